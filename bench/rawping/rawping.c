// SPDX-License-Identifier: GPL-2.0-only
/*
 * rawping: the RTT benchmark's baseline, a ping-pong written directly on
 * ib_core and rdma_cm with no kverbs code at all, so it is the limit of
 * this link for a kernel ULP.
 *
 *   insmod rawping.ko [port=18517] [inline_send=1]        # echo server
 *   insmod rawping.ko server=IP count=N size=S outstanding=O
 *                     [check=0] [inline_send=1] [page=1]
 *   insmod rawping.ko read=1 [port=18517]          # page server, read=1
 *   insmod rawping.ko server=IP read=1 count=N [check=0] [poll=1]
 *
 * @size is the bytes each message puts on the wire (16..4096; the RTT
 * benchmark passes 80, kping's 64 B message plus the 16 B kvmsg header
 * that kping sends with it).  The client tells the server @size in the
 * connection's private data; the server answers with its inline capacity.
 *
 * Both sides pre-post their receives; the CQ runs in softirq
 * (IB_POLL_SOFTIRQ); the server echoes from its receive completion and the
 * client sends the next ping from its reply's completion, after reposting
 * the receive.  t0 is taken after the payload is written, just before
 * ib_post_send(), as kping does.
 *
 * Signaling: as kverbs' send queue ledger, one send in RAWPING_SIGNAL_EVERY
 * is signaled.  Send slots are a ring; the completion of a signaled send
 * frees its slot and every slot posted before it (an RC send queue
 * completes in order).  When the ring is full, the next ping (client) or
 * echo (server) waits for that completion and is posted from it.
 *
 * Inline: with inline_send=1 each side asks its QP for @size bytes of
 * inline data and posts IB_SEND_INLINE when the QP granted that much (the
 * server then sends straight from the receive buffer, with no copy).  The
 * result says inline=1 only when both sides sent inline.
 *
 * check=1 fills a payload pattern and verifies every byte of every reply;
 * check=0 writes and verifies only the sequence number and the length, so
 * the benchmark pays no payload check here or in kping.  Any error
 * completion or bad reply ends the run with an error, once; the server
 * disconnects on its first error, so its client fails at once rather than
 * at its 60 s timeout, which logs where the window stood.  The client
 * logs one line (here wrapped):
 *
 *   rawping: result count=N size=S outstanding=O median_ns=X p99_ns=Y
 *            msgs_per_s=Z inline=0|1 signal_every=16 check=0|1 page=0|1
 *            [read=1 poll=0|1] [page_mismatches=M]
 *
 * page=1 is the raw limit of a DSM read fault's data path: the client
 * registers a 4 KiB page for remote write (FRWR, iova 0, so the wire
 * carries no kernel or DMA address) and sends its rkey in its hello; the
 * server answers each ping with one unsignaled 4 KiB RDMA write into that
 * page and then the echo on the same QP, so RC ordering lands the data
 * before the echo.  With check=1 the server fills the page from the
 * ping's sequence number and the client verifies it on each echo, after
 * taking the RTT; page_mismatches counts the rounds whose page was wrong,
 * and any makes the run fail once the result is logged.  page=1 needs
 * outstanding=1: the server writes every page from one source buffer.
 *
 * check=1 is not a throughput run.  With page=1 the client verifies the
 * page (rawping_page_verify(), 1024 words per echo) in the softirq CQ
 * handler under c->lock, after taking t1: the check is excluded from the
 * RTT but included in msgs_per_s, and it delays the next ping.  Measure
 * throughput with check=0.  The page mode lives in page.c.
 *
 * read=1 is the raw limit of one remote page fetch by RDMA READ, the
 * least a kmigrate post-copy fault costs.  The server (read=1) exports a
 * 4 KiB page per connection, filled once as ping 0's page (page.c),
 * registered by FRWR for remote read at iova 0 (no kernel or DMA address
 * on the wire); its accept's hello carries the page's rkey.  The QP
 * takes the registration only once it is RTS, at ESTABLISHED, after the
 * rkey left: the server then sends one ready message, and the client
 * waits for it (5 s at most).  The client then reads the page into its
 * own (mapped, under the PD's local_dma_lkey) @count times, one signaled
 * 4 KiB IB_WR_RDMA_READ at a time: t0 just before ib_post_send(), t1 at
 * the read's completion, which posts the next.  No message moves during
 * the run.  check=1 verifies the page (and zeroes it) after t1, as page
 * mode does.  A read=1 server serves read=1 clients only; a server
 * without read=1 refuses them.  size, outstanding (1) and inline_send do
 * not apply: the result says size=4096 signal_every=1 read=1.
 *
 * poll=1 (read=1 clients): the client's CQ is IB_POLL_DIRECT and its task
 * busy-polls it (ib_process_cq_direct(), cond_resched() between polls),
 * so each completion, and the next read, runs in the task instead of in
 * softirq after an interrupt.  The benchmark takes the better of poll=0
 * and poll=1.  Read mode and poll=1 live in read.c.
 *
 * Benchmark code, not a library: one connection per client, a handful on
 * the server, fixed sizes.
 */
