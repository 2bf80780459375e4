// SPDX-License-Identifier: GPL-2.0-only
/*
 * kping: the simplest kverbs user, a ping-pong over one RC endpoint, and
 * the driver of the RTT benchmark.
 *
 *   insmod kping.ko [mode=softirq|wq|poll]          # echo server
 *   insmod kping.ko server=10.77.0.1 count=1000 size=64 node_id=2 \
 *          [mode=softirq|wq|poll] [outstanding=1] [burst=0]
 *
 * Where the handler runs is the point of @mode:
 *   softirq: in the CQ's softirq; the client's handler sends the next ping
 *            itself (the paper's "ISR" case);
 *   wq:      every message is deferred to process context on the domain's
 *            workqueue (the paper's "task queue");
 *   poll:    the client task (and a server kthread) busy-poll the CQ, and
 *            the handler runs in the polling task.
 * @outstanding pings are kept in flight; each reply sends the next.  That
 * window must stay below the receive depth of both sides (depth - 2), the
 * paper's rule that the credit window covers the protocol's bound on
 * messages in flight, so no handler ever waits for a credit.  @burst
 * one-way messages go first, as fast as credits allow; the server checks
 * their order and payload without answering.
 *
 * The client runs from module init, verifies every echo (sequence, length,
 * checksum, payload pattern; uapi/kverbs/kping.h; with check=0 the header
 * fields only, so the RTT benchmark pays no more than its baselines) in
 * place, and fails the
 * insmod with the first error, so a script needs nothing but the exit code
 * and the log line.  The server echoes until rmmod.
 *
 * Uses only the exported API (include/kverbs/).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/inet.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/sort.h>

#include <kverbs/kvmsg.h>
#include <kverbs/kverbs.h>
#include <uapi/kverbs/cm.h>
#include <uapi/kverbs/kping.h>
#include <uapi/kverbs/kvmsg.h>

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
MODULE_PARM_DESC(size, "message size in bytes, kping header included (client)");
static uint node_id = 1;
module_param(node_id, uint, 0444);
MODULE_PARM_DESC(node_id, "this node's id, non-zero");
static ushort depth = 128;
module_param(depth, ushort, 0444);
MODULE_PARM_DESC(depth, "receive buffers per endpoint");
static uint max_msg = 4096;
module_param(max_msg, uint, 0444);
MODULE_PARM_DESC(max_msg, "largest message accepted");
static uint timeout_ms = 10000;
module_param(timeout_ms, uint, 0444);
MODULE_PARM_DESC(timeout_ms, "connect and per-reply timeout");
static char *mode = "softirq";
module_param(mode, charp, 0444);
MODULE_PARM_DESC(mode, "where handlers run: softirq, wq or poll");
static uint outstanding = 1;
module_param(outstanding, uint, 0444);
MODULE_PARM_DESC(outstanding, "pings in flight (client), 1..depth - 2");
static uint burst;
module_param(burst, uint, 0444);
MODULE_PARM_DESC(burst, "one-way messages sent before the pings (client)");
static bool check = true;
module_param(check, bool, 0444);
MODULE_PARM_DESC(check, "fill and verify the payload pattern and checksum; off: header fields only (the RTT benchmark, as its baselines)");

static char *auth_key;
module_param(auth_key, charp, 0444);
MODULE_PARM_DESC(auth_key, "description of a logon key (kverbs:NAME) in the loading task's keyrings: every peer must prove it; empty: none");

enum kping_mode { KPING_SOFTIRQ, KPING_WQ, KPING_POLL };
static const char * const kping_modes[] = { "softirq", "wq", "poll" };
static enum kping_mode kping_mode;

/* Server state: counters; endpoints belong to the domain. */
static struct kverbs_domain *kping_dom;
static struct kverbs_listener *kping_listener;
static struct task_struct *kping_poller;
static atomic64_t kping_echoed = ATOMIC64_INIT(0);
static atomic64_t kping_dropped = ATOMIC64_INIT(0);

/* Per accepted endpoint: where its burst is. */
struct kping_peer {
	u32 burst_next;
	u32 burst_bad;
};

