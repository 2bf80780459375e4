// SPDX-License-Identifier: GPL-2.0-only
/*
 * RC endpoints over rdma_cm: connect, accept, and teardown.  Listeners
 * are in listen.c.
 *
 * Teardown order (one function, run once, always on the domain workqueue):
 * state -> CLOSING under ep->lock (no new posts) -> rdma_disconnect ->
 * ib_drain_qp (every posted WR, signaled or not, has completed or flushed)
 * -> destroy QP -> free buffers -> rdma_destroy_id (waits for a running
 * CM handler) -> leave the domain -> @disconnected callback.
 *
 * Sizing: kverbs_ep_budget(), the one place that sizes the queues.
 */
#include <linux/slab.h>

#include "kverbs-pri.h"

/**
 * kverbs_ep_budget - the queue sizes of an endpoint
 * @depth: the domain's depth
 * @b: output
 *
 * See struct kverbs_ep_budget for the numbered budget.
 *
 * Context: any.
 */
void kverbs_ep_budget(u16 depth, struct kverbs_ep_budget *b)
{
	b->ntx = depth + 1;
	b->nops = depth;
	b->nrx = depth;
	b->send_wr = b->ntx + b->nops + 1;
	b->recv_wr = b->nrx + 1;
	b->cqes = b->send_wr + b->recv_wr;
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_ep_budget);

static void kverbs_ep_release(struct kref *ref)
{
	struct kverbs_ep *ep = container_of(ref, struct kverbs_ep, ref);

	WARN_ON(ep->qp || ep->cm_id);
	kvmsg_ep_free(ep);
	kverbs_domain_put(ep->dom);
	kfree(ep);
}

void kverbs_ep_put(struct kverbs_ep *ep)
{
	kref_put(&ep->ref, kverbs_ep_release);
}

static void kverbs_ep_teardown_work(struct work_struct *work);

/* Allocate an endpoint on @dom's list; the list holds the first reference. */
struct kverbs_ep *kverbs_ep_alloc(struct kverbs_domain *dom)
{
	struct kverbs_ep *ep;

	ep = kzalloc(sizeof(*ep), GFP_KERNEL);
	if (!ep)
		return ERR_PTR(-ENOMEM);
	kref_init(&ep->ref);
	spin_lock_init(&ep->lock);
	init_completion(&ep->done_connecting);
	init_completion(&ep->cm_settled);
	INIT_WORK(&ep->teardown_work, kverbs_ep_teardown_work);
	kvmsg_ep_init(ep);
	ep->state = KVERBS_EP_CONNECTING;
	ep->dom = dom;

	mutex_lock(&dom->lock);
	if (dom->dying) {
		mutex_unlock(&dom->lock);
		kfree(ep);
		return ERR_PTR(-ESHUTDOWN);
	}
	kverbs_domain_get(dom);
	list_add_tail(&ep->dom_node, &dom->eps);
	mutex_unlock(&dom->lock);
	return ep;
}

/**
 * kverbs_ep_schedule_teardown - queue the endpoint's teardown
 * @ep: endpoint
 * @err: reason reported to @disconnected; the first non-zero one sticks
 *
 * The queued work holds a reference, so @ep stays valid until it ran even
 * when it is queued again while running.
 *
 * Context: any.
 */
void kverbs_ep_schedule_teardown(struct kverbs_ep *ep, int err)
{
	/* No ep->lock: QP events may come in hard interrupt context. */
	cmpxchg(&ep->error, 0, err);

	kref_get(&ep->ref);
	if (!queue_work(ep->dom->wq, &ep->teardown_work))
		kverbs_ep_put(ep);
}

/*
 * Release the QP and unmap the buffers.  The QP must be drained or never
 * connected: the drain guarantees that no completion for it is left in the
 * shared CQ.  Called with dom->lock held, so the domain is still bound.
 */
static void kverbs_ep_release_qp(struct kverbs_ep *ep)
{
	struct kverbs_domain *dom = ep->dom;

	lockdep_assert_held(&dom->lock);
	if (ep->qp) {
		rdma_destroy_qp(ep->cm_id);
		ep->qp = NULL;
	}
	kvmsg_ep_unmap(ep);
	if (ep->cq_reserved) {
		dom->cq_used -= dom->budget.cqes;
		ep->cq_reserved = false;
	}
}

