// SPDX-License-Identifier: GPL-2.0-only
/*
 * Registered regions: pages a peer may read, write or update atomically
 * through a per-region rkey.
 *
 * Registration is fast registration (FRWR): an MR from ib_alloc_mr(),
 * mapped with ib_map_mr_sg() and made valid by an IB_WR_REG_MR posted on an
 * endpoint of the domain; its rkey is valid on every QP of the domain's PD.
 * Release posts IB_WR_LOCAL_INV when the endpoint is still up, then
 * deregisters the MR, so the rkey is dead before the pages can be reused.
 * Never the PD's global rkey.
 *
 * Lifetime: a region holds a reference to its endpoint and sits on its
 * domain's list; a device removal (domain unbind) deregisters every region
 * of the domain, after which the region only waits to be freed.
 */
#include <linux/scatterlist.h>
#include <linux/slab.h>

#include "kverbs-pri.h"

struct kverbs_region {
	struct kverbs_ep *ep;
	struct kverbs_domain *dom;
	struct ib_mr *mr;
	struct sg_table sgt;
	int nents;
	u64 len;
	u32 access;
	bool dead;		/* deregistered by an unbind; under dom->lock */
	struct list_head dom_node;
	struct completion wr_done;
	int wr_status;
};

static void kverbs_region_wr_done(void *ctx, int status)
{
	struct kverbs_region *r = ctx;

	r->wr_status = status;
	complete(&r->wr_done);
}

/* Post a REG_MR or LOCAL_INV for @r and wait for it. */
static int kverbs_region_post(struct kverbs_region *r, struct ib_send_wr *wr)
{
	struct kverbs_ep *ep = r->ep;
	struct kverbs_op *op;
	int ret;

	op = kverbs_op_get(ep, 0);
	if (IS_ERR(op))
		return PTR_ERR(op);
	op->done = kverbs_region_wr_done;
	op->ctx = r;
	reinit_completion(&r->wr_done);
	ret = kverbs_op_post(ep, op, wr);
	if (ret) {
		kverbs_op_put(ep, op);
		return ret;
	}
	/* Bounded: a completion or, once the endpoint fails, a flush. */
	wait_for_completion(&r->wr_done);
	return r->wr_status;
}

static int kverbs_ib_access(u32 access)
{
	int a = IB_ACCESS_LOCAL_WRITE;

	if (access & KVERBS_ACCESS_REMOTE_READ)
		a |= IB_ACCESS_REMOTE_READ;
	if (access & KVERBS_ACCESS_REMOTE_WRITE)
		a |= IB_ACCESS_REMOTE_WRITE;
	if (access & KVERBS_ACCESS_REMOTE_ATOMIC)
		a |= IB_ACCESS_REMOTE_ATOMIC;
	return a;
}

/* Undo the mapping and the MR; under dom->lock, domain bound. */
static void kverbs_region_release_hw(struct kverbs_region *r)
{
	struct kverbs_domain *dom = r->dom;

	lockdep_assert_held(&dom->lock);
	if (r->mr) {
		ib_dereg_mr(r->mr);
		r->mr = NULL;
	}
	if (r->nents) {
		ib_dma_unmap_sg(dom->pd->device, r->sgt.sgl, r->sgt.orig_nents,
				DMA_BIDIRECTIONAL);
		r->nents = 0;
	}
}

/**
 * kverbs_region_register - register pages for remote access
 * @ep: connected endpoint of the domain; it posts the registration
 * @pages: the pages, in order; they must stay allocated until
 *	kverbs_region_unregister() returns
 * @npages: how many (1..KVERBS_REGION_MAX_PAGES)
 * @access: KVERBS_ACCESS_* flags for the peer
 *
 * kverbs_region_remote() describes it for a peer: an rkey and a length;
 * the peer addresses it by offset (a zero-based registration), so no
 * address of ours leaves the node.
 * The region is also usable as the local side of RDMA operations.
 *
 * Context: process; sleeps.
 * Return: the region, or ERR_PTR: -EINVAL, -ENOMEM, -ENOTCONN or the
 * endpoint's error, -ENODEV (domain not bound), -EINTR, or a provider
 * error.
 */
