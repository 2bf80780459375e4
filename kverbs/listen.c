// SPDX-License-Identifier: GPL-2.0-only
/*
 * Listeners: accept connections into a domain, and survive the device.
 *
 * A listener's cm_id has its own event handler.  rdma_cm delivers two
 * kinds of events to it: CONNECT_REQUEST on a new child id, which becomes
 * an endpoint's id (its context and handler are switched to the endpoint's
 * before the handler returns), and DEVICE_REMOVAL, which rdma_cm sends to
 * every non-internal id bound to a device: a listener on a specific
 * address gets it, a wildcard listener does not.
 *
 * On DEVICE_REMOVAL the listener goes dormant: a work item destroys its id
 * (rdma_cm's removal waits for that), and when any RDMA device is added
 * kverbs tries to listen on the same address again, retrying for a while
 * because the new device's addresses appear after it registers.  The user
 * keeps the same struct kverbs_listener throughout; debugfs and the log
 * say which state it is in.
 *
 * The event names an id, and that id is what must be destroyed: it may be
 * one not published as @cm_id yet (kverbs_listen() and the relisten work
 * create, bind and listen before they publish).  The handler records it
 * as @removed_id; whoever owns the id takes it from there under the
 * listener's lock: the removal work if it is @cm_id, else its creator,
 * which then destroys it instead of publishing it.  A removal that comes
 * while kverbs_listen() starts the listener fails it (-EADDRNOTAVAIL);
 * one that comes while the relisten work starts it again leaves it
 * dormant, to retry.
 *
 * Locking: kverbs_listener.lock (mutex) protects @cm_id, @state, the
 * taking of @removed_id and the dormant list membership;
 * kverbs_listeners_lock protects the dormant list and is taken before any
 * listener's lock.  The CM handler takes neither.
 * No id is created or destroyed under a listener's lock: rdma_destroy_id()
 * waits for the id's handler, which (accepting) takes dom->lock, and
 * debugfs takes listener locks under dom->lock.
 */
#include <linux/slab.h>

#include "kverbs-pri.h"
#include "kverbs_trace.h"

static DEFINE_MUTEX(kverbs_listeners_lock);
static LIST_HEAD(kverbs_dormant);	/* listeners waiting for a device */
static unsigned int kverbs_relisten_tries;
static void kverbs_relisten_work(struct work_struct *work);
static DECLARE_DELAYED_WORK(kverbs_relisten, kverbs_relisten_work);

#define KVERBS_RELISTEN_TRIES		20
#define KVERBS_RELISTEN_INTERVAL	msecs_to_jiffies(500)

/**
 * kverbs_cm_reject - refuse a request, or (active side) an accept, saying why
 * @dom: domain
 * @ep_id: the endpoint created for the request, 0 if none was
 * @id: the request's id (passive), or the connecting id at CONNECT_RESPONSE
 * @r: the reason, in the REJ's private data
 *
 * Context: process, the id's CM handler.
 */
void kverbs_cm_reject(struct kverbs_domain *dom, u32 ep_id,
		      struct rdma_cm_id *id, enum kverbs_cm_reason r)
{
	struct kverbs_cm_rej rej = {
		.magic = cpu_to_be32(KVERBS_CM_MAGIC),
		.version = cpu_to_be16(KVERBS_CM_VERSION),
		.reason = cpu_to_be16(r),
	};
	int ret;

	ret = rdma_reject(id, &rej, sizeof(rej), IB_CM_REJ_CONSUMER_DEFINED);
	trace_kverbs_reject(dom, ep_id, &id->route.addr.dst_addr,
			    kverbs_cm_reason_str(r), ret);
}

/* Passive side: validate, create the endpoint, accept or reject. */
static int kverbs_listener_request(struct kverbs_listener *l,
				   struct rdma_cm_id *id,
				   struct rdma_cm_event *ev)
{
	struct kverbs_domain *dom = l->dom;
	struct sockaddr *src = (struct sockaddr *)&id->route.addr.dst_addr;
	const void *data = ev->param.conn.private_data;
	u8 len = ev->param.conn.private_data_len;
	enum kverbs_cm_reason reason;
	struct kverbs_cm_auth auth;
	struct kverbs_ep *ep;
	u32 node, max_msg;
	u16 depth;
	int ret;

