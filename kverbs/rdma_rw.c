// SPDX-License-Identifier: GPL-2.0-only
/*
 * RDMA reads on iWARP, through the kernel's rdma_rw API.
 *
 * An iWARP RDMA read places its data as the responder's tagged writes
 * into the sink, so the sink must be a registration the peer may write
 * (RFC 5040, 6.3), which the endpoint's local DMA key is not.  rdma_rw,
 * given the QP's MR pool (@max_rdma_ctxs at QP creation: one context per
 * operation slot), registers the sink pages with one fast-registration
 * MR, reads with RDMA_READ_WITH_INV so that the read's completion also
 * invalidates that MR, and returns the MR to the pool at
 * rdma_rw_ctx_destroy(), before the operation's slot is free again
 * (struct kverbs_op @release), so a slot always finds an MR.  The peer can
 * write the pages being read until the read completes or the connection
 * fails; the WRs posted after a read are fenced behind it (sq.c), so its
 * completion is its own.
 *
 * rdma_rw allocates its WR array with GFP_KERNEL, so a read on iWARP
 * needs a caller that may sleep: with KVERBS_NOWAIT, or inside a kverbs
 * callback, it is refused (-EOPNOTSUPP), as every read was before.  IB
 * and RoCE never come here: their reads use the local DMA key (rdma.c,
 * rdma_pages.c).
 *
 * Sizing: one MR carries at most kverbs_rw_max_pages() pages, so a read
 * is one registration, one read and, after a READ without invalidation,
 * one LOCAL_INV: the three send-queue entries per context that
 * ib_create_qp() adds, and two flushed CQEs beyond the ledger's
 * (struct kverbs_ep_budget, @rw_cqes).
 */
#include <linux/scatterlist.h>
#include <rdma/rw.h>

#include "kverbs-pri.h"

/* rdma_rw's own cap on one MR's pages (rdma_rw_fr_page_list_len()) */
#define KVERBS_RW_MR_PAGES	256

/*
 * One read in flight: the context, the QP and port it was built on, and
 * the sink as a scatterlist.  Holds a reference on the device until
 * rdma_rw_ctx_destroy() returned the MR and unmapped the pages.
 */
struct kverbs_rw_op {
	struct rdma_rw_ctx rw;
	struct ib_qp *qp;
	u32 port;
	int err;			/* a chain only partly posted */
	kverbs_rdma_done_t done;
	void *ctx;
	u32 nsg;
	struct scatterlist sg[];
};

/**
 * kverbs_rw_max_pages - pages one read through rdma_rw may carry
 * @dev: the device
 *
 * Context: any.
 * Return: what one fast-registration MR of rdma_rw's pool maps.
 */
u32 kverbs_rw_max_pages(const struct ib_device *dev)
{
	return min_t(u32, dev->attrs.max_fast_reg_page_list_len,
		     KVERBS_RW_MR_PAGES);
}

/* The read's completion or flush: the MR back, the sink unmapped. */
static void kverbs_rw_release(void *arg, int status)
{
	struct kverbs_rw_op *o = arg;

	rdma_rw_ctx_destroy(&o->rw, o->qp, o->port, o->sg, o->nsg,
			    DMA_FROM_DEVICE);
	ib_device_put(o->qp->device);
}

/* Then, with the slot free, the caller's @done. */
static void kverbs_rw_done(void *arg, int status)
{
	struct kverbs_rw_op *o = arg;
	kverbs_rdma_done_t done = o->done;
	void *ctx = o->ctx;

	status = o->err ?: status;
	kfree(o);
	done(ctx, status);
}

/* A read set up on @ep's QP is over; teardown may go on. */
static void kverbs_rw_unbusy(struct kverbs_ep *ep)
{
	spin_lock_bh(&ep->lock);
	ep->rw_busy--;
	spin_unlock_bh(&ep->lock);
	wake_up_all(&ep->sq.wait);
}

/**
 * kverbs_rw_idle - wait until no read is being set up on @ep's QP
 * @ep: endpoint in teardown, CLOSING: no read starts any more
 *
 * A read uses the QP (its MR pool) between taking it and posting; the QP
 * may be destroyed only after.  Local work only stands between.
 *
 * Context: process, may sleep.
 */
void kverbs_rw_idle(struct kverbs_ep *ep)
{
	wait_event(ep->sq.wait, !READ_ONCE(ep->rw_busy));
}