/*
 * Client state.  @lock orders claiming a sequence number with posting it,
 * so pings leave in sequence order whether the task or a handler sends.
 * @owed: a reply was handled but the ping it should trigger is not sent
 * yet (no buffer in atomic context); the deferred call sends it.
 */
struct kping_client {
	struct kverbs_ep *ep;
	spinlock_t lock;		/* see above */
	struct completion done;		/* all replies in, or an error */
	u32 sent;
	u32 replies;
	bool owed;
	int error;
	u64 *t0;
	u64 *rtt;
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

static void kping_msg_fill(struct kping_msg *m, u32 magic, u32 seq,
			   u32 payload)
{
	u32 i;

	m->magic = cpu_to_be32(magic);
	m->seq = cpu_to_be32(seq);
	m->len = cpu_to_be32(payload);
	m->check = 0;
	if (!check)
		return;
	for (i = 0; i < payload; i++)
		m->payload[i] = kping_pattern(seq, i);
	m->check = cpu_to_be32(kping_fnv1a(m->payload, payload));
}

/* Validate a received message on its own, not against a copy. */
static int kping_msg_check(const struct kping_msg *m, u32 len, u32 magic,
			   u32 seq)
{
	u32 i, payload;

	if (len < sizeof(*m) || be32_to_cpu(m->magic) != magic ||
	    be32_to_cpu(m->seq) != seq)
		return -EBADMSG;
	payload = be32_to_cpu(m->len);
	if (payload != len - sizeof(*m))
		return -EBADMSG;
	if (!check)
		return 0;
	if (be32_to_cpu(m->check) != kping_fnv1a(m->payload, payload))
		return -EBADMSG;
	for (i = 0; i < payload; i++)
		if (m->payload[i] != kping_pattern(seq, i))
			return -EBADMSG;
	return 0;
}

/* Process context handles everything in wq mode; so does a deferral. */
static bool kping_defer(enum kvmsg_ctx ctx)
{
	return kping_mode == KPING_WQ && ctx != KVMSG_CTX_PROCESS;
}

/*
 * The echo: a reply buffer, the bytes, a send.  The reserve does not
 * sleep in a handler; its -EAGAIN (no free buffer) handed back defers the
 * message to process context, or there has it called again once a buffer
 * is free.
 */
static int kping_server_recv(struct kverbs_ep *ep, struct kvmsg_rx *rx,
			     enum kvmsg_ctx ctx)
{
	struct kvmsg_buf *b;
	int ret;