struct kverbs_region *kverbs_region_register(struct kverbs_ep *ep,
					     struct page **pages,
					     unsigned int npages, u32 access)
{
	struct kverbs_domain *dom = ep->dom;
	struct ib_reg_wr reg = {};
	struct kverbs_region *r;
	int ret, n;

	might_sleep();
	if (!pages || !npages || npages > KVERBS_REGION_MAX_PAGES ||
	    (access & ~KVERBS_ACCESS_ALL))
		return ERR_PTR(-EINVAL);
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return ERR_PTR(-ENOMEM);
	init_completion(&r->wr_done);
	INIT_LIST_HEAD(&r->dom_node);
	r->ep = ep;
	r->dom = dom;
	r->access = access;
	r->len = (u64)npages << PAGE_SHIFT;
	ret = sg_alloc_table_from_pages(&r->sgt, pages, npages, 0, r->len,
					GFP_KERNEL);
	if (ret)
		goto out_free;

	mutex_lock(&dom->lock);
	if (!dom->kdev || READ_ONCE(ep->state) != KVERBS_EP_CONNECTED) {
		mutex_unlock(&dom->lock);
		ret = dom->kdev ? -ENOTCONN : -ENODEV;
		goto out_sgt;
	}
	n = ib_dma_map_sg(dom->pd->device, r->sgt.sgl, r->sgt.orig_nents,
			  DMA_BIDIRECTIONAL);
	if (!n) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	r->nents = n;
	r->mr = ib_alloc_mr(dom->pd, IB_MR_TYPE_MEM_REG, npages);
	if (IS_ERR(r->mr)) {
		ret = PTR_ERR(r->mr);
		r->mr = NULL;
		goto out_unlock;
	}
	/* Zero-based: the peer addresses the region by offset. */
	ret = ib_map_mr_sg_zbva(r->mr, r->sgt.sgl, n, NULL, PAGE_SIZE);
	if (ret != n) {
		ret = ret < 0 ? ret : -EINVAL;
		goto out_unlock;
	}
	ib_update_fast_reg_key(r->mr, ib_inc_rkey(r->mr->rkey));
	list_add_tail(&r->dom_node, &dom->regions);
	kref_get(&ep->ref);
	mutex_unlock(&dom->lock);

	reg.wr.opcode = IB_WR_REG_MR;
	reg.mr = r->mr;
	reg.key = r->mr->rkey;
	reg.access = kverbs_ib_access(access);
	ret = kverbs_region_post(r, &reg.wr);
	if (ret) {
		kverbs_region_unregister(r);
		return ERR_PTR(ret);
	}
	return r;

out_unlock:
	kverbs_region_release_hw(r);
	mutex_unlock(&dom->lock);
out_sgt:
	sg_free_table(&r->sgt);
out_free:
	kfree(r);
	return ERR_PTR(ret);
}
EXPORT_SYMBOL_NS_GPL(kverbs_region_register, KVERBS_NS);

/**
 * kverbs_region_unregister - invalidate and release a region
 * @r: region
 *
 * After this returns no peer can reach the pages through @r's rkey.
 *
 * Context: process; sleeps.
 */
void kverbs_region_unregister(struct kverbs_region *r)
{
	struct kverbs_domain *dom = r->dom;
	struct ib_send_wr inv = {};

	might_sleep();
	if (READ_ONCE(r->ep->state) == KVERBS_EP_CONNECTED && r->mr) {
		inv.opcode = IB_WR_LOCAL_INV;
		inv.ex.invalidate_rkey = r->mr->rkey;
		/* If this fails the endpoint is going down; dereg still kills
		 * the rkey.
		 */
		kverbs_region_post(r, &inv);
	}
	mutex_lock(&dom->lock);
	if (!r->dead) {
		list_del(&r->dom_node);
		kverbs_region_release_hw(r);
	}
	mutex_unlock(&dom->lock);
	sg_free_table(&r->sgt);
	kverbs_ep_put(r->ep);
	kfree(r);
}
EXPORT_SYMBOL_NS_GPL(kverbs_region_unregister, KVERBS_NS);

/**
 * kverbs_domain_drop_regions - deregister every region of a domain
 * @dom: domain being unbound, its endpoints torn down
 *
 * Context: process, dom->lock held.
 */
void kverbs_domain_drop_regions(struct kverbs_domain *dom)
{
	struct kverbs_region *r, *tmp;

	lockdep_assert_held(&dom->lock);
	list_for_each_entry_safe(r, tmp, &dom->regions, dom_node) {
		kverbs_region_release_hw(r);
		list_del_init(&r->dom_node);
		r->dead = true;
	}
}

/**
 * kverbs_region_remote - what a peer needs to reach the region
 * @r: region
 * @remote: filled with offset 0, the region's length and its rkey
 *
 * Send it to the peer in a message; it holds no address of ours.
 *
 * Context: any.
 */
void kverbs_region_remote(const struct kverbs_region *r,
			  struct kverbs_remote *remote)
{
	remote->offset = 0;
	remote->len = r->len;
	remote->rkey = r->mr ? r->mr->rkey : 0;
	remote->reserved = 0;
}
EXPORT_SYMBOL_NS_GPL(kverbs_region_remote, KVERBS_NS);

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

/* For rdma.c: the local key and address of @off in @r, if in bounds. */
int kverbs_region_local(const struct kverbs_region *r, u64 off, u32 len,
			struct ib_sge *sge)
{
	if (!r->mr || off > r->len || len > r->len - off)
		return -EINVAL;
	sge->addr = off;	/* zero-based MR */
	sge->length = len;
	sge->lkey = r->mr->lkey;
	return 0;
}
