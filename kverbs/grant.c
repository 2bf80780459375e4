// SPDX-License-Identifier: GPL-2.0-only
/*
 * Grants: a region made reachable by the peer of one endpoint.
 *
 * An rkey is valid on every QP of its PD, and the kernel verbs have no
 * memory windows, so the scope of a key is the scope of its PD: every
 * endpoint has its own PD (connect.c), and a grant is a registration on
 * that PD.  A grant's keys therefore work on its endpoint's connection
 * and nowhere else; a peer of the same domain holding them is refused by
 * its own QP's PD check.
 *
 * Registration is fast registration (FRWR): MRs from ib_alloc_mr() on
 * the endpoint's PD, mapped with ib_map_mr_sg() and made valid by
 * IB_WR_REG_MR on the endpoint's send queue.  A device maps at most
 * attrs.max_fast_reg_page_list_len pages per MR, so a grant of a large
 * region is several MRs, each covering one extent: a power of two of
 * pages, the same for every MR of the grant.  Each MR's iova is its
 * extent's offset in the region, so a peer addresses every byte by its
 * region offset and an extent's rkey; no kernel or DMA address travels.
 * The low byte of each rkey is random.
 *
 * Revocation posts IB_WR_LOCAL_INV for every MR while the endpoint is up,
 * then deregisters; the teardown of the endpoint deregisters what is left
 * after the QP is drained and destroyed, before the PD goes.  A grant
 * holds a reference to its endpoint, so its memory outlives the
 * connection until kverbs_grant_revoke().
 *
 * Locking: @region_node, @ep_node, @dead and the MRs are under dom->lock.
 * @ent[].rkey and @extent_shift never change after creation.
 */
#include <linux/log2.h>
#include <linux/random.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>

#include "kverbs-pri.h"
#include "kverbs_trace.h"

/*
 * Pages per extent: a power of two that the device maps per MR with one
 * page to spare.  Each MR is allocated for one page more than it maps:
 * rxe before 6.4 (rxe_mr_copy()) reads the map after the last one when a
 * copy ends at the end of a map of 256 pages, and the spare page makes
 * that map exist (KASAN reports the read on 6.1 otherwise).
 *
 * Devices that map far more per MR (mlx5 says 2^32 - 1) would get one
 * gigantic MR per grant, its descriptors allocated contiguously; like
 * rdma_rw_fr_page_list_len(), extents stop at 256 pages.
 */
#define KVERBS_GRANT_MAX_PAGES	256

static unsigned int kverbs_grant_extent_pages(struct ib_device *dev,
					      unsigned long npages)
{
	u32 max = min_t(u32, dev->attrs.max_fast_reg_page_list_len,
			KVERBS_GRANT_MAX_PAGES + 1);

	max = max > 2 ? rounddown_pow_of_two(max - 1) : 1;
	if (npages < max)
		return roundup_pow_of_two(npages);
	return max;
}

/* The least the peer needs; LOCAL_WRITE only where IB requires it. */
static int kverbs_ib_access(u32 access)
{
	int a = 0;

	if (access & KVERBS_ACCESS_REMOTE_READ)
		a |= IB_ACCESS_REMOTE_READ;
	if (access & KVERBS_ACCESS_REMOTE_WRITE)
		a |= IB_ACCESS_REMOTE_WRITE;
	if (access & KVERBS_ACCESS_REMOTE_ATOMIC)
		a |= IB_ACCESS_REMOTE_ATOMIC;
	if (access & (KVERBS_ACCESS_REMOTE_WRITE | KVERBS_ACCESS_REMOTE_ATOMIC))
		a |= IB_ACCESS_LOCAL_WRITE;
	return a;
}

static void kverbs_grant_wr_done(void *ctx, int status)
{
	struct kverbs_grant *g = ctx;

	if (status)
		cmpxchg(&g->status, 0, status);
	if (atomic_dec_and_test(&g->pending))
		complete(&g->wr_done);
}

/*
 * How long a grant's registrations or invalidations may take.  They are
 * local operations, but they queue behind the endpoint's earlier WRs,
 * which a live peer acknowledges within the RC retry bound (about 4 s,
 * kverbs_conn_param()).  A completion later than this is taken as lost
 * (rxe on 6.1 with two CPUs has lost a LOCAL_INV's) or as a peer that
 * holds the queue: the endpoint is failed, its drain flushes every WR
 * still on the queue, and that flush ends the wait.
 */