	reason = kverbs_cm_priv_parse(data, len, &node, &depth, &max_msg);
	if (reason == KVERBS_CM_OK)
		reason = kverbs_cm_auth_parse(data, len, !!dom->auth_tfm,
					      &auth);
	/* A request's proof field is zero: keep those bytes free for later. */
	if (reason == KVERBS_CM_OK && dom->auth_tfm &&
	    memchr_inv(auth.proof, 0, sizeof(auth.proof)))
		reason = KVERBS_CM_EFLAGS;
	if (reason == KVERBS_CM_EAUTH)
		atomic64_inc(&dom->auth_failures);
	if (reason != KVERBS_CM_OK) {
		kverbs_dom_log(warn, dom, "rejecting connection from %pISpc: %s\n", src,
			       kverbs_cm_reason_str(reason));
		goto reject;
	}

	if (dom->ops->authorize && dom->ops->authorize(dom, node, src)) {
		kverbs_dom_log(info, dom, "node %u from %pISpc refused by the domain's client\n",
			       node, src);
		reason = KVERBS_CM_EREFUSED;
		goto reject;
	}
	ep = kverbs_ep_alloc_accepted(dom, src);
	if (IS_ERR(ep)) {
		reason = PTR_ERR(ep) == -EBUSY ? KVERBS_CM_EBUSY :
		       KVERBS_CM_ENOLISTEN;
		goto reject;
	}
	ep->cm_id = id;
	ep->peer_node = node;
	ep->peer_depth = depth;
	ep->peer_max_msg = max_msg;
	ep->req_initiator_depth = ev->param.conn.initiator_depth;
	ep->req_responder_resources = ev->param.conn.responder_resources;
	/* Every later event of @id is the endpoint's. */
	id->context = ep;
	id->event_handler = kverbs_cm_handler;
	if (dom->auth_tfm)
		kverbs_ep_auth_peer(ep, data, &auth);

	/*
	 * From here on the endpoint owns @id and only its teardown destroys
	 * it, so every failure below returns 0.
	 */
	ret = kverbs_ep_setup_qp(ep);
	if (ret) {
		kverbs_dom_log(warn, dom, "cannot accept node %u from %pISpc: %d\n",
			       node, src, ret);
		kverbs_cm_reject(dom, ep->id, id, KVERBS_CM_EBUSY);
		kverbs_ep_fail(ep, ret);
		return 0;
	}
	kverbs_ep_accept(ep);
	return 0;

reject:
	kverbs_cm_reject(dom, 0, id, reason);
	return 1;	/* rdma_cm destroys the child id */
}

/*
 * The handler of listener ids.  Context: process (rdma_cm work), under
 * the id's handler mutex.
 */
static int kverbs_listener_cm_handler(struct rdma_cm_id *id,
				      struct rdma_cm_event *ev)
{
	struct kverbs_listener *l = id->context;

	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return kverbs_listener_request(l, id, ev);
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		/* Only address-bound listeners get this, once per id. */
		trace_kverbs_listener_removal(l, 0);
		WRITE_ONCE(l->removed_id, id);
		queue_work(system_long_wq, &l->removal_work);
		return 0;
	default:
		return 0;
	}
}

/*
 * Create, bind and listen.  Called without the listener's lock: a failed
 * id is destroyed here, and rdma_destroy_id() takes the id's handler
 * mutex, under which accepts take dom->lock, which debugfs holds while
 * it takes the listener's lock.
 */
static struct rdma_cm_id *kverbs_listener_new_id(struct kverbs_listener *l)
{
	struct rdma_cm_id *id;
	int ret;

	/* named after the domain; accepted ids inherit the name */
	id = __rdma_create_kernel_id(&init_net, kverbs_listener_cm_handler, l,
				     RDMA_PS_TCP, IB_QPT_RC, l->dom->name);
	if (IS_ERR(id))
		return id;
	ret = rdma_bind_addr(id, (struct sockaddr *)&l->addr);
	if (!ret)
		ret = rdma_listen(id, 64);
	if (ret) {
		rdma_destroy_id(id);
		/* Its removal, if it got one, is over: no later id matches. */
		cmpxchg(&l->removed_id, id, NULL);
		return ERR_PTR(ret);
	}
	return id;
}

/*
 * Publish @id, just created, bound and listening, as @l's id unless its
 * device went away meanwhile.  Context: @l->lock held.  Return: true if
 * published; false if the caller must destroy @id (after unlocking).
 */
static bool kverbs_listener_publish(struct kverbs_listener *l,
				    struct rdma_cm_id *id)
{
	lockdep_assert_held(&l->lock);
	if (READ_ONCE(l->removed_id) == id &&
	    !kverbs_test_undo(KVERBS_UNDO_REMOVED_ID)) {
		WRITE_ONCE(l->removed_id, NULL);
		return false;
	}
	l->cm_id = id;
	l->state = KVERBS_LISTENER_LISTENING;
	return true;
}

