/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kdsm protocol: the wire message, the per-node page state, the home's
 * directory entry, and the pure transition functions (proto.c) that the
 * module's effector runs and KUnit exercises in simulated clusters.
 * Documentation/kdsm-design.rst explains the protocol; the rules below are
 * the ones the code checks.  Trust: a peer is a node of the cluster
 * running this protocol; messages are checked against their type, their
 * direction (requests to the home, forwards from it) and the receiving
 * page's state, not against a transaction id.
 *
 * Nodes are numbered 1..nnodes (the kverbs node id); bit n - 1 of a
 * node set is node n.  Every transition takes the state and one event and
 * returns a list of actions, or -EPROTO when the event is impossible in
 * that state (a malformed or misdirected peer message): the effector then
 * drops the message, counts it and closes the endpoint.  The transition
 * functions change the state only when they return >= 0.
 */
#ifndef _KDSM_PROTO_H
#define _KDSM_PROTO_H

#include <linux/build_bug.h>
#include <linux/types.h>
#include <uapi/kverbs/kdsm.h>

#define KDSM_MSG_LEN		32
/* Most actions one event produces: an invalidation to every other node. */
#define KDSM_MAX_ACTS		(KDSM_MAX_NODES + 2)

enum kdsm_msg_type {
	KDSM_READ_REQ = 1,	/* R -> H */
	KDSM_WRITE_REQ,		/* R -> H */
	KDSM_FWD_READ,		/* H -> O: serve R a copy */
	KDSM_FWD_WRITE,		/* H -> O: give R the page (data if flagged) */
	KDSM_INV,		/* H -> S: drop your copy, ack R */
	KDSM_INV_ACK,		/* S -> R */
	KDSM_READ_REPLY,	/* O -> R, after the data */
	KDSM_WRITE_REPLY,	/* O or H -> R, after the data if any; acks */
	KDSM_DONE,		/* R -> H: the transaction is complete */
	KDSM_MSG_TYPES,
	/* not on the wire: this node's RDMA read of the page completed */
	KDSM_FETCHED = KDSM_MSG_TYPES,
};

/* kdsm_msg.flags */
#define KDSM_F_DATA		0x01	/* page data precedes this reply */
#define KDSM_F_FETCH		0x02	/* READ_REPLY: read it from @node */

/*
 * The wire message, 32 bytes, big endian.  @node: the requester a
 * forward or invalidation acts for (whom to answer); in a READ_REPLY with
 * KDSM_F_FETCH the owner to read the page from; 0 in other types.
 * @acks: invalidations R must collect (at most nnodes - 1, when R owns
 * the page), in FWD_WRITE and WRITE_REPLY only.
 */
struct kdsm_msg {
	u8 type;
	u8 flags;
	__be16 reserved0;
	__be32 page;
	__be32 tid;
	u8 node;
	u8 acks;
	__be16 reserved1;
	__be64 arg;
	__be64 reserved2;
};

static_assert(sizeof(struct kdsm_msg) == KDSM_MSG_LEN);

/* The cluster as every transition sees it. */
struct kdsm_geo {
	u8 self;		/* 1..nnodes */
	u8 nnodes;		/* 2..KDSM_MAX_NODES */
	bool block;		/* block placement, else cyclic */
	bool fetch;		/* KDSM_OPT_FETCH_READ */
	u32 npages;
};

/* Protections, as kvmem's KVMEM_PROT_* */
enum kdsm_prot { KDSM_NONE, KDSM_READ, KDSM_RW };

/*
 * A page at one node.  @owner: this node's copy is the valid one the
 * home forwards requests to (then @prot >= READ).  @pending: this node's
 * request (READ_REQ or WRITE_REQ, 0: none); for a write, @reply_seen,
 * @acks_needed (from the reply) and @acks_seen count towards the grant;
 * for a read, @fetching: this node reads the page from the owner.
 */
struct kdsm_page {
	u8 prot;
	bool owner;
	u8 pending;
	bool fetching;
	bool reply_seen;
	u8 acks_needed;
	u8 acks_seen;
};

/*
 * A page at its home.  @owner: node holding the valid copy.  @copyset:
 * other nodes holding READ copies.  @busy: a transaction for @cur is in
 * flight; requests meanwhile queue in the effector, in arrival order.
 */
struct kdsm_home {
	u8 owner;
	u8 copyset;
	bool busy;
	u8 cur;
};

enum kdsm_act_kind {
	KDSM_ACT_SEND = 1,	/* a message: @type, @to, @node, @acks, @flags */
	KDSM_ACT_DATA,		/* RDMA-write the page to @to before the next SEND */
	KDSM_ACT_FETCH,		/* RDMA-read the page from @to: KDSM_FETCHED */
	KDSM_ACT_REVOKE,	/* lower this node's protection to @prot */
	KDSM_ACT_GRANT,		/* raise it to @prot, wake the faulting tasks */
	KDSM_ACT_QUEUE,		/* home busy: queue request @type of @node */
	KDSM_ACT_NEXT,		/* home free: serve the next queued request */
};

struct kdsm_act {
	u8 kind;
	u8 type;
	u8 to;
	u8 node;
	u8 acks;
	u8 flags;
	u8 prot;
};

u8 kdsm_home_of(const struct kdsm_geo *g, u32 page);
int kdsm_msg_check(const struct kdsm_geo *g, const struct kdsm_msg *m,
		   u32 len, u8 from);

int kdsm_fault(const struct kdsm_geo *g, struct kdsm_page *pg, u32 page,
	       bool write, struct kdsm_act *acts);
int kdsm_home_request(const struct kdsm_geo *g, struct kdsm_home *h,
		      u8 from, bool write, struct kdsm_act *acts);
int kdsm_home_done(const struct kdsm_geo *g, struct kdsm_home *h, u8 from,
		   struct kdsm_act *acts);
int kdsm_page_event(const struct kdsm_geo *g, struct kdsm_page *pg,
		    u32 page, u8 from, const struct kdsm_msg *m,
		    struct kdsm_act *acts);

#endif /* _KDSM_PROTO_H */
