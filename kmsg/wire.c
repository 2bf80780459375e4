// SPDX-License-Identifier: GPL-2.0-only
/*
 * kmsg wire headers (uapi/kverbs/kmsg.h): building them, and validating
 * every field of a received one before anything else looks at it.
 */
#include <linux/kernel.h>

#include "../kverbs/kverbs-pri.h"

static const char * const kmsg_wire_err_names[] = {
	[KMSG_WIRE_OK] = "ok",
	[KMSG_WIRE_SHORT] = "shorter than the header",
	[KMSG_WIRE_TYPE] = "unknown type",
	[KMSG_WIRE_FLAGS] = "unknown flags or reserved bits",
	[KMSG_WIRE_LEN] = "length does not match",
	[KMSG_WIRE_CREDIT] = "bad credit message",
	[KMSG_WIRE_SEQ] = "out of sequence",
};

/**
 * kmsg_wire_err_str - text for a validation verdict
 * @e: verdict
 *
 * Context: any.
 * Return: a static string.
 */
const char *kmsg_wire_err_str(enum kmsg_wire_err e)
{
	return e < KMSG_WIRE_MAX ? kmsg_wire_err_names[e] : "?";
}
EXPORT_SYMBOL_IF_KUNIT(kmsg_wire_err_str);

/**
 * kmsg_hdr_fill - write a header
 * @h: header
 * @type: enum kmsg_type
 * @credits: grant carried
 * @seq: message number
 * @len: payload bytes
 *
 * Context: any.
 */
void kmsg_hdr_fill(struct kmsg_hdr *h, u8 type, u16 credits, u32 seq,
		   u32 len)
{
	h->type = type;
	h->flags = 0;
	h->credits = cpu_to_be16(credits);
	h->seq = cpu_to_be32(seq);
	h->len = cpu_to_be32(len);
	h->reserved = 0;
}
EXPORT_SYMBOL_IF_KUNIT(kmsg_hdr_fill);

/**
 * kmsg_hdr_check - validate a received message
 * @buf: the received bytes
 * @byte_len: how many arrived (from the work completion)
 * @seq: the sequence number expected next
 * @max_len: largest payload this side accepts
 * @len: set to the payload length
 * @credits: set to the grant carried
 * @type: set to the message type
 *
 * The credit amount is checked against the credit state by
 * kmsg_credit_receive(); everything else is checked here.
 *
 * Context: any.
 * Return: KMSG_WIRE_OK, or the first violation found.
 */
enum kmsg_wire_err kmsg_hdr_check(const void *buf, u32 byte_len, u32 seq,
				  u32 max_len, u32 *len, u16 *credits,
				  u8 *type)
{
	const struct kmsg_hdr *h = buf;
	u32 n;

	if (byte_len < sizeof(*h))
		return KMSG_WIRE_SHORT;
	if (h->type != KMSG_TYPE_DATA && h->type != KMSG_TYPE_CREDIT)
		return KMSG_WIRE_TYPE;
	if (h->flags || h->reserved)
		return KMSG_WIRE_FLAGS;
	n = be32_to_cpu(h->len);
	if (n != byte_len - sizeof(*h) || n > max_len)
		return KMSG_WIRE_LEN;
	if (h->type == KMSG_TYPE_CREDIT && (n || !h->credits))
		return KMSG_WIRE_CREDIT;
	if (be32_to_cpu(h->seq) != seq)
		return KMSG_WIRE_SEQ;
	*len = n;
	*credits = be16_to_cpu(h->credits);
	*type = h->type;
	return KMSG_WIRE_OK;
}
EXPORT_SYMBOL_IF_KUNIT(kmsg_hdr_check);