#include "rawping-pri.h"

#include <linux/inet.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <rdma/ib_cm.h>

static char *server;
module_param(server, charp, 0444);
MODULE_PARM_DESC(server, "peer to ping; empty: be the echo server");
static ushort port = 18517;
module_param(port, ushort, 0444);
MODULE_PARM_DESC(port, "rdma_cm port");
static uint count = 1000;
module_param(count, uint, 0444);
MODULE_PARM_DESC(count, "round trips (client)");
static uint size = 64;
module_param(size, uint, 0444);
MODULE_PARM_DESC(size, "bytes on the wire per message, 16..4096 (client)");
static uint outstanding = 1;
module_param(outstanding, uint, 0444);
MODULE_PARM_DESC(outstanding, "pings in flight, 1..64 (client)");
static uint check = 1;
module_param(check, uint, 0444);
MODULE_PARM_DESC(check, "1: fill and verify the payload; 0: sequence number and length only (client)");
static bool inline_send;
module_param(inline_send, bool, 0444);
MODULE_PARM_DESC(inline_send, "post sends IB_SEND_INLINE when the QP takes the message inline");
static bool rawping_page_mode;
module_param_named(page, rawping_page_mode, bool, 0444);
MODULE_PARM_DESC(page, "1: the server RDMA-writes a 4 KiB page before each echo; needs outstanding=1 (client)");
static bool rawping_read_mode;
module_param_named(read, rawping_read_mode, bool, 0444);
MODULE_PARM_DESC(read, "1: the client RDMA-reads the server's 4 KiB page, one read at a time (both sides)");
static bool rawping_poll;
module_param_named(poll, rawping_poll, bool, 0444);
MODULE_PARM_DESC(poll, "1: busy-poll the CQ from the task (IB_POLL_DIRECT); needs read=1 (client)");

static struct rdma_cm_id *rawping_listen_id;
static struct workqueue_struct *rawping_wq;	/* server: free_work */
static struct rawping_conn *rawping_conns[RAWPING_MAX_CONN];
static DEFINE_MUTEX(rawping_lock);	/* rawping_conns */

static u8 rawping_pattern(u32 seq, u32 i)
{
	return seq * 13 + i;
}

/* SQ entries of @c's QP: see "Queue budget". */
static u32 rawping_send_wrs(const struct rawping_conn *c)
{
	if (c->read_mode)
		return c->is_client ? 2 : 3;
	return c->page_mode ? 2 * RAWPING_TX_SLOTS + 2 : RAWPING_TX_SLOTS + 1;
}

/*
 * Server: disconnect and free @c from rawping_wq.  Queued at most once
 * (the closing bit), so module exit can wait for it with one
 * cancel_work_sync().
 */
static void rawping_close(struct rawping_conn *c)
{
	if (!test_and_set_bit(0, &c->closing))
		queue_work(rawping_wq, &c->free_work);
}

/*
 * The first error ends the run (client) or the connection (server);
 * later ones (the flush behind it) do not.  The client's waits, for the
 * run (@event) or the read server's page (@ready), see it at once.
 */
void rawping_fail(struct rawping_conn *c, int err)
{
	if (cmpxchg(&c->error, 0, err))
		return;
	if (c->is_client) {
		complete(&c->event);
		complete(&c->ready);
	} else {
		rawping_close(c);
	}
}

/*
 * Retries: 6 transport retries, not 7, which rxe (like some HCAs) takes
 * as "retry forever": a lost packet must end the run with an error, not
 * hang it.  RNR: 7 (forever) is safe, a receive is always reposted.
 */
