// SPDX-License-Identifier: GPL-2.0-only
/*
 * kmsg send path: reserve, send, the credit wait, selective signaling and
 * reclaim on completion.
 *
 * A buffer goes FREE -> RESERVED (kmsg_reserve) -> PENDING (no credit
 * yet, queued in order) -> POSTED -> FREE (reclaimed by the completion of
 * its own WR or of any later one).  It is never reclaimed on the peer's
 * reply: until its WR completes the adapter may still retransmit from it.
 *
 * Every WR the library posts, data or credit-only, goes through
 * kmsg_post_locked(), so one counter per QP decides signaling for all of
 * them and the send queue can never hold more WRs than it has entries.
 */
#include <linux/sched/signal.h>

#include "../kverbs/kverbs-pri.h"
#include "kmsg_trace.h"

static struct kmsg_buf *kmsg_get_free_locked(struct kmsg_ep *m)
{
	struct kmsg_buf *b;

	b = list_first_entry_or_null(&m->tx_free, struct kmsg_buf, node);
	if (b) {
		list_del_init(&b->node);
		m->tx_nfree--;
		b->state = KMSG_BUF_RESERVED;
	}
	return b;
}

static bool kmsg_can_reserve(struct kverbs_ep *ep, struct kmsg_buf **b,
			     int *err)
{
	bool done = true;

	spin_lock_bh(&ep->lock);
	if (ep->state != KVERBS_EP_CONNECTED) {
		*err = ep->error ?: -ENOTCONN;
	} else {
		*b = kmsg_get_free_locked(&ep->msg);
		done = *b;
	}
	spin_unlock_bh(&ep->lock);
	return done;
}

/**
 * kmsg_reserve - get a send buffer
 * @ep: connected endpoint
 * @len: payload bytes the caller will write, 1..kverbs_ep_max_send()
 * @flags: KMSG_NOWAIT to fail instead of sleeping
 *
 * Bounded by the endpoint's send buffers (its depth), never by credits:
 * a message without a credit waits inside kmsg_send().  The buffer must be
 * passed to kmsg_send() or kmsg_unreserve() soon, as it holds a slot of
 * the pool.
 *
 * Context: process, may sleep (killable) until a buffer is reclaimed;
 * softirq with KMSG_NOWAIT (never hard interrupt).
 * Return: the buffer, or ERR_PTR: -EMSGSIZE for a bad @len, -EAGAIN
 * (KMSG_NOWAIT and none free), -EINTR (fatal signal), -ENOTCONN or the
 * endpoint's error once it is not connected.
 */
struct kmsg_buf *kmsg_reserve(struct kverbs_ep *ep, u32 len,
			      unsigned int flags)
{
	struct kmsg_buf *b = NULL;
	int err = 0;

	if (!len || len > kverbs_ep_max_send(ep))
		return ERR_PTR(-EMSGSIZE);
	if (flags & KMSG_NOWAIT) {
		if (!kmsg_can_reserve(ep, &b, &err))
			return ERR_PTR(-EAGAIN);
	} else {
		might_sleep();
		if (wait_event_killable(ep->msg.tx_wait,
					kmsg_can_reserve(ep, &b, &err)))
			return ERR_PTR(-EINTR);
	}
	if (!b)
		return ERR_PTR(err);
	kref_get(&ep->ref);
	return b;
}
EXPORT_SYMBOL_NS_GPL(kmsg_reserve, KVERBS_NS);

/**
 * kmsg_buf_data - where the caller writes its message
 * @buf: reserved buffer
 *
 * Context: any.
 * Return: kverbs_ep_max_send() bytes of registered memory.
 */
void *kmsg_buf_data(struct kmsg_buf *buf)
{
	return (struct kmsg_hdr *)buf->data + 1;
}
EXPORT_SYMBOL_NS_GPL(kmsg_buf_data, KVERBS_NS);

/* Put reclaimed or never-posted buffers back; wake reservers. */
static void kmsg_put_free_locked(struct kmsg_ep *m, struct kmsg_buf *b)
{
	b->state = KMSG_BUF_FREE;
	b->flags = 0;
	b->cookie = NULL;
	if (b->ctrl)
		return;
	list_add(&b->node, &m->tx_free);
	m->tx_nfree++;
}

