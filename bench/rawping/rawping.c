// SPDX-License-Identifier: GPL-2.0-only
/*
 * rawping: the RTT benchmark's baseline, a ping-pong written directly on
 * ib_core and rdma_cm with no kverbs code at all, so it is the limit of
 * this link for a kernel ULP.
 *
 *   insmod rawping.ko [port=18517]                        # echo server
 *   insmod rawping.ko server=IP count=N size=S outstanding=O
 *
 * Both sides pre-post their receives; the CQ runs in softirq
 * (IB_POLL_SOFTIRQ); the server echoes from its receive completion and the
 * client sends the next ping from its reply's completion.  Every send is
 * signaled and a send slot is reused only after its completion.  The client
 * checks each reply's sequence number and payload, and logs one line:
 *
 *   rawping: result count=N size=S outstanding=O median_ns=X p99_ns=Y msgs_per_s=Z
 *
 * Benchmark code, not a library: one connection per client, a handful on
 * the server, fixed sizes.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/inet.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

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
MODULE_PARM_DESC(size, "message bytes, 16..4096 (client)");
static uint outstanding = 1;
module_param(outstanding, uint, 0444);
MODULE_PARM_DESC(outstanding, "pings in flight, 1..64 (client)");

#define RAWPING_SLOTS	64	/* receive and send slots per connection */
#define RAWPING_MAX	4096
#define RAWPING_MAX_CONN	8

/*
 * One connection.  Slot i of @tx is free while @tx_busy bit i is clear.
 * @lock (bh) orders the client task filling the window with the reply
 * handler sending the next ping; completions of one CQ run one at a time.
 */
struct rawping_conn {
	spinlock_t lock;		/* see above */
	struct work_struct free_work;	/* server: free after a disconnect */
	struct rdma_cm_id *id;
	struct ib_pd *pd;
	struct ib_cq *cq;
	u8 *rx_buf;
	u8 *tx_buf;
	u64 rx_dma;
	u64 tx_dma;
	struct ib_cqe rx_cqe[RAWPING_SLOTS];
	struct ib_cqe tx_cqe[RAWPING_SLOTS];
	DECLARE_BITMAP(tx_busy, RAWPING_SLOTS);
	bool is_client;
	bool established;
	int error;
	struct completion event;	/* CM progress or the end of the run */
	/* client */
	u32 sent;
	u32 replies;
	u64 *t0;
	u64 *rtt;
};

static struct rdma_cm_id *rawping_listen_id;
static struct rawping_conn *rawping_conns[RAWPING_MAX_CONN];
static DEFINE_MUTEX(rawping_lock);	/* rawping_conns */

static u8 rawping_pattern(u32 seq, u32 i)
{
	return seq * 13 + i;
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

/* Post @len bytes from a free send slot: a copy of @src, or ping @seq. */
static int rawping_send(struct rawping_conn *c, const u8 *src, u32 len,
			u32 seq)
{
	const struct ib_send_wr *bad;
	struct ib_send_wr wr = {};
	struct ib_sge sge;
	int slot;
	u8 *p;
	u32 i;

	slot = find_first_zero_bit(c->tx_busy, RAWPING_SLOTS);
	if (slot >= RAWPING_SLOTS)
		return -ENOBUFS;
	p = c->tx_buf + slot * RAWPING_MAX;
	if (src) {
		memcpy(p, src, len);
	} else {
		*(__be32 *)p = cpu_to_be32(seq);
		for (i = 4; i < len; i++)
			p[i] = rawping_pattern(seq, i);
	}
	sge.addr = c->tx_dma + slot * RAWPING_MAX;
	sge.length = len;
	sge.lkey = c->pd->local_dma_lkey;
	ib_dma_sync_single_for_device(c->pd->device, sge.addr, len,
				      DMA_TO_DEVICE);
	wr.wr_cqe = &c->tx_cqe[slot];
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IB_WR_SEND;
	wr.send_flags = IB_SEND_SIGNALED;
	__set_bit(slot, c->tx_busy);
	return ib_post_send(c->id->qp, &wr, &bad);
}

static void rawping_fail(struct rawping_conn *c, int err)
{
	if (!c->error)
		c->error = err;
	complete(&c->event);
}

static void rawping_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rawping_conn *c = cq->cq_context;

	__clear_bit(wc->wr_cqe - c->tx_cqe, c->tx_busy);
	if (wc->status != IB_WC_SUCCESS && wc->status != IB_WC_WR_FLUSH_ERR)
		rawping_fail(c, -EIO);
}