#define KVERBS_LOCAL_WR_TIMEOUT	(10 * HZ)
/* rxe: a LOCAL_INV pending this long may have lost its wake-up. */
#define KVERBS_NUDGE_AFTER	(HZ / 5)

/*
 * Wait for @g's work requests, at most KVERBS_LOCAL_WR_TIMEOUT.  On rxe,
 * which can lose a fenced LOCAL_INV's wake-up (kverbs_sq_nudge()), an
 * invalidation still pending after KVERBS_NUDGE_AFTER gets a nudge, and
 * another each KVERBS_NUDGE_AFTER while none is posted, until the
 * endpoint goes down.  Context: process; sleeps (not killable: the WRs
 * name our memory).  Return: true if all completed.
 */
static bool kverbs_grant_wait(struct kverbs_grant *g, bool reg)
{
	unsigned long end = jiffies + KVERBS_LOCAL_WR_TIMEOUT;
	bool nudge = !reg && g->ep->nudge_inv &&
		     !kverbs_test_undo(KVERBS_UNDO_NUDGE);
	long left;
	int ret;

	for (;;) {
		left = (long)(end - jiffies);
		if (left <= 0)
			return completion_done(&g->wr_done);
		if (!nudge)
			return wait_for_completion_timeout(&g->wr_done, left);
		if (wait_for_completion_timeout(&g->wr_done,
						min_t(long, left,
						      KVERBS_NUDGE_AFTER)))
			return true;
		ret = kverbs_sq_nudge(g->ep);
		trace_kverbs_nudge(g->ep, g->nmr, ret);
		/* Gone down: the teardown's drain flushes what is posted. */
		nudge = ret == 0 || ret == -EBUSY || ret == -EAGAIN;
	}
}

/*
 * Post one REG_MR (@reg) or LOCAL_INV for each MR of @g and wait for them
 * all.  Bounded: each completes within KVERBS_LOCAL_WR_TIMEOUT, or the
 * endpoint fails and its teardown's drain flushes them.
 */
static int kverbs_grant_post_all(struct kverbs_grant *g, bool reg)
{
	struct kverbs_ep *ep = g->ep;
	int access = kverbs_ib_access(g->access);
	struct kverbs_op *op;
	unsigned int i;
	int ret = 0;

	g->status = 0;
	atomic_set(&g->pending, 1);
	reinit_completion(&g->wr_done);
	for (i = 0; i < g->nmr && !ret; i++) {
		struct ib_reg_wr rwr = {};
		struct ib_send_wr iwr = {};

		op = kverbs_op_get_local(ep, KVERBS_LOCAL_WR_TIMEOUT);
		if (IS_ERR(op)) {
			ret = PTR_ERR(op);
			break;
		}
		op->done = kverbs_grant_wr_done;
		op->ctx = g;
		atomic_inc(&g->pending);
		if (reg) {
			rwr.wr.opcode = IB_WR_REG_MR;
			rwr.mr = g->ent[i].mr;
			rwr.key = g->ent[i].rkey;
			rwr.access = access;
			ret = kverbs_op_post(ep, op, &rwr.wr);
		} else {
			iwr.opcode = IB_WR_LOCAL_INV;
			iwr.ex.invalidate_rkey = g->ent[i].rkey;
			ret = kverbs_op_post(ep, op, &iwr);
		}
		if (ret) {
			atomic_dec(&g->pending);
			kverbs_op_put(ep, op);
		}
	}
	if (!atomic_dec_and_test(&g->pending) &&
	    !kverbs_grant_wait(g, reg)) {
		kverbs_ep_log(err, ep,
			      "%s of %u keys not complete after %u s; closing the connection\n",
			      reg ? "registration" : "invalidation", g->nmr,
			      KVERBS_LOCAL_WR_TIMEOUT / HZ);
		atomic64_inc(&ep->stat_errors);
		kverbs_ep_fail(ep, -ETIMEDOUT);
		wait_for_completion(&g->wr_done);
		ret = -ETIMEDOUT;
	}
	return ret ?: g->status;
}

/* Deregister @g's MRs; under dom->lock, before its endpoint's PD goes. */
static void kverbs_grant_release_mrs(struct kverbs_grant *g)
{
	unsigned int i;

	lockdep_assert_held(&g->r->dom->lock);
	for (i = 0; i < g->nmr; i++) {
		if (g->ent[i].mr)
			ib_dereg_mr(g->ent[i].mr);
		g->ent[i].mr = NULL;
	}
	WRITE_ONCE(g->dead, true);
}

