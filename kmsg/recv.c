// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmsg receive path: validation, credits, dispatch to the domain's
 * handler, deferral to process context, keep/release and re-posting.
 *
 * A receive buffer is lent to the handler for the duration of its call
 * and re-posted when it returns: that re-post is what the next credit
 * grant counts, so a grant is never announced for a buffer the adapter
 * cannot use yet, and never lost: the count is taken under ep->lock by the
 * same code that posts.
 */
#include "kvmsg-pri.h"
#include "kvmsg_trace.h"

/**
 * kvmsg_post_recv - post one receive buffer
 * @ep: endpoint
 * @rx: buffer
 *
 * Context: any.
 * Return: 0 or the provider's error.
 */
noinline int kvmsg_post_recv(struct kverbs_ep *ep, struct kvmsg_rx *rx)
{
	struct ib_sge sge = {
		.addr = rx->dma,
		.length = ep->msg.buf_size,
		.lkey = kverbs_ep_lkey(ep),
	};
	struct ib_recv_wr wr = {
		.wr_cqe = &rx->cqe,
		.sg_list = &sge,
		.num_sge = 1,
	};

	return ib_post_recv(ep->qp, &wr, NULL);
}
ALLOW_ERROR_INJECTION(kvmsg_post_recv, ERRNO);

/*
 * Give a buffer back to the adapter and count it for the next grant.
 * Under ep->lock and only while connected: teardown marks CLOSING under
 * it before the drain marker, so nothing is posted behind the marker.
 */
static void kvmsg_repost(struct kverbs_ep *ep, struct kvmsg_rx *rx)
{
	int ret = 0;

	spin_lock_bh(&ep->lock);
	if (ep->state == KVERBS_EP_CONNECTED) {
		ib_dma_sync_single_for_device(kverbs_ep_device(ep), rx->dma,
					      ep->msg.buf_size,
					      DMA_FROM_DEVICE);
		ret = kvmsg_post_recv(ep, rx);
		if (!ret) {
			kvmsg_credit_reposted(&ep->msg.credit);
			ret = kvmsg_flush_locked(ep);
		}
	}
	spin_unlock_bh(&ep->lock);
	if (ret) {
		kverbs_ep_log(err, ep, "receive repost failed: %d\n", ret);
		kverbs_ep_fail(ep, ret);
	}
}

static void kvmsg_proto_error(struct kverbs_ep *ep, const char *why, u32 seq)
{
	spin_lock_bh(&ep->lock);
	ep->msg.stats.proto_errors++;
	spin_unlock_bh(&ep->lock);
	trace_kvmsg_error(ep, why);
	kverbs_ep_log(warn, ep, "dropping message %u from node %u: %s; closing the connection\n",
		      seq, ep->peer_node, why);
	kverbs_ep_fail(ep, -EPROTO);
}

/**
 * kvmsg_schedule_defer - have process context dispatch @ep's backlog
 * @ep: endpoint with a non-empty backlog
 *
 * The domain's defer list holds a reference to @ep.
 *
 * Context: any.
 */
void kvmsg_schedule_defer(struct kverbs_ep *ep)
{
	struct kverbs_domain *dom = ep->dom;
	struct kvmsg_domain *md = &dom->msg;

	spin_lock_bh(&md->defer_lock);
	if (list_empty(&ep->msg.defer_node)) {
		kverbs_ep_get(ep);
		list_add_tail(&ep->msg.defer_node, &md->defer_list);
	}
	spin_unlock_bh(&md->defer_lock);
	queue_work(dom->wq, &md->defer_work);
}

/**
 * kvmsg_room_locked - a completion gave @what back on @ep
 * @ep: endpoint
 * @what: KVMSG_WANT_BUF or KVMSG_WANT_OP
 *
 * Counted in @room_gen, so that a handler call it overlapped is repeated
 * rather than parked; a backlog parked for it goes back on the domain's
 * defer list.  Only completions count: a buffer a handler gave back
 * itself (kvmsg_unreserve()) must not have it called again at once.
 *
 * Context: any, under @ep's lock.
 */