	if (kping_defer(ctx))
		return -EAGAIN;
	if (kvmsg_rx_len(rx) >= sizeof(struct kping_msg) &&
	    be32_to_cpu(((const struct kping_msg *)kvmsg_rx_data(rx))->magic) ==
	    KPING_BURST_MAGIC) {
		struct kping_peer *p = kverbs_ep_priv(ep);

		if (kping_msg_check(kvmsg_rx_data(rx), kvmsg_rx_len(rx),
				    KPING_BURST_MAGIC, p->burst_next))
			p->burst_bad++;
		p->burst_next++;
		return 0;
	}
	b = kvmsg_reserve(ep, kvmsg_rx_len(rx), 0);
	if (IS_ERR(b)) {
		ret = PTR_ERR(b);
		if (ret == -EAGAIN)
			return ret;
		goto drop;
	}
	memcpy(kvmsg_buf_data(b), kvmsg_rx_data(rx), kvmsg_rx_len(rx));
	ret = kvmsg_send(b, kvmsg_rx_len(rx), 0, NULL);
	if (ret)
		goto drop;
	atomic64_inc(&kping_echoed);
	return 0;
drop:
	atomic64_inc(&kping_dropped);
	pr_warn_ratelimited("echo to node %u failed: %d\n",
			    kverbs_ep_peer_node(ep), ret);
	return 0;
}

static struct kping_peer kping_no_peer;	/* when allocation failed */

static void kping_connected(struct kverbs_ep *ep)
{
	struct kping_peer *p = kzalloc(sizeof(*p), GFP_KERNEL);

	kverbs_ep_set_priv(ep, p ?: &kping_no_peer);
	pr_info("node %u connected\n", kverbs_ep_peer_node(ep));
}

static void kping_disconnected(struct kverbs_ep *ep, int err)
{
	struct kping_peer *p = kverbs_ep_priv(ep);

	pr_info("node %u disconnected (%d), %lld echoed, %lld dropped\n",
		kverbs_ep_peer_node(ep), err, atomic64_read(&kping_echoed),
		atomic64_read(&kping_dropped));
	if (p && p->burst_next)
		pr_info("node %u: burst of %u, %u in order and intact\n",
			kverbs_ep_peer_node(ep), p->burst_next,
			p->burst_next - p->burst_bad);
	if (p != &kping_no_peer)
		kfree(p);
}

/* Sends are never posted with KVMSG_NOTIFY here. */
static void kping_send_done(struct kverbs_ep *ep, void *cookie, int status)
{
}

static const struct kverbs_domain_ops kping_server_ops = {
	.connected = kping_connected,
	.disconnected = kping_disconnected,
};

static const struct kvmsg_ops kping_server_msg_ops = {
	.recv = kping_server_recv,
	.send_done = kping_send_done,
};

/* Send ping number c->sent, with *@bp if the caller reserved already. */
static int kping_send_locked(struct kping_client *c, struct kvmsg_buf **bp)
{
	struct kvmsg_buf *b = *bp ?: kvmsg_reserve(c->ep, size, KVERBS_NOWAIT);
	int ret;

	if (IS_ERR(b))
		return PTR_ERR(b);
	*bp = NULL;
	kping_msg_fill(kvmsg_buf_data(b), KPING_MAGIC, c->sent,
		       size - sizeof(struct kping_msg));
	c->t0[c->sent] = ktime_get_ns();
	ret = kvmsg_send(b, size, 0, NULL);
	if (!ret)
		c->sent++;
	return ret;
}

static void kping_client_fail(struct kping_client *c, int err)
{
	if (!c->error)
		c->error = err;
	complete(&c->done);
}

/* Verify reply number c->replies in place. */
static int kping_reply_locked(struct kping_client *c, struct kvmsg_rx *rx)
{
	u32 seq = c->replies;

	if (seq >= c->sent || kvmsg_rx_len(rx) != size ||
	    kping_msg_check(kvmsg_rx_data(rx), size, KPING_MAGIC, seq)) {
		pr_err("reply %u corrupt or unexpected (len %u, expected %u)\n",
		       seq, kvmsg_rx_len(rx), size);
		return -EBADMSG;
	}
	c->rtt[seq] = ktime_get_ns() - c->t0[seq];
	/* Wake the task once, at the end: a wake-up per reply would cost
	 * every round trip a context switch.
	 */
	if (++c->replies == count)
		complete(&c->done);
	return 0;
}

static int kping_client_recv(struct kverbs_ep *ep, struct kvmsg_rx *rx,
			     enum kvmsg_ctx ctx)
{
	struct kping_client *c = kverbs_ep_priv(ep);
	struct kvmsg_buf *b = NULL;
	int v = 0, ret = 0;

	if (READ_ONCE(c->error))
		return 0;
	if (kping_defer(ctx))
		return -EAGAIN;
	if (ctx == KVMSG_CTX_PROCESS) {
		b = kvmsg_reserve(ep, size, 0);
		/* None free: kvmsg calls again when one is (nothing done yet). */
		if (b == ERR_PTR(-EAGAIN))
			return -EAGAIN;
		if (IS_ERR(b)) {
			ret = PTR_ERR(b);
			b = NULL;
		}
	}
	spin_lock_bh(&c->lock);
	if (!ret && !c->owed) {
		ret = kping_reply_locked(c, rx);
		c->owed = !ret && c->sent < count;
	}
	if (!ret && c->owed) {
		ret = kping_send_locked(c, &b);
		if (ret == -EAGAIN) {
			v = -EAGAIN;	/* no buffer: sleep for one */
			ret = 0;
		} else if (!ret) {
			c->owed = false;
		}
	}
	if (ret)
		kping_client_fail(c, ret);
	spin_unlock_bh(&c->lock);
	if (b)
		kvmsg_unreserve(b);
	return v;
}

/*
 * The endpoint went down under the run (a failed post, the peer gone):
 * its error ends the wait at once, not timeout_ms later.  A local close
 * comes after the run, with nobody waiting.
 */
static void kping_client_disconnected(struct kverbs_ep *ep, int err)
{
	struct kping_client *c = kverbs_ep_priv(ep);

	spin_lock_bh(&c->lock);
	kping_client_fail(c, err ?: -ECONNRESET);
	spin_unlock_bh(&c->lock);
}

static const struct kverbs_domain_ops kping_client_ops = {
	.disconnected = kping_client_disconnected,
};

static const struct kvmsg_ops kping_client_msg_ops = {
	.recv = kping_client_recv,
	.send_done = kping_send_done,
};

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
					  const struct kvmsg_ops *msg,
					  const char *name, u16 max_eps)
{
	struct kverbs_domain_attr attr = {
		.ops = ops,
		.msg = msg,
		.name = name,
		.node_id = node_id,
		.depth = depth,
		.max_msg = max_msg,
		.max_eps = max_eps,
		.auth_key = auth_key && *auth_key ? auth_key : NULL,
	};
	struct kverbs_domain *dom = kverbs_domain_create(&attr);

	if (IS_ERR(dom))
		pr_err("cannot create domain %s: %ld%s\n", name, PTR_ERR(dom),
		       PTR_ERR(dom) == -ENOKEY ?
		       " (no such logon key in the loading task's keyrings)" :
		       "");
	return dom;
}

