// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmsg send path: reserve, send, the credit wait, selective signaling and
 * reclaim on completion.
 *
 * A buffer goes FREE -> RESERVED (kvmsg_reserve) -> PENDING (no credit
 * yet, queued in order) -> POSTED -> FREE (reclaimed by the completion of
 * its own WR or of any later one).  It is never reclaimed on the peer's
 * reply: until its WR completes the adapter may still retransmit from it.
 *
 * Every WR the library posts, data or credit-only, goes through
 * kvmsg_post_locked(), so one counter per QP decides signaling for all of
 * them and the send queue can never hold more WRs than it has entries.
 */
#include <linux/sched/signal.h>

#include "../kverbs/kverbs-pri.h"
#include "kvmsg_trace.h"

static struct kvmsg_buf *kvmsg_get_free_locked(struct kvmsg_ep *m)
{
	struct kvmsg_buf *b;

	b = list_first_entry_or_null(&m->tx_free, struct kvmsg_buf, node);
	if (b) {
		list_del_init(&b->node);
		m->tx_nfree--;
		b->state = KVMSG_BUF_RESERVED;
	}
	return b;
}

static bool kvmsg_can_reserve(struct kverbs_ep *ep, struct kvmsg_buf **b,
			     int *err)
{
	bool done = true;

	spin_lock_bh(&ep->lock);
	if (ep->state != KVERBS_EP_CONNECTED) {
		*err = ep->error ?: -ENOTCONN;
	} else {
		*b = kvmsg_get_free_locked(&ep->msg);
		done = *b;
	}
	spin_unlock_bh(&ep->lock);
	return done;
}

/**
 * kvmsg_reserve - get a send buffer
 * @ep: connected endpoint
 * @len: payload bytes the caller will write, 1..kverbs_ep_max_send()
 * @flags: KVMSG_NOWAIT to fail instead of sleeping
 *
 * Bounded by the endpoint's send buffers (its depth), never by credits:
 * a message without a credit waits inside kvmsg_send().  The buffer must be
 * passed to kvmsg_send() or kvmsg_unreserve() soon, as it holds a slot of
 * the pool.
 *
 * Context: process, may sleep (killable) until a buffer is reclaimed;
 * softirq with KVMSG_NOWAIT (never hard interrupt).
 * Return: the buffer, or ERR_PTR: -EMSGSIZE for a bad @len, -EAGAIN
 * (KVMSG_NOWAIT and none free), -EINTR (fatal signal), -ENOTCONN or the
 * endpoint's error once it is not connected.
 */
struct kvmsg_buf *kvmsg_reserve(struct kverbs_ep *ep, u32 len,
			      unsigned int flags)
{
	struct kvmsg_buf *b = NULL;
	int err = 0;

	if (!len || len > kverbs_ep_max_send(ep))
		return ERR_PTR(-EMSGSIZE);
	if (flags & KVMSG_NOWAIT) {
		if (!kvmsg_can_reserve(ep, &b, &err))
			return ERR_PTR(-EAGAIN);
	} else {
		might_sleep();
		if (wait_event_killable(ep->msg.tx_wait,
					kvmsg_can_reserve(ep, &b, &err)))
			return ERR_PTR(-EINTR);
	}
	if (!b)
		return ERR_PTR(err);
	kref_get(&ep->ref);
	return b;
}
EXPORT_SYMBOL_NS_GPL(kvmsg_reserve, KVERBS_NS);

/**
 * kvmsg_buf_data - where the caller writes its message
 * @buf: reserved buffer
 *
 * Context: any.
 * Return: kverbs_ep_max_send() bytes of registered memory.
 */
void *kvmsg_buf_data(struct kvmsg_buf *buf)
{
	return (struct kvmsg_hdr *)buf->data + 1;
}
EXPORT_SYMBOL_NS_GPL(kvmsg_buf_data, KVERBS_NS);