static void rawping_conn_param(struct rdma_conn_param *param,
			       struct rawping_hello *hello)
{
	/* read=1: one RDMA READ in flight, which both ends must allow */
	*param = (struct rdma_conn_param) {
		.responder_resources = 1,
		.initiator_depth = 1,
		.rnr_retry_count = 7,
		.retry_count = 6,
		.private_data = hello,
		.private_data_len = sizeof(*hello),
	};
}

static int rawping_post_recv(struct rawping_conn *c, int slot)
{
	struct ib_sge sge = {
		.addr = c->rx_dma + slot * RAWPING_MAX,
		.length = RAWPING_MAX,
		.lkey = c->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = {
		.wr_cqe = &c->rx_cqe[slot],
		.sg_list = &sge,
		.num_sge = 1,
	};

	return ib_post_recv(c->id->qp, &wr, NULL);
}

/* Give a receive slot back to the device. */
static int rawping_repost(struct rawping_conn *c, int slot)
{
	ib_dma_sync_single_for_device(c->pd->device,
				      c->rx_dma + slot * RAWPING_MAX,
				      RAWPING_MAX, DMA_FROM_DEVICE);
	return rawping_post_recv(c, slot);
}

static bool rawping_tx_full(const struct rawping_conn *c)
{
	return c->tx_used == RAWPING_TX_SLOTS;
}

/*
 * Post @len bytes from the next send slot, which must be free: a copy of
 * @src (server), or else ping @seq (client), whose t0 goes to *@t0 once
 * the payload is written.  @pre (page mode's RDMA write, unsignaled) is
 * posted in the same call, just before the send; the slot accounts for
 * both SQ entries.
 */
static int rawping_post_send(struct rawping_conn *c, const u8 *src, u32 len,
			     u32 seq, u64 *t0, struct ib_send_wr *pre)
{
	u32 slot = c->tx_next;
	u8 *p = c->tx_buf + slot * RAWPING_MAX;
	bool inl = len <= c->inline_max;
	struct ib_sge sge = {
		.length = len,
		.lkey = c->pd->local_dma_lkey,
	};
	struct ib_send_wr wr = {
		.wr_cqe = &c->tx_cqe[slot],
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IB_WR_SEND,
	};
	u32 i;
	int ret;

	lockdep_assert_held(&c->lock);
	if (src && inl) {
		/* ib_post_send() copies inline data: no slot copy needed */
		sge.addr = (uintptr_t)src;
	} else {
		if (src) {
			memcpy(p, src, len);
		} else {
			*(__be32 *)p = cpu_to_be32(seq);
			for (i = 4; check && i < len; i++)
				p[i] = rawping_pattern(seq, i);
			*t0 = ktime_get_ns();	/* where kping takes it */
		}
		if (inl) {
			/* the CPU reads inline data, at its kernel address */
			sge.addr = (uintptr_t)p;
		} else {
			sge.addr = c->tx_dma + slot * RAWPING_MAX;
			ib_dma_sync_single_for_device(c->pd->device, sge.addr,
						      len, DMA_TO_DEVICE);
		}
	}
	if (inl)
		wr.send_flags |= IB_SEND_INLINE;
	if (slot % RAWPING_SIGNAL_EVERY == RAWPING_SIGNAL_EVERY - 1)
		wr.send_flags |= IB_SEND_SIGNALED;
	if (pre)
		pre->next = &wr;
	ret = ib_post_send(c->id->qp, pre ?: &wr, NULL);
	if (ret)
		return ret;
	c->tx_next = (slot + 1) % RAWPING_TX_SLOTS;
	c->tx_used++;
	return 0;
}

/* Client: keep @outstanding pings in flight while send slots last. */
static int rawping_fill_window(struct rawping_conn *c)
{
	int ret;

	lockdep_assert_held(&c->lock);
	while (c->sent < count && c->sent - c->replies < outstanding &&
	       !rawping_tx_full(c)) {
		ret = rawping_post_send(c, NULL, size, c->sent,
					&c->t0[c->sent], NULL);
		if (ret)
			return ret;
		c->sent++;
	}
	return 0;
}

/* Server: echo the queued receives, in order, while send slots last. */
static int rawping_echo(struct rawping_conn *c)
{
	struct ib_rdma_wr write;
	struct ib_sge write_sge;
	const u8 *src;
	u32 slot;
	int ret;

	lockdep_assert_held(&c->lock);
	while (c->pend_tail != c->pend_head && !rawping_tx_full(c)) {
		slot = c->pend[c->pend_tail % RAWPING_SLOTS];
		src = c->rx_buf + slot * RAWPING_MAX;
		if (c->page_mode) {
			ret = rawping_page_write(c, src, c->rx_len[slot],
						 &write, &write_sge);
			if (ret)
				return ret;
		}
		ret = rawping_post_send(c, src, c->rx_len[slot], 0, NULL,
					c->page_mode ? &write.wr : NULL);
		if (ret)
			return ret;
		c->pend_tail++;
		ret = rawping_repost(c, slot);
		if (ret)
			return ret;
	}
	return 0;
}

static void rawping_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rawping_conn *c = cq->cq_context;
	u32 slot = wc->wr_cqe - c->tx_cqe;
	u32 first, done;
	int ret;

	/* A flush may complete unsignaled sends too: no reclaim after it. */
	if (wc->status != IB_WC_SUCCESS) {
		rawping_fail(c, rawping_wc_error(wc));
		return;
	}
	spin_lock(&c->lock);
	/* In order: this send and every busy one before it are done. */
	first = (c->tx_next + RAWPING_TX_SLOTS - c->tx_used) % RAWPING_TX_SLOTS;
	done = (slot + RAWPING_TX_SLOTS - first) % RAWPING_TX_SLOTS + 1;
	if (done > c->tx_used) {
		ret = -EIO;
	} else {
		c->tx_used -= done;
		ret = 0;
		if (!READ_ONCE(c->error))
			ret = c->is_client ? rawping_fill_window(c) :
					     rawping_echo(c);
	}
	spin_unlock(&c->lock);
	if (ret)
		rawping_fail(c, ret);
}

