// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvreq: a kverbs client module kept outside the kverbs tree, built only
 * against an installed kverbs (its headers and its Module.symvers), the
 * way a third party writes one.  It asks a kping echo server for @count
 * round trips, one request in flight: connect, reserve a send buffer,
 * send, wait for the reply, check it, close.
 *
 *   insmod kvreq.ko server=10.77.0.1 [port=18515] [count=100] [size=256]
 *
 * The insmod fails with the first error; on success the module stays
 * loaded, idle (it holds a reference to kverbs.ko), until rmmod, and the
 * log says how many round trips it made.  Copy it: nothing here knows
 * more about kverbs than its headers.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/inet.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

#include <kverbs/kverbs.h>
#include <kverbs/kvmsg.h>
#include <uapi/kverbs/kping.h>

static char *server;
module_param(server, charp, 0444);
MODULE_PARM_DESC(server, "address of a kping echo server");
static ushort port = 18515;
module_param(port, ushort, 0444);
MODULE_PARM_DESC(port, "its rdma_cm port");
static uint count = 100;
module_param(count, uint, 0444);
MODULE_PARM_DESC(count, "round trips");
static uint size = 256;
module_param(size, uint, 0444);
MODULE_PARM_DESC(size, "request size in bytes, kping header included");
static uint node_id = 9;
module_param(node_id, uint, 0444);
MODULE_PARM_DESC(node_id, "our node id, non-zero");

/*
 * One request in flight: the handler copies the reply to request @seq
 * here.  @lock orders the handler (softirq) against the task's next
 * request; @error is set when the connection goes.
 */
struct kvreq_call {
	spinlock_t lock;		/* see above */
	struct completion done;
	u32 seq;
	int error;
	u32 len;
	u8 reply[];
};

static int kvreq_recv(struct kverbs_ep *ep, struct kvmsg_rx *rx,
		      enum kvmsg_ctx ctx)
{
	struct kvreq_call *call = kverbs_ep_priv(ep);
	const struct kping_msg *m = kvmsg_rx_data(rx);
	u32 len = kvmsg_rx_len(rx);
	int ret = 0;

	/* Anything but the reply to the request in flight: drop the peer. */
	if (len != size || be32_to_cpu(m->magic) != KPING_MAGIC)
		return -EBADMSG;
	spin_lock_bh(&call->lock);
	if (be32_to_cpu(m->seq) != call->seq || completion_done(&call->done)) {
		ret = -EBADMSG;
	} else {
		memcpy(call->reply, m, len);
		call->len = len;
		complete(&call->done);
	}
	spin_unlock_bh(&call->lock);
	return ret;
}

/* The connection went: wake the task instead of letting it time out. */
static void kvreq_disconnected(struct kverbs_ep *ep, int err)
{
	struct kvreq_call *call = kverbs_ep_priv(ep);

	spin_lock_bh(&call->lock);
	call->error = err ?: -ECONNRESET;
	complete(&call->done);
	spin_unlock_bh(&call->lock);
}

static const struct kverbs_domain_ops kvreq_ops = {
	.disconnected = kvreq_disconnected,
};

static void kvreq_send_done(struct kverbs_ep *ep, void *cookie, int status)
{
}

static const struct kvmsg_ops kvreq_msg_ops = {
	.recv = kvreq_recv,
	.send_done = kvreq_send_done,
};

/* Request @seq in kping's format: its payload pattern and FNV-1a. */
static void kvreq_fill(struct kping_msg *m, u32 seq)
{
	u32 i, h = KPING_FNV_BASIS, payload = size - sizeof(*m);

	m->magic = cpu_to_be32(KPING_MAGIC);
	m->seq = cpu_to_be32(seq);
	m->len = cpu_to_be32(payload);
	for (i = 0; i < payload; i++) {
		m->payload[i] = (u8)(seq * 31 + i * 7 + 1);
		h = (h ^ m->payload[i]) * KPING_FNV_PRIME;
	}
	m->check = cpu_to_be32(h);
}