static int rawping_check(const u8 *p, u32 len, u32 seq)
{
	u32 i;

	if (len != size || be32_to_cpu(*(const __be32 *)p) != seq)
		return -EBADMSG;
	for (i = 4; i < len; i++)
		if (p[i] != rawping_pattern(seq, i))
			return -EBADMSG;
	return 0;
}

static void rawping_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rawping_conn *c = cq->cq_context;
	int slot = wc->wr_cqe - c->rx_cqe;
	u8 *p = c->rx_buf + slot * RAWPING_MAX;
	int ret;

	if (wc->status != IB_WC_SUCCESS) {
		if (wc->status != IB_WC_WR_FLUSH_ERR)
			rawping_fail(c, -EIO);
		return;
	}
	ib_dma_sync_single_for_cpu(c->pd->device, c->rx_dma + slot * RAWPING_MAX,
				   wc->byte_len, DMA_FROM_DEVICE);
	if (!c->is_client) {
		ret = rawping_send(c, p, wc->byte_len, 0);
	} else {
		spin_lock(&c->lock);
		ret = rawping_check(p, wc->byte_len, c->replies);
		if (!ret) {
			c->rtt[c->replies] = ktime_get_ns() - c->t0[c->replies];
			if (++c->replies == count) {
				complete(&c->event);
			} else if (c->sent < count) {
				c->t0[c->sent] = ktime_get_ns();
				ret = rawping_send(c, NULL, size, c->sent++);
			}
		}
		spin_unlock(&c->lock);
	}
	ib_dma_sync_single_for_device(c->pd->device,
				      c->rx_dma + slot * RAWPING_MAX,
				      RAWPING_MAX, DMA_FROM_DEVICE);
	if (!ret)
		ret = rawping_post_recv(c, slot);
	if (ret)
		rawping_fail(c, ret);
}

static void rawping_conn_free(struct rawping_conn *c)
{
	struct ib_device *dev;

	if (c->id && c->id->qp) {
		if (c->established)
			rdma_disconnect(c->id);
		ib_drain_qp(c->id->qp);
		rdma_destroy_qp(c->id);
	}
	dev = c->pd ? c->pd->device : NULL;
	if (c->rx_dma)
		ib_dma_unmap_single(dev, c->rx_dma,
				    RAWPING_SLOTS * RAWPING_MAX,
				    DMA_FROM_DEVICE);
	if (c->tx_dma)
		ib_dma_unmap_single(dev, c->tx_dma,
				    RAWPING_SLOTS * RAWPING_MAX, DMA_TO_DEVICE);
	if (c->cq)
		ib_free_cq(c->cq);
	if (c->pd)
		ib_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	kvfree(c->rx_buf);
	kvfree(c->tx_buf);
	kvfree(c->t0);
	kvfree(c->rtt);
	kfree(c);
}

/* PD, CQ, QP and the posted receive ring, once the device is known. */
static int rawping_setup_qp(struct rawping_conn *c)
{
	struct ib_device *dev = c->id->device;
	struct ib_qp_init_attr attr = {};
	int i, ret;

	c->pd = ib_alloc_pd(dev, 0);
	if (IS_ERR(c->pd)) {
		ret = PTR_ERR(c->pd);
		c->pd = NULL;
		return ret;
	}
	c->cq = ib_alloc_cq_any(dev, c, 2 * (RAWPING_SLOTS + 1),
				IB_POLL_SOFTIRQ);
	if (IS_ERR(c->cq)) {
		ret = PTR_ERR(c->cq);
		c->cq = NULL;
		return ret;
	}
	c->rx_buf = kvzalloc(RAWPING_SLOTS * RAWPING_MAX, GFP_KERNEL);
	c->tx_buf = kvzalloc(RAWPING_SLOTS * RAWPING_MAX, GFP_KERNEL);
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
				      RAWPING_SLOTS * RAWPING_MAX,
				      DMA_TO_DEVICE);
	if (ib_dma_mapping_error(dev, c->tx_dma)) {
		c->tx_dma = 0;
		return -ENOMEM;
	}
	attr.send_cq = c->cq;
	attr.recv_cq = c->cq;
	attr.cap.max_send_wr = RAWPING_SLOTS + 1;
	attr.cap.max_recv_wr = RAWPING_SLOTS + 1;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	ret = rdma_create_qp(c->id, c->pd, &attr);
	if (ret)
		return ret;
	for (i = 0; i < RAWPING_SLOTS; i++) {
		c->rx_cqe[i].done = rawping_recv_done;
		c->tx_cqe[i].done = rawping_send_done;
		ret = rawping_post_recv(c, i);
		if (ret)
			return ret;
	}
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
		INIT_WORK(&c->free_work, rawping_free_work);
	}
	return c;
}