/*
 * Account for @w in the send queue and post @wr.  The one place every WR
 * of the library goes through, so one counter decides signaling for all.
 * @last: @w holds the last free buffer or slot of its pool.
 */
static int kmsg_post_wr_locked(struct kverbs_ep *ep, struct kmsg_wr *w,
			       struct ib_send_wr *wr, bool want_signal,
			       bool last, bool *signaled)
{
	struct kmsg_ep *m = &ep->msg;
	const struct ib_send_wr *bad;
	u32 pos, unsignaled = m->sq.unsignaled;
	bool sig;
	int ret;

	lockdep_assert_held(&ep->lock);
	sig = kmsg_sq_post(&m->sq, want_signal, last, &pos);
	m->sq_ring[pos % m->sq.size] = w;
	w->pos = pos;
	wr->wr_cqe = &w->cqe;
	if (sig)
		wr->send_flags |= IB_SEND_SIGNALED;
	ret = ib_post_send(ep->qp, wr, &bad);
	if (ret) {
		kmsg_sq_unpost(&m->sq, unsignaled);
		return ret;
	}
	if (sig)
		atomic64_inc(&m->stats.signaled);
	*signaled = sig;
	return 0;
}

/*
 * Post @b now if a credit allows.  Return 0 when posted, -EAGAIN when no
 * credit, or the provider's error (the endpoint is then torn down).
 */
static int kmsg_post_locked(struct kverbs_ep *ep, struct kmsg_buf *b)
{
	struct kmsg_ep *m = &ep->msg;
	struct ib_send_wr wr = {};
	struct ib_sge sge;
	bool sig = false;
	u16 grant;
	int ret;

	if (!kmsg_credit_take(&m->credit, &grant))
		return -EAGAIN;
	kmsg_hdr_fill(b->data, b->ctrl ? KMSG_TYPE_CREDIT : KMSG_TYPE_DATA,
		      grant, m->tx_seq, b->len);
	sge.addr = b->dma;
	sge.length = sizeof(struct kmsg_hdr) + b->len;
	sge.lkey = ep->dom->pd->local_dma_lkey;
	ib_dma_sync_single_for_device(ep->dom->pd->device, b->dma, sge.length,
				      DMA_TO_DEVICE);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IB_WR_SEND;
	ret = kmsg_post_wr_locked(ep, &b->wr, &wr,
				  b->ctrl || (b->flags & KMSG_NOTIFY),
				  !b->ctrl && !m->tx_nfree, &sig);
	if (ret) {
		m->credit.avail++;
		m->credit.ungranted += grant;
		return ret;
	}
	trace_kmsg_send(ep, m->tx_seq, b->len, grant, sig);
	m->tx_seq++;
	b->state = KMSG_BUF_POSTED;
	atomic64_inc(&m->stats.sent);
	atomic64_add(grant, &m->stats.credits_granted);
	if (b->ctrl)
		atomic64_inc(&m->stats.credit_msgs);
	return 0;
}

/**
 * kmsg_op_get - take an operation slot of the send queue
 * @ep: connected endpoint
 * @flags: KMSG_NOWAIT to fail instead of sleeping
 *
 * Context: process, may sleep (killable); softirq with KMSG_NOWAIT.
 * Return: the slot, or ERR_PTR: -EAGAIN, -EINTR, -ENOTCONN or the
 * endpoint's error.
 */
struct kmsg_op *kmsg_op_get(struct kverbs_ep *ep, unsigned int flags)
{
	struct kmsg_ep *m = &ep->msg;
	struct kmsg_op *op = NULL;
	int err = 0;

	if (!(flags & KMSG_NOWAIT) &&
	    wait_event_killable(m->tx_wait, READ_ONCE(m->op_nfree) ||
				READ_ONCE(ep->state) != KVERBS_EP_CONNECTED))
		return ERR_PTR(-EINTR);
	spin_lock_bh(&ep->lock);
	if (ep->state != KVERBS_EP_CONNECTED) {
		err = ep->error ?: -ENOTCONN;
	} else {
		op = list_first_entry_or_null(&m->op_free, struct kmsg_op,
					      node);
		if (op) {
			list_del_init(&op->node);
			m->op_nfree--;
		} else {
			err = -EAGAIN;
		}
	}
	spin_unlock_bh(&ep->lock);
	if (err == -EAGAIN && !(flags & KMSG_NOWAIT))
		return kmsg_op_get(ep, flags);
	return op ?: ERR_PTR(err);
}

