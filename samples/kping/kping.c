// SPDX-License-Identifier: GPL-2.0-only
/*
 * kping: the simplest kverbs user, a ping-pong over one RC endpoint.
 *
 *   insmod kping.ko                          # server: echo on port 18515
 *   insmod kping.ko server=10.77.0.1 count=1000 size=64 node_id=2
 *
 * The client runs its round trips from module init, verifies every echo
 * (sequence, length, checksum, payload pattern; uapi/kverbs/kping.h) and
 * fails the insmod with the first error, so a script needs nothing but the
 * exit code and the log line.  The server echoes until rmmod.
 *
 * Uses only the exported API (include/kverbs/).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/inet.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/sort.h>

#include <kverbs/kverbs.h>
#include <uapi/kverbs/cm.h>
#include <uapi/kverbs/kping.h>

static char *server;
module_param(server, charp, 0444);
MODULE_PARM_DESC(server, "peer address to ping; empty: be the echo server");
static ushort port = 18515;
module_param(port, ushort, 0444);
MODULE_PARM_DESC(port, "rdma_cm port");
static uint count = 1000;
module_param(count, uint, 0444);
MODULE_PARM_DESC(count, "round trips (client)");
static uint size = 64;
module_param(size, uint, 0444);
MODULE_PARM_DESC(size, "message size in bytes, header included (client)");
static uint node_id = 1;
module_param(node_id, uint, 0444);
MODULE_PARM_DESC(node_id, "this node's id, non-zero");
static ushort depth = 16;
module_param(depth, ushort, 0444);
MODULE_PARM_DESC(depth, "receive buffers per endpoint");
static uint max_msg = 4096;
module_param(max_msg, uint, 0444);
MODULE_PARM_DESC(max_msg, "largest message accepted");
static uint timeout_ms = 10000;
module_param(timeout_ms, uint, 0444);
MODULE_PARM_DESC(timeout_ms, "connect and per-reply timeout");
static ushort rnr_retry = 7;
module_param(rnr_retry, ushort, 0444);
MODULE_PARM_DESC(rnr_retry, "RNR retry count, 7 = infinite");

/* Server state: echo counters only; endpoints belong to the domain. */
static struct kverbs_domain *kping_dom;
static struct kverbs_listener *kping_listener;
static atomic64_t kping_echoed = ATOMIC64_INIT(0);
static atomic64_t kping_dropped = ATOMIC64_INIT(0);

/*
 * Client state.  One request is outstanding, so the reply buffer has a
 * single writer (the recv callback) and a single reader (the waiter),
 * ordered by the completion.
 */
struct kping_client {
	struct completion reply;
	void *buf;
	u32 len;
};

static void kping_server_recv(struct kverbs_ep *ep, const void *buf, u32 len)
{
	int ret = kverbs_ep_send(ep, buf, len);

	if (ret) {
		atomic64_inc(&kping_dropped);
		pr_warn_ratelimited("echo to node %u failed: %d\n",
				    kverbs_ep_peer_node(ep), ret);
		return;
	}
	atomic64_inc(&kping_echoed);
}

static void kping_connected(struct kverbs_ep *ep)
{
	pr_info("node %u connected\n", kverbs_ep_peer_node(ep));
}

static void kping_disconnected(struct kverbs_ep *ep, int err)
{
	pr_info("node %u disconnected (%d), %lld echoed, %lld dropped\n",
		kverbs_ep_peer_node(ep), err, atomic64_read(&kping_echoed),
		atomic64_read(&kping_dropped));
}

static const struct kverbs_domain_ops kping_server_ops = {
	.connected = kping_connected,
	.disconnected = kping_disconnected,
	.recv = kping_server_recv,
};

static void kping_client_recv(struct kverbs_ep *ep, const void *buf, u32 len)
{
	struct kping_client *c = kverbs_ep_priv(ep);

	if (!c)
		return;
	c->len = min_t(u32, len, size);
	memcpy(c->buf, buf, c->len);
	complete(&c->reply);
}

static const struct kverbs_domain_ops kping_client_ops = {
	.recv = kping_client_recv,
};

static u8 kping_pattern(u32 seq, u32 i)
{
	return seq * 31 + i * 7 + 1;
}

static u32 kping_fnv1a(const u8 *p, u32 len)
{
	u32 h = KPING_FNV_BASIS;

	while (len--) {
		h ^= *p++;
		h *= KPING_FNV_PRIME;
	}
	return h;
}

static void kping_msg_fill(struct kping_msg *m, u32 seq, u32 payload)
{
	u32 i;

	m->magic = cpu_to_be32(KPING_MAGIC);
	m->seq = cpu_to_be32(seq);
	m->len = cpu_to_be32(payload);
	for (i = 0; i < payload; i++)
		m->payload[i] = kping_pattern(seq, i);
	m->check = cpu_to_be32(kping_fnv1a(m->payload, payload));
}

/* Validate a received message on its own, not against a copy. */
static int kping_msg_check(const struct kping_msg *m, u32 len, u32 seq)
{
	u32 i, payload;

	if (len < sizeof(*m) || be32_to_cpu(m->magic) != KPING_MAGIC ||
	    be32_to_cpu(m->seq) != seq)
		return -EBADMSG;
	payload = be32_to_cpu(m->len);
	if (payload != len - sizeof(*m) ||
	    be32_to_cpu(m->check) != kping_fnv1a(m->payload, payload))
		return -EBADMSG;
	for (i = 0; i < payload; i++)
		if (m->payload[i] != kping_pattern(seq, i))
			return -EBADMSG;
	return 0;
}

