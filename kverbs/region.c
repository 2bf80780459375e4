// SPDX-License-Identifier: GPL-2.0-only
/*
 * Regions: pages of ours that belong to a domain and are mapped for DMA
 * on its device, the local side of one-sided operations on any of its
 * endpoints and what grants (grant.c) make reachable by peers.
 *
 * A region is mapped exactly while its domain is bound to a device: at
 * creation if bound, else when the domain binds; a device removal (domain
 * unbind) unmaps it after every endpoint of the domain is torn down, and
 * the next bind maps it again.  Mapping is per page, so a page's DMA
 * address is found in O(1) by the operations of any context.
 *
 * The local side of an operation uses the endpoint's local DMA key: it
 * needs no registration, and nothing about it leaves the node.
 *
 * Locking: @dom_node, @grants and @mapped are under dom->lock.  @dma is
 * read without it by operations: an operation is posted only on a
 * connected endpoint, and unbind unmaps only after it tore down (and
 * drained) every endpoint, so a posted operation never uses a stale
 * address; one built from a stale address is refused at the post.
 */
#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/slab.h>

#include "kverbs-pri.h"

static void kverbs_region_unmap(struct kverbs_region *r,
				struct ib_device *dev, unsigned long n)
{
	while (n--)
		ib_dma_unmap_page(dev, r->dma[n], PAGE_SIZE, DMA_BIDIRECTIONAL);
}

/* Map @r on the domain's device; under dom->lock, domain being bound. */
static int kverbs_region_map(struct kverbs_region *r, struct ib_device *dev)
{
	unsigned long i;

	lockdep_assert_held(&r->dom->lock);
	for (i = 0; i < r->npages; i++) {
		r->dma[i] = ib_dma_map_page(dev, r->pages[i], 0, PAGE_SIZE,
					    DMA_BIDIRECTIONAL);
		if (ib_dma_mapping_error(dev, r->dma[i])) {
			kverbs_region_unmap(r, dev, i);
			return -ENOMEM;
		}
		/*
		 * Mapped for its whole life and never synced: a page the
		 * platform bounces (swiotlb) or a non-coherent device would
		 * show the CPU and the peer stale data.  Refused instead.
		 */
		if (!ib_uses_virt_dma(dev) &&
		    dma_need_sync(dev->dma_device, r->dma[i])) {
			kverbs_region_unmap(r, dev, i + 1);
			dev_warn_once(&dev->dev, "kverbs: regions need DMA that is coherent and not bounced\n");
			return -EOPNOTSUPP;
		}
		if (!(i % 1024))
			cond_resched();
	}
	WRITE_ONCE(r->mapped, true);
	return 0;
}

/**
 * kverbs_domain_map_regions - map every region of a domain being bound
 * @dom: domain
 * @dev: its new device
 *
 * Context: process, dom->lock held.
 * Return: 0, or with nothing mapped -ENOMEM or -EOPNOTSUPP (the device's
 * DMA needs syncing: bounced or not coherent).
 */
int kverbs_domain_map_regions(struct kverbs_domain *dom,
			      struct ib_device *dev)
{
	struct kverbs_region *r;
	int ret;

	lockdep_assert_held(&dom->lock);
	list_for_each_entry(r, &dom->regions, dom_node) {
		ret = kverbs_region_map(r, dev);
		if (ret)
			goto undo;
	}
	return 0;
undo:
	list_for_each_entry_continue_reverse(r, &dom->regions, dom_node) {
		kverbs_region_unmap(r, dev, r->npages);
		WRITE_ONCE(r->mapped, false);
	}
	return ret;
}
ALLOW_ERROR_INJECTION(kverbs_domain_map_regions, ERRNO);

/**
 * kverbs_domain_unmap_regions - unmap every region of a domain being unbound
 * @dom: domain whose endpoints are all torn down
 * @dev: the device it was bound to
 *
 * Context: process, dom->lock held.
 */
void kverbs_domain_unmap_regions(struct kverbs_domain *dom,
				 struct ib_device *dev)
{
	struct kverbs_region *r;

	lockdep_assert_held(&dom->lock);
	list_for_each_entry(r, &dom->regions, dom_node) {
		if (!r->mapped)
			continue;
		WRITE_ONCE(r->mapped, false);
		kverbs_region_unmap(r, dev, r->npages);
	}
}

/**
 * kverbs_region_create - make pages a region of a domain
 * @dom: domain
 * @pages: the pages, in order; they must stay allocated until
 *	kverbs_region_destroy() returns.  The array is copied.
 * @npages: how many, at least 1; a region may be as large as memory
 *	allows (grants split it into extents, see kverbs_grant_extent())
 *
 * The region is the local side of one-sided operations on any endpoint of
 * @dom at once.  Peers reach it only through a grant,
 * kverbs_region_grant().
 *
 * Context: process; sleeps.
 * Return: the region, or ERR_PTR: -EINVAL, -ENOMEM, -EOPNOTSUPP (the
 * domain's device needs its DMA synced: bounced or not coherent),
 * -ESHUTDOWN (the domain is being destroyed).
 */
