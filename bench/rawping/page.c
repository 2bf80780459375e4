// SPDX-License-Identifier: GPL-2.0-only
/*
 * rawping, page=1: the client's 4 KiB page, registered for remote write
 * with FRWR at iova 0, its rkey carried in the hello; the server's RDMA
 * write into it before each echo; the client's check of it (check=1).
 * The page's mapping, FRWR registration, fill and check serve read mode
 * (read.c) too.  See rawping.c's header for the modes and their cost.
 */
#include "rawping-pri.h"

#include <linux/slab.h>

/*
 * check=1: word @i of the page written for ping @seq (read mode: 0).
 * Pages of different pings differ in every word (for 2^22 pings), and no
 * word of ping 0's page is 0, so a transfer into a zeroed page that did
 * not land shows.
 */
static u32 rawping_page_word(u32 seq, u32 i)
{
	return (seq * (RAWPING_PAGE / 4) + i) ^ 0x5a5a5a5a;
}

/* Client: the page's registration, posted and waited for before the run. */
static void rawping_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rawping_conn *c = cq->cq_context;

	if (wc->status != IB_WC_SUCCESS)
		rawping_fail(c, rawping_wc_error(wc));
	else
		complete(&c->event);
}

/* Server: an RDMA write is unsignaled; only an error completes it. */
static void rawping_write_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rawping_conn *c = cq->cq_context;

	rawping_fail(c, wc->status == IB_WC_SUCCESS ? -EIO :
			rawping_wc_error(wc));
}

/*
 * The connection's page (page and read mode), zeroed and mapped for @dir
 * as @page_sg.  kmalloc() aligns a power-of-two size to itself: the page
 * is one MR page, at offset 0.  rawping_conn_free() unmaps it.
 */
int rawping_map_page(struct rawping_conn *c, enum dma_data_direction dir)
{
	c->page_buf = kzalloc(RAWPING_PAGE, GFP_KERNEL);
	if (!c->page_buf)
		return -ENOMEM;
	sg_init_one(&c->page_sg, c->page_buf, RAWPING_PAGE);
	if (ib_dma_map_sg(c->pd->device, &c->page_sg, 1, dir) != 1)
		return -ENOMEM;
	c->page_dir = dir;
	c->page_dma = sg_dma_address(&c->page_sg);
	return 0;
}

/*
 * A one-page FRWR MR over the mapped page, at iova 0 so the wire names
 * the page [0, RAWPING_PAGE) and carries no kernel or DMA address;
 * rawping_post_reg() registers it.
 */
int rawping_page_mr(struct rawping_conn *c)
{
	int n;

	c->mr = ib_alloc_mr(c->pd, IB_MR_TYPE_MEM_REG, 1);
	if (IS_ERR(c->mr)) {
		n = PTR_ERR(c->mr);
		c->mr = NULL;
		return n;
	}
	n = ib_map_mr_sg(c->mr, &c->page_sg, 1, NULL, RAWPING_PAGE);
	if (n != 1)
		return n < 0 ? n : -EINVAL;
	c->mr->iova = 0;
	return 0;
}

/*
 * Post the page's registration for @access: IB_WR_REG_MR, signaled,
 * completed at @reg_cqe.  Its rkey is @mr's, known (and sent in the
 * hello) before it is posted.
 */
int rawping_post_reg(struct rawping_conn *c, int access)
{
	struct ib_reg_wr wr = {
		.wr = {
			.wr_cqe = &c->reg_cqe,
			.opcode = IB_WR_REG_MR,
			.send_flags = IB_SEND_SIGNALED,
		},
		.mr = c->mr,
		.key = c->mr->rkey,
		.access = access,
	};

	return ib_post_send(c->id->qp, &wr.wr, NULL);
}

/*
 * Page mode: the client's page, mapped and ready for registration (posted
 * by rawping_register_page()), or the server's source page, mapped.
 */
int rawping_setup_page(struct rawping_conn *c)
{
	if (!c->is_client) {
		c->write_cqe.done = rawping_write_done;
		return rawping_map_page(c, DMA_TO_DEVICE);
	}
	c->reg_cqe.done = rawping_reg_done;
	return rawping_map_page(c, DMA_FROM_DEVICE) ?: rawping_page_mr(c);
}

/*
 * Client, page mode: register the page (IB_WR_REG_MR, signaled) and wait
 * for it, before the first ping, so the server's first write finds it.
 */
int rawping_register_page(struct rawping_conn *c)
{
	long left;
	int ret;

	ret = rawping_post_reg(c, IB_ACCESS_LOCAL_WRITE |
				  IB_ACCESS_REMOTE_WRITE);
	if (ret)
		return ret;
	left = wait_for_completion_killable_timeout(&c->event, 5 * HZ);
	if (left <= 0)
		return left ? -EINTR : -ETIMEDOUT;
	reinit_completion(&c->event);
	return 0;
}