static int kping_cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

static int kping_parse_addr(const char *s, struct sockaddr_storage *ss)
{
	char portstr[8];

	snprintf(portstr, sizeof(portstr), "%u", port);
	return inet_pton_with_scope(&init_net, AF_UNSPEC, s, portstr, ss);
}

static struct kverbs_domain *kping_domain(const struct kverbs_domain_ops *ops,
					  const char *name, u16 max_eps)
{
	struct kverbs_domain_attr attr = {
		.ops = ops,
		.name = name,
		.node_id = node_id,
		.depth = depth,
		.max_msg = max_msg,
		.max_eps = max_eps,
		.rnr_retry = rnr_retry,
	};

	return kverbs_domain_create(&attr);
}

static int kping_run(struct kverbs_ep *ep, struct kping_client *c,
		     struct kping_msg *req, u64 *rtt)
{
	u32 i, payload = size - sizeof(*req);
	long left;
	int ret;

	for (i = 0; i < count; i++) {
		u64 t0;

		kping_msg_fill(req, i, payload);
		reinit_completion(&c->reply);
		t0 = ktime_get_ns();
		ret = kverbs_ep_send(ep, req, size);
		if (ret) {
			pr_err("send %u failed: %d\n", i, ret);
			return ret;
		}
		left = wait_for_completion_killable_timeout(&c->reply,
							    msecs_to_jiffies(timeout_ms));
		if (left <= 0) {
			pr_err("no reply to ping %u within %u ms\n", i,
			       timeout_ms);
			return left ? -EINTR : -ETIMEDOUT;
		}
		rtt[i] = ktime_get_ns() - t0;
		if (c->len != size || memcmp(c->buf, req, size) ||
		    kping_msg_check(c->buf, c->len, i)) {
			pr_err("reply %u corrupt (len %u, expected %u)\n", i,
			       c->len, size);
			return -EBADMSG;
		}
	}
	return 0;
}

static int kping_client(void)
{
	struct sockaddr_storage dst;
	struct kping_client c;
	struct kping_msg *req;
	struct kverbs_ep *ep;
	u64 *rtt;
	int ret;

	if (size < sizeof(*req) || size > max_msg || !count) {
		pr_err("size must be %zu..%u and count non-zero\n",
		       sizeof(*req), max_msg);
		return -EINVAL;
	}
	ret = kping_parse_addr(server, &dst);
	if (ret) {
		pr_err("bad server address '%s': %d\n", server, ret);
		return ret;
	}

	init_completion(&c.reply);
	c.buf = kmalloc(size, GFP_KERNEL);
	req = kmalloc(size, GFP_KERNEL);
	rtt = kvmalloc_array(count, sizeof(*rtt), GFP_KERNEL);
	if (!c.buf || !req || !rtt) {
		ret = -ENOMEM;
		goto out_free;
	}

	kping_dom = kping_domain(&kping_client_ops, "kping-client", 1);
	if (IS_ERR(kping_dom)) {
		ret = PTR_ERR(kping_dom);
		goto out_free;
	}
	ep = kverbs_ep_connect(kping_dom, (struct sockaddr *)&dst, timeout_ms);
	if (IS_ERR(ep)) {
		ret = PTR_ERR(ep);
		pr_err("connect to %s port %u failed: %d\n", server, port, ret);
		goto out_dom;
	}
	kverbs_ep_set_priv(ep, &c);
	pr_info("connected to node %u at %s port %u\n",
		kverbs_ep_peer_node(ep), server, port);

	ret = kping_run(ep, &c, req, rtt);
	kverbs_ep_set_priv(ep, NULL);
	kverbs_ep_close(ep);
	if (!ret) {
		sort(rtt, count, sizeof(*rtt), kping_cmp_u64, NULL);
		pr_info("%u round trips ok, size %u, median %llu us, p99 %llu us\n",
			count, size, div_u64(rtt[count / 2], 1000),
			div_u64(rtt[(count - 1) * 99 / 100], 1000));
	}
out_dom:
	kverbs_domain_destroy(kping_dom);
	kping_dom = NULL;
out_free:
	kvfree(rtt);
	kfree(req);
	kfree(c.buf);
	return ret;
}

static int kping_server(void)
{
	struct sockaddr_in any = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_ANY),
	};

	kping_dom = kping_domain(&kping_server_ops, "kping-server", 8);
	if (IS_ERR(kping_dom))
		return PTR_ERR(kping_dom);
	kping_listener = kverbs_listen(kping_dom, (struct sockaddr *)&any);
	if (IS_ERR(kping_listener)) {
		pr_err("cannot listen on port %u: %ld\n", port,
		       PTR_ERR(kping_listener));
		kverbs_domain_destroy(kping_dom);
		kping_dom = NULL;
		return PTR_ERR(kping_listener);
	}
	pr_info("node %u listening on port %u\n", node_id, port);
	return 0;
}

static int __init kping_init(void)
{
	return server && *server ? kping_client() : kping_server();
}

static void __exit kping_exit(void)
{
	if (!kping_dom)
		return;
	kverbs_domain_destroy(kping_dom);
	pr_info("server stopped, %lld echoed, %lld dropped\n",
		atomic64_read(&kping_echoed), atomic64_read(&kping_dropped));
}

module_init(kping_init);
module_exit(kping_exit);

MODULE_DESCRIPTION("kverbs sample: RC ping-pong");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS(KVERBS_NS);
