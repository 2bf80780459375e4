// SPDX-License-Identifier: GPL-2.0-only
/*
 * Domains: a protection domain, one completion queue shared by every
 * endpoint, one set of callbacks, and two workqueues: @wq for deferred
 * message handling, @down_wq for endpoint teardowns (which flush @wq).
 *
 * A domain binds to a device lazily, when its first endpoint resolves a
 * route or accepts a connection, because rdma_cm picks the device from the
 * address.  It unbinds on device removal or destroy; it may then bind again,
 * so a domain survives a device that goes away and comes back.
 */
#include <linux/slab.h>
#include <linux/string.h>

#include "kverbs-pri.h"

/*
 * The last reference may go in softirq (a kept receive released, a send
 * reclaimed) or in a work item of one of the domain's own workqueues (a
 * teardown), where destroy_workqueue() must not run: free from kverbs_wq
 * instead,
 * which module exit drains.
 */
static void kverbs_domain_free_work(struct work_struct *work)
{
	struct kverbs_domain *dom = container_of(work, struct kverbs_domain,
						 free_work);

	/* @wq's handlers may queue teardowns: it goes first. */
	destroy_workqueue(dom->wq);
	destroy_workqueue(dom->down_wq);
	kverbs_auth_free(dom);
	kfree(dom);
}

static void kverbs_domain_release(struct kref *ref)
{
	struct kverbs_domain *dom = container_of(ref, struct kverbs_domain,
						 ref);

	WARN_ON(dom->kdev);
	WARN_ON(!list_empty(&dom->eps));
	INIT_WORK(&dom->free_work, kverbs_domain_free_work);
	queue_work(kverbs_wq, &dom->free_work);
}

void kverbs_domain_get(struct kverbs_domain *dom)
{
	kref_get(&dom->ref);
}

void kverbs_domain_put(struct kverbs_domain *dom)
{
	kref_put(&dom->ref, kverbs_domain_release);
}

/* For a domain created without connection callbacks. */
static const struct kverbs_domain_ops kverbs_no_ops;

/**
 * kverbs_domain_create - create a domain
 * @attr: parameters, copied
 *
 * Context: process; may sleep.  With @attr->auth_key, the calling task's
 * keyrings are searched for the key.
 * Return: the domain, or ERR_PTR(-EINVAL) for a missing callback (both
 * message callbacks are required) or an out-of-bounds parameter (a key
 * shorter than 16 or longer than 64 bytes included), ERR_PTR(-ENOMEM),
 * ERR_PTR(-ENOKEY) (no logon key of that description the caller may
 * search), -EKEYREVOKED, -EKEYEXPIRED, or the crypto API's error for a
 * kernel without hmac(sha256).
 */
struct kverbs_domain *kverbs_domain_create(const struct kverbs_domain_attr *attr)
{
	struct kverbs_domain *dom;
	int ret;

	might_sleep();
	if (!attr || !attr->node_id ||
	    attr->depth < KVERBS_CM_MIN_DEPTH ||
	    attr->depth > KVERBS_CM_MAX_DEPTH ||
	    attr->max_msg < KVERBS_CM_MIN_MSG ||
	    attr->max_msg > KVERBS_CM_MAX_MSG || !attr->max_eps ||
	    attr->write_pages > KVERBS_PAGES_MAX_SGE ||
	    attr->read_pages > KVERBS_PAGES_MAX_SGE ||
	    attr->max_accepted > attr->max_eps)
		return ERR_PTR(-EINVAL);

	dom = kzalloc(sizeof(*dom), GFP_KERNEL);
	if (!dom)
		return ERR_PTR(-ENOMEM);
	kref_init(&dom->ref);
	mutex_init(&dom->lock);
	mutex_init(&dom->unbind_lock);
	INIT_LIST_HEAD(&dom->eps);
	INIT_LIST_HEAD(&dom->listeners);
	INIT_LIST_HEAD(&dom->regions);
	INIT_LIST_HEAD(&dom->dev_node);
	strscpy(dom->name, attr->name ?: "anon", sizeof(dom->name));
	dom->ops = attr->ops ?: &kverbs_no_ops;
	dom->priv = attr->priv;
	dom->node_id = attr->node_id;
	dom->depth = attr->depth;
	dom->max_msg = attr->max_msg;
	dom->write_pages = attr->write_pages;
	dom->read_pages = attr->read_pages;
	spin_lock_init(&dom->poll_lock);