void kvmsg_room_locked(struct kverbs_ep *ep, u8 what)
{
	lockdep_assert_held(&ep->lock);
	atomic_inc(&ep->msg.room_gen);
	if (!(ep->msg.parked & what))
		return;
	WRITE_ONCE(ep->msg.parked, 0);
	if (ep->state == KVERBS_EP_CONNECTED)
		kvmsg_schedule_defer(ep);
}

/*
 * Call the handler for @rx.  Return true if the buffer is still ours
 * afterwards (not kept, or released again during the call), with
 * *@defer set if it asked for process context and may have it, or, in
 * process context, to be called again; *@parked then if that waits for
 * room on the endpoint.
 *
 * Whether the handler kept @rx is decided once, under ep->lock, when the
 * call is over: a release from another CPU during the call leaves the
 * re-post to us (@in_handler), so the buffer is re-posted exactly once.
 *
 * In SOFTIRQ and POLL the call is an atomic upcall (kverbs_upcall_begin()):
 * the handler's own kvmsg and kverbs calls then never sleep, and the
 * -EAGAIN they return is what it hands back to be deferred.  In PROCESS,
 * the domain's deferred handler, they do not sleep for a send buffer or
 * a send-queue slot of @ep either (kverbs_may_wait_peer()); the -EAGAIN
 * handed back parks the endpoint with @rx at the head of its backlog
 * until a completion gives one back (kvmsg_room_locked()), or has the
 * handler called again at once if one did during the call (@room_gen).
 * So no give-back is missed, and a handler is repeated at most once per
 * completion.  Any other error rejects the message and closes the
 * endpoint; an -EAGAIN for anything else is logged and consumes it.
 */
static bool kvmsg_call_handler(struct kverbs_ep *ep, struct kvmsg_rx *rx,
			       enum kvmsg_ctx ctx, bool *defer, bool *parked)
{
	bool atomic = ctx != KVMSG_CTX_PROCESS;
	bool ours, consumed = false;
	int gen = 0;
	u8 want;
	int ret;

	if (!atomic) {
		spin_lock_bh(&ep->lock);
		ep->msg.starved = 0;
		clear_bit(KVERBS_EP_F_OP_STARVED, &ep->flags);
		gen = atomic_read(&ep->msg.room_gen);
		spin_unlock_bh(&ep->lock);
	}
	rx->in_handler = true;
	if (atomic)
		kverbs_upcall_begin();
	ret = ep->dom->msg.ops->recv(ep, rx, ctx);
	if (atomic)
		kverbs_upcall_end();
	/* A positive return is a handler bug: reject rather than guess. */
	if (WARN_ON_ONCE(ret > 0))
		ret = -EINVAL;
	/* An error because the endpoint is going down rejects nothing. */
	if (ret && ret != -EAGAIN && READ_ONCE(ep->state) != KVERBS_EP_CONNECTED)
		ret = 0;
	spin_lock_bh(&ep->lock);
	rx->in_handler = false;
	ours = !rx->kept;
	*parked = false;
	if (ret == -EAGAIN && !atomic) {
		want = ep->msg.starved;
		if (test_and_clear_bit(KVERBS_EP_F_OP_STARVED, &ep->flags))
			want |= KVMSG_WANT_OP;
		ep->msg.starved = 0;
		if (!want || !ours) {
			consumed = true;
			ret = 0;
		} else if (atomic_read(&ep->msg.room_gen) == gen) {
			/* Pairs with the full barrier in kvmsg_op_space(). */
			WRITE_ONCE(ep->msg.parked, want);
			ep->msg.stats.parked++;
			*parked = true;
		}
	}
	*defer = ours && ret == -EAGAIN;
	if (*defer) {
		kvmsg_backlog_push_front(&ep->msg.backlog, rx);
		if (atomic)
			ep->msg.stats.deferrals++;
	} else if (ret && ret != -EAGAIN) {
		ep->msg.stats.rejected++;
	}
	spin_unlock_bh(&ep->lock);
	if (consumed)
		kverbs_ep_log(warn, ep,
			      "handler returned -EAGAIN in process context with no send buffer or slot to wait for; message %u consumed\n",
			      rx->seq);
	if (ret && ret != -EAGAIN) {
		trace_kvmsg_error(ep, "message rejected by the handler");
		kverbs_ep_log(warn, ep,
			      "handler rejected message %u from node %u: %d; closing the connection\n",
			      rx->seq, ep->peer_node, ret);
		kverbs_ep_fail(ep, ret);
	}
	return ours;
}

