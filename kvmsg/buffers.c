// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmsg buffers of an endpoint: allocation, DMA mapping, the initial
 * receive ring, reclaim at teardown and freeing.
 *
 * Sizing: the domain's kverbs_ep_budget(): depth receive buffers, depth +
 * 1 send buffers (the extra one carries credit-only messages, so returning
 * credits never waits for a data buffer), each sizeof(struct kvmsg_hdr) +
 * max_msg bytes, and depth slots for RDMA operations and registrations.
 */
#include <linux/slab.h>

#include "../kverbs/kverbs-pri.h"

static void *kvmsg_buf_alloc(struct ib_device *dev, u32 size,
			    enum dma_data_direction dir, u64 *dma)
{
	void *p = kmalloc(size, GFP_KERNEL);

	if (!p)
		return NULL;
	*dma = ib_dma_map_single(dev, p, size, dir);
	if (ib_dma_mapping_error(dev, *dma)) {
		kfree(p);
		return NULL;
	}
	return p;
}

/**
 * kvmsg_ep_init - empty message state of a new endpoint
 * @ep: endpoint
 *
 * Context: any.
 */
void kvmsg_ep_init(struct kverbs_ep *ep)
{
	struct kvmsg_ep *m = &ep->msg;

	INIT_LIST_HEAD(&m->tx_free);
	INIT_LIST_HEAD(&m->pending);
	INIT_LIST_HEAD(&m->op_free);
	INIT_LIST_HEAD(&m->defer_node);
	init_waitqueue_head(&m->tx_wait);
	kvmsg_backlog_init(&m->backlog);
}

/**
 * kvmsg_ep_connected - the peer's depth is known: open the credit window
 * @ep: endpoint, under ep->lock, becoming CONNECTED
 *
 * Messages that arrived before this were queued for process context;
 * they go now.
 *
 * Context: any, ep->lock held.
 */
void kvmsg_ep_connected(struct kverbs_ep *ep)
{
	kvmsg_credit_init(&ep->msg.credit, ep->peer_depth, ep->dom->depth);
}

/**
 * kvmsg_ep_setup - allocate and map an endpoint's buffers
 * @ep: endpoint whose domain is bound to a device
 *
 * Context: process; may sleep.
 * Return: 0 or -ENOMEM; on error kvmsg_ep_stop() and kvmsg_ep_free() undo
 * what was done.
 */
int kvmsg_ep_setup(struct kverbs_ep *ep)
{
	struct kverbs_domain *dom = ep->dom;
	struct ib_device *dev = dom->pd->device;
	struct kvmsg_ep *m = &ep->msg;
	u16 interval;
	int i;

	/* The sizes are the domain's queue budget, nothing else. */
	m->nrx = dom->budget.nrx;
	m->ntx = dom->budget.ntx;
	m->nops = dom->budget.nops;
	m->buf_size = sizeof(struct kvmsg_hdr) + dom->max_msg;
	m->max_kept = kvmsg_max_kept(dom->depth);
	interval = dom->signal_interval ?: max(1, dom->depth / 4);
	kvmsg_sq_init(&m->sq, m->ntx + m->nops, interval);

	m->rx = kcalloc(m->nrx, sizeof(*m->rx), GFP_KERNEL);
	m->tx = kcalloc(m->ntx, sizeof(*m->tx), GFP_KERNEL);
	m->ops = kcalloc(m->nops, sizeof(*m->ops), GFP_KERNEL);
	m->sq_ring = kcalloc(m->ntx + m->nops, sizeof(*m->sq_ring),
			     GFP_KERNEL);
	if (!m->rx || !m->tx || !m->ops || !m->sq_ring)
		return -ENOMEM;
	for (i = 0; i < m->nops; i++) {
		struct kvmsg_op *op = &m->ops[i];

		op->wr.ep = ep;
		op->wr.kind = KVMSG_WR_OP;
		op->wr.cqe.done = kvmsg_wr_done;
		list_add_tail(&op->node, &m->op_free);
		m->op_nfree++;
	}
	m->mapped = true;

	for (i = 0; i < m->nrx; i++) {
		struct kvmsg_rx *rx = &m->rx[i];

		rx->ep = ep;
		rx->cqe.done = kvmsg_recv_done;
		INIT_LIST_HEAD(&rx->node);
		rx->data = kvmsg_buf_alloc(dev, m->buf_size, DMA_FROM_DEVICE,
					  &rx->dma);
		if (!rx->data)
			return -ENOMEM;
	}
	for (i = 0; i < m->ntx; i++) {
		struct kvmsg_buf *b = &m->tx[i];

		b->wr.ep = ep;
		b->wr.kind = KVMSG_WR_BUF;
		b->wr.cqe.done = kvmsg_wr_done;
		b->ctrl = i == m->ntx - 1;
		b->data = kvmsg_buf_alloc(dev, m->buf_size, DMA_TO_DEVICE,
					 &b->dma);
		if (!b->data)
			return -ENOMEM;
		if (!b->ctrl) {
			list_add_tail(&b->node, &m->tx_free);
			m->tx_nfree++;
		} else {
			INIT_LIST_HEAD(&b->node);
		}
	}
	return 0;
}