static int rawping_check(const u8 *p, u32 len, u32 seq)
{
	u32 i;

	if (len != size || be32_to_cpu(*(const __be32 *)p) != seq)
		return -EBADMSG;
	for (i = 4; check && i < len; i++)
		if (p[i] != rawping_pattern(seq, i))
			return -EBADMSG;
	return 0;
}

/* Client: reply number c->replies, then the next ping. */
static int rawping_reply(struct rawping_conn *c, const u8 *p, u32 len,
			 int slot)
{
	int ret;

	spin_lock(&c->lock);
	ret = c->replies < c->sent ? rawping_check(p, len, c->replies) :
				     -EBADMSG;
	if (!ret) {
		c->rtt[c->replies] = ktime_get_ns() - c->t0[c->replies];
		if (c->page_check)	/* after t1: the RTT excludes it */
			rawping_page_verify(c, c->replies);
		ret = rawping_repost(c, slot);
	}
	if (!ret && ++c->replies == count)
		complete(&c->event);
	else if (!ret)
		ret = rawping_fill_window(c);
	spin_unlock(&c->lock);
	return ret;
}

static void rawping_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rawping_conn *c = cq->cq_context;
	int slot = wc->wr_cqe - c->rx_cqe;
	u8 *p = c->rx_buf + slot * RAWPING_MAX;
	int ret;

	if (wc->status != IB_WC_SUCCESS) {
		rawping_fail(c, rawping_wc_error(wc));
		return;
	}
	if (READ_ONCE(c->error))
		return;
	ib_dma_sync_single_for_cpu(c->pd->device, c->rx_dma + slot * RAWPING_MAX,
				   wc->byte_len, DMA_FROM_DEVICE);
	if (c->is_client) {
		ret = rawping_reply(c, p, wc->byte_len, slot);
	} else {
		spin_lock(&c->lock);
		c->rx_len[slot] = wc->byte_len;
		c->pend[c->pend_head++ % RAWPING_SLOTS] = slot;
		ret = rawping_echo(c);
		spin_unlock(&c->lock);
	}
	if (ret)
		rawping_fail(c, ret);
}