/*
 * Hand @rx to the handler, or leave it to process context if @queued: it
 * is on the backlog already, behind messages whose dispatch is owned by
 * someone else, who will reach it too.  The owner is the ->opened hook
 * while the user's ->connected runs (backlog busy), the defer work once
 * scheduled, or the softirq call that deferred the message in front.
 * Scheduling here would let ->recv() run during ->connected().
 */
static void kvmsg_dispatch(struct kverbs_ep *ep, struct kvmsg_rx *rx,
			   enum kvmsg_ctx ctx, bool queued)
{
	bool defer, parked;

	if (queued) {
		trace_kvmsg_defer(ep, rx->seq, true);
		return;
	}
	if (!kvmsg_call_handler(ep, rx, ctx, &defer, &parked))
		return;
	if (defer) {
		trace_kvmsg_defer(ep, rx->seq, false);
		kvmsg_schedule_defer(ep);
		return;
	}
	kvmsg_repost(ep, rx);
}

/**
 * kvmsg_recv_done - completion of a receive
 * @cq: the domain's CQ
 * @wc: work completion
 *
 * Context: softirq, possibly run for a task in kverbs_domain_poll();
 * serialised per domain by the CQ's one poller.
 */
void kvmsg_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kvmsg_rx *rx = container_of(wc->wr_cqe, struct kvmsg_rx, cqe);
	struct kverbs_ep *ep = rx->ep;
	struct kverbs_domain *dom = ep->dom;
	struct kvmsg_ep *m = &ep->msg;
	enum kvmsg_wire_err e;
	bool polled, queued;
	u16 credits;
	u8 type;
	int ret;

	if (unlikely(wc->status != IB_WC_SUCCESS)) {
		/* Flushes are how a QP in the error state returns its WRs. */
		if (wc->status == IB_WC_WR_FLUSH_ERR)
			return;
		atomic64_inc(&ep->stat_errors);
		trace_kvmsg_error(ep, "receive completion failed");
		kverbs_ep_log(err, ep, "receive completion failed: %s (%d), peer node %u\n",
			      ib_wc_status_msg(wc->status), wc->status,
			      ep->peer_node);
		kverbs_ep_fail(ep, -EIO);
		return;
	}

	polled = kverbs_domain_polled(dom);
	ib_dma_sync_single_for_cpu(kverbs_ep_device(ep), rx->dma, wc->byte_len,
				   DMA_FROM_DEVICE);
	e = kvmsg_hdr_check(rx->data, wc->byte_len, m->rx_seq, dom->max_msg,
			    &rx->len, &credits, &type);
	if (e != KVMSG_WIRE_OK) {
		kvmsg_proto_error(ep, kvmsg_wire_err_str(e), m->rx_seq);
		return;
	}
	rx->seq = m->rx_seq++;
	rx->type = type;
	trace_kvmsg_recv(ep, rx->seq, rx->len, credits, type, false);

	/*
	 * An accepted endpoint of a keyed domain takes its peer's proof
	 * first and nothing before it; a proof anywhere else is an error.
	 * Checked before the message's credits count: a failure tears down.
	 */
	if (unlikely(type == KVMSG_TYPE_AUTH && !kverbs_ep_keyed(ep))) {
		kvmsg_proto_error(ep, "a proof on a connection without a key",
				  rx->seq);
		return;
	}
	if (unlikely(type == KVMSG_TYPE_AUTH || kverbs_ep_auth_pending(ep)) &&
	    kverbs_ep_auth_check(ep, type == KVMSG_TYPE_AUTH,
				 kvmsg_rx_data(rx), rx->len))
		return;

	/*
	 * One critical section for the grant and the order check: a data
	 * message that must wait (before ->connected, or behind deferred
	 * ones) joins the backlog here.  So does a proof that arrives before
	 * ->connected (always, since ->connected waits for it): its buffer is
	 * re-posted from the backlog, once re-posting is allowed.
	 */
	spin_lock_bh(&ep->lock);
	m->stats.received++;
	m->stats.polled += polled;
	ret = kvmsg_credit_receive(&m->credit, credits);
	if (!ret)
		m->stats.credits_received += credits;
	if (!ret && credits)
		ret = kvmsg_flush_locked(ep);
	queued = !ret && type != KVMSG_TYPE_CREDIT &&
		 (ep->state != KVERBS_EP_CONNECTED ||
		  kvmsg_backlog_must_queue(&m->backlog));
	if (queued)
		kvmsg_backlog_add(&m->backlog, rx);
	spin_unlock_bh(&ep->lock);
	if (ret == -EPROTO) {
		kvmsg_proto_error(ep, "credits beyond the announced depth",
				  rx->seq);
		return;
	} else if (ret) {
		kverbs_ep_fail(ep, ret);
		return;
	}

	if (type == KVMSG_TYPE_CREDIT ||
	    (type == KVMSG_TYPE_AUTH && !queued))
		kvmsg_repost(ep, rx);
	else if (type == KVMSG_TYPE_DATA)
		kvmsg_dispatch(ep, rx, polled ? KVMSG_CTX_POLL :
			      KVMSG_CTX_SOFTIRQ, queued);
}