/* Put reclaimed or never-posted buffers back; wake reservers. */
static void kvmsg_put_free_locked(struct kvmsg_ep *m, struct kvmsg_buf *b)
{
	b->state = KVMSG_BUF_FREE;
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
static int kvmsg_post_wr_locked(struct kverbs_ep *ep, struct kvmsg_wr *w,
			       struct ib_send_wr *wr, bool want_signal,
			       bool last, bool *signaled)
{
	struct kvmsg_ep *m = &ep->msg;
	const struct ib_send_wr *bad;
	u32 pos, unsignaled = m->sq.unsignaled;
	bool sig;
	int ret;

	lockdep_assert_held(&ep->lock);
	sig = kvmsg_sq_post(&m->sq, want_signal, last, &pos);
	m->sq_ring[pos % m->sq.size] = w;
	w->pos = pos;
	wr->wr_cqe = &w->cqe;
	if (sig)
		wr->send_flags |= IB_SEND_SIGNALED;
	ret = ib_post_send(ep->qp, wr, &bad);
	if (ret) {
		kvmsg_sq_unpost(&m->sq, unsignaled);
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
static int kvmsg_post_locked(struct kverbs_ep *ep, struct kvmsg_buf *b)
{
	struct kvmsg_ep *m = &ep->msg;
	struct ib_send_wr wr = {};
	struct ib_sge sge;
	bool sig = false;
	u16 grant;
	int ret;

	if (!kvmsg_credit_take(&m->credit, &grant))
		return -EAGAIN;
	kvmsg_hdr_fill(b->data, b->ctrl ? KVMSG_TYPE_CREDIT : KVMSG_TYPE_DATA,
		      grant, m->tx_seq, b->len);
	sge.addr = b->dma;
	sge.length = sizeof(struct kvmsg_hdr) + b->len;
	sge.lkey = ep->dom->pd->local_dma_lkey;
	ib_dma_sync_single_for_device(ep->dom->pd->device, b->dma, sge.length,
				      DMA_TO_DEVICE);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IB_WR_SEND;
	ret = kvmsg_post_wr_locked(ep, &b->wr, &wr,
				  b->ctrl || (b->flags & KVMSG_NOTIFY),
				  !b->ctrl && !m->tx_nfree, &sig);
	if (ret) {
		m->credit.avail++;
		m->credit.ungranted += grant;
		return ret;
	}
	trace_kvmsg_send(ep, m->tx_seq, b->len, grant, sig);
	m->tx_seq++;
	b->state = KVMSG_BUF_POSTED;
	atomic64_inc(&m->stats.sent);
	atomic64_add(grant, &m->stats.credits_granted);
	if (b->ctrl)
		atomic64_inc(&m->stats.credit_msgs);
	return 0;
}

/**
 * kvmsg_op_get - take an operation slot of the send queue
 * @ep: connected endpoint
 * @flags: KVMSG_NOWAIT to fail instead of sleeping
 *
 * Context: process, may sleep (killable); softirq with KVMSG_NOWAIT.
 * Return: the slot, or ERR_PTR: -EAGAIN, -EINTR, -ENOTCONN or the
 * endpoint's error.
 */
struct kvmsg_op *kvmsg_op_get(struct kverbs_ep *ep, unsigned int flags)
{
	struct kvmsg_ep *m = &ep->msg;
	struct kvmsg_op *op = NULL;
	int err = 0;

	if (!(flags & KVMSG_NOWAIT) &&
	    wait_event_killable(m->tx_wait, READ_ONCE(m->op_nfree) ||
				READ_ONCE(ep->state) != KVERBS_EP_CONNECTED))
		return ERR_PTR(-EINTR);
	spin_lock_bh(&ep->lock);
	if (ep->state != KVERBS_EP_CONNECTED) {
		err = ep->error ?: -ENOTCONN;
	} else {
		op = list_first_entry_or_null(&m->op_free, struct kvmsg_op,
					      node);
		if (op) {
			list_del_init(&op->node);
			m->op_nfree--;
		} else {
			err = -EAGAIN;
		}
	}
	spin_unlock_bh(&ep->lock);
	if (err == -EAGAIN && !(flags & KVMSG_NOWAIT))
		return kvmsg_op_get(ep, flags);
	return op ?: ERR_PTR(err);
}

/**
 * kvmsg_op_put - give back an operation slot that was not posted
 * @ep: endpoint
 * @op: slot from kvmsg_op_get()
 *
 * Context: any.
 */
void kvmsg_op_put(struct kverbs_ep *ep, struct kvmsg_op *op)
{
	spin_lock_bh(&ep->lock);
	list_add(&op->node, &ep->msg.op_free);
	ep->msg.op_nfree++;
	spin_unlock_bh(&ep->lock);
	wake_up(&ep->msg.tx_wait);
}

/**
 * kvmsg_post_op_locked - post an RDMA operation or registration
 * @ep: endpoint
 * @op: slot from kvmsg_op_get(), with @done and @ctx set
 * @wr: the work request; signaled if @op->done is set
 *
 * Context: any, ep->lock held.
 * Return: 0, -ENOTCONN once the endpoint is going down, or the provider's
 * post error; the slot is the caller's again on error.
 */
int kvmsg_post_op_locked(struct kverbs_ep *ep, struct kvmsg_op *op,
			struct ib_send_wr *wr)
{
	bool sig;

	if (ep->state != KVERBS_EP_CONNECTED)
		return ep->error ?: -ENOTCONN;
	return kvmsg_post_wr_locked(ep, &op->wr, wr, op->done,
				   !ep->msg.op_nfree, &sig);
}

/**
 * kvmsg_flush_locked - post what credits now allow
 * @ep: endpoint
 *
 * Queued data first, in order; then a credit-only message if grants have
 * piled up and no data will carry them.  Called whenever credits arrive or
 * a receive is re-posted.
 *
 * Context: any, with ep->lock held.
 * Return: 0 or a provider error, after which the endpoint is torn down.
 */
int kvmsg_flush_locked(struct kverbs_ep *ep)
{
	struct kvmsg_ep *m = &ep->msg;
	struct kvmsg_buf *b, *ctrl = &m->tx[m->ntx - 1];
	int ret;

	if (ep->state != KVERBS_EP_CONNECTED)
		return 0;
	while ((b = list_first_entry_or_null(&m->pending, struct kvmsg_buf,
					     node))) {
		ret = kvmsg_post_locked(ep, b);
		if (ret == -EAGAIN) {
			trace_kvmsg_credit_stall(ep, m->credit.avail,
						m->credit.ungranted);
			return 0;
		}
		if (ret)
			return ret;
		list_del_init(&b->node);
	}
	if (ctrl->state == KVMSG_BUF_FREE &&
	    kvmsg_credit_want_ctrl(&m->credit)) {
		ctrl->len = 0;
		ret = kvmsg_post_locked(ep, ctrl);
		if (ret && ret != -EAGAIN)
			return ret;
	}
	return 0;
}

/**
 * kvmsg_send - post a reserved buffer
 * @buf: from kvmsg_reserve()
 * @len: payload bytes written, 1..kverbs_ep_max_send()
 * @flags: KVMSG_NOTIFY to get ->send_done(@cookie) once the send completed
 *	or failed
 * @cookie: passed to ->send_done
 *
 * The buffer belongs to the library after this call, whatever it returns.
 * Without a credit the message waits, behind earlier ones, and is posted
 * when the peer returns credits; an endpoint that goes down first fails it
 * (->send_done with -ECONNRESET if KVMSG_NOTIFY).
 *
 * Context: process or softirq, not hard interrupt; does not sleep.
 * Return: 0 when posted or queued; -EMSGSIZE, -ENOTCONN or the endpoint's
 * error (no ->send_done then), or the provider's post error.
 */
int kvmsg_send(struct kvmsg_buf *buf, u32 len, unsigned int flags,
	      void *cookie)
{
	struct kverbs_ep *ep = buf->wr.ep;
	struct kvmsg_ep *m = &ep->msg;
	bool queued = false;
	int ret;

	spin_lock_bh(&ep->lock);
	if (WARN_ON_ONCE(buf->state != KVMSG_BUF_RESERVED)) {
		spin_unlock_bh(&ep->lock);
		return -EINVAL;
	}
	if (!len || len > kverbs_ep_max_send(ep))
		ret = -EMSGSIZE;
	else if ((flags & KVMSG_NOTIFY) && !ep->dom->ops->send_done)
		ret = -EINVAL;
	else if (ep->state != KVERBS_EP_CONNECTED)
		ret = ep->error ?: -ENOTCONN;
	else
		queued = true;
	if (queued) {
		buf->len = len;
		buf->flags = flags & KVMSG_NOTIFY;
		buf->cookie = cookie;
		buf->state = KVMSG_BUF_PENDING;
		list_add_tail(&buf->node, &m->pending);
		if (!list_is_first(&buf->node, &m->pending))
			atomic64_inc(&m->stats.stalls);
		ret = kvmsg_flush_locked(ep);
	} else {
		kvmsg_put_free_locked(m, buf);
	}
	spin_unlock_bh(&ep->lock);
	if (!queued)
		wake_up(&m->tx_wait);
	else if (ret)
		kverbs_ep_schedule_teardown(ep, ret);
	kverbs_ep_put(ep);	/* the reservation's reference */
	return ret;
}
EXPORT_SYMBOL_NS_GPL(kvmsg_send, KVERBS_NS);

/**
 * kvmsg_unreserve - give back a reserved buffer without sending it
 * @buf: from kvmsg_reserve()
 *
 * Context: any.
 */
void kvmsg_unreserve(struct kvmsg_buf *buf)
{
	struct kverbs_ep *ep = buf->wr.ep;

	spin_lock_bh(&ep->lock);
	if (!WARN_ON_ONCE(buf->state != KVMSG_BUF_RESERVED))
		kvmsg_put_free_locked(&ep->msg, buf);
	spin_unlock_bh(&ep->lock);
	wake_up(&ep->msg.tx_wait);
	kverbs_ep_put(ep);
}
EXPORT_SYMBOL_NS_GPL(kvmsg_unreserve, KVERBS_NS);

/* Callbacks owed for reclaimed WRs, run after ep->lock is dropped. */
struct kvmsg_notify {
	struct {
		struct kvmsg_op *op;	/* NULL: a buffer's ->send_done */
		void *cookie;
	} c[8];
	unsigned int n;
};

static void kvmsg_notify_flush(struct kverbs_ep *ep, struct kvmsg_notify *nt,
			      int status)
{
	unsigned int i;

	for (i = 0; i < nt->n; i++) {
		struct kvmsg_op *op = nt->c[i].op;

		if (!op) {
			ep->dom->ops->send_done(ep, nt->c[i].cookie, status);
			continue;
		}
		if (op->done)
			op->done(op->ctx, status);
		kvmsg_op_put(ep, op);
	}
	nt->n = 0;
}

/*
 * Reclaim every WR up to position @pos, which completed with @status, and
 * run the callbacks owed.  Returns whether the credit-message buffer was
 * among them.
 */
static bool kvmsg_reclaim_through(struct kverbs_ep *ep, u32 pos, int status)
{
	struct kvmsg_ep *m = &ep->msg;
	struct kvmsg_notify nt = { .n = 0 };
	bool ctrl = false;
	u32 n;

	spin_lock_bh(&ep->lock);
	n = kvmsg_sq_reclaim(&m->sq, pos);
	while (n--) {
		struct kvmsg_wr *w = m->sq_ring[(m->sq.tail - n - 1) %
					       m->sq.size];
		struct kvmsg_buf *b = container_of(w, struct kvmsg_buf, wr);
		bool owed = w->kind == KVMSG_WR_OP || (b->flags & KVMSG_NOTIFY);

		if (owed && nt.n == ARRAY_SIZE(nt.c)) {
			spin_unlock_bh(&ep->lock);
			kvmsg_notify_flush(ep, &nt, status);
			spin_lock_bh(&ep->lock);
		}
		if (w->kind == KVMSG_WR_OP) {
			nt.c[nt.n].op = container_of(w, struct kvmsg_op, wr);
			nt.c[nt.n++].cookie = NULL;
			continue;
		}
		if (owed) {
			nt.c[nt.n].op = NULL;
			nt.c[nt.n++].cookie = b->cookie;
		}
		ctrl |= b->ctrl;
		kvmsg_put_free_locked(m, b);
		atomic64_inc(&m->stats.reclaimed);
	}
	spin_unlock_bh(&ep->lock);
	wake_up(&m->tx_wait);
	kvmsg_notify_flush(ep, &nt, status);
	return ctrl;
}

static int kvmsg_wc_errno(enum ib_wc_status st)
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
 * kvmsg_wr_done - completion of a send-queue WR, signaled or flushed
 * @cq: the domain's CQ
 * @wc: work completion
 *
 * Reclaims the WR and every earlier one still outstanding.
 *
 * Context: softirq (CQ callback), serialised per domain by the CQ's poller.
 */
void kvmsg_wr_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kvmsg_wr *w = container_of(wc->wr_cqe, struct kvmsg_wr, cqe);
	struct kverbs_ep *ep = w->ep;
	int status = kvmsg_wc_errno(wc->status);
	int ret = 0;

	/* A freed credit-message buffer may be what grants waited for. */
	if (kvmsg_reclaim_through(ep, w->pos, status) && !status) {
		spin_lock_bh(&ep->lock);
		ret = kvmsg_flush_locked(ep);
		spin_unlock_bh(&ep->lock);
	}

	if (status && status != -ECONNRESET) {
		atomic64_inc(&ep->stat_errors);
		trace_kvmsg_error(ep, ib_wc_status_msg(wc->status));
		pr_err_ratelimited("%s: %s completion failed: %s (%d), peer node %u\n",
				   ep->dom->name,
				   w->kind == KVMSG_WR_OP ? "operation" : "send",
				   ib_wc_status_msg(wc->status), wc->status,
				   ep->peer_node);
		ret = status;
	}
	if (ret)
		kverbs_ep_schedule_teardown(ep, ret);
}

/**
 * kvmsg_reclaim_tail - reclaim the unsignaled tail of a drained QP
 * @ep: endpoint in teardown
 *
 * Unsignaled WRs that completed successfully produce no completion, and
 * the drain WR's completion belongs to ib_drain_qp(), so WRs posted after
 * the last signaled one are still on the books: they are all done once the
 * drain returned.  Without this they would leak across a reconnect.
 *
 * Context: process, after ib_drain_qp().
 */
void kvmsg_reclaim_tail(struct kverbs_ep *ep)
{
	struct kvmsg_sq *sq = &ep->msg.sq;
	u32 used, last;

	spin_lock_bh(&ep->lock);
	used = kvmsg_sq_used(sq);
	last = sq->head - 1;
	spin_unlock_bh(&ep->lock);
	if (used)
		kvmsg_reclaim_through(ep, last, 0);
}

/**
 * kvmsg_fail_pending - fail what never got a credit
 * @ep: endpoint in teardown, QP drained
 *
 * Context: process.
 */
void kvmsg_fail_pending(struct kverbs_ep *ep)
{
	struct kvmsg_ep *m = &ep->msg;
	struct kvmsg_notify nt = { .n = 0 };
	struct kvmsg_buf *b;

	spin_lock_bh(&ep->lock);
	while ((b = list_first_entry_or_null(&m->pending, struct kvmsg_buf,
					     node))) {
		list_del_init(&b->node);
		if (b->flags & KVMSG_NOTIFY) {
			if (nt.n == ARRAY_SIZE(nt.c)) {
				spin_unlock_bh(&ep->lock);
				kvmsg_notify_flush(ep, &nt, -ECONNRESET);
				spin_lock_bh(&ep->lock);
			}
			nt.c[nt.n].op = NULL;
			nt.c[nt.n++].cookie = b->cookie;
		}
		kvmsg_put_free_locked(m, b);
	}
	spin_unlock_bh(&ep->lock);
	wake_up(&m->tx_wait);
	kvmsg_notify_flush(ep, &nt, -ECONNRESET);
}