static void kverbs_qp_event(struct ib_event *ev, void *ctx)
{
	struct kverbs_ep *ep = ctx;

	switch (ev->event) {
	case IB_EVENT_COMM_EST:
	case IB_EVENT_SQ_DRAINED:
	case IB_EVENT_QP_LAST_WQE_REACHED:
		break;
	default:
		pr_err_ratelimited("%s: QP event %s (%d), peer node %u\n",
				   ep->dom->name, ib_event_msg(ev->event),
				   ev->event, ep->peer_node);
		kverbs_ep_schedule_teardown(ep, -EIO);
	}
}

/*
 * Bind the domain to the cm_id's device, create the QP and post the
 * receive ring.  Done under dom->lock so that unbind either sees the
 * endpoint's CQ reservation or the endpoint sees the domain gone; and only
 * while CONNECTING, so nothing is created once teardown has started.
 */
int kverbs_ep_setup_qp(struct kverbs_ep *ep)
{
	struct kverbs_domain *dom = ep->dom;
	struct ib_qp_init_attr init = {};
	const struct kverbs_ep_budget *b = &dom->budget;
	int ret;

	mutex_lock(&dom->lock);
	if (READ_ONCE(ep->state) != KVERBS_EP_CONNECTING) {
		ret = -ECONNABORTED;
		goto out;
	}
	ret = kverbs_domain_bind(dom, ep->cm_id->device);
	if (ret)
		goto out;
	if (dom->cq_used + b->cqes > dom->cq_bound) {
		ret = -ENOSPC;
		goto out;
	}
	dom->cq_used += b->cqes;
	ep->cq_reserved = true;

	ret = kvmsg_ep_setup(ep);
	if (ret)
		goto fail;

	init.event_handler = kverbs_qp_event;
	init.qp_context = ep;
	init.send_cq = dom->cq;
	init.recv_cq = dom->cq;
	init.cap.max_send_wr = b->send_wr;
	init.cap.max_recv_wr = b->recv_wr;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	init.sq_sig_type = IB_SIGNAL_REQ_WR;
	init.qp_type = IB_QPT_RC;
	ret = rdma_create_qp(ep->cm_id, dom->pd, &init);
	if (ret)
		goto fail;
	ep->qp = ep->cm_id->qp;

	ret = kvmsg_ep_post_ring(ep);
	if (ret)
		goto fail;
	mutex_unlock(&dom->lock);
	return 0;

fail:
	/* Nothing connected yet, but receives may be posted: drain first. */
	if (ep->qp)
		ib_drain_qp(ep->qp);
	kverbs_ep_release_qp(ep);
out:
	mutex_unlock(&dom->lock);
	return ret;
}

static void kverbs_conn_param(struct kverbs_ep *ep, struct kverbs_cm_priv *priv,
			      struct rdma_conn_param *param)
{
	struct kverbs_domain *dom = ep->dom;
	struct ib_device_attr *attrs = &ep->cm_id->device->attrs;

	kverbs_cm_priv_fill(priv, dom->node_id, dom->depth, dom->max_msg);
	memset(param, 0, sizeof(*param));
	param->private_data = priv;
	param->private_data_len = sizeof(*priv);
	param->responder_resources = min_t(int, attrs->max_qp_rd_atom, 16);
	param->initiator_depth = min_t(int, attrs->max_qp_init_rd_atom, 16);
	param->retry_count = 7;
	param->rnr_retry_count = dom->rnr_retry;
}

static void kverbs_ep_connected(struct kverbs_ep *ep)
{
	bool ok;

	spin_lock_bh(&ep->lock);
	ok = ep->state == KVERBS_EP_CONNECTING;
	if (ok) {
		kvmsg_ep_connected(ep);
		ep->state = KVERBS_EP_CONNECTED;
		set_bit(KVERBS_EP_F_NOTIFIED, &ep->flags);
		/*
		 * Until @connected returned, arrivals queue on the backlog:
		 * no ->recv() runs before or during ->connected().
		 */
		ep->msg.backlog.busy = true;
	}
	spin_unlock_bh(&ep->lock);
	if (!ok)
		return;
	/*
	 * Teardown calls @disconnected only after rdma_destroy_id, which waits
	 * for this CM handler: @connected always returns first.
	 */
	if (ep->dom->ops->connected)
		ep->dom->ops->connected(ep);
	complete_all(&ep->done_connecting);
	/* Dispatch what waited; the work marks the backlog idle when empty. */
	kvmsg_schedule_defer(ep);
}

