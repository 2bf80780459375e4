/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * kverbs connection-manager wire format.
 *
 * Carried in rdma_cm private data on CONNECT_REQUEST (active side) and on
 * ESTABLISHED (the passive side's accept).  The IB CM leaves 56 bytes of
 * private data to rdma_cm users on an RC connect, so the structure must stay
 * at or below KVERBS_CM_PRIV_MAX; the transport may pad it with zeros, so a
 * receiver accepts trailing bytes beyond sizeof(struct kverbs_cm_priv).
 *
 * All fields are big endian.  Shared with user space so that a user-level
 * peer (tools/, the benchmarks) speaks exactly the kernel's format.
 *
 * Authentication (KVERBS_CM_F_AUTH, Documentation/security.rst): both sides
 * hold the same pre-shared key.  The request carries the client's nonce
 * Nc, the accept the server's nonce Ns and the server's proof; the client's
 * proof is the first message on the connection (KVMSG_TYPE_AUTH in
 * uapi/kverbs/kvmsg.h).  A proof is HMAC-SHA256 under the key, cut to
 * KVERBS_CM_PROOF_LEN bytes, of the label "kverbs-auth-1 server" or
 * "kverbs-auth-1 client" (without a NUL), then Nc, Ns, the client's and
 * the server's struct kverbs_cm_priv as sent, and the client's and the
 * server's address as the RDMA CM gives them (16 bytes of IPv6 address,
 * IPv4 as v4-mapped, then the 2-byte port, network byte order).  Fresh
 * nonces on both sides make a recorded exchange worthless; the two labels
 * keep one side's proof from being reflected as the other's; the
 * addresses and announcements keep a relay from splicing two connections.
 * A request's proof field is zero.
 */
#ifndef _UAPI_KVERBS_CM_H
#define _UAPI_KVERBS_CM_H

#include <linux/types.h>

#define KVERBS_CM_MAGIC		0x4b56524dU	/* "KVRM" */
#define KVERBS_CM_VERSION	3	/* 3: depth at least 4 */
#define KVERBS_CM_PRIV_MAX	56

/* Bounds a peer's announced parameters must fall in. */
#define KVERBS_CM_MIN_DEPTH	4
#define KVERBS_CM_MAX_DEPTH	4096
#define KVERBS_CM_MIN_MSG	64
#define KVERBS_CM_MAX_MSG	(1U << 20)

/* struct kverbs_cm_priv.flags */
#define KVERBS_CM_F_AUTH	0x1	/* struct kverbs_cm_auth follows */

#define KVERBS_CM_NONCE_LEN	16
#define KVERBS_CM_PROOF_LEN	16

/**
 * struct kverbs_cm_priv - parameters announced by each side of a connection
 * @magic: KVERBS_CM_MAGIC
 * @version: KVERBS_CM_VERSION; a receiver refuses any other
 * @flags: KVERBS_CM_F_AUTH or 0; any other bit is refused
 * @node_id: sender's node id, never 0 (0 means "unset")
 * @depth: receive buffers the sender posts for this connection
 * @reserved: must be zero
 * @max_msg: largest message, in bytes, the sender accepts
 */
struct kverbs_cm_priv {
	__be32 magic;
	__be16 version;
	__be16 flags;
	__be32 node_id;
	__be16 depth;
	__be16 reserved;
	__be32 max_msg;
};

/**
 * struct kverbs_cm_auth - after struct kverbs_cm_priv when KVERBS_CM_F_AUTH
 * @nonce: the sender's nonce, random for every connection
 * @proof: the accepting side's proof; zero in a request
 *
 * 20 + 32 bytes: within KVERBS_CM_PRIV_MAX.
 */
struct kverbs_cm_auth {
	__u8 nonce[KVERBS_CM_NONCE_LEN];
	__u8 proof[KVERBS_CM_PROOF_LEN];
};

/* Why a connection was refused; carried in the reject private data. */
enum kverbs_cm_reason {
	KVERBS_CM_OK = 0,
	KVERBS_CM_ESHORT = 1,		/* private data shorter than the header */
	KVERBS_CM_EMAGIC = 2,		/* wrong magic: not a kverbs peer */
	KVERBS_CM_EVERSION = 3,		/* unsupported version */
	KVERBS_CM_EFLAGS = 4,		/* unknown flags or reserved bits set */
	KVERBS_CM_ENODE = 5,		/* node id 0 */
	KVERBS_CM_EDEPTH = 6,		/* depth out of bounds */
	KVERBS_CM_EMSG = 7,		/* max_msg out of bounds */
	KVERBS_CM_EBUSY = 8,		/* no resources to accept now */
	KVERBS_CM_ENOLISTEN = 9,	/* nobody accepts this connection */
	KVERBS_CM_EREFUSED = 10,	/* the listener's client refused this peer */
	KVERBS_CM_EAUTH = 11,		/* authentication asked for, not offered */
	KVERBS_CM_REASON_MAX
};

/**
 * struct kverbs_cm_rej - private data of a reject sent by kverbs
 * @magic: KVERBS_CM_MAGIC
 * @version: KVERBS_CM_VERSION
 * @reason: enum kverbs_cm_reason
 */
struct kverbs_cm_rej {
	__be32 magic;
	__be16 version;
	__be16 reason;
};

#endif /* _UAPI_KVERBS_CM_H */
