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
 * loaded, idle, until rmmod, and the log says how many round trips it
 * made.  Copy it: nothing here knows more about kverbs than its headers.
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

/* One request in flight: the handler copies its reply here. */
struct kvreq_call {
	struct completion done;
	u32 len;
	u8 reply[];
};

static int kvreq_recv(struct kverbs_ep *ep, struct kvmsg_rx *rx,
		      enum kvmsg_ctx ctx)
{
	struct kvreq_call *call = kverbs_ep_priv(ep);
	u32 len = kvmsg_rx_len(rx);

	/* A reply longer than the request cannot be ours: drop the peer. */
	if (len > size)
		return -EMSGSIZE;
	memcpy(call->reply, kvmsg_rx_data(rx), len);
	call->len = len;
	complete(&call->done);
	return 0;
}

static void kvreq_send_done(struct kverbs_ep *ep, void *cookie, int status)
{
}

static const struct kvmsg_ops kvreq_msg_ops = {
	.recv = kvreq_recv,
	.send_done = kvreq_send_done,
};

/* Request @seq: the kping header and a payload that names @seq. */
static void kvreq_fill(struct kping_msg *m, u32 seq)
{
	u32 i, payload = size - sizeof(*m);

	m->magic = cpu_to_be32(KPING_MAGIC);
	m->seq = cpu_to_be32(seq);
	m->len = cpu_to_be32(payload);
	m->check = 0;
	for (i = 0; i < payload; i++)
		m->payload[i] = (u8)(seq + i);
}

static int kvreq_round_trip(struct kverbs_ep *ep, struct kvreq_call *call,
			    u32 seq)
{
	struct kvmsg_buf *b;
	int ret;

	reinit_completion(&call->done);
	b = kvmsg_reserve(ep, size, 0);	/* sleeps for a buffer or a credit */
	if (IS_ERR(b))
		return PTR_ERR(b);
	kvreq_fill(kvmsg_buf_data(b), seq);
	ret = kvmsg_send(b, size, 0, NULL);	/* the buffer is kvmsg's now */
	if (ret)
		return ret;
	/* Bounded: a reply, or the endpoint's teardown after ~4 s of retries. */
	if (!wait_for_completion_timeout(&call->done, 10 * HZ))
		return -ETIMEDOUT;
	return 0;
}

static int kvreq_check(const struct kvreq_call *call, u32 seq)
{
	u8 want[sizeof(struct kping_msg) + 64];
	u32 n = min_t(u32, size, sizeof(want));

	if (call->len != size)
		return -EBADMSG;
	kvreq_fill((struct kping_msg *)want, seq);	/* the first bytes */
	return memcmp(call->reply, want, n) ? -EBADMSG : 0;
}

static int __init kvreq_init(void)
{
	struct kverbs_domain_attr attr = {
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

	if (!server || size < sizeof(struct kping_msg) + 64 ||
	    size > attr.max_msg || !count)
		return -EINVAL;
	snprintf(portstr, sizeof(portstr), "%u", port);
	ret = inet_pton_with_scope(&init_net, AF_UNSPEC, server, portstr, &dst);
	if (ret)
		return ret;
	call = kzalloc(struct_size(call, reply, size), GFP_KERNEL);
	if (!call)
		return -ENOMEM;
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