/* Allocate and map @g's MRs on its endpoint's PD; under dom->lock. */
static int kverbs_grant_map(struct kverbs_grant *g, struct scatterlist *sgl)
{
	struct kverbs_region *r = g->r;
	unsigned int per = 1U << (g->extent_shift - PAGE_SHIFT);
	unsigned int i, k, n;
	struct ib_mr *mr;
	int ret;

	for (i = 0; i < g->nmr; i++) {
		unsigned long first = (unsigned long)i * per;

		n = min_t(unsigned long, per, r->npages - first);
		mr = ib_alloc_mr(g->ep->pd, IB_MR_TYPE_MEM_REG, n + 1);
		if (IS_ERR(mr))
			return PTR_ERR(mr);
		g->ent[i].mr = mr;
		sg_init_table(sgl, n);
		for (k = 0; k < n; k++) {
			sg_set_page(&sgl[k], r->pages[first + k], PAGE_SIZE, 0);
			sg_dma_address(&sgl[k]) = r->dma[first + k];
			sg_dma_len(&sgl[k]) = PAGE_SIZE;
		}
		ret = ib_map_mr_sg(mr, sgl, n, NULL, PAGE_SIZE);
		if (ret != n)
			return ret < 0 ? ret : -EINVAL;
		/* The extent's offset in the region, as the peer names it. */
		mr->iova = (u64)first << PAGE_SHIFT;
		ib_update_fast_reg_key(mr, get_random_u32() & 0xff);
		g->ent[i].rkey = mr->rkey;
	}
	return 0;
}

static void kverbs_grant_free(struct kverbs_grant *g, bool invalidate);

/**
 * kverbs_region_grant - let the peer of one endpoint reach a region
 * @r: region
 * @ep: connected endpoint of @r's domain
 * @access: KVERBS_ACCESS_* flags, at least one: the least the peer needs
 *
 * kverbs_grant_remote() then describes extents of @r for that peer.  The
 * keys work on @ep's connection only; they die with kverbs_grant_revoke(),
 * kverbs_region_destroy() or the endpoint's teardown.
 *
 * Context: process; sleeps, for the registration's completions: at most
 * 10 s, after which the endpoint is failed and the call waits for its
 * teardown's drain.  Not concurrently with kverbs_region_destroy() of @r.
 *
 * Return: the grant, or ERR_PTR: -EINVAL (bad @access, another domain's
 * region), -ENOMEM, -ENOTCONN or the endpoint's error, -ENODEV (the
 * domain has no device), -EINTR, -ETIMEDOUT (the registration did not
 * complete in 10 s; the endpoint is closed), or a provider error.
 */
struct kverbs_grant *kverbs_region_grant(struct kverbs_region *r,
					 struct kverbs_ep *ep, u32 access)
{
	struct kverbs_domain *dom = ep->dom;
	struct scatterlist *sgl = NULL;
	struct kverbs_grant *g = NULL;
	unsigned int per, nmr;
	int ret;

	might_sleep();
	if (!access || (access & ~KVERBS_ACCESS_ALL) || r->dom != dom)
		return ERR_PTR(-EINVAL);

	mutex_lock(&dom->lock);
	if (!dom->kdev || !r->mapped) {
		ret = -ENODEV;
		goto out_unlock;
	}
	if (READ_ONCE(ep->state) != KVERBS_EP_CONNECTED || !ep->pd) {
		ret = -ENOTCONN;
		goto out_unlock;
	}
	per = kverbs_grant_extent_pages(dom->kdev->ibdev, r->npages);
	nmr = DIV_ROUND_UP(r->npages, per);
	ret = -ENOMEM;
	g = kvzalloc(struct_size(g, ent, nmr), GFP_KERNEL);
	sgl = kvmalloc_array(min_t(unsigned long, per, r->npages),
			     sizeof(*sgl), GFP_KERNEL);
	if (!g || !sgl)
		goto out_unlock;
	g->r = r;
	g->ep = ep;
	g->access = access;
	g->nmr = nmr;
	g->extent_shift = ilog2(per) + PAGE_SHIFT;
	init_completion(&g->wr_done);
	ret = kverbs_grant_map(g, sgl);
	if (ret) {
		kverbs_grant_release_mrs(g);
		goto out_unlock;
	}
	list_add_tail(&g->region_node, &r->grants);
	list_add_tail(&g->ep_node, &ep->grants);
	kverbs_ep_get(ep);
	mutex_unlock(&dom->lock);
	kvfree(sgl);

