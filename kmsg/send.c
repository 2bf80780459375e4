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
	unsigned long flags;
	bool done = true;

	spin_lock_irqsave(&ep->lock, flags);
	if (ep->state != KVERBS_EP_CONNECTED) {
		*err = ep->error ?: -ENOTCONN;
	} else {
		*b = kmsg_get_free_locked(&ep->msg);
		done = *b;
	}
	spin_unlock_irqrestore(&ep->lock, flags);
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
 * Context: process, may sleep (killable) until a buffer is reclaimed; any
 * context with KMSG_NOWAIT.
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
 * Post @b now if a credit allows.  Return 0 when posted, -EAGAIN when no
 * credit, or the provider's error (the endpoint is then torn down).
 */
static int kmsg_post_locked(struct kverbs_ep *ep, struct kmsg_buf *b)
{
	struct kmsg_ep *m = &ep->msg;
	const struct ib_send_wr *bad;
	struct ib_send_wr wr = {};
	struct ib_sge sge;
	u32 pos, unsignaled = m->sq.unsignaled;
	bool sig;
	u16 grant;
	int ret;

	lockdep_assert_held(&ep->lock);
	if (!kmsg_credit_take(&m->credit, &grant))
		return -EAGAIN;
	kmsg_hdr_fill(b->data, b->ctrl ? KMSG_TYPE_CREDIT : KMSG_TYPE_DATA,
		      grant, m->tx_seq, b->len);
	sig = kmsg_sq_post(&m->sq, b->ctrl || (b->flags & KMSG_NOTIFY),
			   !b->ctrl && !m->tx_nfree, &pos);
	m->sq_ring[pos % m->sq.size] = b;
	b->pos = pos;

	sge.addr = b->dma;
	sge.length = sizeof(struct kmsg_hdr) + b->len;
	sge.lkey = ep->dom->pd->local_dma_lkey;
	ib_dma_sync_single_for_device(ep->dom->pd->device, b->dma, sge.length,
				      DMA_TO_DEVICE);
	wr.wr_cqe = &b->cqe;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IB_WR_SEND;
	wr.send_flags = sig ? IB_SEND_SIGNALED : 0;
	ret = ib_post_send(ep->qp, &wr, &bad);
	if (ret) {
		kmsg_sq_unpost(&m->sq, unsignaled);
		m->credit.avail++;
		m->credit.ungranted += grant;
		return ret;
	}
	trace_kmsg_send(ep, m->tx_seq, b->len, grant, sig);
	m->tx_seq++;
	b->state = KMSG_BUF_POSTED;
	atomic64_inc(&m->stats.sent);
	atomic64_add(grant, &m->stats.credits_granted);
	if (sig)
		atomic64_inc(&m->stats.signaled);
	if (b->ctrl)
		atomic64_inc(&m->stats.credit_msgs);
	return 0;
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
 * Context: any; does not sleep.
 * Return: 0 when posted or queued; -EMSGSIZE, -ENOTCONN or the endpoint's
 * error (no ->send_done then), or the provider's post error.
 */
int kmsg_send(struct kmsg_buf *buf, u32 len, unsigned int flags,
	      void *cookie)
{
	struct kverbs_ep *ep = buf->ep;
	struct kmsg_ep *m = &ep->msg;
	unsigned long irqflags;
	bool queued = false;
	int ret;

	spin_lock_irqsave(&ep->lock, irqflags);
	if (WARN_ON_ONCE(buf->state != KMSG_BUF_RESERVED)) {
		spin_unlock_irqrestore(&ep->lock, irqflags);
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
	spin_unlock_irqrestore(&ep->lock, irqflags);
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
	struct kverbs_ep *ep = buf->ep;
	unsigned long flags;

	spin_lock_irqsave(&ep->lock, flags);
	if (!WARN_ON_ONCE(buf->state != KMSG_BUF_RESERVED))
		kmsg_put_free_locked(&ep->msg, buf);
	spin_unlock_irqrestore(&ep->lock, flags);
	wake_up(&ep->msg.tx_wait);
	kverbs_ep_put(ep);
}
EXPORT_SYMBOL_NS_GPL(kmsg_unreserve, KVERBS_NS);

/* Reclaimed buffers whose caller asked for KMSG_NOTIFY. */
struct kmsg_notify {
	void *cookie[8];
	unsigned int n;
};

static void kmsg_notify_flush(struct kverbs_ep *ep, struct kmsg_notify *nt,
			      int status)
{
	unsigned int i;

	for (i = 0; i < nt->n; i++)
		ep->dom->ops->send_done(ep, nt->cookie[i], status);
	nt->n = 0;
}

/*
 * Reclaim every WR up to position @pos, which completed with @status, and
 * tell callers that asked.  Returns whether the credit-message buffer was
 * among them.
 */
static bool kmsg_reclaim_through(struct kverbs_ep *ep, u32 pos, int status)
{
	struct kmsg_ep *m = &ep->msg;
	struct kmsg_notify nt = { .n = 0 };
	unsigned long flags;
	bool ctrl = false;
	u32 n;

	spin_lock_irqsave(&ep->lock, flags);
	n = kmsg_sq_reclaim(&m->sq, pos);
	while (n--) {
		struct kmsg_buf *r = m->sq_ring[(m->sq.tail - n - 1) %
						m->sq.size];

		if (r->flags & KMSG_NOTIFY) {
			if (nt.n == ARRAY_SIZE(nt.cookie)) {
				spin_unlock_irqrestore(&ep->lock, flags);
				kmsg_notify_flush(ep, &nt, status);
				spin_lock_irqsave(&ep->lock, flags);
			}
			nt.cookie[nt.n++] = r->cookie;
		}
		ctrl |= r->ctrl;
		kmsg_put_free_locked(m, r);
		atomic64_inc(&m->stats.reclaimed);
	}
	spin_unlock_irqrestore(&ep->lock, flags);
	wake_up(&m->tx_wait);
	kmsg_notify_flush(ep, &nt, status);
	return ctrl;
}

/**
 * kmsg_send_done - completion of a send WR, signaled or flushed
 * @cq: the domain's CQ
 * @wc: work completion
 *
 * Reclaims the WR and every earlier one still outstanding.
 *
 * Context: softirq or poll (CQ callback), serialised per domain.
 */
void kmsg_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kmsg_buf *b = container_of(wc->wr_cqe, struct kmsg_buf, cqe);
	struct kverbs_ep *ep = b->ep;
	int status = wc->status == IB_WC_SUCCESS ? 0 :
		     wc->status == IB_WC_WR_FLUSH_ERR ? -ECONNRESET : -EIO;
	unsigned long flags;
	bool locked;
	int ret = 0;

	locked = kmsg_cq_enter(ep->dom);
	/* A freed credit-message buffer may be what grants waited for. */
	if (kmsg_reclaim_through(ep, b->pos, status) && !status) {
		spin_lock_irqsave(&ep->lock, flags);
		ret = kmsg_flush_locked(ep);
		spin_unlock_irqrestore(&ep->lock, flags);
	}
	kmsg_cq_exit(ep->dom, locked);

	if (status == -EIO) {
		atomic64_inc(&ep->stat_errors);
		trace_kmsg_error(ep, "send completion failed");
		pr_err_ratelimited("%s: send completion failed: %s (%d), peer node %u\n",
				   ep->dom->name, ib_wc_status_msg(wc->status),
				   wc->status, ep->peer_node);
		ret = -EIO;
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
	unsigned long flags;
	u32 used, last;

	spin_lock_irqsave(&ep->lock, flags);
	used = kmsg_sq_used(sq);
	last = sq->head - 1;
	spin_unlock_irqrestore(&ep->lock, flags);
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
	unsigned long flags;

	spin_lock_irqsave(&ep->lock, flags);
	while ((b = list_first_entry_or_null(&m->pending, struct kmsg_buf,
					     node))) {
		list_del_init(&b->node);
		if (b->flags & KMSG_NOTIFY) {
			if (nt.n == ARRAY_SIZE(nt.cookie)) {
				spin_unlock_irqrestore(&ep->lock, flags);
				kmsg_notify_flush(ep, &nt, -ECONNRESET);
				spin_lock_irqsave(&ep->lock, flags);
			}
			nt.cookie[nt.n++] = b->cookie;
		}
		kmsg_put_free_locked(m, b);
	}
	spin_unlock_irqrestore(&ep->lock, flags);
	wake_up(&m->tx_wait);
	kmsg_notify_flush(ep, &nt, -ECONNRESET);
}
