// SPDX-License-Identifier: GPL-2.0-only
/*
 * rawping, read=1: the raw limit of one remote page fetch by RDMA READ.
 * The server exports a 4 KiB page per connection (FRWR, remote read, iova
 * 0, its rkey in the accept's hello) and says so with one ready message
 * once it is registered; the client reads it into its own page, one read
 * at a time, and times each.  poll=1 busy-polls the client's CQ from its
 * task (rawping_wait()).  See rawping.c's header for the mode.
 */
#include "rawping-pri.h"

#include <linux/ktime.h>
#include <linux/sched/signal.h>

/* The ready message: the server's page is registered. */
#define RAWPING_READ_READY	0x52454144	/* "READ" */

/*
 * poll=1: completions run per ib_process_cq_direct() call.  Any budget
 * works (the CQ holds one read and the ready message at most, read mode
 * posts nothing else); a small one returns to cond_resched() often.
 */
#define RAWPING_POLL_BUDGET	4

/*
 * Client: wait for @x up to @timeout jiffies; the remaining jiffies (at
 * least 1), 0 on timeout, -ERESTARTSYS on a fatal signal, as
 * wait_for_completion_killable_timeout(), which poll=0 uses.  poll=1:
 * the CQ is IB_POLL_DIRECT, so this task runs its completions meanwhile,
 * yielding the CPU with cond_resched() between polls.
 */
long rawping_wait(struct rawping_conn *c, struct completion *x, long timeout)
{
	unsigned long end = jiffies + timeout;

	if (!c->poll)
		return wait_for_completion_killable_timeout(x, timeout);
	for (;;) {
		ib_process_cq_direct(c->cq, RAWPING_POLL_BUDGET);
		if (try_wait_for_completion(x))
			return max_t(long, end - jiffies, 1);
		if (fatal_signal_pending(current))
			return -ERESTARTSYS;
		if (time_after_eq(jiffies, end))
			return 0;
		cond_resched();
	}
}

/*
 * Client: post read number @sent, the server's whole page into ours, t0
 * just before ib_post_send().  Under @lock: the read's completion may run
 * before ib_post_send() returns, and must find @sent counted.
 */
int rawping_read_post(struct rawping_conn *c)
{
	struct ib_sge sge = {
		.addr = c->page_dma,
		.length = RAWPING_PAGE,
		.lkey = c->pd->local_dma_lkey,
	};
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_cqe = &c->read_cqe,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IB_WR_RDMA_READ,
			.send_flags = IB_SEND_SIGNALED,
		},
		.remote_addr = 0,	/* the server registered at iova 0 */
		.rkey = c->remote_rkey,
	};
	int ret;

	lockdep_assert_held(&c->lock);
	c->t0[c->sent] = ktime_get_ns();
	ret = ib_post_send(c->id->qp, &wr.wr, NULL);
	if (!ret)
		c->sent++;
	return ret;
}

/*
 * Client: read number @replies landed.  t1 first; the page check
 * (check=1) and the next read's post follow, outside both intervals.
 */
static void rawping_read_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rawping_conn *c = cq->cq_context;
	u64 t1 = ktime_get_ns();
	int ret = 0;

	if (wc->status != IB_WC_SUCCESS) {
		rawping_fail(c, rawping_wc_error(wc));
		return;
	}
	spin_lock(&c->lock);
	if (c->replies == c->sent) {	/* a completion with no read posted */
		ret = -EIO;
	} else {
		c->rtt[c->replies] = t1 - c->t0[c->replies];
		if (c->page_check)	/* the server filled ping 0's page */
			rawping_page_verify(c, 0);
		if (++c->replies == c->count)
			complete(&c->event);
		else if (!READ_ONCE(c->error))
			ret = rawping_read_post(c);
	}
	spin_unlock(&c->lock);
	if (ret)
		rawping_fail(c, ret);
}

/*
 * Receives of a read-mode connection, never reposted.  Client: the
 * server's one ready message.  Server: its client sends nothing, and its
 * send queue has no room for an echo: any message ends the connection.
 * @read_ready is only touched here: the completions of one CQ run one at
 * a time.
 */
void rawping_read_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rawping_conn *c = cq->cq_context;
	int slot = wc->wr_cqe - c->rx_cqe;
	const __be32 *p = (const __be32 *)(c->rx_buf + slot * RAWPING_MAX);

	if (wc->status != IB_WC_SUCCESS) {
		rawping_fail(c, rawping_wc_error(wc));
		return;
	}
	if (!c->is_client || c->read_ready || wc->byte_len != sizeof(*p)) {
		rawping_fail(c, -EBADMSG);
		return;
	}
	ib_dma_sync_single_for_cpu(c->pd->device, c->rx_dma + slot * RAWPING_MAX,
				   sizeof(*p), DMA_FROM_DEVICE);
	if (be32_to_cpu(*p) != RAWPING_READ_READY) {
		rawping_fail(c, -EBADMSG);
		return;
	}
	c->read_ready = true;
	complete(&c->ready);
}