	ret = kverbs_upper->domain_init(dom, attr, &dom->budget);
	if (ret) {
		kfree(dom);
		return ERR_PTR(ret);
	}
	kverbs_ep_budget(attr->depth, dom->budget.upper_send,
			 dom->budget.upper_recv, &dom->budget);
	dom->max_eps = attr->max_eps;
	dom->max_accepted = attr->max_accepted ?: attr->max_eps;
	dom->max_per_host = attr->max_per_host;
	ret = kverbs_auth_init(dom, attr->auth_key);
	if (ret) {
		kverbs_auth_free(dom);
		kfree(dom);
		return ERR_PTR(ret);
	}

	/*
	 * Per-domain, not global: one domain's teardown or deferred work
	 * never waits behind another's.
	 */
	dom->wq = alloc_workqueue("kverbs-%s", WQ_HIGHPRI | WQ_MEM_RECLAIM, 0,
				  dom->name);
	dom->down_wq = alloc_workqueue("kvdown-%s", WQ_MEM_RECLAIM, 0,
				       dom->name);
	if (!dom->wq || !dom->down_wq) {
		if (dom->wq)
			destroy_workqueue(dom->wq);
		if (dom->down_wq)
			destroy_workqueue(dom->down_wq);
		kverbs_auth_free(dom);
		kfree(dom);
		return ERR_PTR(-ENOMEM);
	}
	kverbs_debugfs_add_domain(dom);
	return dom;
}
EXPORT_SYMBOL_NS_GPL(kverbs_domain_create, KVERBS_NS);
ALLOW_ERROR_INJECTION(kverbs_domain_create, ERRNO);

/**
 * kverbs_domain_priv - the @priv given at creation
 * @dom: domain
 *
 * Context: any.
 * Return: the private pointer.
 */
void *kverbs_domain_priv(const struct kverbs_domain *dom)
{
	return dom->priv;
}
EXPORT_SYMBOL_NS_GPL(kverbs_domain_priv, KVERBS_NS);

/*
 * Bind @dom to @ibdev if unbound.  Called with dom->lock held.  Returns
 * -EXDEV when bound to another device, -ENODEV when @ibdev is going away
 * or the domain is unbinding from it, -ESHUTDOWN when the domain is being
 * destroyed.
 */
int kverbs_domain_bind(struct kverbs_domain *dom, struct ib_device *ibdev)
{
	const struct kverbs_ep_budget *b = &dom->budget;
	struct kverbs_device *kdev;
	unsigned int cq_size, send_wr;
	bool iwarp;
	int ret;

	lockdep_assert_held(&dom->lock);
	if (dom->dying)
		return -ESHUTDOWN;
	/* Nothing may use the CQ that an unbind is about to free. */
	if (dom->unbinding)
		return -ENODEV;
	if (dom->kdev)
		return dom->kdev->ibdev == ibdev ? 0 : -EXDEV;

	kdev = kverbs_device_get(ibdev);
	if (!kdev)
		return -ENODEV;

	/*
	 * iWARP: rdma_rw's WRs too (struct kverbs_ep_budget, 6), which
	 * ib_create_qp() would otherwise clamp silently to max_qp_wr.
	 */
	iwarp = rdma_protocol_iwarp(ibdev, rdma_start_port(ibdev));
	send_wr = b->send_wr + (iwarp ? 3 * b->nops : 0);
	dom->ep_cqes = b->cqes + (iwarp ? b->rw_cqes : 0);

	/* The device's limits clamp the CQ, and refuse a depth too deep. */
	if (send_wr > ibdev->attrs.max_qp_wr ||
	    b->recv_wr > ibdev->attrs.max_qp_wr ||
	    dom->ep_cqes > ibdev->attrs.max_cqe) {
		kverbs_dom_log(warn, dom,
			       "depth %u needs %u/%u WRs and %u CQEs, %s allows %d WRs and %d CQEs\n",
			       dom->depth, send_wr, b->recv_wr, dom->ep_cqes,
			       dev_name(&ibdev->dev), ibdev->attrs.max_qp_wr,
			       ibdev->attrs.max_cqe);
		ret = -EINVAL;
		goto out_put;
	}
	cq_size = min_t(unsigned int, dom->max_eps * dom->ep_cqes,
			ibdev->attrs.max_cqe);

	ret = kverbs_domain_map_regions(dom, ibdev);
	if (ret)
		goto out_put;
	dom->cq = __ib_alloc_cq_any(ibdev, dom, cq_size, IB_POLL_SOFTIRQ,
				    dom->name);
	if (IS_ERR(dom->cq)) {
		ret = PTR_ERR(dom->cq);
		goto out_regions;
	}
	ret = kverbs_device_attach_domain(kdev, dom);
	if (ret)
		goto out_cq;
	dom->kdev = kdev;
	dom->cq_used = 0;
	dom->cq_bound = cq_size;
	spin_lock_bh(&dom->poll_lock);
	dom->poll_cq = dom->cq;
	spin_unlock_bh(&dom->poll_lock);
	kverbs_dom_log(info, dom, "bound to %s\n", dev_name(&ibdev->dev));
	return 0;

out_cq:
	ib_free_cq(dom->cq);
out_regions:
	kverbs_domain_unmap_regions(dom, ibdev);
out_put:
	dom->cq = NULL;
	kverbs_device_put(kdev);
	return ret;
}
ALLOW_ERROR_INJECTION(kverbs_domain_bind, ERRNO);