/* Dispatch one endpoint's backlog in process context. */
static void kvmsg_defer_ep(struct kverbs_ep *ep)
{
	struct kvmsg_ep *m = &ep->msg;
	struct kvmsg_rx *rx;
	bool live, defer, parked, ours;

	for (;;) {
		spin_lock_bh(&ep->lock);
		rx = kvmsg_backlog_next(&m->backlog);
		live = ep->state == KVERBS_EP_CONNECTED;
		/* Not live: teardown reclaims the ring; nobody sees this one. */
		if (rx && !live)
			m->stats.dropped++;
		spin_unlock_bh(&ep->lock);
		if (!rx)
			return;
		if (!live)
			continue;
		/* A proof waited here only for its buffer to be re-posted. */
		if (rx->type == KVMSG_TYPE_AUTH) {
			kvmsg_repost(ep, rx);
			continue;
		}
		ours = kvmsg_call_handler(ep, rx, KVMSG_CTX_PROCESS, &defer,
					  &parked);
		if (defer) {
			/* Room came back meanwhile: again, behind the others. */
			if (!parked)
				kvmsg_schedule_defer(ep);
			return;
		}
		if (ours)
			kvmsg_repost(ep, rx);
		cond_resched();
	}
}

/**
 * kvmsg_defer_work - the domain's process-context dispatcher
 * @work: kvmsg_domain.defer_work
 *
 * One work item per domain, so deferred handlers of a domain never run
 * concurrently, and per-domain, so one domain's slow handler never delays
 * another's.  A handler of one endpoint never waits here for what its
 * peer withholds (kverbs_domain.upcall_task): the other endpoints' turn
 * would wait too.
 *
 * Context: process (domain workqueue, WQ_HIGHPRI).
 */
void kvmsg_defer_work(struct work_struct *work)
{
	struct kvmsg_domain *md = container_of(work, struct kvmsg_domain,
					       defer_work);
	struct kverbs_domain *dom = container_of(md, struct kverbs_domain,
						 msg);
	struct kverbs_ep *ep;

	WRITE_ONCE(dom->upcall_task, current);
	for (;;) {
		spin_lock_bh(&md->defer_lock);
		ep = list_first_entry_or_null(&md->defer_list,
					      struct kverbs_ep,
					      msg.defer_node);
		if (ep)
			list_del_init(&ep->msg.defer_node);
		spin_unlock_bh(&md->defer_lock);
		if (!ep)
			break;
		kvmsg_defer_ep(ep);
		kverbs_ep_put(ep);
		cond_resched();
	}
	WRITE_ONCE(dom->upcall_task, NULL);
}

