// SPDX-License-Identifier: GPL-2.0-only
/*
 * RDMA writes from, and reads into, pages that belong to no region:
 * page-cache pages a server sends once, or pages a task waits for.  Each
 * page is DMA-mapped for the one operation that carries it and unmapped
 * when that operation completes, so nothing of ours stays mapped, and
 * nothing of ours is ever remotely reachable: the operation uses the
 * endpoint's local DMA key, and only the peer's grant is remote.
 *
 * Mapping a page is an atomic-safe call, so unlike kverbs_region_create()
 * this works from a softirq receive handler; the cost is one map and one
 * unmap per page per operation, which for pages moved once is the least
 * any registration costs.
 *
 * iWARP needs the sink of an RDMA READ registered for remote write, which
 * the local DMA key is not: reads go through rdma_rw there (rdma_rw.c),
 * from callers that may sleep.
 */
#include "kverbs-pri.h"

/*
 * One operation in flight: its pages' DMA addresses, for the unmap in
 * kverbs_pages_done().  Freed there.  Test builds keep the pages too,
 * after the @n addresses (kverbs_pages_check()).
 */
struct kverbs_pages_op {
	struct ib_device *ibdev;
	kverbs_rdma_done_t done;
	void *ctx;
	enum dma_data_direction dir;
	unsigned int n;
	u64 dma[];
};

#ifdef KVERBS_TESTING
#define KVERBS_PO_PAGES(n)	((size_t)(n) * sizeof(struct page *))

static struct page **kverbs_po_pages(struct kverbs_pages_op *po)
{
	return (struct page **)&po->dma[po->n];
}

/*
 * Test builds: the caller must hold every page of an operation from its
 * post to its completion.  A page whose count (its folio's, for a page of
 * a large folio) is zero at either point was freed, and the device reads
 * or writes memory that may be reused elsewhere; WARN, which fails any
 * suite run (the console scan).  A tail page of a high-order allocation
 * that is not a compound page reads 0 too: callers give order-0 pages,
 * folios' pages or compound pages.
 */
static void kverbs_pages_check(struct kverbs_pages_op *po, const char *when)
{
	struct page **pages = kverbs_po_pages(po);
	unsigned int i;

	for (i = 0; i < po->n; i++)
		WARN_ONCE(page_count(pages[i]) <= 0,
			  "kverbs: page %u of %u unreferenced %s\n", i, po->n,
			  when);
}

/* Test builds: remember @po's pages (room for them is after @dma). */
static void kverbs_pages_keep(struct kverbs_pages_op *po, struct page **pages)
{
	memcpy(kverbs_po_pages(po), pages, KVERBS_PO_PAGES(po->n));
	kverbs_pages_check(po, "at post");
}
#else
#define KVERBS_PO_PAGES(n)	((size_t)(n) * 0)

static void kverbs_pages_check(struct kverbs_pages_op *po, const char *when)
{
}

static void kverbs_pages_keep(struct kverbs_pages_op *po, struct page **pages)
{
}
#endif

static void kverbs_pages_unmap(struct kverbs_pages_op *po, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		ib_dma_unmap_page(po->ibdev, po->dma[i], PAGE_SIZE, po->dir);
}

static void kverbs_pages_done(void *arg, int status)
{
	struct kverbs_pages_op *po = arg;

	kverbs_pages_check(po, "at completion");
	kverbs_pages_unmap(po, po->n);
	ib_device_put(po->ibdev);
	if (po->done)
		po->done(po->ctx, status);
	kfree(po);
}

/**
 * kverbs_ep_max_write_pages - pages one kverbs_rdma_write_pages() carries
 * @ep: connected endpoint
 *
 * Context: any.
 * Return: the domain's @write_pages, capped at the device's send SGE
 * limit; 0 before the endpoint has a queue pair.  It stays after the
 * endpoint's teardown.
 */
unsigned int kverbs_ep_max_write_pages(const struct kverbs_ep *ep)
{
	return READ_ONCE(ep->max_sge_pages);
}
EXPORT_SYMBOL_NS_GPL(kverbs_ep_max_write_pages, KVERBS_NS);

