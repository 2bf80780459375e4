// SPDX-License-Identifier: GPL-2.0-only
/*
 * RC endpoints: life cycle, the state machine, teardown and accessors.
 * The rdma_cm side (connect, accept, the QP) is in connect.c.
 *
 * Teardown order (one function, run once, always on the domain's teardown
 * workqueue, down_wq, never on the deferral workqueue whose work it flushes):
 * state -> CLOSING under ep->lock (no new posts) -> rdma_disconnect ->
 * ib_drain_qp (every posted WR, signaled or not, has completed or flushed)
 * -> reclaim the ledger's tail -> upper ->stop -> destroy QP, unmap
 * buffers -> rdma_destroy_id (waits for a running CM handler) -> leave the
 * domain -> @disconnected callback.
 *
 * Sizing: kverbs_ep_budget(), the one place that sizes the queues.
 */
#include <linux/slab.h>

#include "kverbs-pri.h"
#include "kverbs_trace.h"

/**
 * kverbs_ep_budget - the queue sizes of an endpoint
 * @depth: the domain's depth: operation slots
 * @upper_send: send WRs the layer above may have outstanding
 * @upper_recv: receives the layer above posts
 * @b: output
 *
 * See struct kverbs_ep_budget for the numbered budget.
 *
 * Context: any.
 */
void kverbs_ep_budget(u16 depth, u16 upper_send, u16 upper_recv,
		      struct kverbs_ep_budget *b)
{
	b->upper_send = upper_send;
	b->nops = depth;
	b->upper_recv = upper_recv;
	b->send_wr = b->upper_send + b->nops + 1;
	b->recv_wr = b->upper_recv + 1;
	b->cqes = b->send_wr + b->recv_wr;
	b->rw_cqes = 2 * b->nops;
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_ep_budget);

static const char * const kverbs_ep_state_names[] = {
	[KVERBS_EP_CONNECTING] = "connecting",
	[KVERBS_EP_CONNECTED] = "connected",
	[KVERBS_EP_CLOSING] = "closing",
	[KVERBS_EP_CLOSED] = "closed",
};

const char *kverbs_ep_state_str(enum kverbs_ep_state s)
{
	return s < KVERBS_EP_NR_STATES ? kverbs_ep_state_names[s] : "?";
}

/* kverbs_ep_transitions[from] has bit @to set if from -> to is allowed. */
static const u8 kverbs_ep_transitions[KVERBS_EP_NR_STATES] = {
	[KVERBS_EP_CONNECTING] = BIT(KVERBS_EP_CONNECTED) |
				 BIT(KVERBS_EP_CLOSING),
	[KVERBS_EP_CONNECTED] = BIT(KVERBS_EP_CLOSING),
	[KVERBS_EP_CLOSING] = BIT(KVERBS_EP_CLOSED),
	[KVERBS_EP_CLOSED] = 0,
};

/**
 * kverbs_ep_change_state - move an endpoint to @to if the table allows it
 * @ep: endpoint
 * @to: new state
 *
 * Context: any, ep->lock held.
 * Return: true if the state changed.
 */
bool kverbs_ep_change_state(struct kverbs_ep *ep, enum kverbs_ep_state to)
{
	enum kverbs_ep_state from = ep->state;

	lockdep_assert_held(&ep->lock);
	if (!(kverbs_ep_transitions[from] & BIT(to))) {
		trace_kverbs_ep_state_refused(ep, from, to);
		return false;
	}
	WRITE_ONCE(ep->state, to);
	trace_kverbs_ep_state(ep, from, to);
	return true;
}

static void kverbs_ep_release(struct kref *ref)
{
	struct kverbs_ep *ep = container_of(ref, struct kverbs_ep, ref);

	WARN_ON(ep->qp || ep->cm_id);
	kverbs_upper->free(ep);
	kverbs_sq_free(ep);
	kverbs_domain_put(ep->dom);
	kfree(ep);
}

void kverbs_ep_get(struct kverbs_ep *ep)
{
	kref_get(&ep->ref);
}

void kverbs_ep_put(struct kverbs_ep *ep)
{
	kref_put(&ep->ref, kverbs_ep_release);
}

static void kverbs_ep_teardown_work(struct work_struct *work);

/*
 * Allocate an endpoint on @dom's list; the list holds the first reference.
 * @src: for an accepted connection, the peer's address: set, with
 * KVERBS_EP_F_ACCEPTED, before the endpoint is on the list, and in a
 * keyed domain admitted by the caps on unproven connections (-EBUSY).
 */
