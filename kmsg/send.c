// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmsg send path: reserve, send, the credit wait, and what happens when
 * kverbs' send-queue ledger reclaims a buffer.
 *
 * A buffer goes FREE -> RESERVED (kvmsg_reserve) -> PENDING (no credit
 * yet, queued in order) -> POSTED -> FREE (reclaimed by the completion of
 * its own WR or of any later one).  It is never reclaimed on the peer's
 * reply: until its WR completes the adapter may still retransmit from it.
 *
 * Every send, data or credit-only, goes through kvmsg_post_locked() into
 * the ledger (kverbs_sq_post_locked()), which decides signaling for the
 * whole send queue; a buffer asks for a signal when the caller wants
 * ->send_done or when it is the last free one, so an exhausted pool is
 * always refilled by a completion.
 */
#include <linux/sched/signal.h>

#include "kvmsg-pri.h"
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

/*
 * @deferred: the domain's deferred handler asks; if there is no buffer it
 * records why for kvmsg_call_handler(), which parks the endpoint.
 */
static bool kvmsg_can_reserve(struct kverbs_ep *ep, struct kvmsg_buf **b,
			      int *err, bool deferred)
{
	bool done = true;

	spin_lock_bh(&ep->lock);
	if (ep->state != KVERBS_EP_CONNECTED) {
		*err = ep->error ?: -ENOTCONN;
	} else {
		*b = kvmsg_get_free_locked(&ep->msg);
		done = *b;
		if (!done && deferred)
			ep->msg.starved |= KVMSG_WANT_BUF;
	}
	spin_unlock_bh(&ep->lock);
	return done;
}

/**
 * kvmsg_reserve - get a send buffer
 * @ep: connected endpoint
 * @len: payload bytes the caller will write, 1..kverbs_ep_max_send()
 * @flags: KVERBS_NOWAIT to fail instead of sleeping
 *
 * Bounded by the endpoint's send buffers (its depth), never by credits:
 * a message without a credit waits inside kvmsg_send().  The buffer must be
 * passed to kvmsg_send() or kvmsg_unreserve() soon, as it holds a slot of
 * the pool.
 *
 * Context: process, may sleep (killable) until a buffer is reclaimed;
 * never sleeps with KVERBS_NOWAIT, inside an atomic callback (a handler
 * returns the -EAGAIN to be deferred) or in a deferred handler, where a
 * wait for one peer's credits would stall every peer's messages (the
 * handler returns the -EAGAIN and is called again, for the same message,
 * once the endpoint has a free buffer).  Not hard interrupt.
 * Return: the buffer, or ERR_PTR: -EMSGSIZE for a bad @len, -EAGAIN
 * (none free and not allowed to wait), -EINTR (fatal signal), -ENOTCONN or the
 * endpoint's error once it is not connected.
 */
struct kvmsg_buf *kvmsg_reserve(struct kverbs_ep *ep, u32 len,
				unsigned int flags)
{
	struct kvmsg_buf *b = NULL;
	int err = 0;

	if (!len || len > kverbs_ep_max_send(ep))
		return ERR_PTR(-EMSGSIZE);
	if (!kverbs_may_wait_peer(ep->dom, flags)) {
		if (!kvmsg_can_reserve(ep, &b, &err,
				       kverbs_in_deferred(ep->dom)))
			return ERR_PTR(-EAGAIN);
	} else {
		might_sleep();
		if (wait_event_killable(ep->msg.tx_wait,
					kvmsg_can_reserve(ep, &b, &err, false)))
			return ERR_PTR(-EINTR);
	}
	if (!b)
		return ERR_PTR(err);
	kverbs_ep_get(ep);
	return b;
}
EXPORT_SYMBOL_NS_GPL(kvmsg_reserve, KVERBS_NS);
ALLOW_ERROR_INJECTION(kvmsg_reserve, ERRNO);

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

/*
 * Put a reclaimed or never-posted buffer back.  Reservers wait only while
 * none is free and check under ep->lock, so waking them on the first free
 * one, under the lock, loses no wake-up.
 */