/**
 * kverbs_ep_accept - accept the connection of a passive endpoint
 * @ep: endpoint whose QP is set up, in its CM handler
 *
 * ->connected means "sends work now": rdma_accept() moves an IB or RoCE
 * QP to RTS before it returns, an iWARP QP reaches RTS only with
 * ESTABLISHED.  Messages that arrive in between wait for ->connected on
 * the backlog, as on the active side.
 *
 * Context: process (CM handler of @ep's id).
 */
void kverbs_ep_accept(struct kverbs_ep *ep)
{
	struct rdma_cm_id *id = ep->cm_id;
	struct rdma_conn_param param;
	struct kverbs_cm_priv priv;
	int ret;

	kverbs_conn_param(ep, &priv, &param);
	ret = rdma_accept(id, &param);
	if (ret) {
		pr_warn_ratelimited("%s: accept of node %u from %pISpc failed: %d\n",
				    ep->dom->name, ep->peer_node, &ep->peer_addr,
				    ret);
		kverbs_ep_schedule_teardown(ep, ret);
		return;
	}
	set_bit(KVERBS_EP_F_ACCEPT_SENT, &ep->flags);
	if (!rdma_protocol_iwarp(id->device, id->port_num))
		kverbs_ep_connected(ep);
}

/* Active side: the server's accept carries its announcement. */
static void kverbs_ep_established_active(struct kverbs_ep *ep,
					 struct rdma_cm_event *ev)
{
	enum kverbs_cm_reason reason;

	reason = kverbs_cm_priv_parse(ev->param.conn.private_data,
				      ev->param.conn.private_data_len,
				      &ep->peer_node, &ep->peer_depth,
				      &ep->peer_max_msg);
	if (reason != KVERBS_CM_OK) {
		pr_warn_ratelimited("%s: peer %pISpc accepted with bad parameters: %s\n",
				    ep->dom->name, &ep->peer_addr,
				    kverbs_cm_reason_str(reason));
		kverbs_ep_schedule_teardown(ep, -EPROTO);
		return;
	}
	kverbs_ep_connected(ep);
}

static void kverbs_ep_rejected(struct kverbs_ep *ep, struct rdma_cm_id *id,
			       struct rdma_cm_event *ev)
{
	enum kverbs_cm_reason reason = KVERBS_CM_REASON_MAX;
	const void *data;
	u8 len = 0;

	data = rdma_consumer_reject_data(id, ev, &len);
	if (data)
		reason = kverbs_cm_rej_parse(data, len);
	pr_warn_ratelimited("%s: connection to %pISpc refused: %s (cm status %d)\n",
			    ep->dom->name, &ep->peer_addr,
			    kverbs_cm_reason_str(reason), ev->status);
	kverbs_ep_schedule_teardown(ep, -ECONNREFUSED);
}

static void kverbs_ep_route_resolved(struct kverbs_ep *ep,
				     struct rdma_cm_id *id)
{
	struct rdma_conn_param param;
	struct kverbs_cm_priv priv;
	int ret;

	ret = kverbs_ep_setup_qp(ep);
	if (!ret) {
		kverbs_conn_param(ep, &priv, &param);
		ret = rdma_connect_locked(id, &param);
	}
	if (ret) {
		pr_warn_ratelimited("%s: connect to %pISpc failed: %d\n",
				    ep->dom->name, &ep->peer_addr, ret);
		kverbs_ep_schedule_teardown(ep, ret);
	}
}

/*
 * The rdma_cm event handler of every endpoint's cm_id: active ids from
 * their creation, accepted ones from the CONNECT_REQUEST that made them
 * (kverbs/listen.c switches the child id over).  Context: process
 * (rdma_cm work), under the id's handler mutex.  Never destroys its own
 * id.
 */