static void rawping_conn_free(struct rawping_conn *c)
{
	struct ib_device *dev;

	/*
	 * The handlers post no more; the server's close is not requeued.
	 * A completion handler cannot post after the drain's completion
	 * (the CQ runs one handler at a time); a post from elsewhere (read
	 * mode's registration, from the CM handler) checks @error under
	 * @lock, so it is posted before the drain or never.
	 */
	spin_lock_bh(&c->lock);
	cmpxchg(&c->error, 0, -ESHUTDOWN);
	spin_unlock_bh(&c->lock);
	set_bit(0, &c->closing);
	if (c->id && c->id->qp) {
		if (READ_ONCE(c->established))
			rdma_disconnect(c->id);
		ib_drain_qp(c->id->qp);
		rdma_destroy_qp(c->id);
	}
	dev = c->pd ? c->pd->device : NULL;
	/* No WR references the MR once the QP is gone: its keys die here. */
	if (c->mr)
		ib_dereg_mr(c->mr);
	if (c->page_dma)
		ib_dma_unmap_sg(dev, &c->page_sg, 1, c->page_dir);
	if (c->rx_dma)
		ib_dma_unmap_single(dev, c->rx_dma,
				    RAWPING_SLOTS * RAWPING_MAX,
				    DMA_FROM_DEVICE);
	if (c->tx_dma)
		ib_dma_unmap_single(dev, c->tx_dma,
				    RAWPING_TX_SLOTS * RAWPING_MAX,
				    DMA_TO_DEVICE);
	if (c->cq)
		ib_free_cq(c->cq);
	if (c->pd)
		ib_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	kfree(c->rx_buf);
	kfree(c->tx_buf);
	kfree(c->page_buf);
	kvfree(c->t0);
	kvfree(c->rtt);
	kfree(c);
}

/* The RC QP, asking for @inline_data bytes of inline sends. */
static int rawping_create_qp(struct rawping_conn *c, u32 inline_data,
			     u32 *granted)
{
	struct ib_qp_init_attr attr = {
		.send_cq = c->cq,
		.recv_cq = c->cq,
		.cap = {
			.max_send_wr = rawping_send_wrs(c),
			.max_recv_wr = RAWPING_SLOTS + 1,
			.max_send_sge = 1,
			.max_recv_sge = 1,
			.max_inline_data = inline_data,
		},
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.qp_type = IB_QPT_RC,
	};
	int ret;

	ret = rdma_create_qp(c->id, c->pd, &attr);
	if (!ret)
		*granted = attr.cap.max_inline_data;
	return ret;
}

/* PD, CQ, QP and the posted receive ring, once the device is known. */
static int rawping_setup_qp(struct rawping_conn *c)
{
	struct ib_device *dev = c->id->device;
	u32 want = inline_send ? c->msg_len : 0, granted = 0;
	int i, ret;

	c->pd = ib_alloc_pd(dev, 0);
	if (IS_ERR(c->pd)) {
		ret = PTR_ERR(c->pd);
		c->pd = NULL;
		return ret;
	}
	c->cq = ib_alloc_cq_any(dev, c,
				rawping_send_wrs(c) + RAWPING_SLOTS + 1,
				c->poll ? IB_POLL_DIRECT : IB_POLL_SOFTIRQ);
	if (IS_ERR(c->cq)) {
		ret = PTR_ERR(c->cq);
		c->cq = NULL;
		return ret;
	}
	/* Mapped with ib_dma_map_single(): physically contiguous. */
	c->rx_buf = kzalloc(RAWPING_SLOTS * RAWPING_MAX, GFP_KERNEL);
	c->tx_buf = kzalloc(RAWPING_TX_SLOTS * RAWPING_MAX, GFP_KERNEL);
	if (!c->rx_buf || !c->tx_buf)
		return -ENOMEM;
	c->rx_dma = ib_dma_map_single(dev, c->rx_buf,
				      RAWPING_SLOTS * RAWPING_MAX,
				      DMA_FROM_DEVICE);
	if (ib_dma_mapping_error(dev, c->rx_dma)) {
		c->rx_dma = 0;
		return -ENOMEM;
	}
	c->tx_dma = ib_dma_map_single(dev, c->tx_buf,
				      RAWPING_TX_SLOTS * RAWPING_MAX,
				      DMA_TO_DEVICE);
	if (ib_dma_mapping_error(dev, c->tx_dma)) {
		c->tx_dma = 0;
		return -ENOMEM;
	}
	if (c->page_mode || c->read_mode) {
		ret = c->page_mode ? rawping_setup_page(c) :
				     rawping_read_setup(c);
		if (ret)
			return ret;
	}
	/* A device refuses more inline data than it takes: go without. */
	ret = rawping_create_qp(c, want, &granted);
	if (ret && want)
		ret = rawping_create_qp(c, 0, &granted);
	if (ret)
		return ret;
	c->inline_max = inline_send ? granted : 0;
	for (i = 0; i < RAWPING_SLOTS; i++) {
		c->rx_cqe[i].done = c->read_mode ? rawping_read_recv_done :
						   rawping_recv_done;
		ret = rawping_post_recv(c, i);
		if (ret)
			return ret;
	}
	for (i = 0; i < RAWPING_TX_SLOTS; i++)
		c->tx_cqe[i].done = rawping_send_done;
	return 0;
}