	ret = kverbs_grant_post_all(g, true);
	if (ret) {
		/*
		 * Every posted WR is done; the keys never left the node.  No
		 * LOCAL_INV: one for an MR never registered fails, and its
		 * error would tear down a healthy connection.
		 */
		kverbs_grant_free(g, false);
		return ERR_PTR(ret == -ECONNRESET ? -ENOTCONN : ret);
	}
	return g;

out_unlock:
	mutex_unlock(&dom->lock);
	kvfree(sgl);
	kvfree(g);
	return ERR_PTR(ret);
}
EXPORT_SYMBOL_NS_GPL(kverbs_region_grant, KVERBS_NS);
ALLOW_ERROR_INJECTION(kverbs_region_grant, ERRNO);

/**
 * kverbs_grant_revoke - end a peer's access and free the grant
 * @g: grant
 *
 * When this returns, no peer can reach the region through @g's keys.
 *
 * Context: process; sleeps.
 */
void kverbs_grant_revoke(struct kverbs_grant *g)
{
	might_sleep();
	kverbs_grant_free(g, true);
}
EXPORT_SYMBOL_NS_GPL(kverbs_grant_revoke, KVERBS_NS);

static void kverbs_grant_free(struct kverbs_grant *g, bool invalidate)
{
	struct kverbs_domain *dom = g->r->dom;
	struct kverbs_ep *ep = g->ep;

	/*
	 * If this fails, the endpoint is going down: its teardown drains the
	 * QP before it deregisters, and deregistration kills the keys too.
	 */
	if (invalidate && !READ_ONCE(g->dead) &&
	    READ_ONCE(ep->state) == KVERBS_EP_CONNECTED)
		kverbs_grant_post_all(g, false);
	mutex_lock(&dom->lock);
	if (!g->dead) {
		kverbs_grant_release_mrs(g);
		list_del(&g->ep_node);
	}
	list_del(&g->region_node);
	mutex_unlock(&dom->lock);
	kverbs_ep_put(ep);
	kvfree(g);
}

/**
 * kverbs_ep_drop_grants - deregister every grant of an endpoint
 * @ep: endpoint whose QP is drained and destroyed
 *
 * The grants stay allocated, dead, until their owner revokes them.
 *
 * Context: process, dom->lock held.
 */
void kverbs_ep_drop_grants(struct kverbs_ep *ep)
{
	struct kverbs_grant *g, *tmp;

	lockdep_assert_held(&ep->dom->lock);
	list_for_each_entry_safe(g, tmp, &ep->grants, ep_node) {
		kverbs_grant_release_mrs(g);
		list_del_init(&g->ep_node);
	}
}

/**
 * kverbs_grant_remote - what the peer needs to reach bytes of the region
 * @g: grant
 * @offset: first byte, an offset in the region
 * @len: bytes, at least 1, within one extent (kverbs_grant_extent())
 * @remote: filled with @offset, @len and the extent's key
 *
 * Send it to the peer in a message; it holds no address of ours.
 *
 * Context: any.
 * Return: 0, -EINVAL (out of the region, or across an extent boundary),
 * or -ENOTCONN (the endpoint closed: the keys are dead).
 */
int kverbs_grant_remote(const struct kverbs_grant *g, u64 offset, u64 len,
			struct kverbs_remote *remote)
{
	u64 rlen = g->r->len;

	if (!len || offset > rlen || len > rlen - offset ||
	    offset >> g->extent_shift != (offset + len - 1) >> g->extent_shift)
		return -EINVAL;
	if (READ_ONCE(g->dead))
		return -ENOTCONN;
	remote->offset = offset;
	remote->len = len;
	remote->rkey = g->ent[offset >> g->extent_shift].rkey;
	remote->reserved = 0;
	return 0;
}
EXPORT_SYMBOL_NS_GPL(kverbs_grant_remote, KVERBS_NS);

/**
 * kverbs_grant_extent - bytes each key of a grant covers
 * @g: grant
 *
 * A power of two, at least PAGE_SIZE; extents start at its multiples.
 * Extents are at most 256 pages, fewer if the device maps fewer per MR
 * (one page kept to spare; see above): 256 on rxe.
 *
 * Context: any.
 * Return: bytes.
 */
u64 kverbs_grant_extent(const struct kverbs_grant *g)
{
	return 1ULL << g->extent_shift;
}
EXPORT_SYMBOL_NS_GPL(kverbs_grant_extent, KVERBS_NS);
