/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kvmsg internals: the per-endpoint message state and the pure pieces of
 * logic (credits, send-queue bookkeeping, wire headers, deferral order)
 * that KUnit drives without a device.  Included by kverbs-pri.h.
 */
#ifndef _KVMSG_PRI_H
#define _KVMSG_PRI_H

#include <linux/atomic.h>
#include <linux/list.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <rdma/ib_verbs.h>

#include <kverbs/kvmsg.h>
#include <uapi/kverbs/kvmsg.h>

struct kverbs_ep;
struct kverbs_domain;

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

u32 kvmsg_max_kept(u32 depth);
void kvmsg_credit_init(struct kvmsg_credit *c, u32 peer_depth, u32 our_depth);
bool kvmsg_credit_take(struct kvmsg_credit *c, u16 *grant);
int kvmsg_credit_receive(struct kvmsg_credit *c, u32 grant);
void kvmsg_credit_reposted(struct kvmsg_credit *c);
bool kvmsg_credit_want_ctrl(const struct kvmsg_credit *c);

/*
 * Send-queue bookkeeping.  Positions are free-running u32 counters; entry
 * p lives in slot p % @size.  RC send queues complete in order, so the
 * completion of the WR at position p (signaled, or flushed) means every WR
 * up to p is done: kvmsg_sq_reclaim() moves @tail past p.
 *
 * Signal rule: a WR is signaled when the caller asks, when @interval WRs
 * went unsignaled, or when it takes the last free buffer.  The last rule
 * is what makes reclaim certain: whenever every buffer is posted, the
 * newest of them is signaled, so its completion frees them all.
 */
struct kvmsg_sq {
	u32 size;
	u32 head;		/* next position to post */
	u32 tail;		/* oldest position not reclaimed */
	u32 interval;
	u32 unsignaled;		/* posted since the last signaled WR */
};

void kvmsg_sq_init(struct kvmsg_sq *sq, u32 size, u32 interval);
u32 kvmsg_sq_used(const struct kvmsg_sq *sq);
bool kvmsg_sq_post(struct kvmsg_sq *sq, bool want_signal, bool last_buffer,
		  u32 *pos);
void kvmsg_sq_unpost(struct kvmsg_sq *sq, u32 unsignaled);
u32 kvmsg_sq_reclaim(struct kvmsg_sq *sq, u32 pos);

/* Wire header validation verdicts; 0 is a good header. */
enum kvmsg_wire_err {
	KVMSG_WIRE_OK,
	KVMSG_WIRE_SHORT,
	KVMSG_WIRE_TYPE,
	KVMSG_WIRE_FLAGS,
	KVMSG_WIRE_LEN,
	KVMSG_WIRE_CREDIT,
	KVMSG_WIRE_SEQ,
	KVMSG_WIRE_MAX,
};

void kvmsg_hdr_fill(struct kvmsg_hdr *h, u8 type, u16 credits, u32 seq,
		   u32 len);
enum kvmsg_wire_err kvmsg_hdr_check(const void *buf, u32 byte_len, u32 seq,
				  u32 max_len, u32 *len, u16 *credits,
				  u8 *type);
const char *kvmsg_wire_err_str(enum kvmsg_wire_err e);

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
	bool kept;
	bool in_handler;
	struct list_head node;
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

void kvmsg_backlog_init(struct kvmsg_backlog *b);
bool kvmsg_backlog_must_queue(const struct kvmsg_backlog *b);
void kvmsg_backlog_add(struct kvmsg_backlog *b, struct kvmsg_rx *rx);
void kvmsg_backlog_push_front(struct kvmsg_backlog *b, struct kvmsg_rx *rx);
struct kvmsg_rx *kvmsg_backlog_next(struct kvmsg_backlog *b);

/*
 * One work request in the send queue.  Every WR the library posts, a
 * message or an RDMA operation, owns one of these until reclaimed, and
 * its position in the send-queue ring.
 */
enum kvmsg_wr_kind {
	KVMSG_WR_BUF,		/* a struct kvmsg_buf */
	KVMSG_WR_OP,		/* a struct kvmsg_op */
};

struct kvmsg_wr {
	struct ib_cqe cqe;
	struct kverbs_ep *ep;
	u32 pos;
	u8 kind;
};