static void rawping_free_work(struct work_struct *work)
{
	struct rawping_conn *c = container_of(work, struct rawping_conn,
					      free_work);
	bool mine = false;
	int i;

	mutex_lock(&rawping_lock);
	for (i = 0; i < RAWPING_MAX_CONN; i++) {
		if (rawping_conns[i] == c) {
			rawping_conns[i] = NULL;
			mine = true;
		}
	}
	mutex_unlock(&rawping_lock);
	if (mine)	/* otherwise module exit owns it */
		rawping_conn_free(c);
}

static struct rawping_conn *rawping_conn_alloc(void)
{
	struct rawping_conn *c = kzalloc(sizeof(*c), GFP_KERNEL);

	if (c) {
		spin_lock_init(&c->lock);
		init_completion(&c->event);
		init_completion(&c->ready);
		INIT_WORK(&c->free_work, rawping_free_work);
	}
	return c;
}

/*
 * The peer's hello in *@h, zero past what it sent; false (and all zero)
 * if it sent none.
 */
static bool rawping_peer_hello(const struct rdma_cm_event *ev,
			       struct rawping_hello *h)
{
	u8 len = ev->param.conn.private_data_len;

	memset(h, 0, sizeof(*h));
	if (!ev->param.conn.private_data || len < RAWPING_HELLO_MIN)
		return false;
	memcpy(h, ev->param.conn.private_data, min_t(size_t, len, sizeof(*h)));
	return true;
}

/* Passive side: a slot, a QP, then the accept. */
static int rawping_accept(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct rawping_hello peer, hello = {};
	struct rdma_conn_param param;
	struct rawping_conn *c;
	int i, ret;

	c = rawping_conn_alloc();
	if (!c)
		return -ENOMEM;
	mutex_lock(&rawping_lock);
	for (i = 0; i < RAWPING_MAX_CONN && rawping_conns[i]; i++)
		;
	if (i < RAWPING_MAX_CONN)
		rawping_conns[i] = c;
	mutex_unlock(&rawping_lock);
	if (i == RAWPING_MAX_CONN) {
		kfree(c);
		return -EBUSY;
	}
	c->id = id;
	id->context = c;
	if (rawping_peer_hello(ev, &peer))
		c->msg_len = be32_to_cpu(peer.size);
	if (c->msg_len < 16 || c->msg_len > RAWPING_MAX)
		c->msg_len = 0;
	c->read_mode = rawping_read_mode;
	ret = rawping_read_accept(c, &peer) ?: rawping_page_accept(c, &peer);
	if (!ret)
		ret = rawping_setup_qp(c);
	if (ret) {
		pr_warn("refusing a connection: %d\n", ret);
		rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
	} else {
		hello.size = cpu_to_be32(c->msg_len);
		hello.inline_max = cpu_to_be32(c->inline_max);
		rawping_page_hello(c, &hello);
		rawping_read_hello(c, &hello);
		rawping_conn_param(&param, &hello);
		ret = rdma_accept(id, &param);	/* rejects itself on error */
	}
	if (ret)	/* the id stays until the free work destroys it */
		rawping_fail(c, ret);
	return 0;
}

static int rawping_cm(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct rawping_conn *c = id->context;
	struct rawping_hello peer, hello = { .size = cpu_to_be32(size) };
	struct rdma_conn_param param;
	int ret = 0;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		return rawping_accept(id, ev) ? 1 : 0;
	if (!c)		/* the listener: nothing to do */
		return 0;
	switch (ev->event) {
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (!c->is_client)	/* the peer left: no DREQ back */
			WRITE_ONCE(c->established, false);
		rawping_fail(c, -ECONNRESET);
		return 0;
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ret = rdma_resolve_route(id, 5000);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		ret = rawping_setup_qp(c);
		if (ret)
			break;
		rawping_page_hello(c, &hello);
		rawping_read_hello(c, &hello);
		rawping_conn_param(&param, &hello);
		ret = rdma_connect_locked(id, &param);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		WRITE_ONCE(c->established, true);
		if (!c->is_client) {
			ret = rawping_read_established(c, NULL);
			break;
		}
		if (rawping_peer_hello(ev, &peer))
			c->peer_inline_max = be32_to_cpu(peer.inline_max);
		ret = rawping_page_established(c, &peer) ?:
		      rawping_read_established(c, &peer);
		if (ret)
			break;
		complete(&c->event);
		break;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		ret = -ECONNREFUSED;
		break;
	default:
		break;
	}
	if (ret)	/* the client's run ends; a server conn closes */
		rawping_fail(c, ret);
	return 0;
}