/**
 * kmsg_op_put - give back an operation slot that was not posted
 * @ep: endpoint
 * @op: slot from kmsg_op_get()
 *
 * Context: any.
 */
void kmsg_op_put(struct kverbs_ep *ep, struct kmsg_op *op)
{
	spin_lock_bh(&ep->lock);
	list_add(&op->node, &ep->msg.op_free);
	ep->msg.op_nfree++;
	spin_unlock_bh(&ep->lock);
	wake_up(&ep->msg.tx_wait);
}

/**
 * kmsg_post_op_locked - post an RDMA operation or registration
 * @ep: endpoint
 * @op: slot from kmsg_op_get(), with @done and @ctx set
 * @wr: the work request; signaled if @op->done is set
 *
 * Context: any, ep->lock held.
 * Return: 0, -ENOTCONN once the endpoint is going down, or the provider's
 * post error; the slot is the caller's again on error.
 */
int kmsg_post_op_locked(struct kverbs_ep *ep, struct kmsg_op *op,
			struct ib_send_wr *wr)
{
	bool sig;

	if (ep->state != KVERBS_EP_CONNECTED)
		return ep->error ?: -ENOTCONN;
	return kmsg_post_wr_locked(ep, &op->wr, wr, op->done,
				   !ep->msg.op_nfree, &sig);
}

/**
 * kmsg_flush_locked - post what credits now allow
 * @ep: endpoint
 *
 * Queued data first, in order; then a credit-only message if grants have
 * piled up and no data will carry them.  Called whenever credits arrive or
 * a receive is re-posted.
 *
 * Context: any, with ep->lock held.
 * Return: 0 or a provider error, after which the endpoint is torn down.
 */
int kmsg_flush_locked(struct kverbs_ep *ep)
{
	struct kmsg_ep *m = &ep->msg;
	struct kmsg_buf *b, *ctrl = &m->tx[m->ntx - 1];
	int ret;

	if (ep->state != KVERBS_EP_CONNECTED)
		return 0;
	while ((b = list_first_entry_or_null(&m->pending, struct kmsg_buf,
					     node))) {
		ret = kmsg_post_locked(ep, b);
		if (ret == -EAGAIN) {
			trace_kmsg_credit_stall(ep, m->credit.avail,
						m->credit.ungranted);
			return 0;
		}
		if (ret)
			return ret;
		list_del_init(&b->node);
	}
	if (ctrl->state == KMSG_BUF_FREE &&
	    kmsg_credit_want_ctrl(&m->credit)) {
		ctrl->len = 0;
		ret = kmsg_post_locked(ep, ctrl);
		if (ret && ret != -EAGAIN)
			return ret;
	}
	return 0;
}

/**
 * kmsg_send - post a reserved buffer
 * @buf: from kmsg_reserve()
 * @len: payload bytes written, 1..kverbs_ep_max_send()
 * @flags: KMSG_NOTIFY to get ->send_done(@cookie) once the send completed
 *	or failed
 * @cookie: passed to ->send_done
 *
 * The buffer belongs to the library after this call, whatever it returns.
 * Without a credit the message waits, behind earlier ones, and is posted
 * when the peer returns credits; an endpoint that goes down first fails it
 * (->send_done with -ECONNRESET if KMSG_NOTIFY).
 *
 * Context: process or softirq, not hard interrupt; does not sleep.
 * Return: 0 when posted or queued; -EMSGSIZE, -ENOTCONN or the endpoint's
 * error (no ->send_done then), or the provider's post error.
 */