int kverbs_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct kverbs_ep *ep = id->context;
	int ret;

	/* Any event after our REP ends the handshake (see teardown). */
	if (test_bit(KVERBS_EP_F_ACCEPTED, &ep->flags))
		complete_all(&ep->cm_settled);

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ret = rdma_resolve_route(id, KVERBS_CM_TIMEOUT_MS);
		if (ret)
			kverbs_ep_schedule_teardown(ep, ret);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		kverbs_ep_route_resolved(ep, id);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (!test_bit(KVERBS_EP_F_ACCEPTED, &ep->flags))
			kverbs_ep_established_active(ep, ev);
		else	/* iWARP: only now is the QP in RTS */
			kverbs_ep_connected(ep);
		break;
	case RDMA_CM_EVENT_REJECTED:
		kverbs_ep_rejected(ep, id, ev);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		pr_warn_ratelimited("%s: %pISpc: %s (status %d)\n",
				    ep->dom->name, &ep->peer_addr,
				    rdma_event_msg(ev->event), ev->status);
		kverbs_ep_schedule_teardown(ep, ev->status < 0 ? ev->status :
					    -EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		kverbs_ep_schedule_teardown(ep, -ECONNRESET);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		kverbs_ep_schedule_teardown(ep, -ENODEV);
		break;
	default:
		break;
	}
	return 0;
}

static void kverbs_ep_teardown(struct kverbs_ep *ep)
{
	struct kverbs_domain *dom = ep->dom;
	enum kverbs_ep_state was;
	struct ib_qp *qp;

	spin_lock_bh(&ep->lock);
	was = ep->state;
	ep->state = KVERBS_EP_CLOSING;
	spin_unlock_bh(&ep->lock);
	/* Reservers sleeping for a buffer must see CLOSING, not wait on. */
	wake_up_all(&ep->msg.tx_wait);

	/* A handler creating the QP holds dom->lock: wait for it, then look. */
	mutex_lock(&dom->lock);
	qp = ep->qp;
	mutex_unlock(&dom->lock);

	/*
	 * An accepted id is in REP_SENT until the peer's RTU arrives; a
	 * disconnect cannot send a DREQ from there, and destroying the id
	 * then sends a REJ that an established peer ignores: the peer would
	 * never learn that we closed.  So wait, bounded, for the handshake
	 * to end first.
	 */
	if (test_bit(KVERBS_EP_F_ACCEPT_SENT, &ep->flags))
		wait_for_completion_timeout(&ep->cm_settled,
					    msecs_to_jiffies(KVERBS_CM_TIMEOUT_MS));
	if (ep->cm_id && (was == KVERBS_EP_CONNECTED ||
			  test_bit(KVERBS_EP_F_ACCEPT_SENT, &ep->flags)))
		rdma_disconnect(ep->cm_id);
	if (qp)
		ib_drain_qp(qp);
	kvmsg_ep_stop(ep);

	mutex_lock(&dom->lock);
	kverbs_ep_release_qp(ep);
	mutex_unlock(&dom->lock);

	if (ep->cm_id) {
		rdma_destroy_id(ep->cm_id);
		ep->cm_id = NULL;
	}

	mutex_lock(&dom->lock);
	list_del_init(&ep->dom_node);
	mutex_unlock(&dom->lock);

	spin_lock_bh(&ep->lock);
	ep->state = KVERBS_EP_CLOSED;
	if (!ep->error)
		ep->error = -ENOTCONN;
	spin_unlock_bh(&ep->lock);
	complete_all(&ep->done_connecting);

	if (test_bit(KVERBS_EP_F_NOTIFIED, &ep->flags) &&
	    dom->ops->disconnected)
		dom->ops->disconnected(ep, ep->error == -ESHUTDOWN ? 0 :
				       ep->error);
	kverbs_ep_put(ep);	/* the domain list's reference */
}

static void kverbs_ep_teardown_work(struct work_struct *work)
{
	struct kverbs_ep *ep = container_of(work, struct kverbs_ep,
					    teardown_work);

	if (!test_and_set_bit(KVERBS_EP_F_TORN, &ep->flags))
		kverbs_ep_teardown(ep);
	kverbs_ep_put(ep);	/* the queued work's reference */
}

/**
 * kverbs_ep_connect - connect to a kverbs peer
 * @dom: domain of the new endpoint
 * @dst: peer address with port (IPv4 or IPv6)
 * @timeout_ms: bound on address/route resolution and connection
 *
 * Context: process; sleeps (killable) until connected, refused or timed out.
 * Return: a connected endpoint, to be released with kverbs_ep_close(), or
 * ERR_PTR: -ECONNREFUSED (the peer refused; the reason is logged),
 * -ETIMEDOUT, -EINTR (fatal signal), -EPROTO (malformed accept), -EXDEV
 * (route to a device other than the domain's), -ENOSPC (domain full),
 * -ESHUTDOWN (domain being destroyed), -EINVAL, or an rdma_cm error.
 */