static struct kverbs_ep *__kverbs_ep_alloc(struct kverbs_domain *dom,
					   const struct sockaddr *src)
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
	INIT_DELAYED_WORK(&ep->auth_work, kverbs_ep_auth_work);
	INIT_LIST_HEAD(&ep->sq.op_free);
	INIT_LIST_HEAD(&ep->grants);
	init_waitqueue_head(&ep->sq.wait);
	ep->state = KVERBS_EP_CONNECTING;
	ep->dom = dom;

	if (src) {
		memcpy(&ep->peer_addr, src, rdma_addr_size(src));
		set_bit(KVERBS_EP_F_ACCEPTED, &ep->flags);
	}

	mutex_lock(&dom->lock);
	if (dom->dying || (src && !kverbs_admit_locked(dom, src))) {
		mutex_unlock(&dom->lock);
		kfree(ep);
		return ERR_PTR(dom->dying ? -ESHUTDOWN : -EBUSY);
	}
	ep->id = ++dom->next_ep_id;
	kverbs_domain_get(dom);
	list_add_tail(&ep->dom_node, &dom->eps);
	mutex_unlock(&dom->lock);
	return ep;
}

struct kverbs_ep *kverbs_ep_alloc(struct kverbs_domain *dom)
{
	return __kverbs_ep_alloc(dom, NULL);
}

struct kverbs_ep *kverbs_ep_alloc_accepted(struct kverbs_domain *dom,
					   const struct sockaddr *src)
{
	return __kverbs_ep_alloc(dom, src);
}

/**
 * kverbs_ep_fail - tear the endpoint down
 * @ep: endpoint
 * @err: reason reported to @disconnected; the first non-zero one sticks
 *
 * The one way the layer above, a completion or a CM event ends an
 * endpoint.  The queued work holds a reference, so @ep stays valid until
 * it ran even when it is queued again while running.
 *
 * Context: any (QP events may call it in hard interrupt context).
 */
void kverbs_ep_fail(struct kverbs_ep *ep, int err)
{
	/* No ep->lock: QP events may come in hard interrupt context. */
	cmpxchg(&ep->error, 0, err);

	kverbs_ep_get(ep);
	if (!queue_work(kverbs_test_undo(KVERBS_UNDO_DOWN_WQ) ? ep->dom->wq :
			ep->dom->down_wq, &ep->teardown_work))
		kverbs_ep_put(ep);
}

/*
 * Release the QP, unmap the buffers, deregister the grants and free the
 * PD, in that order.  The QP must be drained or never connected: the drain
 * guarantees that no completion for it is left in the shared CQ, and that
 * no WR still names a grant's MR.  Called with dom->lock held, so the
 * domain is still bound.
 */
void kverbs_ep_release_qp(struct kverbs_ep *ep)
{
	struct kverbs_domain *dom = ep->dom;

	lockdep_assert_held(&dom->lock);
	if (ep->qp) {
		if (ep->cm_id->qp)	/* iWARP: the CM's */
			rdma_destroy_qp(ep->cm_id);
		else
			ib_destroy_qp(ep->qp);
		ep->qp = NULL;
	}
	kverbs_upper->release(ep);
	kverbs_ep_drop_grants(ep);
	if (ep->pd) {
		ib_dealloc_pd(ep->pd);
		ep->pd = NULL;
	}
	if (ep->cq_reserved) {
		dom->cq_used -= dom->ep_cqes;
		ep->cq_reserved = false;
	}
}

/**
 * kverbs_ep_connected - the endpoint is usable: tell both layers
 * @ep: endpoint whose peer announcement (and, keyed, proof) is checked
 *
 * The upper layer opens its window in the same critical section as the
 * state change, so nothing sees CONNECTED without it; an authenticating
 * active endpoint queues its proof there too, ahead of any message.  An
 * accepted endpoint of a keyed domain is CONNECTED without ->connected
 * until its peer's proof arrived: its messages wait on the backlog, and
 * kverbs_ep_auth_work() calls ->connected, or fails it at the deadline.
 *
 * Context: process (the endpoint's CM handler).
 */