/*
 * The device under an address-bound listener went away.  The listener
 * joins the dormant list only once its old id is destroyed, so a retry
 * never races the old id for the address.  An id not yet published is
 * its creator's to destroy (kverbs_listener_publish()).
 */
static void kverbs_listener_removal_work(struct work_struct *work)
{
	struct kverbs_listener *l = container_of(work, struct kverbs_listener,
						 removal_work);
	struct rdma_cm_id *id = NULL;
	bool dormant;

	mutex_lock(&l->lock);
	if (kverbs_test_undo(KVERBS_UNDO_REMOVED_ID) ?
	    l->state == KVERBS_LISTENER_LISTENING :
	    l->cm_id && READ_ONCE(l->removed_id) == l->cm_id) {
		WRITE_ONCE(l->removed_id, NULL);
		id = l->cm_id;
		l->cm_id = NULL;
		l->state = KVERBS_LISTENER_DORMANT;
	}
	mutex_unlock(&l->lock);
	if (!id)
		return;
	/* rdma_cm's device removal waits for this. */
	rdma_destroy_id(id);

	mutex_lock(&kverbs_listeners_lock);
	mutex_lock(&l->lock);
	dormant = l->state == KVERBS_LISTENER_DORMANT;
	if (dormant)
		list_add_tail(&l->dormant_node, &kverbs_dormant);
	mutex_unlock(&l->lock);
	mutex_unlock(&kverbs_listeners_lock);
	if (dormant)
		trace_kverbs_listener_dormant(l, 0);
	/* A device may have come back already. */
	kverbs_listeners_device_added();
	kverbs_dom_log(info, l->dom,
		       "listener on %pISpc lost its device; listening again when one is added\n",
		       &l->addr);
}

static void kverbs_relisten_work(struct work_struct *work)
{
	struct kverbs_listener *l, *tmp;
	struct rdma_cm_id *id;
	bool left;

	/* The dormant list lock keeps each listener alive (see _free()). */
	mutex_lock(&kverbs_listeners_lock);
	list_for_each_entry_safe(l, tmp, &kverbs_dormant, dormant_node) {
		id = kverbs_listener_new_id(l);
		if (IS_ERR(id)) {
			trace_kverbs_listener_relisten(l, PTR_ERR(id));
			continue;
		}
		kverbs_test_delay(listen);
		mutex_lock(&l->lock);
		if (l->state == KVERBS_LISTENER_DORMANT &&
		    kverbs_listener_publish(l, id)) {
			list_del_init(&l->dormant_node);
			id = NULL;
		}
		mutex_unlock(&l->lock);
		if (id) {	/* closed, or its device went away already */
			rdma_destroy_id(id);
			continue;
		}
		trace_kverbs_listener_relisten(l, 0);
		kverbs_dom_log(info, l->dom, "listener on %pISpc listening again\n", &l->addr);
	}
	left = !list_empty(&kverbs_dormant);
	if (left && kverbs_relisten_tries) {
		kverbs_relisten_tries--;
		queue_delayed_work(system_long_wq, &kverbs_relisten,
				   KVERBS_RELISTEN_INTERVAL);
	}
	mutex_unlock(&kverbs_listeners_lock);
}

/**
 * kverbs_listeners_device_added - an RDMA device appeared
 *
 * Dormant listeners try their address again, for a bounded time (the
 * new device's addresses appear after it registers).  Also called when a
 * listener goes dormant, in case its device is back already.
 *
 * Context: process.
 */
void kverbs_listeners_device_added(void)
{
	mutex_lock(&kverbs_listeners_lock);
	if (!list_empty(&kverbs_dormant)) {
		kverbs_relisten_tries = KVERBS_RELISTEN_TRIES;
		mod_delayed_work(system_long_wq, &kverbs_relisten,
				 KVERBS_RELISTEN_INTERVAL);
	}
	mutex_unlock(&kverbs_listeners_lock);
}

/**
 * kverbs_listeners_exit - module unload
 *
 * Every listener is gone (their users imported our symbols and are
 * unloaded), so only the retry work may remain.
 *
 * Context: process.
 */
void kverbs_listeners_exit(void)
{
	cancel_delayed_work_sync(&kverbs_relisten);
	WARN_ON(!list_empty(&kverbs_dormant));
}

/**
 * kverbs_listen - accept connections on an address
 * @dom: domain of accepted endpoints
 * @addr: local address with port; the wildcard address listens on every
 *	device
 *
 * Accepted endpoints belong to @dom; the user sees them through
 * @connected, @recv and @disconnected.  A listener on a specific address
 * survives the removal of its device: it stops accepting, and listens
 * again when a device with that address is added.
 *
 * Context: process; may sleep.
 * Return: the listener, or ERR_PTR: -EINVAL (no or unsupported address),
 * -EADDRINUSE, -EADDRNOTAVAIL (no device has the address, or its device
 * went away as listening started), -ESHUTDOWN (domain being destroyed),
 * -ENOMEM, or an rdma_cm error.
 */