static void kvmsg_put_free_locked(struct kvmsg_ep *m, struct kvmsg_buf *b)
{
	b->state = KVMSG_BUF_FREE;
	b->flags = 0;
	b->cookie = NULL;
	b->auth = false;
	if (b->ctrl)
		return;
	list_add(&b->node, &m->tx_free);
	if (!m->tx_nfree++)
		wake_up(&m->tx_wait);
}

/*
 * Post @b now if a credit allows.  Return 0 when posted, -EAGAIN when no
 * credit, or the provider's error (the endpoint is then torn down).
 */
static int kvmsg_post_locked(struct kverbs_ep *ep, struct kvmsg_buf *b)
{
	struct kvmsg_ep *m = &ep->msg;
	struct ib_send_wr wr = {};
	u8 type = b->ctrl ? KVMSG_TYPE_CREDIT :
		  b->auth ? KVMSG_TYPE_AUTH : KVMSG_TYPE_DATA;
	struct ib_sge sge;
	bool sig = false;
	u16 grant;
	int ret;

	if (!kvmsg_credit_take(&m->credit, &grant))
		return -EAGAIN;
	kvmsg_hdr_fill(b->data, type, grant, m->tx_seq, b->len);
	sge.addr = b->dma;
	sge.length = sizeof(struct kvmsg_hdr) + b->len;
	sge.lkey = kverbs_ep_lkey(ep);
	ib_dma_sync_single_for_device(kverbs_ep_device(ep), b->dma, sge.length,
				      DMA_TO_DEVICE);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IB_WR_SEND;
	ret = kverbs_sq_post_locked(ep, &b->wr, &wr,
				    b->ctrl || (b->flags & KVMSG_NOTIFY) ||
				    !m->tx_nfree, &sig);
	if (ret) {
		m->credit.avail++;
		m->credit.ungranted += grant;
		return ret;
	}
	trace_kvmsg_send(ep, m->tx_seq, b->len, grant, type, sig);
	m->tx_seq++;
	b->state = KVMSG_BUF_POSTED;
	m->stats.sent++;
	m->stats.credits_granted += grant;
	if (b->ctrl)
		m->stats.credit_msgs++;
	return 0;
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
 * kvmsg_send_auth_locked - queue our proof as the endpoint's first message
 * @ep: authenticated active endpoint becoming CONNECTED
 * @proof: KVERBS_CM_PROOF_LEN bytes
 * @len: bytes of @proof
 *
 * The kverbs_upper_ops.send_auth hook.  Nothing was sent on @ep yet, so
 * a buffer is free and the message takes sequence number 0; it needs a
 * credit like any message and the peer announced at least
 * KVERBS_CM_MIN_DEPTH.
 *
 * Context: any, ep->lock held.
 * Return: 0 when queued (posted, or waiting for a credit), -ENOBUFS, or
 * the provider's error.
 */
int kvmsg_send_auth_locked(struct kverbs_ep *ep, const void *proof, u32 len)
{
	struct kvmsg_ep *m = &ep->msg;
	struct kvmsg_buf *b;

	lockdep_assert_held(&ep->lock);
	b = kvmsg_get_free_locked(m);
	if (WARN_ON_ONCE(!b || m->tx_seq || len > m->buf_size -
			 sizeof(struct kvmsg_hdr))) {
		if (b)
			kvmsg_put_free_locked(m, b);
		return -ENOBUFS;
	}
	memcpy(kvmsg_buf_data(b), proof, len);
	b->len = len;
	b->auth = true;
	b->state = KVMSG_BUF_PENDING;
	list_add_tail(&b->node, &m->pending);
	return kvmsg_flush_locked(ep);
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
 * Return: 0 when the message is posted or queued: from then on a failure
 * (a provider error closes the endpoint) reaches only ->send_done, if
 * KVMSG_NOTIFY.  -EMSGSIZE, -ENOTCONN or the endpoint's error when it was
 * not taken (no ->send_done then).
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
			m->stats.stalls++;
		/* An error posting this or an earlier message is the
		 * endpoint's, not this call's: the message is taken.
		 */
		ret = kvmsg_flush_locked(ep);
	} else {
		kvmsg_put_free_locked(m, buf);
	}
	spin_unlock_bh(&ep->lock);
	if (queued && ret)
		kverbs_ep_fail(ep, ret);
	kverbs_ep_put(ep);	/* the reservation's reference */
	return queued ? 0 : ret;
}
EXPORT_SYMBOL_NS_GPL(kvmsg_send, KVERBS_NS);
/*
 * Not ALLOW_ERROR_INJECTION: the buffer is the library's whatever this
 * returns, so an injected return would leak it and its endpoint.  A
 * failed post is injected at kverbs_sq_post_locked().
 */

