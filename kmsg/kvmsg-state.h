/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The state kvmsg keeps in kverbs' objects: struct kvmsg_domain is
 * kverbs_domain.msg, struct kvmsg_ep is kverbs_ep.msg.  kverbs embeds them
 * and never touches them (the style suite checks that kverbs/ does not name
 * them); only kmsg/ does.  Functions are in kvmsg-pri.h.
 */
#ifndef _KVMSG_STATE_H
#define _KVMSG_STATE_H

#include <linux/atomic.h>
#include <linux/list.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include <kverbs/kvmsg.h>

/*
 * Credits (see uapi/kverbs/kvmsg.h for the protocol).
 *
 * Invariants: @avail <= @limit, the peer's announced receive depth; a
 * message is posted only by kvmsg_credit_take(), which never lets @avail
 * reach 0 unless that last message carries a grant (@ungranted > 0).
 * @ungranted counts our receives re-posted since our last message; all of
 * it goes out with the next message.  Locking: the endpoint's lock.
 */
struct kvmsg_credit {
	u32 avail;
	u32 limit;
	u32 ungranted;
	u32 threshold;	/* send a credit-only message at this many */
};

/*
 * Deferral order.  Once a message of an endpoint is deferred, every later
 * one queues behind it until process context has dispatched them all, so
 * the handler sees each endpoint's messages in order and never two of
 * them at once.  @busy: process context owns dispatch for the endpoint.
 * Locking: the endpoint's lock.
 */
struct kvmsg_backlog {
	struct list_head q;
	bool busy;
};

/*
 * A received buffer; one per receive-ring slot.
 * @node: on the endpoint's backlog while waiting for process context
 * @kept, @in_handler: under the endpoint's lock; @in_handler is set by
 *	the dispatcher around the ->recv() call, so that a release during
 *	the call leaves the one re-post to the dispatcher
 */
struct kvmsg_rx {
	struct ib_cqe cqe;
	struct kverbs_ep *ep;
	void *data;
	u64 dma;
	u32 len;
	u32 seq;
	u8 type;		/* enum kvmsg_type, of the message it holds */
	bool kept;
	bool in_handler;
	struct list_head node;
};

enum kvmsg_buf_state {
	KVMSG_BUF_FREE,
	KVMSG_BUF_RESERVED,	/* the caller's, between reserve and send */
	KVMSG_BUF_PENDING,	/* waiting for a credit, on @pending */
	KVMSG_BUF_POSTED,	/* in the send queue until reclaimed */
};

/* A registered send buffer; the message header precedes kvmsg_buf_data(). */
struct kvmsg_buf {
	struct kverbs_wr wr;		/* wr.ep: the owning endpoint */
	void *data;
	u64 dma;
	u32 len;		/* payload bytes */
	unsigned int flags;
	void *cookie;
	enum kvmsg_buf_state state;
	bool ctrl;		/* the endpoint's credit-message buffer */
	bool auth;		/* carries our proof (KVMSG_TYPE_AUTH) */
	struct list_head node;	/* free list or pending list */
};

/*
 * Counters of one endpoint.  Plain u64s, all updated under the endpoint's
 * lock, which the paths that count hold anyway (@received and @polled by
 * the receive completion, which the CQ serialises per domain).
 */
struct kvmsg_stats {
	u64 sent;
	u64 received;
	u64 reclaimed;
	u64 credit_msgs;
	u64 credits_granted;
	u64 credits_received;
	u64 stalls;
	u64 deferrals;
	u64 polled;
	u64 proto_errors;
	u64 rejected;
	u64 dropped;
	u64 parked;
};

/*
 * What a deferred handler found none of (kverbs_may_wait_peer()): its
 * message waits at the head of the backlog, the endpoint off the defer
 * list ("parked"), until one is given back.  Other endpoints go on.
 */
#define KVMSG_WANT_BUF	BIT(0)	/* a send buffer (kvmsg_reserve()) */
#define KVMSG_WANT_OP	BIT(1)	/* a send-queue operation slot */

/*
 * Message state of one endpoint.
 *
 * Sizing: @ntx send buffers (depth data + one credit message) and @nrx
 * receive buffers are the upper part of the domain's kverbs_ep_budget():
 * every posted send holds a buffer until the ledger reclaims it, so the
 * send queue cannot overflow.  The peer's credits bound what it sends to
 * what is posted, so with rnr_retry 0 a credit bug is an error, not a
 * stall.
 *
 * Locking: kverbs_ep.lock protects the send side (@tx_free, @pending,
 * @credit, @tx_seq, buffer states), the backlog, @starved, @parked, @kept
 * and @stats.  Order: kverbs_ep.lock, then kvmsg_domain.defer_lock.
 * @rx_seq is touched only by receive completions, which the CQ serialises.
 *
 * Lifetime: buffers are DMA-unmapped at teardown and freed with the
 * endpoint, so a buffer a caller still holds (reserved, or a kept
 * receive) stays valid memory; each holds an endpoint reference.
 */
struct kvmsg_ep {
	struct kvmsg_rx *rx;
	struct kvmsg_buf *tx;
	u16 nrx;
	u16 ntx;
	u32 buf_size;			/* header + largest payload we accept */
	bool mapped;

	struct list_head tx_free;
	u32 tx_nfree;
	struct list_head pending;
	struct kvmsg_credit credit;
	bool ctrl_reclaimed;		/* grants may wait for the ctrl buffer */
	u32 tx_seq;
	u32 rx_seq;
	wait_queue_head_t tx_wait;

	struct kvmsg_backlog backlog;
	struct list_head defer_node;	/* on the domain's defer list */
	u8 starved;			/* KVMSG_WANT_*: this handler call's */
	u8 parked;			/* KVMSG_WANT_*: the backlog waits */
	atomic_t room_gen;		/* completions that gave room back */
	u32 kept;
	u32 max_kept;

	struct kvmsg_stats stats;
};

/*
 * Message state of a domain.
 *
 * Deferred receives: @defer_work (on the domain's workqueue; a work item
 * never runs twice at once) dispatches the backlog of every endpoint on
 * @defer_list, so deferred handlers of one domain run one at a time.
 * @defer_lock (bh) protects @defer_list.  @closed_*: counters of endpoints
 * already gone, for debugfs: messages they sent, their send buffers and
 * how many of those were free when the endpoint was freed (all of them,
 * unless a send was never reclaimed).
 */
struct kvmsg_domain {
	const struct kvmsg_ops *ops;
	struct work_struct defer_work;
	spinlock_t defer_lock;		/* see above */
	struct list_head defer_list;
	atomic64_t closed_sent;
	atomic64_t closed_bufs;
	atomic64_t closed_bufs_free;
};

#endif /* _KVMSG_STATE_H */