/* The one-way burst: the task sends, credits alone pace it. */
static int kping_burst(struct kping_client *c)
{
	struct kvmsg_buf *b;
	u32 i;
	int ret;

	for (i = 0; i < burst; i++) {
		b = kvmsg_reserve(c->ep, size, 0);
		if (IS_ERR(b))
			return PTR_ERR(b);
		kping_msg_fill(kvmsg_buf_data(b), KPING_BURST_MAGIC, i,
			       size - sizeof(struct kping_msg));
		ret = kvmsg_send(b, size, 0, NULL);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Keep @outstanding pings in flight until @count replies came back.  The
 * task fills the window; each reply's handler sends the next ping.
 */
static int kping_run(struct kping_client *c)
{
	unsigned int poll_us = kping_mode == KPING_POLL ? timeout_ms * 1000 : 0;
	struct kvmsg_buf *b;
	bool more = true;
	u32 seen;
	int ret;

	while (more) {
		b = kvmsg_reserve(c->ep, size, 0);
		if (IS_ERR(b))
			return PTR_ERR(b);
		spin_lock_bh(&c->lock);
		ret = 0;
		more = c->sent < count && c->sent - c->replies < outstanding;
		if (more)
			ret = kping_send_locked(c, &b);
		spin_unlock_bh(&c->lock);
		if (b)
			kvmsg_unreserve(b);
		if (ret)
			return ret;
	}
	/* Fail when no reply came for timeout_ms, however long the run. */
	for (;;) {
		seen = READ_ONCE(c->replies);
		ret = kvmsg_wait_poll_us(kping_dom, &c->done, poll_us,
					 timeout_ms * USEC_PER_MSEC);
		if (ret == -EINTR)
			return ret;
		if (!ret)
			return READ_ONCE(c->error);
		if (READ_ONCE(c->replies) == seen) {
			pr_err("no reply to ping %u within %u ms\n", seen,
			       timeout_ms);
			return -ETIMEDOUT;
		}
	}
}

static void kping_report(struct kping_client *c, u64 elapsed)
{
	u64 med, p99, rate;

	sort(c->rtt, count, sizeof(*c->rtt), kping_cmp_u64, NULL);
	med = c->rtt[count / 2];
	p99 = c->rtt[(count - 1) * 99 / 100];
	rate = div64_u64((u64)count * NSEC_PER_SEC, max_t(u64, elapsed, 1));
	pr_info("%u round trips ok, size %u, median %llu us, p99 %llu us\n",
		count, size, div_u64(med, 1000), div_u64(p99, 1000));
	pr_info("result mode=%s count=%u size=%u outstanding=%u median_ns=%llu p99_ns=%llu msgs_per_s=%llu wire=%zu check=%d\n",
		kping_modes[kping_mode], count, size, outstanding, med, p99,
		rate, size + sizeof(struct kvmsg_hdr), check);
}

static int kping_client(void)
{
	struct sockaddr_storage dst;
	struct kping_client c = {};
	u64 start;
	int ret;

	if (size < sizeof(struct kping_msg) || size > max_msg || !count ||
	    !outstanding || outstanding + 2 > depth) {
		pr_err("size must be %zu..%u, count non-zero, outstanding 1..depth - 2 (%u)\n",
		       sizeof(struct kping_msg), max_msg, depth - 2);
		return -EINVAL;
	}
	ret = kping_parse_addr(server, &dst);
	if (ret) {
		pr_err("bad server address '%s': %d\n", server, ret);
		return ret;
	}

	spin_lock_init(&c.lock);
	init_completion(&c.done);
	c.t0 = kvmalloc_array(count, sizeof(*c.t0), GFP_KERNEL);
	c.rtt = kvmalloc_array(count, sizeof(*c.rtt), GFP_KERNEL);
	if (!c.t0 || !c.rtt) {
		ret = -ENOMEM;
		goto out_free;
	}

	kping_dom = kping_domain(&kping_client_ops, &kping_client_msg_ops,
				 "kping-client", 1);
	if (IS_ERR(kping_dom)) {
		ret = PTR_ERR(kping_dom);
		goto out_free;
	}
	c.ep = kverbs_ep_connect(kping_dom, (struct sockaddr *)&dst,
				 timeout_ms, &c);
	if (IS_ERR(c.ep)) {
		ret = PTR_ERR(c.ep);
		pr_err("connect to %s port %u failed: %d\n", server, port, ret);
		goto out_dom;
	}
	pr_info("connected to node %u at %s port %u, mode %s\n",
		kverbs_ep_peer_node(c.ep), server, port,
		kping_modes[kping_mode]);

	ret = kping_burst(&c);
	if (ret)
		pr_err("burst failed after %u messages: %d\n", burst, ret);
	start = ktime_get_ns();
	if (!ret) {
		ret = kping_run(&c);
		if (ret)
			pr_err("run failed after %u of %u replies: %d\n",
			       READ_ONCE(c.replies), count, ret);
	}
	if (!ret)
		kping_report(&c, ktime_get_ns() - start);
	kverbs_ep_close(c.ep);
out_dom:
	kverbs_domain_destroy(kping_dom);
	kping_dom = NULL;
out_free:
	kvfree(c.rtt);
	kvfree(c.t0);
	return ret;
}

/* Server side of poll mode: handlers run in this thread. */
static int kping_poll_thread(void *arg)
{
	while (!kthread_should_stop()) {
		if (kverbs_domain_poll(kping_dom) < 0)
			schedule_timeout_interruptible(HZ / 100);
		cond_resched();
	}
	return 0;
}

static int kping_server(void)
{
	struct sockaddr_in any = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_ANY),
	};

	kping_dom = kping_domain(&kping_server_ops, &kping_server_msg_ops,
				 "kping-server", 8);
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
	if (kping_mode == KPING_POLL) {
		kping_poller = kthread_run(kping_poll_thread, NULL, "kping-poll");
		if (IS_ERR(kping_poller)) {
			kverbs_domain_destroy(kping_dom);
			kping_dom = NULL;
			return PTR_ERR(kping_poller);
		}
	}
	pr_info("node %u listening on port %u, mode %s\n", node_id, port,
		kping_modes[kping_mode]);
	return 0;
}

static int __init kping_init(void)
{
	int m = match_string(kping_modes, ARRAY_SIZE(kping_modes), mode);

	if (m < 0) {
		pr_err("unknown mode '%s': softirq, wq or poll\n", mode);
		return -EINVAL;
	}
	kping_mode = m;
	return server && *server ? kping_client() : kping_server();
}

static void __exit kping_exit(void)
{
	if (!kping_dom)
		return;
	if (kping_poller)
		kthread_stop(kping_poller);
	kverbs_domain_destroy(kping_dom);
	pr_info("server stopped, %lld echoed, %lld dropped\n",
		atomic64_read(&kping_echoed), atomic64_read(&kping_dropped));
}

module_init(kping_init);
module_exit(kping_exit);

MODULE_DESCRIPTION("kverbs sample: RC ping-pong");
MODULE_LICENSE("GPL");
MODULE_VERSION(KVERBS_VERSION);
KVERBS_IMPORT_NS();
