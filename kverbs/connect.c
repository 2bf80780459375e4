// SPDX-License-Identifier: GPL-2.0-only
/*
 * The connection-management side of an endpoint: the rdma_cm event
 * handler, the active connect and the passive accept, and the QP they set
 * up.  Listeners are in listen.c; the state machine and teardown in ep.c.
 *
 * Both sides announce node id, receive depth and largest message in the
 * private data (cm.c); the active side learns the peer's announcement from
 * the accept, the passive side from the request (listen.c).  In a keyed
 * domain the private data also carries the nonces and the accepting
 * side's proof (auth.c).
 */
#include "kverbs-pri.h"
#include "kverbs_trace.h"

static void kverbs_qp_event(struct ib_event *ev, void *ctx)
{
	struct kverbs_ep *ep = ctx;

	switch (ev->event) {
	case IB_EVENT_COMM_EST:
		/* A message before the RTU: tell the CM it is established. */
		rdma_notify(ep->cm_id, ev->event);
		break;
	case IB_EVENT_SQ_DRAINED:
	case IB_EVENT_QP_LAST_WQE_REACHED:
		break;
	default:
		kverbs_ep_log(err, ep, "QP event %s (%d), peer node %u\n", ib_event_msg(ev->event),
			      ev->event, ep->peer_node);
		kverbs_ep_fail(ep, -EIO);
	}
}

/*
 * On IB and RoCE the QP is ours, not the CM's: created with the domain's
 * name, so that `rdma res show qp` names the client that owns it
 * (rdma_create_qp() names every QP after rdma_cm).  The CM then leaves
 * the QP's states to us, and these do what it does for a QP it owns
 * (cma_init_conn_qp(), cma_modify_qp_rtr(), cma_modify_qp_rts()): INIT at
 * creation; INIT again with the path's attributes, RTR and RTS before the
 * passive side's REP, or on the active side when the REP arrives, before
 * the RTU.  iWARP keeps the CM's QP: its CM programs the QP inside
 * rdma_connect(), where no caller can.
 *
 * @param: the accept's depths on the passive side; NULL for the CM's
 * (the REP's) on the active side.
 */
static int kverbs_qp_modify(struct kverbs_ep *ep, enum ib_qp_state state,
			    const struct rdma_conn_param *param)
{
	struct ib_qp_attr attr = { .qp_state = state };
	int mask, ret;

	ret = rdma_init_qp_attr(ep->cm_id, &attr, &mask);
	if (ret)
		return ret;
	if (param && state == IB_QPS_RTR)
		attr.max_dest_rd_atomic = param->responder_resources;
	if (param && state == IB_QPS_RTS)
		attr.max_rd_atomic = param->initiator_depth;
	return ib_modify_qp(ep->qp, &attr, mask);
}

/*
 * Our QP to RTS (see above).  Under dom->lock and only while CONNECTING:
 * teardown leaves CONNECTING before it releases the QP under that lock.
 * A drain racing this moved the QP to ERR, from where every step fails.
 *
 * Return: 0, -ECONNABORTED once teardown began, or the verbs' error.
 */
static int kverbs_ep_qp_ready(struct kverbs_ep *ep,
			      const struct rdma_conn_param *param)
{
	struct kverbs_domain *dom = ep->dom;
	int ret;

	mutex_lock(&dom->lock);
	if (READ_ONCE(ep->state) != KVERBS_EP_CONNECTING || !ep->qp)
		ret = -ECONNABORTED;
	else
		ret = kverbs_qp_modify(ep, IB_QPS_INIT, param) ?:
		      kverbs_qp_modify(ep, IB_QPS_RTR, param) ?:
		      kverbs_qp_modify(ep, IB_QPS_RTS, param);
	mutex_unlock(&dom->lock);
	return ret;
}

/*
 * Bind the domain to the cm_id's device, create the QP and post the
 * receive ring.  Done under dom->lock so that unbind either sees the
 * endpoint's CQ reservation or the endpoint sees the domain gone; and only
 * while CONNECTING, so nothing is created once teardown has started.
 */