/**
 * kverbs_rw_read - RDMA read into pages, registered by rdma_rw
 * @ep: connected endpoint on iWARP
 * @pages: the sink's pages; the first from byte @off
 * @off: offset in the first page
 * @len: bytes, from @off on; at most kverbs_rw_max_pages() pages
 * @remote: the peer's grant, checked against @len by the caller
 * @done: required; see kverbs_rdma_read()
 * @ctx: for @done
 * @flags: the caller's; KVERBS_NOWAIT refuses
 *
 * Context: process, may sleep.
 * Return: 0 when posted (then @done runs once); -EOPNOTSUPP (the caller
 * may not sleep), -EINVAL (too many pages), -ENOMEM, -EAGAIN, -EINTR,
 * -ENOTCONN or the endpoint's error, or rdma_rw's or the provider's.
 */
int kverbs_rw_read(struct kverbs_ep *ep, struct page **pages, u32 off,
		   u32 len, const struct kverbs_remote *remote,
		   kverbs_rdma_done_t done, void *ctx, unsigned int flags)
{
	struct ib_send_wr *first, *last;
	struct kverbs_rw_op *o;
	struct kverbs_op *op;
	struct ib_qp *qp;
	u32 i, n;
	int ret;

	if (!kverbs_may_wait(flags))
		return -EOPNOTSUPP;
	if (!len || off >= PAGE_SIZE || len > KVERBS_RW_MR_PAGES * PAGE_SIZE)
		return -EINVAL;
	n = DIV_ROUND_UP(off + len, PAGE_SIZE);	/* no wrap: both bounded */
	if (n > KVERBS_RW_MR_PAGES)
		return -EINVAL;
	op = kverbs_op_get(ep, flags);
	if (IS_ERR(op))
		return PTR_ERR(op);
	o = kzalloc(struct_size(o, sg, n), GFP_KERNEL);
	if (!o) {
		kverbs_op_put(ep, op);
		return -ENOMEM;
	}
	sg_init_table(o->sg, n);
	for (i = 0; i < n; i++) {
		u32 chunk = min_t(u32, len, PAGE_SIZE - off);

		sg_set_page(&o->sg[i], pages[i], chunk, off);
		len -= chunk;
		off = 0;
	}
	o->nsg = n;
	o->done = done;
	o->ctx = ctx;

	/*
	 * The QP, read while connected, and its device held until the
	 * context is destroyed; @rw_busy keeps the QP until the post, and
	 * the drain at teardown then completes the read (flushed) before
	 * kverbs_ep_release_qp() destroys it.
	 */
	spin_lock_bh(&ep->lock);
	qp = ep->state == KVERBS_EP_CONNECTED ? ep->qp : NULL;
	if (qp && !ib_device_try_get(qp->device))
		qp = NULL;
	if (qp) {
		ep->rw_busy++;
		o->port = ep->cm_id->port_num;
	}
	ret = ep->error ?: -ENOTCONN;
	spin_unlock_bh(&ep->lock);
	if (!qp)
		goto out_free;
	o->qp = qp;
	ret = -EINVAL;
	if (n > kverbs_rw_max_pages(qp->device))
		goto out_dev;
	/* A slot has its MR: kverbs_rw_release() runs before the put */
	ret = rdma_rw_ctx_init(&o->rw, qp, o->port, o->sg, n, 0,
			       remote->offset, remote->rkey, DMA_FROM_DEVICE);
	if (ret < 0)
		goto out_dev;
	op->release = kverbs_rw_release;
	op->done = kverbs_rw_done;
	op->ctx = o;
	first = rdma_rw_ctx_wrs(&o->rw, qp, o->port, &op->wr.cqe, NULL);
	for (last = first; last->next; last = last->next)
		;
	ret = kverbs_op_post_chain(ep, op, first, last);
	kverbs_rw_unbusy(ep);
	if (ret == -EINPROGRESS) {
		/* On the books: reclaimed after the drain, with -EIO */
		o->err = -EIO;
		kverbs_ep_fail(ep, -EIO);
		return 0;
	}
	if (!ret)
		return 0;
	rdma_rw_ctx_destroy(&o->rw, qp, o->port, o->sg, n, DMA_FROM_DEVICE);
	ib_device_put(qp->device);
	goto out_free;
out_dev:
	kverbs_rw_unbusy(ep);
	ib_device_put(qp->device);
out_free:
	kfree(o);
	kverbs_op_put(ep, op);
	return ret;
}