struct kverbs_ep *kverbs_ep_connect(struct kverbs_domain *dom,
				    const struct sockaddr *dst,
				    unsigned int timeout_ms)
{
	struct rdma_cm_id *id;
	struct kverbs_ep *ep;
	long left;
	int ret;

	might_sleep();
	if (!dst || (dst->sa_family != AF_INET && dst->sa_family != AF_INET6))
		return ERR_PTR(-EINVAL);

	ep = kverbs_ep_alloc(dom);
	if (IS_ERR(ep))
		return ep;
	kref_get(&ep->ref);	/* the caller's */
	memcpy(&ep->peer_addr, dst, dst->sa_family == AF_INET ?
	       sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));

	id = rdma_create_id(&init_net, kverbs_cm_handler, ep, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id)) {
		ret = PTR_ERR(id);
		goto fail;
	}
	ep->cm_id = id;
	ret = rdma_resolve_addr(id, NULL, (struct sockaddr *)&ep->peer_addr,
				min(timeout_ms, KVERBS_CM_TIMEOUT_MS));
	if (ret)
		goto fail;

	left = wait_for_completion_killable_timeout(&ep->done_connecting,
						    msecs_to_jiffies(timeout_ms));
	if (left <= 0) {
		ret = left ? -EINTR : -ETIMEDOUT;
		goto fail;
	}
	if (READ_ONCE(ep->state) == KVERBS_EP_CONNECTED)
		return ep;
	ret = READ_ONCE(ep->error) ?: -ENOTCONN;
fail:
	kverbs_ep_schedule_teardown(ep, ret);
	kverbs_ep_close(ep);
	return ERR_PTR(ret);
}
EXPORT_SYMBOL_NS_GPL(kverbs_ep_connect, KVERBS_NS);

/**
 * kverbs_ep_close - disconnect and release an endpoint from kverbs_ep_connect()
 * @ep: endpoint
 *
 * Waits for the teardown, including the @disconnected callback if the
 * endpoint had connected.  Every buffer is reclaimed when this returns.
 *
 * Context: process; may sleep.  Not from a domain callback.
 */
void kverbs_ep_close(struct kverbs_ep *ep)
{
	might_sleep();
	kverbs_ep_schedule_teardown(ep, -ESHUTDOWN);
	flush_work(&ep->teardown_work);
	kverbs_ep_put(ep);
}
EXPORT_SYMBOL_NS_GPL(kverbs_ep_close, KVERBS_NS);

/**
 * kverbs_ep_max_send - largest payload kvmsg_reserve() accepts
 * @ep: endpoint
 *
 * Context: any.
 * Return: the smaller of our max_msg and the peer's announced maximum;
 * 0 before the peer's announcement arrived.
 */
u32 kverbs_ep_max_send(const struct kverbs_ep *ep)
{
	return min(ep->dom->max_msg, ep->peer_max_msg);
}
EXPORT_SYMBOL_NS_GPL(kverbs_ep_max_send, KVERBS_NS);

/**
 * kverbs_ep_peer_node - the node id the peer announced
 * @ep: endpoint
 *
 * Context: any.
 * Return: the peer's node id; 0 before the peer's announcement arrived.
 */
u32 kverbs_ep_peer_node(const struct kverbs_ep *ep)
{
	return ep->peer_node;
}
EXPORT_SYMBOL_NS_GPL(kverbs_ep_peer_node, KVERBS_NS);

/**
 * kverbs_ep_set_priv - attach a user pointer to an endpoint
 * @ep: endpoint
 * @priv: pointer, returned by kverbs_ep_priv()
 *
 * Context: any.
 */
void kverbs_ep_set_priv(struct kverbs_ep *ep, void *priv)
{
	WRITE_ONCE(ep->priv, priv);
}
EXPORT_SYMBOL_NS_GPL(kverbs_ep_set_priv, KVERBS_NS);

/**
 * kverbs_ep_priv - the user pointer of an endpoint
 * @ep: endpoint
 *
 * Context: any.
 * Return: the pointer set by kverbs_ep_set_priv(), or NULL.
 */
void *kverbs_ep_priv(const struct kverbs_ep *ep)
{
	return READ_ONCE(ep->priv);
}
EXPORT_SYMBOL_NS_GPL(kverbs_ep_priv, KVERBS_NS);