/*
 * Server: fill the page as the one that answers ping @seq (page mode,
 * check=1; read mode fills it once, as ping 0's), for the device to read.
 */
void rawping_page_fill(struct rawping_conn *c, u32 seq)
{
	__be32 *w = (__be32 *)c->page_buf;
	u32 i;

	for (i = 0; i < RAWPING_PAGE / 4; i++)
		w[i] = cpu_to_be32(rawping_page_word(seq, i));
	ib_dma_sync_single_for_device(c->pd->device, c->page_dma,
				      RAWPING_PAGE, DMA_TO_DEVICE);
}

/*
 * Server, page mode: the RDMA write of the page that answers ping @src
 * into the client's page, in *@wr and *@sge for rawping_post_send().
 */
int rawping_page_write(struct rawping_conn *c, const u8 *src, u32 len,
		       struct ib_rdma_wr *wr, struct ib_sge *sge)
{
	if (len < sizeof(__be32))
		return -EBADMSG;
	if (c->page_check)
		rawping_page_fill(c, be32_to_cpu(*(const __be32 *)src));
	*sge = (struct ib_sge) {
		.addr = c->page_dma,
		.length = RAWPING_PAGE,
		.lkey = c->pd->local_dma_lkey,
	};
	*wr = (struct ib_rdma_wr) {
		.wr = {
			.wr_cqe = &c->write_cqe,
			.sg_list = sge,
			.num_sge = 1,
			.opcode = IB_WR_RDMA_WRITE,
		},
		.remote_addr = 0,	/* the client registered at iova 0 */
		.rkey = c->remote_rkey,
	};
	return 0;
}

/*
 * Client, check=1: the page as the server filled it for ping @seq?  A
 * wrong page counts, and the first is logged; the run goes on.  The page
 * is then zeroed for the next round: read mode reads the same page every
 * round, so only a zeroed page shows a read that did not land.
 */
void rawping_page_verify(struct rawping_conn *c, u32 seq)
{
	struct ib_device *dev = c->pd->device;
	__be32 *w = (__be32 *)c->page_buf;
	u32 i;

	ib_dma_sync_single_for_cpu(dev, c->page_dma, RAWPING_PAGE,
				   DMA_FROM_DEVICE);
	for (i = 0; i < RAWPING_PAGE / 4; i++)
		if (be32_to_cpu(w[i]) != rawping_page_word(seq, i))
			break;
	if (i < RAWPING_PAGE / 4 && !c->page_mismatches++)
		pr_err("page of ping %u: word %u is %#x, not %#x\n", seq, i,
		       be32_to_cpu(w[i]), rawping_page_word(seq, i));
	memset(w, 0, RAWPING_PAGE);
	ib_dma_sync_single_for_device(dev, c->page_dma, RAWPING_PAGE,
				      DMA_FROM_DEVICE);
}

/*
 * Server: the client's hello asks for page mode when it names a page of
 * RAWPING_PAGE bytes; any other page length is refused.
 */
int rawping_page_accept(struct rawping_conn *c,
			const struct rawping_hello *peer)
{
	u32 page_len = be32_to_cpu(peer->page_len);

	if (page_len == RAWPING_PAGE) {
		c->page_mode = true;
		c->remote_rkey = be32_to_cpu(peer->rkey);
		c->page_check = be32_to_cpu(peer->flags) & RAWPING_HELLO_CHECK;
	}
	if (page_len && !c->page_mode) {
		pr_warn("client's page is %u bytes, not %u\n", page_len,
			RAWPING_PAGE);
		return -EPROTO;
	}
	return 0;
}

/*
 * The page fields of this side's hello: the client's page, its rkey and
 * whether the server fills it (check=1); the server's page length.
 */
void rawping_page_hello(const struct rawping_conn *c,
			struct rawping_hello *hello)
{
	if (!c->page_mode)
		return;
	hello->page_len = cpu_to_be32(RAWPING_PAGE);
	if (!c->is_client)
		return;
	hello->rkey = cpu_to_be32(c->mr->rkey);
	hello->flags = cpu_to_be32(c->page_check ? RAWPING_HELLO_CHECK : 0);
}

/* Client: does the server that accepted us write the page? */
int rawping_page_established(const struct rawping_conn *c,
			     const struct rawping_hello *peer)
{
	if (c->page_mode && be32_to_cpu(peer->page_len) != RAWPING_PAGE) {
		pr_err("page=1: the server does not write the page (an older rawping?)\n");
		return -EPROTO;
	}
	return 0;
}
