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

/*
 * Control messages share the wire's first byte (the type) with the
 * protocol's, numbered above them; all are KDSM_MSG_LEN bytes.  The
 * setup messages are in kdsm-pri.h; every other one is a struct kdsm_sig.
 */
enum kdsm_ctl_type {
	KDSM_HELLO = KDSM_WIRE_CTL_FIRST,	/* geometry, once per connection */
	KDSM_KEY,		/* one rkey of the sender's region */
	KDSM_READY,		/* the sender holds every peer's keys */
	KDSM_PING,		/* heartbeat: makes a dead peer's RC fail */
	KDSM_REFUSE,		/* the sender refuses this peer: @code */
	KDSM_ABORT,		/* the sender lost node @node: cluster fails */
	KDSM_LOCK_REQ,		/* to lock @id's manager */
	KDSM_LOCK_GRANT,	/* from it */
	KDSM_UNLOCK,		/* to it */
	KDSM_BAR_ENTER,		/* to node 1: barrier @gen */
	KDSM_BAR_GO,		/* from node 1 to all */
	/* the queue lock (qlock.c): see kdsm_q_check() */
	KDSM_QL_NEXT,		/* to the predecessor: the sender follows it */
	KDSM_QL_PASS,		/* to the successor: the lock is yours */
	KDSM_QL_CAS,		/* manager to its helper: CAS my word @code -> @node */
	KDSM_QL_CAS_DONE,	/* helper to manager: it held @node (@code: refused) */
	KDSM_CTL_END,
};

static_assert((int)KDSM_MSG_TYPES <= (int)KDSM_HELLO);
static_assert(KDSM_CTL_END <= 32);	/* KDSM_STAT_MSG_TYPE has 32 slots */

/* Every control message but HELLO and KEY. */
struct kdsm_sig {
	u8 type;
	u8 code;
	u8 node;
	u8 reserved0;
	__be32 id;		/* lock */
	__be32 gen;		/* barrier generation */
	u8 reserved[20];
};

static_assert(sizeof(struct kdsm_sig) == KDSM_MSG_LEN);

/*
 * KDSM_UNLOCK's and KDSM_LOCK_GRANT's @code: the lock's holder died (its
 * descriptor closed) holding it; the grant tells the next holder.
 */
#define KDSM_LOCK_DEAD		1

/* KDSM_QL_CAS_DONE's @code */
#define KDSM_QL_NO_ATOMICS	1	/* the helper's device has no atomics */

/* Lock @id's manager: the kernel lock's queue, the queue lock's word */
static inline u8 kdsm_lock_mgr_of(const struct kdsm_geo *g, u32 id)
{
	return id % g->nnodes + 1;
}

/*
 * The queue lock at one node (qproto.c; Documentation/kdsm-design.rst,
 * "The queue lock").  The lock's word at its manager holds the queue's
 * tail, a node id, 0 when free; only RDMA compare-and-swap touches it.
 * @state: enum kdsm_qstate.  @guess: SWAP's expected tail.  @pred: the
 * node whose PASS a WAIT expects.  @succ: the node whose NEXT arrived (0:
 * none yet); it is owed the lock.  @cas_busy: a CAS of ours on the word is
 * in flight; its result is an event.  @abandoned: the waiting task died:
 * the lock is passed on as soon as it comes.  @waiter: the task of the
 * last acquire has not taken its outcome yet (kdsm_q_collect()); no new
 * acquire starts before it has, so the outcome it takes is its own.
 * @granted: the lock came to that task; it stays set when another task of
 * the node releases the lock before the waiter woke.
 */
struct kdsm_qlock {
	u8 state;
	u8 guess;
	u8 pred;
	u8 succ;
	bool cas_busy;
	bool abandoned;
	bool waiter;
	bool granted;
};

/*
 * IDLE: not in the queue.  SWAP: swapping itself in as the tail (CAS
 * @guess -> self).  LINK: it is in, behind @pred: NEXT is due.  WAIT: for
 * @pred's PASS.  HELD: a task holds it.  FREE: released, no successor
 * known: CAS self -> 0 is due or in flight.  HANDOFF: that CAS found a
 * successor; its NEXT is on the way.  PASS: PASS to @succ is due.
 */
enum kdsm_qstate {
	KDSM_Q_IDLE,
	KDSM_Q_SWAP,
	KDSM_Q_LINK,
	KDSM_Q_WAIT,
	KDSM_Q_HELD,
	KDSM_Q_FREE,
	KDSM_Q_HANDOFF,
	KDSM_Q_PASS,
};

/* What the effector must do next for a lock: kdsm_q_action(). */
enum kdsm_qact {
	KDSM_QA_NONE,
	KDSM_QA_CAS,		/* compare-and-swap the word: @cmp -> @swap */
	KDSM_QA_NEXT,		/* send KDSM_QL_NEXT to @to */
	KDSM_QA_PASS,		/* send KDSM_QL_PASS to @to */
};

struct kdsm_qact_arg {
	u8 cmp;
	u8 swap;
	u8 to;
};

/* kdsm_q_*() results besides 0 and -errno: what the effector counts */
#define KDSM_Q_GRANTED		0x1	/* a live waiter got the lock */
#define KDSM_Q_RETRY		0x2	/* the CAS found another tail: again */

u8 kdsm_q_helper(const struct kdsm_geo *g, u8 node);
int kdsm_q_check(const struct kdsm_geo *g, const struct kdsm_sig *s, u8 from);
int kdsm_q_word(const struct kdsm_geo *g, u64 raw);
bool kdsm_q_busy(const struct kdsm_qlock *q);
int kdsm_q_acquire(struct kdsm_qlock *q);
int kdsm_q_release(struct kdsm_qlock *q);
void kdsm_q_abandon(struct kdsm_qlock *q);
bool kdsm_q_settled(const struct kdsm_qlock *q);
bool kdsm_q_collect(struct kdsm_qlock *q);
int kdsm_q_action(const struct kdsm_geo *g, const struct kdsm_qlock *q,
		  struct kdsm_qact_arg *a);
void kdsm_q_performed(struct kdsm_qlock *q, int act);
int kdsm_q_unsupported(struct kdsm_qlock *q);
int kdsm_q_cas_result(const struct kdsm_geo *g, struct kdsm_qlock *q, u8 old);
int kdsm_q_next(const struct kdsm_geo *g, struct kdsm_qlock *q, u8 from);
int kdsm_q_pass(struct kdsm_qlock *q, u8 from);

#endif /* _KDSM_PROTO_H */