struct kverbs_region *kverbs_region_create(struct kverbs_domain *dom,
					   struct page **pages,
					   unsigned long npages)
{
	struct kverbs_region *r;
	int ret = -ENOMEM;

	might_sleep();
	if (!pages || !npages || npages > INT_MAX / sizeof(dma_addr_t))
		return ERR_PTR(-EINVAL);
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return ERR_PTR(-ENOMEM);
	r->pages = kvmalloc_array(npages, sizeof(*r->pages), GFP_KERNEL);
	r->dma = kvmalloc_array(npages, sizeof(*r->dma), GFP_KERNEL);
	if (!r->pages || !r->dma)
		goto out_free;
	memcpy(r->pages, pages, npages * sizeof(*pages));
	r->dom = dom;
	r->npages = npages;
	r->len = (u64)npages << PAGE_SHIFT;
	INIT_LIST_HEAD(&r->grants);

	mutex_lock(&dom->lock);
	ret = dom->dying ? -ESHUTDOWN : 0;
	if (!ret && dom->kdev)
		ret = kverbs_region_map(r, dom->kdev->ibdev);
	if (ret) {
		mutex_unlock(&dom->lock);
		goto out_free;
	}
	kverbs_domain_get(dom);
	list_add_tail(&r->dom_node, &dom->regions);
	mutex_unlock(&dom->lock);
	return r;

out_free:
	kvfree(r->dma);
	kvfree(r->pages);
	kfree(r);
	return ERR_PTR(ret);
}
EXPORT_SYMBOL_NS_GPL(kverbs_region_create, KVERBS_NS);
ALLOW_ERROR_INJECTION(kverbs_region_create, ERRNO);

/**
 * kverbs_region_destroy - revoke every grant of a region and free it
 * @r: region
 *
 * Grants of @r still live are revoked and freed here: their pointers are
 * invalid afterwards.  No one-sided operation using @r as its local side
 * may still be outstanding: wait for its @done, or close the endpoint (an
 * operation posted without @done is only known complete after a later
 * signaled one, or the endpoint's teardown).  Not concurrently with
 * kverbs_region_grant() on @r.
 *
 * Context: process; sleeps.
 */
void kverbs_region_destroy(struct kverbs_region *r)
{
	struct kverbs_domain *dom = r->dom;
	struct kverbs_grant *g;

	might_sleep();
	for (;;) {
		mutex_lock(&dom->lock);
		g = list_first_entry_or_null(&r->grants, struct kverbs_grant,
					     region_node);
		mutex_unlock(&dom->lock);
		if (!g)
			break;
		kverbs_grant_revoke(g);
	}
	mutex_lock(&dom->lock);
	list_del(&r->dom_node);
	if (r->mapped)
		kverbs_region_unmap(r, dom->kdev->ibdev, r->npages);
	mutex_unlock(&dom->lock);
	kvfree(r->dma);
	kvfree(r->pages);
	kfree(r);
	kverbs_domain_put(dom);
}
EXPORT_SYMBOL_NS_GPL(kverbs_region_destroy, KVERBS_NS);

/**
 * kverbs_region_len - size of a region
 * @r: region
 *
 * Context: any.
 * Return: bytes.
 */
u64 kverbs_region_len(const struct kverbs_region *r)
{
	return r->len;
}
EXPORT_SYMBOL_NS_GPL(kverbs_region_len, KVERBS_NS);

/**
 * kverbs_region_range - may @ep's operation use @len bytes of @r at @off?
 * @r: the local region
 * @ep: the endpoint the operation goes on
 * @off: first byte
 * @len: bytes
 *
 * Context: any.
 * Return: 0, -EINVAL (another domain's region, empty or out of bounds),
 * or -ENODEV (not mapped: the domain has no device).
 */
int kverbs_region_range(const struct kverbs_region *r,
			const struct kverbs_ep *ep, u64 off, u32 len)
{
	if (r->dom != ep->dom || !len || off > r->len || len > r->len - off)
		return -EINVAL;
	if (!READ_ONCE(r->mapped))
		return -ENODEV;
	return 0;
}

/**
 * kverbs_region_local - the local SGEs of @len bytes at @off in @r
 * @r: region
 * @ep: endpoint the operation goes out on
 * @off: offset in @r
 * @len: bytes, at least 1
 * @sge: room for @max entries
 * @max: SGEs the work request may carry (@ep->max_sge, or max_sge_rd for
 *	an RDMA READ)
 *
 * Physically contiguous pages share one SGE.
 *
 * Context: any.
 * Return: the number of SGEs, -EINVAL (another domain's region, out of
 * bounds, more runs than @max), or -ENODEV (not mapped: the
 * domain has no device).
 */
int kverbs_region_local(const struct kverbs_region *r,
			const struct kverbs_ep *ep, u64 off, u32 len,
			struct ib_sge *sge, int max)
{
	unsigned long pg = off >> PAGE_SHIFT;
	u32 pgoff = offset_in_page(off);
	int n = kverbs_region_range(r, ep, off, len);

	if (n)
		return n;
	while (len) {
		u32 chunk = min_t(u32, len, PAGE_SIZE - pgoff);
		u64 addr = r->dma[pg] + pgoff;

		if (n && sge[n - 1].addr + sge[n - 1].length == addr) {
			sge[n - 1].length += chunk;
		} else {
			if (n == max)
				return -EINVAL;
			sge[n].addr = addr;
			sge[n].length = chunk;
			sge[n].lkey = ep->lkey;
			n++;
		}
		len -= chunk;
		pg++;
		pgoff = 0;
	}
	return n;
}