int kmsg_send(struct kmsg_buf *buf, u32 len, unsigned int flags,
	      void *cookie)
{
	struct kverbs_ep *ep = buf->wr.ep;
	struct kmsg_ep *m = &ep->msg;
	bool queued = false;
	int ret;

	spin_lock_bh(&ep->lock);
	if (WARN_ON_ONCE(buf->state != KMSG_BUF_RESERVED)) {
		spin_unlock_bh(&ep->lock);
		return -EINVAL;
	}
	if (!len || len > kverbs_ep_max_send(ep))
		ret = -EMSGSIZE;
	else if ((flags & KMSG_NOTIFY) && !ep->dom->ops->send_done)
		ret = -EINVAL;
	else if (ep->state != KVERBS_EP_CONNECTED)
		ret = ep->error ?: -ENOTCONN;
	else
		queued = true;
	if (queued) {
		buf->len = len;
		buf->flags = flags & KMSG_NOTIFY;
		buf->cookie = cookie;
		buf->state = KMSG_BUF_PENDING;
		list_add_tail(&buf->node, &m->pending);
		if (!list_is_first(&buf->node, &m->pending))
			atomic64_inc(&m->stats.stalls);
		ret = kmsg_flush_locked(ep);
	} else {
		kmsg_put_free_locked(m, buf);
	}
	spin_unlock_bh(&ep->lock);
	if (!queued)
		wake_up(&m->tx_wait);
	else if (ret)
		kverbs_ep_schedule_teardown(ep, ret);
	kverbs_ep_put(ep);	/* the reservation's reference */
	return ret;
}
EXPORT_SYMBOL_NS_GPL(kmsg_send, KVERBS_NS);

/**
 * kmsg_unreserve - give back a reserved buffer without sending it
 * @buf: from kmsg_reserve()
 *
 * Context: any.
 */
void kmsg_unreserve(struct kmsg_buf *buf)
{
	struct kverbs_ep *ep = buf->wr.ep;

	spin_lock_bh(&ep->lock);
	if (!WARN_ON_ONCE(buf->state != KMSG_BUF_RESERVED))
		kmsg_put_free_locked(&ep->msg, buf);
	spin_unlock_bh(&ep->lock);
	wake_up(&ep->msg.tx_wait);
	kverbs_ep_put(ep);
}
EXPORT_SYMBOL_NS_GPL(kmsg_unreserve, KVERBS_NS);

/* Callbacks owed for reclaimed WRs, run after ep->lock is dropped. */
struct kmsg_notify {
	struct {
		struct kmsg_op *op;	/* NULL: a buffer's ->send_done */
		void *cookie;
	} c[8];
	unsigned int n;
};

static void kmsg_notify_flush(struct kverbs_ep *ep, struct kmsg_notify *nt,
			      int status)
{
	unsigned int i;

	for (i = 0; i < nt->n; i++) {
		struct kmsg_op *op = nt->c[i].op;

		if (!op) {
			ep->dom->ops->send_done(ep, nt->c[i].cookie, status);
			continue;
		}
		if (op->done)
			op->done(op->ctx, status);
		kmsg_op_put(ep, op);
	}
	nt->n = 0;
}

/*
 * Reclaim every WR up to position @pos, which completed with @status, and
 * run the callbacks owed.  Returns whether the credit-message buffer was
 * among them.
 */
static bool kmsg_reclaim_through(struct kverbs_ep *ep, u32 pos, int status)
{
	struct kmsg_ep *m = &ep->msg;
	struct kmsg_notify nt = { .n = 0 };
	bool ctrl = false;
	u32 n;

	spin_lock_bh(&ep->lock);
	n = kmsg_sq_reclaim(&m->sq, pos);
	while (n--) {
		struct kmsg_wr *w = m->sq_ring[(m->sq.tail - n - 1) %
					       m->sq.size];
		struct kmsg_buf *b = container_of(w, struct kmsg_buf, wr);
		bool owed = w->kind == KMSG_WR_OP || (b->flags & KMSG_NOTIFY);

		if (owed && nt.n == ARRAY_SIZE(nt.c)) {
			spin_unlock_bh(&ep->lock);
			kmsg_notify_flush(ep, &nt, status);
			spin_lock_bh(&ep->lock);
		}
		if (w->kind == KMSG_WR_OP) {
			nt.c[nt.n].op = container_of(w, struct kmsg_op, wr);
			nt.c[nt.n++].cookie = NULL;
			continue;
		}
		if (owed) {
			nt.c[nt.n].op = NULL;
			nt.c[nt.n++].cookie = b->cookie;
		}
		ctrl |= b->ctrl;
		kmsg_put_free_locked(m, b);
		atomic64_inc(&m->stats.reclaimed);
	}
	spin_unlock_bh(&ep->lock);
	wake_up(&m->tx_wait);
	kmsg_notify_flush(ep, &nt, status);
	return ctrl;
}