static int rawping_cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/* Where a run that timed out stands: which side stopped answering. */
static void rawping_log_stall(struct rawping_conn *c)
{
	struct ib_qp_init_attr init;
	struct ib_qp_attr attr = {};
	int ret;

	ret = ib_query_qp(c->id->qp, &attr, IB_QP_STATE, &init);
	spin_lock_bh(&c->lock);
	pr_err("stalled: sent %u replies %u of %u, send slots used %u next %u, error %d, qp state %d (query %d)\n",
	       c->sent, c->replies, count, c->tx_used, c->tx_next, c->error,
	       ret ? -1 : attr.qp_state, ret);
	spin_unlock_bh(&c->lock);
}

static int rawping_run(struct rawping_conn *c)
{
	u64 start, elapsed, med, p99;
	char mode[16] = "", tail[32] = "";
	bool inl;
	int ret;
	long left;

	inl = !c->read_mode && size <= c->inline_max &&
	      size <= c->peer_inline_max;
	if (inline_send && !c->read_mode && !inl)
		pr_info("inline_send: this side sends %u bytes inline, the server %u; %u-byte messages go without\n",
			c->inline_max, c->peer_inline_max, size);
	if (c->page_mode) {
		ret = rawping_register_page(c);
		if (ret)
			return ret;
	}
	if (c->read_mode) {
		ret = rawping_read_wait_ready(c);
		if (ret)
			return ret;
	}
	start = ktime_get_ns();
	/* After reinit_completion(): an error since ESTABLISHED shows here. */
	spin_lock_bh(&c->lock);
	ret = READ_ONCE(c->error);
	if (!ret)
		ret = c->read_mode ? rawping_read_post(c) :
				     rawping_fill_window(c);
	spin_unlock_bh(&c->lock);
	if (ret)
		return ret;
	left = rawping_wait(c, &c->event, 60 * HZ);
	if (!left)
		rawping_log_stall(c);
	if (left <= 0)
		return left ? -EINTR : -ETIMEDOUT;
	if (c->error)
		return c->error;
	elapsed = ktime_get_ns() - start;
	sort(c->rtt, count, sizeof(*c->rtt), rawping_cmp_u64, NULL);
	med = c->rtt[count / 2];
	p99 = c->rtt[(count - 1) * 99 / 100];
	if (c->read_mode)
		snprintf(mode, sizeof(mode), " read=1 poll=%d", c->poll);
	if (c->page_check)
		snprintf(tail, sizeof(tail), " page_mismatches=%u",
			 c->page_mismatches);
	/* Read mode: 4 KiB per read, one in flight, each signaled. */
	pr_info("result count=%u size=%u outstanding=%u median_ns=%llu p99_ns=%llu msgs_per_s=%llu inline=%d signal_every=%d check=%u page=%d%s%s\n",
		count, c->read_mode ? RAWPING_PAGE : size, outstanding, med,
		p99,
		div64_u64((u64)count * NSEC_PER_SEC, max_t(u64, elapsed, 1)),
		inl, c->read_mode ? 1 : RAWPING_SIGNAL_EVERY, check,
		c->page_mode, mode, tail);
	return c->page_mismatches ? -EBADMSG : 0;
}