/**
 * kvmsg_ep_post_ring - post the whole receive ring
 * @ep: endpoint with a QP, before it connects
 *
 * Context: process.
 * Return: 0 or the provider's error.
 */
int kvmsg_ep_post_ring(struct kverbs_ep *ep)
{
	int i, ret;

	for (i = 0; i < ep->msg.nrx; i++) {
		ret = kvmsg_post_recv(ep, &ep->msg.rx[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/**
 * kvmsg_ep_stop - reclaim everything after the QP is drained
 * @ep: endpoint in CLOSING, QP drained or never connected
 *
 * ib_drain_qp() returns only after every posted WR completed or was
 * flushed (a flushed WR completes even when posted unsignaled), so what is
 * still on the books is the unsignaled tail that completed silently; it is
 * reclaimed here.  What still waits for a credit was never posted and is
 * failed now.  Receives waiting for process context
 * are dropped.
 *
 * Context: process; may sleep (waits for a running deferred handler).
 */
void kvmsg_ep_stop(struct kverbs_ep *ep)
{
	struct kverbs_domain *dom = ep->dom;
	struct kvmsg_ep *m = &ep->msg;
	bool queued;

	spin_lock_bh(&dom->defer_lock);
	queued = !list_empty(&m->defer_node);
	list_del_init(&m->defer_node);
	spin_unlock_bh(&dom->defer_lock);
	if (queued)
		kverbs_ep_put(ep);
	/* A handler of this endpoint may be running in the deferral work. */
	flush_work(&dom->defer_work);

	kvmsg_reclaim_tail(ep);
	kvmsg_fail_pending(ep);
	WARN_ONCE(kvmsg_sq_used(&m->sq), "kverbs: %u sends not reclaimed\n",
		  kvmsg_sq_used(&m->sq));
	atomic64_add(atomic64_read(&m->stats.sent), &dom->closed_sent);
	atomic64_add(atomic64_read(&m->stats.reclaimed),
		     &dom->closed_reclaimed);
}

/**
 * kvmsg_ep_unmap - end the device's access to the buffers
 * @ep: endpoint whose QP is drained or never connected
 *
 * Buffers stay allocated until the endpoint is freed, because a caller may
 * still hold a reserved or kept one.
 *
 * Context: process, dom->lock held (the domain is still bound).
 */
void kvmsg_ep_unmap(struct kverbs_ep *ep)
{
	struct kvmsg_ep *m = &ep->msg;
	struct ib_device *dev;
	int i;

	lockdep_assert_held(&ep->dom->lock);
	if (!m->mapped)
		return;
	dev = ep->dom->pd->device;
	for (i = 0; m->rx && i < m->nrx && m->rx[i].data; i++)
		ib_dma_unmap_single(dev, m->rx[i].dma, m->buf_size,
				    DMA_FROM_DEVICE);
	for (i = 0; m->tx && i < m->ntx && m->tx[i].data; i++)
		ib_dma_unmap_single(dev, m->tx[i].dma, m->buf_size,
				    DMA_TO_DEVICE);
	m->mapped = false;
}

/**
 * kvmsg_ep_free - free the buffers of an endpoint being released
 * @ep: endpoint; nobody holds a buffer of it any more
 *
 * Context: any.
 */
void kvmsg_ep_free(struct kverbs_ep *ep)
{
	struct kvmsg_ep *m = &ep->msg;
	int i;

	for (i = 0; m->rx && i < m->nrx; i++)
		kfree(m->rx[i].data);
	for (i = 0; m->tx && i < m->ntx; i++)
		kfree(m->tx[i].data);
	kfree(m->rx);
	kfree(m->tx);
	kfree(m->ops);
	kfree(m->sq_ring);
	m->ops = NULL;
	m->rx = NULL;
	m->tx = NULL;
	m->sq_ring = NULL;
}

/**
 * kvmsg_ep_mem - memory an endpoint's messaging uses
 * @ep: endpoint
 *
 * Context: any.
 * Return: bytes of buffers and bookkeeping.
 */
size_t kvmsg_ep_mem(const struct kverbs_ep *ep)
{
	const struct kvmsg_ep *m = &ep->msg;

	return sizeof(*ep) + (size_t)m->nrx * (sizeof(*m->rx) + m->buf_size) +
	       (size_t)m->ntx * (sizeof(*m->tx) + m->buf_size) +
	       (size_t)m->nops * sizeof(*m->ops) +
	       (size_t)(m->ntx + m->nops) * sizeof(*m->sq_ring);
}