void kverbs_ep_connected(struct kverbs_ep *ep)
{
	bool ok, wait = test_bit(KVERBS_EP_F_AUTH_WAIT, &ep->flags);
	int ret = 0;

	if (!test_bit(KVERBS_EP_F_ACCEPTED, &ep->flags))
		kverbs_test_delay(connect);	/* past kverbs_ep_connect()'s deadline */
	spin_lock_bh(&ep->lock);
	/* Refused once kverbs_ep_connect()'s deadline moved it to CLOSING. */
	ok = kverbs_ep_change_state(ep, KVERBS_EP_CONNECTED);
	if (ok) {
		kverbs_upper->connected(ep);
		if (test_bit(KVERBS_EP_F_AUTH_SEND, &ep->flags))
			ret = kverbs_upper->send_auth(ep, ep->auth.proof,
						      KVERBS_CM_PROOF_LEN);
		if (wait)
			queue_delayed_work(ep->dom->wq, &ep->auth_work,
					   test_bit(KVERBS_EP_F_AUTH_PASSED,
						    &ep->flags) ? 0 :
					   msecs_to_jiffies(KVERBS_AUTH_TIMEOUT_MS));
		else if (!ret)
			set_bit(KVERBS_EP_F_NOTIFIED, &ep->flags);
	}
	spin_unlock_bh(&ep->lock);
	memzero_explicit(ep->auth.proof, sizeof(ep->auth.proof));
	if (ret)
		kverbs_ep_fail(ep, ret);
	if (!ok || wait || ret)
		return;
	kverbs_ep_notify(ep);
}

/**
 * kverbs_ep_notify - call ->connected, then let messages through
 * @ep: CONNECTED endpoint whose KVERBS_EP_F_NOTIFIED its caller set
 *
 * Teardown calls @disconnected only after this returned: it destroys the
 * cm_id (waiting for a CM handler) and cancels the auth work (waiting for
 * a running one) first.
 *
 * Context: process (the endpoint's CM handler, or kverbs_ep_auth_work()).
 */
void kverbs_ep_notify(struct kverbs_ep *ep)
{
	if (ep->dom->ops->connected)
		ep->dom->ops->connected(ep);
	complete_all(&ep->done_connecting);
	kverbs_upper->opened(ep);
}