static int rawping_client(void)
{
	struct sockaddr_storage dst;
	struct rawping_conn *c;
	char portstr[8];
	long left;
	int ret;

	snprintf(portstr, sizeof(portstr), "%u", port);
	ret = inet_pton_with_scope(&init_net, AF_UNSPEC, server, portstr, &dst);
	if (ret)
		return ret;
	c = rawping_conn_alloc();
	if (!c)
		return -ENOMEM;
	c->is_client = true;
	c->msg_len = size;
	c->count = count;
	c->page_mode = rawping_page_mode;
	c->read_mode = rawping_read_mode;
	c->poll = rawping_poll;
	c->page_check = (rawping_page_mode || rawping_read_mode) && check;
	c->t0 = kvcalloc(count, sizeof(u64), GFP_KERNEL);
	c->rtt = kvcalloc(count, sizeof(u64), GFP_KERNEL);
	if (!c->t0 || !c->rtt) {
		ret = -ENOMEM;
		goto out;
	}
	c->id = rdma_create_id(&init_net, rawping_cm, c, RDMA_PS_TCP,
			       IB_QPT_RC);
	if (IS_ERR(c->id)) {
		ret = PTR_ERR(c->id);
		c->id = NULL;
		goto out;
	}
	ret = rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&dst, 5000);
	if (ret)
		goto out;
	left = wait_for_completion_killable_timeout(&c->event, 15 * HZ);
	if (left <= 0 || c->error || !c->established) {
		ret = c->error ?: (left < 0 ? -EINTR : -ETIMEDOUT);
		goto out;
	}
	reinit_completion(&c->event);
	ret = rawping_run(c);
out:
	if (ret)
		pr_err("run against %s failed: %d\n", server, ret);
	rawping_conn_free(c);
	return ret;
}

static int rawping_server(void)
{
	struct sockaddr_in any = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_ANY),
	};
	int ret;

	rawping_wq = alloc_workqueue("rawping", 0, 0);
	if (!rawping_wq)
		return -ENOMEM;
	rawping_listen_id = rdma_create_id(&init_net, rawping_cm, NULL,
					   RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(rawping_listen_id)) {
		destroy_workqueue(rawping_wq);
		return PTR_ERR(rawping_listen_id);
	}
	ret = rdma_bind_addr(rawping_listen_id, (struct sockaddr *)&any);
	if (!ret)
		ret = rdma_listen(rawping_listen_id, 8);
	if (ret) {
		rdma_destroy_id(rawping_listen_id);
		rawping_listen_id = NULL;
		destroy_workqueue(rawping_wq);
	}
	return ret;
}

static int __init rawping_init(void)
{
	if (size < 16 || size > RAWPING_MAX) {
		pr_err("size=%u: must be 16..%u\n", size, RAWPING_MAX);
		return -EINVAL;
	}
	if (!outstanding || outstanding > RAWPING_SLOTS) {
		pr_err("outstanding=%u: must be 1..%u\n", outstanding,
		       RAWPING_SLOTS);
		return -EINVAL;
	}
	if (check > 1) {
		pr_err("check=%u: must be 0 or 1\n", check);
		return -EINVAL;
	}
	if (!count) {
		pr_err("count=0: must be at least 1\n");
		return -EINVAL;
	}
	if (rawping_page_mode && outstanding != 1) {
		pr_err("page=1 needs outstanding=1, not %u: the server writes every page from one buffer\n",
		       outstanding);
		return -EINVAL;
	}
	if (rawping_read_mode && (rawping_page_mode || outstanding != 1)) {
		pr_err("read=1 reads one page at a time: no page=1, and outstanding=1\n");
		return -EINVAL;
	}
	if (rawping_poll && !(rawping_read_mode && server && *server)) {
		pr_err("poll=1 is for a read=1 client: only its waits poll the CQ\n");
		return -EINVAL;
	}
	return server && *server ? rawping_client() : rawping_server();
}

static void __exit rawping_exit(void)
{
	struct rawping_conn *c;
	int i;

	if (!rawping_listen_id)
		return;
	rdma_destroy_id(rawping_listen_id);
	for (i = 0; i < RAWPING_MAX_CONN; i++) {
		mutex_lock(&rawping_lock);
		c = rawping_conns[i];
		rawping_conns[i] = NULL;
		mutex_unlock(&rawping_lock);
		if (!c)
			continue;
		/* Out of the table, so a queued close leaves it to us. */
		set_bit(0, &c->closing);
		cancel_work_sync(&c->free_work);
		rawping_conn_free(c);
	}
	destroy_workqueue(rawping_wq);	/* closes that own their conn */
}

module_init(rawping_init);
module_exit(rawping_exit);

MODULE_DESCRIPTION("kverbs benchmark baseline: raw ib_core ping-pong");
MODULE_LICENSE("GPL");