noinline int kverbs_ep_setup_qp(struct kverbs_ep *ep)
{
	struct kverbs_domain *dom = ep->dom;
	struct ib_qp_init_attr init = {};
	const struct kverbs_ep_budget *b = &dom->budget;
	struct ib_qp *qp;
	int ret;

	mutex_lock(&dom->lock);
	if (READ_ONCE(ep->state) != KVERBS_EP_CONNECTING) {
		ret = -ECONNABORTED;
		goto out;
	}
	ret = kverbs_domain_bind(dom, ep->cm_id->device);
	if (ret)
		goto out;
	if (dom->cq_used + dom->ep_cqes > dom->cq_bound) {
		ret = -ENOSPC;
		goto out;
	}
	dom->cq_used += dom->ep_cqes;
	ep->cq_reserved = true;

	/*
	 * Our own PD: what is granted on this connection stays on it.  Named
	 * after the domain (its client), as the CQ and the cm_ids are, for
	 * `rdma res`: the name lives in the domain, which outlives them.
	 */
	ep->pd = __ib_alloc_pd(dom->kdev->ibdev, 0, dom->name);
	if (IS_ERR(ep->pd)) {
		ret = PTR_ERR(ep->pd);
		ep->pd = NULL;
		goto fail;
	}
	ep->lkey = ep->pd->local_dma_lkey;
	ep->max_sge = min_t(int, KVERBS_RDMA_MAX_SEGS,
			    dom->kdev->ibdev->attrs.max_send_sge);
	ep->max_sge_rd = min_t(int, ep->max_sge,
			       dom->kdev->ibdev->attrs.max_sge_rd);
	ep->max_sge_pages = min_t(int, dom->write_pages,
				  dom->kdev->ibdev->attrs.max_send_sge);
	ep->iwarp = rdma_protocol_iwarp(dom->kdev->ibdev, ep->cm_id->port_num);
	ep->nudge_inv = dom->kdev->ibdev->ops.driver_id == RDMA_DRIVER_RXE;
	/* iWARP: reads through rdma_rw, one MR of its pool each */
	ep->max_sge_read_pages = ep->iwarp ?
		min_t(u32, dom->read_pages, kverbs_rw_max_pages(dom->kdev->ibdev)) :
		min_t(int, dom->read_pages,
		      min(dom->kdev->ibdev->attrs.max_send_sge,
			  dom->kdev->ibdev->attrs.max_sge_rd));

	ret = kverbs_sq_alloc(ep);
	if (!ret)
		ret = kverbs_upper->setup(ep);
	if (ret)
		goto fail;

	init.event_handler = kverbs_qp_event;
	init.qp_context = ep;
	init.send_cq = dom->cq;
	init.recv_cq = dom->cq;
	init.cap.max_send_wr = b->send_wr;
	init.cap.max_recv_wr = b->recv_wr;
	/* An iWARP read is one SGE: rdma_rw's MR */
	init.cap.max_send_sge = max3(ep->max_sge, ep->max_sge_pages,
				     ep->iwarp ? 1 : ep->max_sge_read_pages);
	init.cap.max_recv_sge = 1;
	init.sq_sig_type = IB_SIGNAL_REQ_WR;
	init.qp_type = IB_QPT_RC;
	init.port_num = ep->cm_id->port_num;
	if (ep->iwarp) {
		/* A read per slot (kverbs_ep_budget(); rdma_rw.c) */
		init.cap.max_rdma_ctxs = b->nops;
		ret = rdma_create_qp(ep->cm_id, ep->pd, &init);
		if (ret)
			goto fail;
		ep->qp = ep->cm_id->qp;
	} else {
		/* Named after the domain's client; see kverbs_qp_modify(). */
		qp = ib_create_qp_kernel(ep->pd, &init, dom->name);
		if (IS_ERR(qp)) {
			ret = PTR_ERR(qp);
			goto fail;
		}
		ep->qp = qp;
		ret = kverbs_qp_modify(ep, IB_QPS_INIT, NULL);
		if (ret)
			goto fail;
	}
	WRITE_ONCE(ep->qpn, ep->qp->qp_num);
	ep->atomics = ep->qp->device->attrs.atomic_cap != IB_ATOMIC_NONE;

	ret = kverbs_upper->start(ep);
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
ALLOW_ERROR_INJECTION(kverbs_ep_setup_qp, ERRNO);

/* RC transport retries; see kverbs_conn_param() */
#define KVERBS_RETRY		6

/* Return: 0, or the crypto API's error computing an accept's proof. */
static int kverbs_conn_param(struct kverbs_ep *ep, struct kverbs_cm_wire *w,
			     struct rdma_conn_param *param)
{
	struct kverbs_domain *dom = ep->dom;
	struct ib_device_attr *attrs = &ep->cm_id->device->attrs;
	int ret = 0;

	kverbs_cm_priv_fill(&w->priv, dom->node_id, dom->depth, dom->max_msg);
	memset(param, 0, sizeof(*param));
	param->private_data = w;
	param->private_data_len = sizeof(w->priv);
	/* Used when the QP is ours; set with it, never reread from it here. */
	param->qp_num = READ_ONCE(ep->qpn);
	if (dom->auth_tfm) {
		w->priv.flags = cpu_to_be16(KVERBS_CM_F_AUTH);
		param->private_data_len = sizeof(*w);
		if (test_bit(KVERBS_EP_F_ACCEPTED, &ep->flags))
			ret = kverbs_ep_auth_accept(ep, &w->priv, &w->auth);
		else
			kverbs_ep_auth_request(ep, &w->priv, &w->auth);
	}
	param->responder_resources = min_t(int, attrs->max_qp_rd_atom, 16);
	param->initiator_depth = min_t(int, attrs->max_qp_init_rd_atom, 16);
	/*
	 * The passive side answers with no more than the request offered.
	 * The CM hands the request's depths over from our side already (its
	 * responder resources are our initiator depth), so each is clamped by
	 * its own: our reads in flight at most what the peer can take as a
	 * responder, our responder resources at most the reads it may issue.
	 * More would let our reads overrun the peer's responder (a fatal NAK
	 * on a strict device) or have the peer program a depth its device
	 * lacks.
	 */
	if (test_bit(KVERBS_EP_F_ACCEPTED, &ep->flags) &&
	    !kverbs_test_undo(KVERBS_UNDO_DEPTH_CLAMP)) {
		param->responder_resources = min_t(u8, param->responder_resources,
						   ep->req_responder_resources);
		param->initiator_depth = min_t(u8, param->initiator_depth,
					       ep->req_initiator_depth);
	}
	/*
	 * On IB and RoCE, a peer that vanished fails an endpoint that sends
	 * to it after KVERBS_RETRY + 1 transmissions an ack timeout apart
	 * (module parameter ack_timeout, default 17: 7 x 0.54 s, about 4 s).
	 * Not 7 retries: rxe takes 7 as "retry forever".  The timeout is
	 * set rather than left to the CM's RoCE default of 2.1 s (a 15 s
	 * bound).  A passive QP retries as the active peer's request asked.
	 */
	param->retry_count = KVERBS_RETRY;
	if (rdma_set_ack_timeout(ep->cm_id,
				 clamp(READ_ONCE(kverbs_ack_timeout), 1U, 31U)))
		pr_warn_once("cannot set the RC ack timeout; the CM's default applies\n");
	param->rnr_retry_count = min(READ_ONCE(kverbs_rnr_retry), 7U);
	return ret;
}

/**
 * kverbs_ep_accept - accept the connection of a passive endpoint
 * @ep: endpoint whose QP is set up, in its CM handler
 *
 * ->connected means "sends work now": an IB or RoCE QP is in RTS before
 * rdma_accept() sends the REP, an iWARP QP reaches RTS only with
 * ESTABLISHED.  Messages that arrive in between wait for ->connected on
 * the backlog, as on the active side.
 *
 * Context: process (CM handler of @ep's id).
 */
void kverbs_ep_accept(struct kverbs_ep *ep)
{
	struct rdma_cm_id *id = ep->cm_id;
	struct rdma_conn_param param;
	struct kverbs_cm_wire w;
	int ret;

	ret = kverbs_conn_param(ep, &w, &param);
	if (!ret && !id->qp)
		ret = kverbs_ep_qp_ready(ep, &param);
	if (!ret)
		ret = rdma_accept(id, &param);
	memzero_explicit(&w.auth, sizeof(w.auth));
	trace_kverbs_ep_accept(ep, ret);
	if (ret) {
		kverbs_ep_log(warn, ep, "accept of node %u from %pISpc failed: %d\n",
			      ep->peer_node, &ep->peer_addr, ret);
		kverbs_ep_fail(ep, ret);
		return;
	}
	set_bit(KVERBS_EP_F_ACCEPT_SENT, &ep->flags);
	if (!rdma_protocol_iwarp(id->device, id->port_num))
		kverbs_ep_connected(ep);
}

/*
 * Active side: the server's accept carries its announcement and, in a
 * keyed domain, its proof, which must be good before our QP goes to RTS
 * and the RTU tells the server we took it (on iWARP, before ->connected).
 * On IB and RoCE (@rej) a bad accept is answered with a REJ saying why,
 * so the server counts a peer without its key as an authentication
 * failure.
 * Return: 0, or an error after failing the endpoint.
 */
static int kverbs_ep_check_accept(struct kverbs_ep *ep,
				  struct rdma_cm_event *ev, bool rej)
{
	const void *data = ev->param.conn.private_data;
	u8 len = ev->param.conn.private_data_len;
	enum kverbs_cm_reason reason;
	struct kverbs_cm_auth auth;

	reason = kverbs_cm_priv_parse(data, len, &ep->peer_node,
				      &ep->peer_depth, &ep->peer_max_msg);
	if (reason == KVERBS_CM_OK)
		reason = kverbs_cm_auth_parse(data, len,
					      !!ep->dom->auth_tfm, &auth);
	if (reason != KVERBS_CM_OK) {
		kverbs_ep_log(warn, ep, "peer %pISpc accepted with bad parameters: %s\n",
			      &ep->peer_addr, kverbs_cm_reason_str(reason));
		if (rej)
			kverbs_cm_reject(ep->dom, ep->id, ep->cm_id, reason);
		kverbs_ep_fail(ep, reason == KVERBS_CM_EAUTH ? -EACCES :
				   -EPROTO);
		return -EPROTO;
	}
	if (ep->dom->auth_tfm && kverbs_ep_auth_established(ep, data, &auth)) {
		if (rej)
			kverbs_cm_reject(ep->dom, ep->id, ep->cm_id,
					 KVERBS_CM_EAUTH);
		return -EACCES;
	}
	return 0;
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
	if (reason == KVERBS_CM_EAUTH)
		atomic64_inc(&ep->dom->auth_failures);
	trace_kverbs_rejected(ep->dom, ep->id, &ep->peer_addr,
			      kverbs_cm_reason_str(reason), ev->status);
	if (test_bit(KVERBS_EP_F_ACCEPTED, &ep->flags))
		kverbs_ep_log(warn, ep, "node %u at %pISpc refused our accept: %s (cm status %d)\n",
			      ep->peer_node, &ep->peer_addr,
			      kverbs_cm_reason_str(reason), ev->status);
	else
		kverbs_ep_log(warn, ep, "connection to %pISpc refused: %s (cm status %d)\n",
			      &ep->peer_addr, kverbs_cm_reason_str(reason),
			      ev->status);
	kverbs_ep_fail(ep, reason == KVERBS_CM_EAUTH ? -EACCES :
			   -ECONNREFUSED);
}

static void kverbs_ep_route_resolved(struct kverbs_ep *ep,
				     struct rdma_cm_id *id)
{
	struct rdma_conn_param param;
	struct kverbs_cm_wire w;
	int ret;

	ret = kverbs_ep_setup_qp(ep);
	if (!ret)
		ret = kverbs_conn_param(ep, &w, &param) ?:
		      rdma_connect_locked(id, &param);
	if (ret) {
		kverbs_ep_log(warn, ep, "connect to %pISpc failed: %d\n", &ep->peer_addr, ret);
		kverbs_ep_fail(ep, ret);
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

	trace_kverbs_cm_event(ep, ev);
	/* Any event after our REP ends the handshake (see teardown). */
	if (test_bit(KVERBS_EP_F_ACCEPTED, &ep->flags))
		complete_all(&ep->cm_settled);

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ret = rdma_resolve_route(id, KVERBS_CM_TIMEOUT_MS);
		if (ret)
			kverbs_ep_fail(ep, ret);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		kverbs_ep_route_resolved(ep, id);
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		/*
		 * Active, our QP: check the REP, then ready the QP and answer
		 * with the RTU.
		 */
		if (kverbs_ep_check_accept(ep, ev, true))
			break;
		ret = kverbs_ep_qp_ready(ep, NULL) ?: rdma_accept(id, NULL);
		if (ret) {
			kverbs_ep_log(warn, ep,
				      "%pISpc accepted, but the connection cannot be completed: %d\n",
				      &ep->peer_addr, ret);
			kverbs_ep_fail(ep, ret);
			break;
		}
		kverbs_ep_connected(ep);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		/* Active: iWARP only; IB and RoCE end at CONNECT_RESPONSE. */
		if (!test_bit(KVERBS_EP_F_ACCEPTED, &ep->flags)) {
			if (!kverbs_ep_check_accept(ep, ev, false))
				kverbs_ep_connected(ep);
		} else {	/* iWARP: only now is the QP in RTS */
			kverbs_ep_connected(ep);
		}
		break;
	case RDMA_CM_EVENT_REJECTED:
		kverbs_ep_rejected(ep, id, ev);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		kverbs_ep_log(warn, ep, "%pISpc: %s (status %d)\n", &ep->peer_addr,
			      rdma_event_msg(ev->event), ev->status);
		kverbs_ep_fail(ep, ev->status < 0 ? ev->status :
					    -EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		kverbs_ep_fail(ep, -ECONNRESET);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		kverbs_ep_fail(ep, -ENODEV);
		break;
	default:
		break;
	}
	return 0;
}

/*
 * kverbs_ep_connect() stops waiting (its deadline, or a fatal signal):
 * decide, under ep->lock where kverbs_ep_connected() moves to CONNECTED
 * and sets NOTIFIED, who won.  Notified: the handshake did; the peer holds
 * an established connection, the domain's ->connected() is running and
 * returns soon, and the caller gets the endpoint.  Otherwise the deadline
 * did: a CONNECTING endpoint moves to CLOSING, so a handshake ending later
 * is refused and ->connected() and ->disconnected() never run for an
 * endpoint whose connect failed.  (Teardown then destroys an id that may
 * be established without rdma_disconnect(): the IB CM sends the DREQ when
 * an established id is destroyed, and an iWARP QP in error closes.)
 *
 * Context: process; takes ep->lock (BH off).
 * Return: true if the handshake won.
 */
static bool kverbs_ep_connect_deadline(struct kverbs_ep *ep)
{
	bool won;

	if (kverbs_test_undo(KVERBS_UNDO_DEADLINE)) {
		won = test_bit(KVERBS_EP_F_NOTIFIED, &ep->flags);
		kverbs_test_delay(connect);
		return won;
	}
	spin_lock_bh(&ep->lock);
	won = test_bit(KVERBS_EP_F_NOTIFIED, &ep->flags);
	if (!won && ep->state == KVERBS_EP_CONNECTING)
		kverbs_ep_change_state(ep, KVERBS_EP_CLOSING);
	spin_unlock_bh(&ep->lock);
	kverbs_test_delay(connect);
	return won;
}

/**
 * kverbs_ep_connect - connect to a kverbs peer
 * @dom: domain of the new endpoint
 * @dst: peer address with port (IPv4 or IPv6)
 * @timeout_ms: bound on address/route resolution and connection; a
 *	connection established by then waits for the domain's ->connected()
 * @priv: the endpoint's pointer (kverbs_ep_priv()), set before any
 *	callback for it can run
 *
 * The domain's ->connected() and ->disconnected() run for the endpoint
 * if and only if this returns it.
 *
 * Context: process; sleeps (killable) until connected, refused or timed
 * out, except once the handshake won: then until ->connected() returned.
 * Return: a connected endpoint, to be released with kverbs_ep_close(), or
 * ERR_PTR: -ECONNREFUSED (the peer refused; the reason is logged),
 * -EACCES (authentication failed: a wrong key on either side, or only one
 * side keyed),
 * -ETIMEDOUT, -EINTR (fatal signal), -EPROTO (malformed accept), -EXDEV
 * (route to a device other than the domain's), -ENOSPC (domain full),
 * -ESHUTDOWN (domain being destroyed), -EINVAL, or an rdma_cm error.
 */
struct kverbs_ep *kverbs_ep_connect(struct kverbs_domain *dom,
				    const struct sockaddr *dst,
				    unsigned int timeout_ms, void *priv)
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
	kverbs_ep_get(ep);	/* the caller's */
	ep->priv = priv;
	memcpy(&ep->peer_addr, dst, dst->sa_family == AF_INET ?
	       sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	trace_kverbs_ep_connect(ep, 0);

	id = __rdma_create_kernel_id(&init_net, kverbs_cm_handler, ep,
				     RDMA_PS_TCP, IB_QPT_RC, dom->name);
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
	if (left <= 0 && kverbs_ep_connect_deadline(ep)) {
		/* Not killable: ->connected() is running and returns soon. */
		wait_for_completion(&ep->done_connecting);
		left = 1;
	}
	if (left <= 0) {
		ret = left ? -EINTR : -ETIMEDOUT;
		goto fail;
	}
	/*
	 * ->connected() ran: the endpoint is the caller's even if it is
	 * going down already (->connected() may disconnect it, the peer may
	 * have): its ->disconnected() follows.  Otherwise it never ran.
	 */
	if (test_bit(KVERBS_EP_F_NOTIFIED, &ep->flags)) {
		trace_kverbs_ep_connect_done(ep, 0);
		return ep;
	}
	ret = READ_ONCE(ep->error) ?: -ENOTCONN;
fail:
	trace_kverbs_ep_connect_done(ep, ret);
	kverbs_ep_fail(ep, ret);
	kverbs_ep_close(ep);
	return ERR_PTR(ret);
}
EXPORT_SYMBOL_NS_GPL(kverbs_ep_connect, KVERBS_NS);
ALLOW_ERROR_INJECTION(kverbs_ep_connect, ERRNO);