/* Server: the ready message, from send slot 0's buffer, signaled. */
static int rawping_read_post_ready(struct rawping_conn *c)
{
	struct ib_sge sge = {
		.addr = c->tx_dma,
		.length = sizeof(__be32),
		.lkey = c->pd->local_dma_lkey,
	};
	struct ib_send_wr wr = {
		.wr_cqe = &c->read_cqe,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	};

	lockdep_assert_held(&c->lock);
	*(__be32 *)c->tx_buf = cpu_to_be32(RAWPING_READ_READY);
	ib_dma_sync_single_for_device(c->pd->device, c->tx_dma, sge.length,
				      DMA_TO_DEVICE);
	return ib_post_send(c->id->qp, &wr, NULL);
}

/*
 * Server: the page is registered, so the client's reads will find it:
 * the ready message says so.  Posted only from this completion, not
 * chained behind the IB_WR_REG_MR: nothing orders a registration with
 * the peer's use of its rkey but its completion.
 */
static void rawping_read_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rawping_conn *c = cq->cq_context;
	int ret = 0;

	if (wc->status != IB_WC_SUCCESS) {
		rawping_fail(c, rawping_wc_error(wc));
		return;
	}
	spin_lock(&c->lock);
	if (!READ_ONCE(c->error))
		ret = rawping_read_post_ready(c);
	spin_unlock(&c->lock);
	if (ret)
		rawping_fail(c, ret);
}

/* Server: the ready message is sent; an error or a flush ends the conn. */
static void rawping_read_ready_sent(struct ib_cq *cq, struct ib_wc *wc)
{
	if (wc->status != IB_WC_SUCCESS)
		rawping_fail(cq->cq_context, rawping_wc_error(wc));
}

/*
 * Read mode's page, before the QP: the client's, mapped for the reads to
 * land in (the PD's local_dma_lkey covers it; no MR); the server's,
 * filled as ping 0's and mapped, with its MR at iova 0, registered at
 * ESTABLISHED (rawping_read_established()).
 */
int rawping_read_setup(struct rawping_conn *c)
{
	int ret;

	if (c->is_client) {
		c->read_cqe.done = rawping_read_done;
		return rawping_map_page(c, DMA_FROM_DEVICE);
	}
	c->reg_cqe.done = rawping_read_reg_done;
	c->read_cqe.done = rawping_read_ready_sent;
	ret = rawping_map_page(c, DMA_TO_DEVICE) ?: rawping_page_mr(c);
	if (!ret)
		rawping_page_fill(c, 0);
	return ret;
}

/*
 * Server: the client's hello asks for read mode (RAWPING_HELLO_READ) iff
 * this server exports pages (read=1); anything else is refused, so a
 * read connection never echoes and a ping never meets a read server.
 */
int rawping_read_accept(const struct rawping_conn *c,
			const struct rawping_hello *peer)
{
	bool asks = be32_to_cpu(peer->flags) & RAWPING_HELLO_READ;

	if (asks == c->read_mode)
		return 0;
	if (asks)
		pr_warn("client asks for read=1: this server runs without it\n");
	else
		pr_warn("this server runs with read=1: it serves read=1 clients only\n");
	return -EPROTO;
}

/*
 * The read fields of this side's hello: the client asks for read mode;
 * the server answers with its page, RAWPING_PAGE bytes at iova 0 under
 * @rkey (its MR's, registered at ESTABLISHED).
 */
void rawping_read_hello(const struct rawping_conn *c,
			struct rawping_hello *hello)
{
	if (!c->read_mode)
		return;
	hello->flags |= cpu_to_be32(RAWPING_HELLO_READ);
	if (c->is_client)
		return;
	hello->page_len = cpu_to_be32(RAWPING_PAGE);
	hello->rkey = cpu_to_be32(c->mr->rkey);
}

/*
 * Read mode, connected.  Server: post the page's registration; its
 * completion sends the ready message.  Not earlier: the QP takes send
 * WRs once it is RTS, which ESTABLISHED guarantees on any transport.
 * From the CM handler, not a CQ's: it checks @error under @lock, as
 * rawping_conn_free() sets it, so it posts before the drain or never.
 * Client: the server's page, from its accept (@peer).
 */
int rawping_read_established(struct rawping_conn *c,
			     const struct rawping_hello *peer)
{
	int ret;

	if (!c->read_mode)
		return 0;
	if (!c->is_client) {
		spin_lock_bh(&c->lock);
		ret = READ_ONCE(c->error) ?:
		      rawping_post_reg(c, IB_ACCESS_REMOTE_READ);
		spin_unlock_bh(&c->lock);
		return ret;
	}
	if (be32_to_cpu(peer->page_len) != RAWPING_PAGE ||
	    !(be32_to_cpu(peer->flags) & RAWPING_HELLO_READ)) {
		pr_err("read=1: the server exports no page (an older rawping?)\n");
		return -EPROTO;
	}
	c->remote_rkey = be32_to_cpu(peer->rkey);
	return 0;
}

/*
 * Client: wait (5 s at most) for the server's ready message, which may
 * have come before this task even saw ESTABLISHED: @ready is completed
 * by it or by the first error (rawping_fail()), and by nothing else.
 */
int rawping_read_wait_ready(struct rawping_conn *c)
{
	long left = rawping_wait(c, &c->ready, 5 * HZ);

	if (READ_ONCE(c->error))
		return c->error;
	if (!left)
		pr_err("read=1: the server's page was not registered in 5 s\n");
	if (left <= 0)
		return left ? -EINTR : -ETIMEDOUT;
	return 0;
}
