/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * kvmsg wire format: the header in front of every message on a kverbs
 * endpoint (protocol version 3 of uapi/kverbs/cm.h).
 *
 * Flow control is by credits.  Each side posts as many receive buffers as
 * it announced as @depth in the connection's private data, and starts with
 * one send credit per receive the peer announced.  Every message, of any
 * type, consumes one credit.  @credits returns credits: it is the number of
 * receive buffers the sender re-posted since its previous message.  A
 * sender never spends its last credit on a message whose @credits is 0, so
 * the two sides cannot both end up waiting for a grant (the scheme of
 * net/rds/ib_send.c).
 *
 * A receiver checks every field and tears the connection down on any
 * violation: an unknown @type or @flags bit, non-zero @reserved, @len that
 * does not match the received byte count, a KVMSG_TYPE_CREDIT with a payload
 * or without credits, credits that would exceed the receive depth the peer
 * announced, or a @seq other than the next one expected.
 *
 * All fields are big endian.
 */
#ifndef _UAPI_KVERBS_KVMSG_H
#define _UAPI_KVERBS_KVMSG_H

#include <linux/types.h>

enum kvmsg_type {
	KVMSG_TYPE_DATA = 1,	/* payload for the peer's handler */
	KVMSG_TYPE_CREDIT = 2,	/* no payload, returns credits only */
	KVMSG_TYPE_AUTH = 3,	/* the connecting side's proof (uapi/kverbs/cm.h) */
};

/*
 * KVMSG_TYPE_AUTH: sent only on an authenticated connection, by the side
 * that connected, as its first message (@seq 0), with a payload of exactly
 * KVERBS_CM_PROOF_LEN bytes.  It consumes a credit like any message.  The
 * accepting side takes nothing else first and tears the connection down on
 * a wrong proof; anywhere else the type is a protocol error.
 */

/**
 * struct kvmsg_hdr - in front of every message
 * @type: enum kvmsg_type
 * @flags: none defined; must be zero
 * @credits: receive buffers re-posted by the sender since its last message
 * @seq: message number on this connection, from 0, counting every type
 * @len: payload bytes following the header
 * @reserved: must be zero
 */
struct kvmsg_hdr {
	__u8 type;
	__u8 flags;
	__be16 credits;
	__be32 seq;
	__be32 len;
	__be32 reserved;
};

#endif /* _UAPI_KVERBS_KVMSG_H */