/**
 * kvmsg_unreserve - give back a reserved buffer without sending it
 * @buf: from kvmsg_reserve()
 *
 * Context: process or softirq, not hard interrupt (takes the endpoint's
 * bh lock).
 */
void kvmsg_unreserve(struct kvmsg_buf *buf)
{
	struct kverbs_ep *ep = buf->wr.ep;

	spin_lock_bh(&ep->lock);
	if (!WARN_ON_ONCE(buf->state != KVMSG_BUF_RESERVED))
		kvmsg_put_free_locked(&ep->msg, buf);
	spin_unlock_bh(&ep->lock);
	kverbs_ep_put(ep);
}
EXPORT_SYMBOL_NS_GPL(kvmsg_unreserve, KVERBS_NS);

/* The credit-message buffer came back: grants that waited for it may go. */
static char kvmsg_ctrl_token;

static bool kvmsg_buf_reclaim(struct kverbs_wr *w, void **arg)
{
	struct kvmsg_buf *b = container_of(w, struct kvmsg_buf, wr);
	struct kvmsg_ep *m = &w->ep->msg;
	bool owed = b->ctrl || (b->flags & KVMSG_NOTIFY);

	*arg = b->ctrl ? &kvmsg_ctrl_token : b->cookie;
	kvmsg_put_free_locked(m, b);
	m->stats.reclaimed++;
	/* A completion gave a send buffer back (only these unpark). */
	if (!b->ctrl)
		kvmsg_room_locked(w->ep, KVMSG_WANT_BUF);
	return owed;
}

static void kvmsg_buf_reclaimed(struct kverbs_ep *ep, void *arg, int status)
{
	int ret;

	if (arg != &kvmsg_ctrl_token) {
		ep->dom->msg.ops->send_done(ep, arg, status);
		return;
	}
	if (status)
		return;
	spin_lock_bh(&ep->lock);
	ret = kvmsg_flush_locked(ep);
	spin_unlock_bh(&ep->lock);
	if (ret)
		kverbs_ep_fail(ep, ret);
}

const struct kverbs_wr_ops kvmsg_buf_wr_ops = {
	.reclaim = kvmsg_buf_reclaim,
	.done = kvmsg_buf_reclaimed,
};

/**
 * kvmsg_fail_pending - fail what never got a credit
 * @ep: endpoint in teardown, QP drained
 *
 * Context: process.
 */
void kvmsg_fail_pending(struct kverbs_ep *ep)
{
	struct kvmsg_ep *m = &ep->msg;
	void *cookies[8];
	unsigned int i, n;
	struct kvmsg_buf *b;

	do {
		n = 0;
		spin_lock_bh(&ep->lock);
		while (n < ARRAY_SIZE(cookies) &&
		       (b = list_first_entry_or_null(&m->pending,
						     struct kvmsg_buf, node))) {
			list_del_init(&b->node);
			if (b->flags & KVMSG_NOTIFY)
				cookies[n++] = b->cookie;
			kvmsg_put_free_locked(m, b);
		}
		spin_unlock_bh(&ep->lock);
		for (i = 0; i < n; i++)
			ep->dom->msg.ops->send_done(ep, cookies[i], -ECONNRESET);
	} while (n == ARRAY_SIZE(cookies));
}
