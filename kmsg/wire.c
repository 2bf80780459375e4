// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmsg wire headers (uapi/kverbs/kvmsg.h): building them, and validating
 * every field of a received one before anything else looks at it.
 */
#include <linux/kernel.h>

#include "kvmsg-pri.h"

static const char * const kvmsg_wire_err_names[] = {
	[KVMSG_WIRE_OK] = "ok",
	[KVMSG_WIRE_SHORT] = "shorter than the header",
	[KVMSG_WIRE_TYPE] = "unknown type",
	[KVMSG_WIRE_FLAGS] = "unknown flags or reserved bits",
	[KVMSG_WIRE_LEN] = "length does not match",
	[KVMSG_WIRE_CREDIT] = "bad credit message",
	[KVMSG_WIRE_SEQ] = "out of sequence",
};

/**
 * kvmsg_wire_err_str - text for a validation verdict
 * @e: verdict
 *
 * Context: any.
 * Return: a static string.
 */
const char *kvmsg_wire_err_str(enum kvmsg_wire_err e)
{
	return e < KVMSG_WIRE_MAX ? kvmsg_wire_err_names[e] : "?";
}
EXPORT_SYMBOL_IF_KUNIT(kvmsg_wire_err_str);

/**
 * kvmsg_hdr_fill - write a header
 * @h: header
 * @type: enum kvmsg_type
 * @credits: grant carried
 * @seq: message number
 * @len: payload bytes
 *
 * Context: any.
 */
void kvmsg_hdr_fill(struct kvmsg_hdr *h, u8 type, u16 credits, u32 seq,
		    u32 len)
{
	h->type = type;
	h->flags = 0;
	h->credits = cpu_to_be16(credits);
	h->seq = cpu_to_be32(seq);
	h->len = cpu_to_be32(len);
	h->reserved = 0;
}
EXPORT_SYMBOL_IF_KUNIT(kvmsg_hdr_fill);

/**
 * kvmsg_hdr_check - validate a received message
 * @buf: the received bytes
 * @byte_len: how many arrived (from the work completion)
 * @seq: the sequence number expected next
 * @max_len: largest payload this side accepts
 * @len: set to the payload length
 * @credits: set to the grant carried
 * @type: set to the message type
 *
 * The credit amount is checked against the credit state by
 * kvmsg_credit_receive(), and whether a KVMSG_TYPE_AUTH may come by
 * kverbs_ep_auth_check(); everything else is checked here.
 *
 * Context: any.
 * Return: KVMSG_WIRE_OK, or the first violation found.
 */
enum kvmsg_wire_err kvmsg_hdr_check(const void *buf, u32 byte_len, u32 seq,
				    u32 max_len, u32 *len, u16 *credits,
				  u8 *type)
{
	const struct kvmsg_hdr *h = buf;
	u32 n;

	if (byte_len < sizeof(*h))
		return KVMSG_WIRE_SHORT;
	if (h->type != KVMSG_TYPE_DATA && h->type != KVMSG_TYPE_CREDIT &&
	    h->type != KVMSG_TYPE_AUTH)
		return KVMSG_WIRE_TYPE;
	if (h->flags || h->reserved)
		return KVMSG_WIRE_FLAGS;
	n = be32_to_cpu(h->len);
	if (n != byte_len - sizeof(*h) || n > max_len)
		return KVMSG_WIRE_LEN;
	if (h->type == KVMSG_TYPE_CREDIT && (n || !h->credits))
		return KVMSG_WIRE_CREDIT;
	if (be32_to_cpu(h->seq) != seq)
		return KVMSG_WIRE_SEQ;
	*len = n;
	*credits = be16_to_cpu(h->credits);
	*type = h->type;
	return KVMSG_WIRE_OK;
}
EXPORT_SYMBOL_IF_KUNIT(kvmsg_hdr_check);