/*
 * Tear down every endpoint that uses the domain's device resources, then
 * unmap the regions, free the CQ and drop the device.  Endpoints still
 * resolving an address hold no device resources; they find the domain
 * unbinding when they get to kverbs_domain_bind() and fail.
 *
 * @dom->unbinding stays set from the first critical section to the last,
 * across the flush that drops dom->lock, so no endpoint can reserve the
 * dying CQ in between.  @unbind_lock makes concurrent unbinds (device
 * removal and kverbs_domain_destroy()) run one after the other.
 *
 * Context: process; not from the domain's workqueue (it is flushed here).
 */
void kverbs_domain_unbind(struct kverbs_domain *dom)
{
	struct kverbs_device *kdev;
	struct kverbs_ep *ep;

	mutex_lock(&dom->unbind_lock);
	mutex_lock(&dom->lock);
	kdev = dom->kdev;
	if (!kdev) {
		mutex_unlock(&dom->lock);
		goto out;
	}
	dom->unbinding = true;
	list_for_each_entry(ep, &dom->eps, dom_node)
		if (ep->cq_reserved)
			kverbs_ep_fail(ep, -ENODEV);
	mutex_unlock(&dom->lock);

	/*
	 * Teardowns run on down_wq (on wq with a test build's undo); once
	 * both are flushed, no endpoint uses the CQ.
	 */
	flush_workqueue(dom->down_wq);
	flush_workqueue(dom->wq);
	kverbs_test_delay(unbind);

	mutex_lock(&dom->lock);
	WARN_ON(dom->cq_used);
	kverbs_domain_unmap_regions(dom, kdev->ibdev);
	spin_lock_bh(&dom->poll_lock);
	dom->poll_cq = NULL;
	spin_unlock_bh(&dom->poll_lock);
	ib_free_cq(dom->cq);
	dom->cq = NULL;
	dom->kdev = NULL;
	dom->unbinding = false;
	mutex_unlock(&dom->lock);

	kverbs_device_detach_domain(kdev, dom);
	kverbs_dom_log(info, dom, "unbound from %s\n",
		       dev_name(&kdev->ibdev->dev));
	kverbs_device_put(kdev);
out:
	mutex_unlock(&dom->unbind_lock);
}

/**
 * kverbs_domain_destroy - destroy a domain and everything in it
 * @dom: domain
 *
 * Destroys the listeners, tears down every endpoint (accepted ones get
 * their @disconnected callback), frees the device resources and drops the
 * caller's reference.  Endpoints from kverbs_ep_connect() are torn down
 * too but stay allocated until their owner calls kverbs_ep_close().
 *
 * Context: process; may sleep.  Not from a domain callback.
 */
void kverbs_domain_destroy(struct kverbs_domain *dom)
{
	struct kverbs_listener *l, *tmp;
	struct kverbs_ep *ep;
	LIST_HEAD(listeners);

	might_sleep();
	mutex_lock(&dom->lock);
	dom->dying = true;
	list_splice_init(&dom->listeners, &listeners);
	mutex_unlock(&dom->lock);

	/* No new accepts once they are gone. */
	list_for_each_entry_safe(l, tmp, &listeners, dom_node)
		kverbs_listener_free(l);

	mutex_lock(&dom->lock);
	list_for_each_entry(ep, &dom->eps, dom_node)
		kverbs_ep_fail(ep, -ESHUTDOWN);
	mutex_unlock(&dom->lock);
	flush_workqueue(dom->down_wq);
	flush_workqueue(dom->wq);

	kverbs_domain_unbind(dom);
	kverbs_debugfs_remove_domain(dom);
	kverbs_domain_put(dom);
}
EXPORT_SYMBOL_NS_GPL(kverbs_domain_destroy, KVERBS_NS);