/**
 * kvmsg_rx_data - the payload of a received message
 * @rx: message, during the handler or while kept
 *
 * Context: any.
 * Return: kvmsg_rx_len() bytes, in place in the receive buffer.
 */
const void *kvmsg_rx_data(const struct kvmsg_rx *rx)
{
	return (const struct kvmsg_hdr *)rx->data + 1;
}
EXPORT_SYMBOL_NS_GPL(kvmsg_rx_data, KVERBS_NS);

/**
 * kvmsg_rx_len - payload length of a received message
 * @rx: message
 *
 * Context: any.
 * Return: bytes, at most the max_msg this domain announced.
 */
u32 kvmsg_rx_len(const struct kvmsg_rx *rx)
{
	return rx->len;
}
EXPORT_SYMBOL_NS_GPL(kvmsg_rx_len, KVERBS_NS);

/**
 * kvmsg_rx_ep - the endpoint a message arrived on
 * @rx: message
 *
 * Context: any.
 * Return: the endpoint.
 */
struct kverbs_ep *kvmsg_rx_ep(const struct kvmsg_rx *rx)
{
	return rx->ep;
}
EXPORT_SYMBOL_NS_GPL(kvmsg_rx_ep, KVERBS_NS);

/**
 * kvmsg_rx_keep - hold a received buffer beyond the handler's call
 * @rx: message, inside ->recv()
 *
 * The buffer leaves the receive ring until kvmsg_rx_release(), so the peer
 * gets its credit back only then.  At most (depth - 1) / 2 buffers of an
 * endpoint can be kept (kvmsg_max_kept()), which leaves a one-way sender
 * enough receives to earn a credit message.  A release may come from any
 * context, also while ->recv() is still running on another CPU.
 *
 * Context: inside ->recv(), any context.
 * Return: 0, or -ENOBUFS when the endpoint's limit is reached (copy the
 * data instead), -EINVAL if already kept or called outside ->recv().
 */
int kvmsg_rx_keep(struct kvmsg_rx *rx)
{
	struct kverbs_ep *ep = rx->ep;
	int ret = 0;

	spin_lock_bh(&ep->lock);
	if (rx->kept || !rx->in_handler) {
		ret = -EINVAL;
	} else if (ep->msg.kept >= ep->msg.max_kept) {
		ret = -ENOBUFS;
	} else {
		ep->msg.kept++;
		rx->kept = true;
	}
	spin_unlock_bh(&ep->lock);
	if (ret)
		return ret;
	kverbs_ep_get(ep);
	return 0;
}
EXPORT_SYMBOL_NS_GPL(kvmsg_rx_keep, KVERBS_NS);

/**
 * kvmsg_rx_release - return a kept buffer to the receive ring
 * @rx: message kept with kvmsg_rx_keep()
 *
 * After the endpoint went down the buffer is simply let go.
 *
 * Context: process or softirq, not hard interrupt (takes the endpoint's
 * bh lock).
 */
void kvmsg_rx_release(struct kvmsg_rx *rx)
{
	struct kverbs_ep *ep = rx->ep;
	bool repost;

	spin_lock_bh(&ep->lock);
	if (WARN_ON_ONCE(!rx->kept)) {
		spin_unlock_bh(&ep->lock);
		return;
	}
	ep->msg.kept--;
	rx->kept = false;
	/* Still inside ->recv() on another CPU: the dispatcher re-posts. */
	repost = !rx->in_handler;
	spin_unlock_bh(&ep->lock);
	if (repost)
		kvmsg_repost(ep, rx);
	kverbs_ep_put(ep);
}
EXPORT_SYMBOL_NS_GPL(kvmsg_rx_release, KVERBS_NS);