struct kverbs_listener *kverbs_listen(struct kverbs_domain *dom,
				      const struct sockaddr *addr)
{
	struct kverbs_listener *l;
	struct rdma_cm_id *id;
	bool published;
	int ret;

	might_sleep();
	if (!addr || (addr->sa_family != AF_INET &&
		      addr->sa_family != AF_INET6))
		return ERR_PTR(-EINVAL);
	l = kzalloc(sizeof(*l), GFP_KERNEL);
	if (!l)
		return ERR_PTR(-ENOMEM);
	l->dom = dom;
	mutex_init(&l->lock);
	INIT_WORK(&l->removal_work, kverbs_listener_removal_work);
	INIT_LIST_HEAD(&l->dormant_node);
	memcpy(&l->addr, addr, addr->sa_family == AF_INET ?
	       sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));

	l->state = KVERBS_LISTENER_CLOSED;
	id = kverbs_listener_new_id(l);
	if (IS_ERR(id)) {
		ret = PTR_ERR(id);
		/* A DEVICE_REMOVAL between bind and listen queued this. */
		cancel_work_sync(&l->removal_work);
		goto out_free;
	}
	kverbs_test_delay(listen);
	mutex_lock(&l->lock);
	published = kverbs_listener_publish(l, id);
	mutex_unlock(&l->lock);
	if (!published) {
		/* The address's device went away as we started listening. */
		rdma_destroy_id(id);
		cancel_work_sync(&l->removal_work);
		ret = -EADDRNOTAVAIL;
		goto out_free;
	}

	mutex_lock(&dom->lock);
	if (dom->dying) {
		mutex_unlock(&dom->lock);
		kverbs_listener_free(l);
		return ERR_PTR(-ESHUTDOWN);
	}
	list_add_tail(&l->dom_node, &dom->listeners);
	mutex_unlock(&dom->lock);
	return l;

out_free:
	kfree(l);
	return ERR_PTR(ret);
}
EXPORT_SYMBOL_NS_GPL(kverbs_listen, KVERBS_NS);
ALLOW_ERROR_INJECTION(kverbs_listen, ERRNO);

/**
 * kverbs_listener_free - stop a listener in any state and free it
 * @l: listener, already off its domain's list
 *
 * The one destroyer of listeners, for kverbs_listener_destroy() and
 * kverbs_domain_destroy().  rdma_destroy_id() waits for a running CM
 * handler, so no accept starts after it; a removal the handler queued is
 * cancelled after it.
 *
 * Context: process; may sleep.
 */
void kverbs_listener_free(struct kverbs_listener *l)
{
	struct rdma_cm_id *id;

	mutex_lock(&kverbs_listeners_lock);
	mutex_lock(&l->lock);
	id = l->cm_id;
	l->cm_id = NULL;
	l->state = KVERBS_LISTENER_CLOSED;
	list_del_init(&l->dormant_node);
	mutex_unlock(&l->lock);
	mutex_unlock(&kverbs_listeners_lock);

	if (id)
		rdma_destroy_id(id);
	cancel_work_sync(&l->removal_work);
	kfree(l);
}

/**
 * kverbs_listener_destroy - stop accepting
 * @l: listener
 *
 * Endpoints already accepted stay; they go with their domain.
 *
 * Context: process; may sleep.
 */
void kverbs_listener_destroy(struct kverbs_listener *l)
{
	struct kverbs_domain *dom = l->dom;

	might_sleep();
	mutex_lock(&dom->lock);
	list_del(&l->dom_node);
	mutex_unlock(&dom->lock);
	kverbs_listener_free(l);
}
EXPORT_SYMBOL_NS_GPL(kverbs_listener_destroy, KVERBS_NS);

/**
 * kverbs_listener_state_str - a listener's state for debugfs
 * @l: listener
 *
 * Context: process (takes the listener's lock).
 * Return: a static string.
 */
const char *kverbs_listener_state_str(struct kverbs_listener *l)
{
	static const char * const names[] = {
		[KVERBS_LISTENER_LISTENING] = "listening",
		[KVERBS_LISTENER_DORMANT] = "dormant (no device)",
		[KVERBS_LISTENER_CLOSED] = "closed",
	};
	enum kverbs_listener_state s;

	mutex_lock(&l->lock);
	s = l->state;
	mutex_unlock(&l->lock);
	return names[s];
}