static int kvreq_round_trip(struct kverbs_ep *ep, struct kvreq_call *call,
			    u32 seq)
{
	struct kvmsg_buf *b;
	int ret;

	long left;

	spin_lock_bh(&call->lock);
	if (call->error) {
		spin_unlock_bh(&call->lock);
		return call->error;
	}
	call->seq = seq;
	reinit_completion(&call->done);
	spin_unlock_bh(&call->lock);
	b = kvmsg_reserve(ep, size, 0);	/* sleeps for a buffer or a credit */
	if (IS_ERR(b))
		return PTR_ERR(b);
	kvreq_fill(kvmsg_buf_data(b), seq);
	ret = kvmsg_send(b, size, 0, NULL);	/* the buffer is kvmsg's now */
	if (ret)
		return ret;
	/*
	 * Bounded and killable: the reply, the connection's end (a vanished
	 * peer fails it after about 4 s of retries), a fatal signal to
	 * insmod, or 10 s.
	 */
	left = wait_for_completion_killable_timeout(&call->done, 10 * HZ);
	if (left < 0)
		return left;
	if (!left)
		return -ETIMEDOUT;
	return call->error;
}

/* The echo of request @seq, checked in place: header, pattern, FNV-1a. */
static int kvreq_check(const struct kvreq_call *call, u32 seq)
{
	const struct kping_msg *m = (const struct kping_msg *)call->reply;
	u32 i, h = KPING_FNV_BASIS, payload = size - sizeof(*m);

	if (call->len != size || be32_to_cpu(m->seq) != seq ||
	    be32_to_cpu(m->len) != payload)
		return -EBADMSG;
	for (i = 0; i < payload; i++) {
		if (m->payload[i] != (u8)(seq * 31 + i * 7 + 1))
			return -EBADMSG;
		h = (h ^ m->payload[i]) * KPING_FNV_PRIME;
	}
	return be32_to_cpu(m->check) == h ? 0 : -EBADMSG;
}

static int __init kvreq_init(void)
{
	struct kverbs_domain_attr attr = {
		.ops = &kvreq_ops,
		.msg = &kvreq_msg_ops,
		.name = "kvreq",
		.node_id = node_id,
		.depth = 16,
		.max_msg = 4096,
		.max_eps = 1,
	};
	struct sockaddr_storage dst;
	struct kverbs_domain *dom;
	struct kvreq_call *call;
	struct kverbs_ep *ep;
	char portstr[8];
	u32 seq;
	int ret;

	if (!server || size < sizeof(struct kping_msg) ||
	    size > attr.max_msg || !count)
		return -EINVAL;
	snprintf(portstr, sizeof(portstr), "%u", port);
	ret = inet_pton_with_scope(&init_net, AF_UNSPEC, server, portstr, &dst);
	if (ret)
		return ret;
	call = kzalloc(struct_size(call, reply, size), GFP_KERNEL);
	if (!call)
		return -ENOMEM;
	spin_lock_init(&call->lock);
	init_completion(&call->done);

	dom = kverbs_domain_create(&attr);
	if (IS_ERR(dom)) {
		ret = PTR_ERR(dom);
		goto out_call;
	}
	ep = kverbs_ep_connect(dom, (struct sockaddr *)&dst, 10000, call);
	if (IS_ERR(ep)) {
		ret = PTR_ERR(ep);
		pr_err("connect to %s port %u: %d\n", server, port, ret);
		goto out_dom;
	}
	for (seq = 0, ret = 0; seq < count && !ret; seq++)
		ret = kvreq_round_trip(ep, call, seq) ?: kvreq_check(call, seq);
	if (ret)
		pr_err("round trip %u: %d\n", seq - 1, ret);
	else
		pr_info("%u round trips with node %u ok\n", count,
			kverbs_ep_peer_node(ep));
	kverbs_ep_close(ep);
out_dom:
	kverbs_domain_destroy(dom);
out_call:
	kfree(call);
	return ret;
}

static void __exit kvreq_exit(void)
{
}

module_init(kvreq_init);
module_exit(kvreq_exit);
MODULE_DESCRIPTION("kverbs client example: request-reply against kping");
MODULE_LICENSE("GPL");
MODULE_VERSION("1.0");
KVERBS_IMPORT_NS();