/* @npages whole pages to or from @remote, at most @max: 0 or -EINVAL. */
static int kverbs_pages_args(unsigned int max, unsigned int npages,
			     const struct kverbs_remote *remote)
{
	if (!npages || npages > max || remote->reserved ||
	    remote->len < (u64)npages << PAGE_SHIFT)
		return -EINVAL;
	return 0;
}

/* Both directions; @max is the endpoint's cap for @opcode. */
static int kverbs_rdma_pages(struct kverbs_ep *ep, enum ib_wr_opcode opcode,
			     unsigned int max, struct page **pages,
			     unsigned int npages,
			     const struct kverbs_remote *remote,
			     kverbs_rdma_done_t done, void *ctx,
			     unsigned int flags)
{
	struct ib_sge sge[KVERBS_PAGES_MAX_SGE];
	struct kverbs_pages_op *po;
	struct ib_rdma_wr wr = {};
	struct ib_device *ibdev;
	struct kverbs_op *op;
	unsigned int i;
	int ret;

	ret = kverbs_pages_args(max, npages, remote);
	if (ret)
		return ret;
	op = kverbs_op_get(ep, flags);
	if (IS_ERR(op))
		return PTR_ERR(op);
	/*
	 * The device, read while the endpoint is connected, and held until
	 * the pages are unmapped: a device removal waits for it, so the
	 * mappings are undone on a live device whatever happens.
	 */
	spin_lock_bh(&ep->lock);
	ibdev = ep->state == KVERBS_EP_CONNECTED && ep->qp ?
		ep->qp->device : NULL;
	if (ibdev && !ib_device_try_get(ibdev))
		ibdev = NULL;
	spin_unlock_bh(&ep->lock);
	ret = ep->error ?: -ENOTCONN;
	if (!ibdev)
		goto out_put;
	ret = -ENOMEM;
	po = kmalloc(struct_size(po, dma, npages) + KVERBS_PO_PAGES(npages),
		     kverbs_may_wait(flags) ? GFP_KERNEL : GFP_ATOMIC);
	if (!po)
		goto out_dev;
	po->ibdev = ibdev;
	po->done = done;
	po->ctx = ctx;
	po->dir = opcode == IB_WR_RDMA_READ ? DMA_FROM_DEVICE : DMA_TO_DEVICE;
	po->n = npages;
	kverbs_pages_keep(po, pages);
	for (i = 0; i < npages; i++) {
		po->dma[i] = ib_dma_map_page(po->ibdev, pages[i], 0, PAGE_SIZE,
					     po->dir);
		if (ib_dma_mapping_error(po->ibdev, po->dma[i])) {
			ret = -EIO;
			goto out_unmap;
		}
		sge[i].addr = po->dma[i];
		sge[i].length = PAGE_SIZE;
		sge[i].lkey = ep->lkey;
	}
	op->done = kverbs_pages_done;
	op->ctx = po;
	wr.wr.opcode = opcode;
	wr.wr.sg_list = sge;
	wr.wr.num_sge = npages;
	wr.remote_addr = remote->offset;
	wr.rkey = remote->rkey;
	ret = kverbs_op_post(ep, op, &wr.wr);
	if (!ret)
		return 0;
out_unmap:
	kverbs_pages_unmap(po, i);
	kfree(po);
out_dev:
	ib_device_put(ibdev);
out_put:
	kverbs_op_put(ep, op);
	return ret;
}

/**
 * kverbs_rdma_write_pages - write whole pages of ours into a peer's memory
 * @ep: connected endpoint
 * @pages: the pages, written in order to consecutive remote bytes; they
 *	must stay allocated, and their contents stable, until @done runs
 * @npages: 1..kverbs_ep_max_write_pages(@ep) (the domain's @write_pages)
 * @remote: where; at least @npages pages long
 * @done: called once when the write completed (0) or failed (-errno), after
 *	the pages are unmapped; NULL for none.  Context: softirq, or process
 *	during teardown.
 * @ctx: passed to @done
 * @flags: KVERBS_NOWAIT to fail instead of sleeping for a free slot
 *
 * One work request, signaled: the pages are DMA-mapped here and unmapped
 * when it completes.  A message sent after the write on the same endpoint
 * arrives after the pages are visible to the peer (RC ordering).
 *
 * Context: process, may sleep; softirq (not hard interrupt) with
 * KVERBS_NOWAIT or inside a kverbs callback (see KVERBS_NOWAIT).
 * Return: 0 when posted (then @done runs exactly once); -EINVAL (no pages,
 * too many, @remote too short or its reserved field set), -ENOMEM, -EIO
 * (a page failed to map), -EAGAIN, -EINTR, -ENOTCONN or the endpoint's
 * error, or a provider error.
 */
