/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kmigrate wire protocol: kvmsg messages on the one connection of one
 * migration, from the source S (which dials) to the destination D.
 * Big endian; every message starts with struct kmig_hdr.
 *
 *   S -> D  PREPARE   the arena's size, address and grant layout, the
 *                     executable to start, its argv, the fingerprint
 *   S -> D  KEYS      the grant's keys, KMIG_KEYS_PER_MSG per message
 *   D -> S  READY     the process is mapped and waiting (0), or why not
 *   S -> D  FROZEN    the register context and the pages that move: the
 *                     source stopped, the destination may run
 *   D -> S  RESUMED   the process runs at D (downtime ends)
 *   D -> S  DONE      D needs nothing more of S: every page is here, or
 *                     D's process ended (S frees its copy), or it died
 *                     before it resumed (S resumes its copy)
 *
 * S sends nothing after FROZEN, D nothing after DONE; S closes the
 * connection when DONE arrives.  Until then a lost connection means: at D
 * before FROZEN, abandon; at D after FROZEN, every page not yet here is
 * lost (SIGBUS when touched); at S before DONE, resume the process at S.
 * D reads pages from S's arena by RDMA read, by offset in the arena and
 * the key of the extent that holds it (kverbs grants): S's CPU serves none.
 */
#ifndef _KMIGRATE_PROTO_H
#define _KMIGRATE_PROTO_H

#include <linux/types.h>
#include <uapi/kverbs/kmigrate.h>

#define KMIG_PROTO_VERSION	1
/* Largest message; PREPARE with the longest path, argv and fingerprint */
#define KMIG_MAX_MSG		4096
#define KMIG_KEYS_PER_MSG	512

enum kmig_msg_type {
	KMIG_PREPARE = 1,
	KMIG_KEYS,
	KMIG_READY,
	KMIG_FROZEN,
	KMIG_RESUMED,
	KMIG_DONE,
	__KMIG_MSG_MAX,
};

/* @len: bytes of the whole message, header included */
struct kmig_hdr {
	__be16 type;
	__be16 version;
	__be32 len;
};

/*
 * @nkeys: extents of S's grant, each 1 << @extent_shift bytes, the last
 * one possibly partial; @data: path (with its NUL), then args, then fp.
 */
struct kmig_prepare {
	struct kmig_hdr hdr;
	__be64 va;
	__be32 npages;
	__be32 mode;
	__be32 flags;
	__be32 nkeys;
	__be32 extent_shift;
	__be32 unused_ids[2];	/* zero, never read: no credential travels */
	__be16 path_len;
	__be16 args_len;
	__be16 fp_len;
	__be16 reserved;
	__be32 reserved2;
	u8 data[];
};

struct kmig_keys {
	struct kmig_hdr hdr;
	__be32 first;
	__be32 count;
	__be32 key[];
};

/* @status: 0, or a positive errno: why D cannot take the process */
struct kmig_ready {
	struct kmig_hdr hdr;
	__be32 status;
	__be32 reserved;
};

struct kmig_wire_range {
	__be32 first;
	__be32 count;
};

/* @range[@nranges], then @ctx_len bytes of context */
struct kmig_frozen {
	struct kmig_hdr hdr;
	__be16 nranges;
	__be16 ctx_len;
	__be32 reserved;
	struct kmig_wire_range range[];
};

/* RESUMED is a bare header. */

/*
 * @status: ARRIVED every page is at D; EXITED D's process ended first;
 * ABORTED D's process died before it resumed: S resumes its copy.
 */
#define KMIG_DONE_ARRIVED	0
#define KMIG_DONE_EXITED	1
#define KMIG_DONE_ABORTED	2
struct kmig_done {
	struct kmig_hdr hdr;
	__be32 status;
	__be32 reserved;
};

#endif /* _KMIGRATE_PROTO_H */
