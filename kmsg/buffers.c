// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmsg's side of an endpoint's life: the hooks kverbs calls
 * (kvmsg_upper_ops), buffer allocation and DMA mapping, the initial receive
 * ring, reclaim at teardown and freeing.
 *
 * Sizing (the upper part of kverbs_ep_budget()): depth receive buffers,
 * depth + 1 send buffers (the extra one carries credit-only messages, so
 * returning credits never waits for a data buffer), each
 * sizeof(struct kvmsg_hdr) + max_msg bytes.  Buffers come from kmalloc, so
 * a size just above a power of two wastes up to half of its allocation:
 * choose max_msg as a power of two minus the 16-byte header for the
 * tightest fit (Documentation/kvmsg.rst).
 */
#include <linux/slab.h>

#include "kvmsg-pri.h"

static int kvmsg_domain_init(struct kverbs_domain *dom,
			     const struct kverbs_domain_attr *attr,
			     struct kverbs_ep_budget *b)
{
	struct kvmsg_domain *md = &dom->msg;

	if (!attr->msg || !attr->msg->recv || !attr->msg->send_done)
		return -EINVAL;
	md->ops = attr->msg;
	INIT_WORK(&md->defer_work, kvmsg_defer_work);
	spin_lock_init(&md->defer_lock);
	INIT_LIST_HEAD(&md->defer_list);
	b->upper_send = attr->depth + 1;
	b->upper_recv = attr->depth;
	return 0;
}

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