/* Passive side: a slot, a QP, then the accept. */
static int rawping_accept(struct rdma_cm_id *id)
{
	struct rdma_conn_param param = { .rnr_retry_count = 7,
					 .retry_count = 7 };
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
	ret = rawping_setup_qp(c);
	if (!ret)
		ret = rdma_accept(id, &param);
	if (ret)	/* the id stays; the free work disconnects it */
		queue_work(system_wq, &c->free_work);
	return 0;
}

static int rawping_cm(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct rawping_conn *c = id->context;
	struct rdma_conn_param param = { .rnr_retry_count = 7,
					 .retry_count = 7 };
	int ret = 0;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		return rawping_accept(id) ? 1 : 0;
	if (!c)		/* the listener: nothing to do */
		return 0;
	switch (ev->event) {
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (c->is_client) {
			rawping_fail(c, -ECONNRESET);
		} else {
			c->established = false;
			queue_work(system_wq, &c->free_work);
		}
		return 0;
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ret = rdma_resolve_route(id, 5000);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		ret = rawping_setup_qp(c);
		if (!ret)
			ret = rdma_connect_locked(id, &param);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		c->established = true;
		if (c->is_client)
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
	if (ret && c && c->is_client)
		rawping_fail(c, ret);
	return 0;
}

static int rawping_cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

static int rawping_run(struct rawping_conn *c)
{
	u64 start, elapsed, med, p99;
	int ret = 0;
	long left;

	start = ktime_get_ns();
	spin_lock_bh(&c->lock);
	while (!ret && c->sent < count && c->sent < outstanding) {
		c->t0[c->sent] = ktime_get_ns();
		ret = rawping_send(c, NULL, size, c->sent++);
	}
	spin_unlock_bh(&c->lock);
	if (ret)
		return ret;
	left = wait_for_completion_killable_timeout(&c->event, 60 * HZ);
	if (left <= 0)
		return left ? -EINTR : -ETIMEDOUT;
	if (c->error)
		return c->error;
	elapsed = ktime_get_ns() - start;
	sort(c->rtt, count, sizeof(*c->rtt), rawping_cmp_u64, NULL);
	med = c->rtt[count / 2];
	p99 = c->rtt[(count - 1) * 99 / 100];
	pr_info("result count=%u size=%u outstanding=%u median_ns=%llu p99_ns=%llu msgs_per_s=%llu\n",
		count, size, outstanding, med, p99,
		div64_u64((u64)count * NSEC_PER_SEC, max_t(u64, elapsed, 1)));
	return 0;
}

static int rawping_client(void)
{
	struct sockaddr_storage dst;
	struct rawping_conn *c;
	char portstr[8];
	long left;
	int ret;

	if (size < 16 || size > RAWPING_MAX || !count || !outstanding ||
	    outstanding > RAWPING_SLOTS)
		return -EINVAL;
	snprintf(portstr, sizeof(portstr), "%u", port);
	ret = inet_pton_with_scope(&init_net, AF_UNSPEC, server, portstr, &dst);
	if (ret)
		return ret;
	c = rawping_conn_alloc();
	if (!c)
		return -ENOMEM;
	c->is_client = true;
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

	rawping_listen_id = rdma_create_id(&init_net, rawping_cm, NULL,
					   RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(rawping_listen_id))
		return PTR_ERR(rawping_listen_id);
	ret = rdma_bind_addr(rawping_listen_id, (struct sockaddr *)&any);
	if (!ret)
		ret = rdma_listen(rawping_listen_id, 8);
	if (ret) {
		rdma_destroy_id(rawping_listen_id);
		rawping_listen_id = NULL;
	}
	return ret;
}

static int __init rawping_init(void)
{
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
		cancel_work_sync(&c->free_work);
		rawping_conn_free(c);
	}
}

module_init(rawping_init);
module_exit(rawping_exit);

MODULE_DESCRIPTION("kverbs benchmark baseline: raw ib_core ping-pong");
MODULE_LICENSE("GPL");