/*
 * An RDMA operation, a memory registration or an invalidation.  @done runs
 * once, after the WR completed (signaled) or was flushed, with 0 or a
 * negative errno; NULL for operations nobody waits for.
 */
struct kvmsg_op {
	struct kvmsg_wr wr;
	void (*done)(void *ctx, int status);
	void *ctx;
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
	struct kvmsg_wr wr;		/* wr.ep: the owning endpoint */
	void *data;
	u64 dma;
	u32 len;		/* payload bytes */
	unsigned int flags;
	void *cookie;
	enum kvmsg_buf_state state;
	bool ctrl;		/* the endpoint's credit-message buffer */
	struct list_head node;	/* free list or pending list */
};

struct kvmsg_stats {
	atomic64_t sent;
	atomic64_t received;
	atomic64_t signaled;
	atomic64_t reclaimed;
	atomic64_t credit_msgs;
	atomic64_t credits_granted;
	atomic64_t credits_received;
	atomic64_t stalls;
	atomic64_t deferrals;
	atomic64_t polled;
	atomic64_t proto_errors;
	atomic64_t dropped;
};

/*
 * Message state of one endpoint.
 *
 * Sizing: @ntx, @nops and @nrx come from the domain's kverbs_ep_budget(),
 * whose send queue holds @ntx + @nops WRs plus the drain WR; every posted
 * WR owns a buffer or an operation slot until reclaimed, so the send
 * queue cannot overflow.
 * The receive ring has depth buffers; the peer's credits bound what it
 * sends to what is posted, so with rnr_retry 0 a credit bug is an error,
 * not a stall.
 *
 * Locking: kverbs_ep.lock protects the send side (@tx_free, @pending,
 * @sq, @credit, @tx_seq, buffer states), the backlog and @kept.  @rx_seq
 * is touched only by receive completions, which the CQ serialises.
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
	struct kvmsg_op *ops;
	u16 nops;
	struct list_head op_free;
	u32 op_nfree;
	struct kvmsg_wr **sq_ring;
	struct kvmsg_sq sq;
	struct kvmsg_credit credit;
	u32 tx_seq;
	u32 rx_seq;
	wait_queue_head_t tx_wait;

	struct kvmsg_backlog backlog;
	struct list_head defer_node;	/* on the domain's defer list */
	u32 kept;
	u32 max_kept;

	struct kvmsg_stats stats;
};

/* send.c / recv.c: endpoint life cycle, called by ep.c */
int kvmsg_ep_setup(struct kverbs_ep *ep);
int kvmsg_ep_post_ring(struct kverbs_ep *ep);
void kvmsg_ep_connected(struct kverbs_ep *ep);
void kvmsg_ep_stop(struct kverbs_ep *ep);
void kvmsg_ep_unmap(struct kverbs_ep *ep);
void kvmsg_ep_free(struct kverbs_ep *ep);
size_t kvmsg_ep_mem(const struct kverbs_ep *ep);
void kvmsg_ep_init(struct kverbs_ep *ep);
void kvmsg_defer_work(struct work_struct *work);
int kvmsg_post_recv(struct kverbs_ep *ep, struct kvmsg_rx *rx);
int kvmsg_flush_locked(struct kverbs_ep *ep);
void kvmsg_fail_pending(struct kverbs_ep *ep);
void kvmsg_reclaim_tail(struct kverbs_ep *ep);
void kvmsg_wr_done(struct ib_cq *cq, struct ib_wc *wc);
struct kvmsg_op *kvmsg_op_get(struct kverbs_ep *ep, unsigned int flags);
void kvmsg_op_put(struct kverbs_ep *ep, struct kvmsg_op *op);
int kvmsg_post_op_locked(struct kverbs_ep *ep, struct kvmsg_op *op,
			struct ib_send_wr *wr);
void kvmsg_recv_done(struct ib_cq *cq, struct ib_wc *wc);
void kvmsg_schedule_defer(struct kverbs_ep *ep);

/* poll.c: a CQ callback run for a task in kverbs_domain_poll() */
bool kvmsg_polled(const struct kverbs_domain *dom);

#endif /* _KVMSG_PRI_H */