static int kmsg_wc_errno(enum ib_wc_status st)
{
	switch (st) {
	case IB_WC_SUCCESS:
		return 0;
	case IB_WC_WR_FLUSH_ERR:
		return -ECONNRESET;
	case IB_WC_REM_ACCESS_ERR:
	case IB_WC_REM_INV_REQ_ERR:
	case IB_WC_REM_OP_ERR:
		return -EREMOTEIO;
	default:
		return -EIO;
	}
}

/**
 * kmsg_wr_done - completion of a send-queue WR, signaled or flushed
 * @cq: the domain's CQ
 * @wc: work completion
 *
 * Reclaims the WR and every earlier one still outstanding.
 *
 * Context: softirq (CQ callback), serialised per domain by the CQ's poller.
 */
void kmsg_wr_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kmsg_wr *w = container_of(wc->wr_cqe, struct kmsg_wr, cqe);
	struct kverbs_ep *ep = w->ep;
	int status = kmsg_wc_errno(wc->status);
	int ret = 0;

	/* A freed credit-message buffer may be what grants waited for. */
	if (kmsg_reclaim_through(ep, w->pos, status) && !status) {
		spin_lock_bh(&ep->lock);
		ret = kmsg_flush_locked(ep);
		spin_unlock_bh(&ep->lock);
	}

	if (status && status != -ECONNRESET) {
		atomic64_inc(&ep->stat_errors);
		trace_kmsg_error(ep, ib_wc_status_msg(wc->status));
		pr_err_ratelimited("%s: %s completion failed: %s (%d), peer node %u\n",
				   ep->dom->name,
				   w->kind == KMSG_WR_OP ? "operation" : "send",
				   ib_wc_status_msg(wc->status), wc->status,
				   ep->peer_node);
		ret = status;
	}
	if (ret)
		kverbs_ep_schedule_teardown(ep, ret);
}

/**
 * kmsg_reclaim_tail - reclaim the unsignaled tail of a drained QP
 * @ep: endpoint in teardown
 *
 * Unsignaled WRs that completed successfully produce no completion, and
 * the drain WR's completion belongs to ib_drain_qp(), so WRs posted after
 * the last signaled one are still on the books: they are all done once the
 * drain returned.  Without this they would leak across a reconnect.
 *
 * Context: process, after ib_drain_qp().
 */
void kmsg_reclaim_tail(struct kverbs_ep *ep)
{
	struct kmsg_sq *sq = &ep->msg.sq;
	u32 used, last;

	spin_lock_bh(&ep->lock);
	used = kmsg_sq_used(sq);
	last = sq->head - 1;
	spin_unlock_bh(&ep->lock);
	if (used)
		kmsg_reclaim_through(ep, last, 0);
}

/**
 * kmsg_fail_pending - fail what never got a credit
 * @ep: endpoint in teardown, QP drained
 *
 * Context: process.
 */
void kmsg_fail_pending(struct kverbs_ep *ep)
{
	struct kmsg_ep *m = &ep->msg;
	struct kmsg_notify nt = { .n = 0 };
	struct kmsg_buf *b;

	spin_lock_bh(&ep->lock);
	while ((b = list_first_entry_or_null(&m->pending, struct kmsg_buf,
					     node))) {
		list_del_init(&b->node);
		if (b->flags & KMSG_NOTIFY) {
			if (nt.n == ARRAY_SIZE(nt.c)) {
				spin_unlock_bh(&ep->lock);
				kmsg_notify_flush(ep, &nt, -ECONNRESET);
				spin_lock_bh(&ep->lock);
			}
			nt.c[nt.n].op = NULL;
			nt.c[nt.n++].cookie = b->cookie;
		}
		kmsg_put_free_locked(m, b);
	}
	spin_unlock_bh(&ep->lock);
	wake_up(&m->tx_wait);
	kmsg_notify_flush(ep, &nt, -ECONNRESET);
}