static void kverbs_ep_teardown(struct kverbs_ep *ep)
{
	struct kverbs_domain *dom = ep->dom;
	enum kverbs_ep_state was;
	struct ib_qp *qp;

	spin_lock_bh(&ep->lock);
	was = ep->state;
	kverbs_ep_change_state(ep, KVERBS_EP_CLOSING);
	spin_unlock_bh(&ep->lock);
	/* Tasks sleeping for a slot must see CLOSING, not wait on. */
	wake_up_all(&ep->sq.wait);

	/* A handler creating the QP holds dom->lock: wait for it, then look. */
	mutex_lock(&dom->lock);
	qp = ep->qp;
	mutex_unlock(&dom->lock);
	/* A read being set up on the QP (iWARP, rdma_rw.c) posts or gives up */
	kverbs_rw_idle(ep);

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
	kverbs_sq_reclaim_tail(ep);
	kverbs_upper->stop(ep);

	mutex_lock(&dom->lock);
	kverbs_ep_release_qp(ep);
	mutex_unlock(&dom->lock);

	/*
	 * CLOSING: a proof's work finds nothing to do from now on; one that
	 * started earlier is waited for, with its ->connected, here where the
	 * CM handler's is (rdma_destroy_id): after the drain and the upper
	 * layer's stop, which end what a ->connected may sleep on.  The work
	 * runs on dom->wq, never on down_wq, where this runs.
	 */
	cancel_delayed_work_sync(&ep->auth_work);
	kverbs_ep_auth_teardown(ep);
	if (ep->cm_id) {
		rdma_destroy_id(ep->cm_id);
		ep->cm_id = NULL;
	}

	mutex_lock(&dom->lock);
	list_del_init(&ep->dom_node);
	mutex_unlock(&dom->lock);

	spin_lock_bh(&ep->lock);
	kverbs_ep_change_state(ep, KVERBS_EP_CLOSED);
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
 * kverbs_ep_close - disconnect and release an endpoint from kverbs_ep_connect()
 * @ep: endpoint
 *
 * Waits for the teardown, including the @disconnected callback if the
 * endpoint had connected.  Every buffer is reclaimed when this returns.
 * An accepted endpoint belongs to the domain, not to the caller: closing
 * one is refused (and warned about) without touching it.
 *
 * Context: process; may sleep.  Not from a domain callback.
 * Return: 0, or -EPERM for an endpoint the caller does not own.
 */
int kverbs_ep_close(struct kverbs_ep *ep)
{
	might_sleep();
	if (WARN_ONCE(test_bit(KVERBS_EP_F_ACCEPTED, &ep->flags),
		      "kverbs: %s ep%u: %s() of an accepted endpoint\n",
		      ep->dom->name, ep->id, __func__))
		return -EPERM;
	if (WARN_ONCE(test_and_set_bit(KVERBS_EP_F_CLOSED_BY_OWNER, &ep->flags),
		      "kverbs: %s ep%u: closed twice\n", ep->dom->name, ep->id))
		return -EINVAL;
	kverbs_ep_fail(ep, -ESHUTDOWN);
	flush_work(&ep->teardown_work);
	kverbs_ep_put(ep);
	return 0;
}
EXPORT_SYMBOL_NS_GPL(kverbs_ep_close, KVERBS_NS);

/**
 * kverbs_ep_disconnect - end a connection from this side
 * @ep: endpoint, accepted or from kverbs_ep_connect()
 *
 * Starts the teardown a peer's disconnect would: operations in flight
 * complete with errors, the peer sees the connection close, and
 * ->disconnected follows with -ECONNABORTED (or the error that failed the
 * endpoint first).  The way a client ends an accepted endpoint it no
 * longer wants (a peer that stays idle, one it refuses after
 * ->connected).  An accepted endpoint is then freed by the domain; one
 * from kverbs_ep_connect() still needs kverbs_ep_close().
 *
 * Context: any, does not sleep; from ->connected and message callbacks
 * too.  @ep must be valid: the caller is one of its callbacks, or its
 * ->disconnected has not returned yet.
 */
void kverbs_ep_disconnect(struct kverbs_ep *ep)
{
	kverbs_ep_fail(ep, -ECONNABORTED);
}
EXPORT_SYMBOL_NS_GPL(kverbs_ep_disconnect, KVERBS_NS);

/**
 * kverbs_ep_probe - make sure the peer is still there
 * @ep: endpoint
 *
 * A peer that dies between acknowledging a request and answering it
 * leaves nothing outstanding on our send queue, so RC never retries and
 * the death goes unnoticed while the caller waits for the answer.  This
 * posts a zero-length RDMA WRITE, which needs nothing at the peer but its
 * acknowledgment: if none comes, RC's retries fail it (KVERBS_RETRY + 1
 * transmissions an ack timeout apart, about 4 s at the defaults) and the
 * endpoint fails as for any failed operation (->disconnected follows).
 * At most one probe is posted at a time; it uses an operation slot, and
 * debugfs counts it with the endpoint's nudges.  Call it from a wait that
 * has lasted longer than the peer should take, as a keepalive.  IB and
 * RoCE only: on iWARP the WRITE completes once TCP has sent it, so a dead
 * peer is found by TCP's own timeouts instead (minutes by default).
 *
 * Context: process or softirq; not from the endpoint's send-queue
 * callbacks.  @ep must be valid (as for kverbs_ep_disconnect()).
 * Return: 0 (posted), -EBUSY (a probe is in flight already), -EAGAIN (no
 * free operation slot: the operations in flight probe the peer already),
 * -ENOTCONN or the endpoint's error, or the provider's post error.
 */
int kverbs_ep_probe(struct kverbs_ep *ep)
{
	return kverbs_sq_nudge(ep);
}
EXPORT_SYMBOL_NS_GPL(kverbs_ep_probe, KVERBS_NS);

/**
 * kverbs_ep_max_send - largest message payload the peer accepts
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
 * kverbs_ep_peer_addr - the peer's address
 * @ep: endpoint
 * @addr: out: the address the connection came from (accepted) or was
 *	dialled to (connected), with its port
 *
 * Unlike the node id, which the peer writes into its own connection
 * data, the address is what the RDMA CM saw; it is still only as
 * trustworthy as the fabric (an address can be spoofed on RoCE), so a
 * client authorises by it only as a floor.  Set before ->connected() and
 * never changed.
 *
 * Context: any.
 */
void kverbs_ep_peer_addr(const struct kverbs_ep *ep,
			 struct sockaddr_storage *addr)
{
	memcpy(addr, &ep->peer_addr, sizeof(*addr));
}
EXPORT_SYMBOL_NS_GPL(kverbs_ep_peer_addr, KVERBS_NS);

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

/**
 * kverbs_ep_domain - the domain of an endpoint
 * @ep: endpoint
 *
 * Context: any.
 * Return: the domain; valid as long as the endpoint is.
 */
struct kverbs_domain *kverbs_ep_domain(const struct kverbs_ep *ep)
{
	return ep->dom;
}
EXPORT_SYMBOL_NS_GPL(kverbs_ep_domain, KVERBS_NS);