int kverbs_rdma_write_pages(struct kverbs_ep *ep, struct page **pages,
			    unsigned int npages,
			    const struct kverbs_remote *remote,
			    kverbs_rdma_done_t done, void *ctx,
			    unsigned int flags)
{
	return kverbs_rdma_pages(ep, IB_WR_RDMA_WRITE,
				 READ_ONCE(ep->max_sge_pages), pages, npages,
				 remote, done, ctx, flags);
}
EXPORT_SYMBOL_NS_GPL(kverbs_rdma_write_pages, KVERBS_NS);
ALLOW_ERROR_INJECTION(kverbs_rdma_write_pages, ERRNO);

/**
 * kverbs_ep_max_read_pages - pages one kverbs_rdma_read_pages() carries
 * @ep: connected endpoint
 *
 * Context: any.
 * Return: the domain's @read_pages, capped at the device's send and RDMA
 * READ SGE limits (on iWARP, at what one MR of rdma_rw's pool maps); 0
 * before the endpoint has a queue pair.  It stays after the endpoint's
 * teardown.
 */
unsigned int kverbs_ep_max_read_pages(const struct kverbs_ep *ep)
{
	return READ_ONCE(ep->max_sge_read_pages);
}
EXPORT_SYMBOL_NS_GPL(kverbs_ep_max_read_pages, KVERBS_NS);

/**
 * kverbs_rdma_read_pages - read a peer's memory into whole pages of ours
 * @ep: connected endpoint
 * @pages: the sinks, filled in order from consecutive remote bytes; they
 *	must stay allocated, and nobody may write them, until @done runs
 * @npages: 1..kverbs_ep_max_read_pages(@ep) (the domain's @read_pages)
 * @remote: where; at least @npages pages long
 * @done: called once when the read completed (0: the pages hold the data)
 *	or failed (-errno: their contents are undefined), after the pages are
 *	unmapped; required (the pages may be reused only after it ran);
 *	it runs in softirq, or in process context during teardown.
 * @ctx: passed to @done
 * @flags: KVERBS_NOWAIT to fail instead of sleeping for a free slot
 *
 * One work request (on iWARP, a registration and the read), signaled,
 * mapped and unmapped as for kverbs_rdma_write_pages().  The peer's CPU
 * takes no part.  On iWARP the pages are registered for the read by
 * rdma_rw, which the read's completion invalidates: the peer may write
 * them until then, as the read does.
 *
 * Context: process, may sleep; softirq (not hard interrupt) with
 * KVERBS_NOWAIT or inside a kverbs callback (see KVERBS_NOWAIT), except
 * on iWARP.
 * Return: 0 when posted (then @done runs exactly once); -EOPNOTSUPP on
 * iWARP from a caller that may not sleep; -EINVAL without @done;
 * otherwise as kverbs_rdma_write_pages().
 */
int kverbs_rdma_read_pages(struct kverbs_ep *ep, struct page **pages,
			   unsigned int npages,
			   const struct kverbs_remote *remote,
			   kverbs_rdma_done_t done, void *ctx,
			   unsigned int flags)
{
	unsigned int max = READ_ONCE(ep->max_sge_read_pages);

	if (!done && (ep->iwarp || !kverbs_test_undo(KVERBS_UNDO_NODONE)))
		return -EINVAL;
	if (ep->iwarp)
		return kverbs_pages_args(max, npages, remote) ?:
		       kverbs_rw_read(ep, pages, 0, npages << PAGE_SHIFT,
				      remote, done, ctx, flags);
	return kverbs_rdma_pages(ep, IB_WR_RDMA_READ, max, pages, npages,
				 remote, done, ctx, flags);
}
EXPORT_SYMBOL_NS_GPL(kverbs_rdma_read_pages, KVERBS_NS);
ALLOW_ERROR_INJECTION(kverbs_rdma_read_pages, ERRNO);