/* Allocate and map an endpoint's buffers; the domain is bound. */
static int kvmsg_ep_setup(struct kverbs_ep *ep)
{
	struct kverbs_domain *dom = ep->dom;
	struct ib_device *dev = kverbs_ep_device(ep);
	struct kvmsg_ep *m = &ep->msg;
	int i;

	INIT_LIST_HEAD(&m->tx_free);
	INIT_LIST_HEAD(&m->pending);
	INIT_LIST_HEAD(&m->defer_node);
	init_waitqueue_head(&m->tx_wait);
	kvmsg_backlog_init(&m->backlog);
	m->nrx = dom->budget.upper_recv;
	m->ntx = dom->budget.upper_send;
	m->buf_size = sizeof(struct kvmsg_hdr) + dom->max_msg;
	m->max_kept = kvmsg_max_kept(dom->depth);

	m->rx = kcalloc(m->nrx, sizeof(*m->rx), GFP_KERNEL);
	m->tx = kcalloc(m->ntx, sizeof(*m->tx), GFP_KERNEL);
	if (!m->rx || !m->tx)
		return -ENOMEM;
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
		b->wr.ops = &kvmsg_buf_wr_ops;
		b->wr.cqe.done = kverbs_sq_done;
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

/* Post the whole receive ring; the QP exists, before it connects. */
static int kvmsg_ep_start(struct kverbs_ep *ep)
{
	int i, ret;

	for (i = 0; i < ep->msg.nrx; i++) {
		ret = kvmsg_post_recv(ep, &ep->msg.rx[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * The peer's depth is known and the endpoint becomes CONNECTED in this
 * critical section: open the credit window.  Until the user's ->connected
 * returned, arrivals queue on the backlog: no ->recv() runs before or
 * during ->connected().
 */
static void kvmsg_ep_connected(struct kverbs_ep *ep)
{
	kvmsg_credit_init(&ep->msg.credit, ep->peer_depth, ep->dom->depth);
	ep->msg.backlog.busy = true;
}

/*
 * A completion gave an operation slot back (kverbs_op_reclaimed()).  The
 * increment is a full barrier before the look at @parked; a handler reads
 * @room_gen before it sets @parked under the lock.  So either it sees the
 * increment and is called again, or this sees it parked.
 */
static void kvmsg_op_space(struct kverbs_ep *ep)
{
	atomic_inc_return(&ep->msg.room_gen);
	if (!(READ_ONCE(ep->msg.parked) & KVMSG_WANT_OP))
		return;
	spin_lock_bh(&ep->lock);
	kvmsg_room_locked(ep, KVMSG_WANT_OP);
	spin_unlock_bh(&ep->lock);
}

/* ->connected returned: dispatch what waited; the work marks it idle. */
static void kvmsg_ep_opened(struct kverbs_ep *ep)
{
	kvmsg_schedule_defer(ep);
}

/*
 * The QP is drained and the ledger reclaimed.  What still waits for a
 * credit was never posted and is failed now; receives waiting for process
 * context are dropped.  Waits for a running deferred handler.
 */
static void kvmsg_ep_stop(struct kverbs_ep *ep)
{
	struct kvmsg_domain *md = &ep->dom->msg;
	struct kvmsg_ep *m = &ep->msg;
	bool queued;

	if (!m->rx)
		return;		/* setup never ran */
	/* Reservers sleeping for a buffer must see CLOSING, not wait on. */
	wake_up_all(&m->tx_wait);
	spin_lock_bh(&ep->lock);
	WRITE_ONCE(m->parked, 0);	/* nothing queues it again: CLOSING */
	spin_unlock_bh(&ep->lock);
	spin_lock_bh(&md->defer_lock);
	queued = !list_empty(&m->defer_node);
	list_del_init(&m->defer_node);
	spin_unlock_bh(&md->defer_lock);
	if (queued)
		kverbs_ep_put(ep);
	/* A handler of this endpoint may be running in the deferral work. */
	flush_work(&md->defer_work);

	kvmsg_fail_pending(ep);
	spin_lock_bh(&ep->lock);
	atomic64_add(m->stats.sent, &md->closed_sent);
	spin_unlock_bh(&ep->lock);
}

/* End the device's access to the buffers; they stay allocated. */
static void kvmsg_ep_release(struct kverbs_ep *ep)
{
	struct kvmsg_ep *m = &ep->msg;
	struct ib_device *dev;
	int i;

	lockdep_assert_held(&ep->dom->lock);
	if (!m->mapped)
		return;
	dev = kverbs_ep_device(ep);
	for (i = 0; m->rx && i < m->nrx && m->rx[i].data; i++)
		ib_dma_unmap_single(dev, m->rx[i].dma, m->buf_size,
				    DMA_FROM_DEVICE);
	for (i = 0; m->tx && i < m->ntx && m->tx[i].data; i++)
		ib_dma_unmap_single(dev, m->tx[i].dma, m->buf_size,
				    DMA_TO_DEVICE);
	m->mapped = false;
}

/*
 * The last reference is gone: every send buffer must be free again (no
 * holder is left, and teardown drained the QP).  The domain counts what
 * it sees, so a send whose completion was never reclaimed shows in
 * debugfs as closed_bufs_free < closed_bufs instead of vanishing.
 */
static void kvmsg_ep_free(struct kverbs_ep *ep)
{
	struct kvmsg_domain *md = &ep->dom->msg;
	struct kvmsg_ep *m = &ep->msg;
	int i, nfree = 0;

	for (i = 0; m->tx && i < m->ntx; i++)
		nfree += m->tx[i].state == KVMSG_BUF_FREE;
	if (m->tx) {
		atomic64_add(m->ntx, &md->closed_bufs);
		atomic64_add(nfree, &md->closed_bufs_free);
	}
	for (i = 0; m->rx && i < m->nrx; i++)
		kfree(m->rx[i].data);
	for (i = 0; m->tx && i < m->ntx; i++)
		kfree(m->tx[i].data);
	kfree(m->rx);
	kfree(m->tx);
	m->rx = NULL;
	m->tx = NULL;
}

/**
 * kvmsg_ep_mem - memory an endpoint uses, messaging and ledger
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
	       (size_t)ep->sq.nops * sizeof(*ep->sq.ops) +
	       (size_t)ep->sq.ledger.slots * sizeof(*ep->sq.ring);
}

static void kvmsg_show_domain(struct seq_file *sf, struct kverbs_domain *dom)
{
	seq_printf(sf, " closed_sent %lld closed_bufs %lld closed_bufs_free %lld",
		   atomic64_read(&dom->msg.closed_sent),
		   atomic64_read(&dom->msg.closed_bufs),
		   atomic64_read(&dom->msg.closed_bufs_free));
}

static void kvmsg_show_ep(struct seq_file *sf, struct kverbs_ep *ep)
{
	struct kvmsg_ep *m = &ep->msg;
	struct kvmsg_stats st;
	u32 avail, ungranted, kept;

	spin_lock_bh(&ep->lock);
	st = m->stats;
	avail = m->credit.avail;
	ungranted = m->credit.ungranted;
	kept = m->kept;
	spin_unlock_bh(&ep->lock);

	seq_printf(sf, " sent %llu received %llu reclaimed %llu",
		   st.sent, st.received, st.reclaimed);
	seq_printf(sf, " credits %u ungranted %u granted %llu credit_msgs %llu stalls %llu",
		   avail, ungranted, st.credits_granted, st.credit_msgs,
		   st.stalls);
	seq_printf(sf, " deferrals %llu polled %llu kept %u proto_errors %llu rejected %llu dropped %llu parked %llu mem=%zu",
		   st.deferrals, st.polled, kept, st.proto_errors, st.rejected,
		   st.dropped, st.parked, kvmsg_ep_mem(ep));
}

const struct kverbs_upper_ops kvmsg_upper_ops = {
	.domain_init = kvmsg_domain_init,
	.setup = kvmsg_ep_setup,
	.start = kvmsg_ep_start,
	.connected = kvmsg_ep_connected,
	.opened = kvmsg_ep_opened,
	.send_auth = kvmsg_send_auth_locked,
	.stop = kvmsg_ep_stop,
	.op_space = kvmsg_op_space,
	.release = kvmsg_ep_release,
	.free = kvmsg_ep_free,
	.show_domain = kvmsg_show_domain,
	.show_ep = kvmsg_show_ep,
};
