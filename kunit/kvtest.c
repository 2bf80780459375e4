// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvtest: integration scenarios for the kverbs regression tests.  Built
 * only with KVERBS_KUNIT=m, never shipped; uses only include/kverbs/.
 *
 *   insmod kvtest.ko [addr=A] [greet=1] [keep=1] [depth=D] [fanout=N] # server
 *   insmod kvtest.ko server=A scenario=S node_id=N [...]      # client
 *
 * The server echoes every message.  With @addr it listens on that address
 * only (an address-bound listener), otherwise on the wildcard.  @greet:
 * its ->connected sends a greeting at once (a passive endpoint must be
 * able to send from ->connected).  @keep: its handler runs in process
 * context, keeps the message, hands it to a work item that releases it,
 * and sleeps before returning, so the release races the return.  @slow:
 * its ->connected sleeps 200 ms, and no ->recv() may run meanwhile.
 * @fanout: a message of any other size than ours (a kvping ping) is
 * answered @fanout times with a copy of itself from process context, more
 * sends than a peer's credits cover: a peer that keeps its credits
 * (kvping --withhold-ms) exhausts its endpoint's send buffers.  A HELLO
 * message is answered with the kverbs_remote of a region granted to that
 * peer only; a LARGE one with that of one page of the @large region.
 *
 * Client scenarios (insmod fails with the first error):
 *   echo       @count round trips, payload checked;
 *   reconnect  @count connect/echo/close cycles; errors are counted, not
 *              fatal (the server's device may be going away);
 *   sqfull     at @depth, @depth unsignaled RDMA writes and @depth sends
 *              posted without waiting, then close;
 *   greet      the first message must be the server's greeting;
 *   scope      the key of a grant for this connection must not work on a
 *              second connection to the same server;
 *   large      against a server with @large: read pages of its @count MiB
 *              region across its extents, each holding its index;
 *   leave      @count messages sent at once, then close without waiting
 *              for the echoes (against @keep: the server's deferred
 *              handling is busy when its teardown runs);
 *   nodone     a read, a page read and an atomic without a completion
 *              callback are refused (-EINVAL) before anything is posted,
 *              and the connection still reads;
 *   freed      planted fault: an RDMA write from a page whose count
 *              reads zero, which test builds of kverbs must WARN about;
 *   deadline   connect with a deadline of @count ms (kverbs'
 *              test_connect_delay_ms makes the handshake end after it):
 *              ->connected and ->disconnected must run if and only if the
 *              connect returned an endpoint;
 *   late       a grant revoked behind an RDMA read still in flight (the
 *              test delays the client's packets): the invalidation is late,
 *              kverbs nudges the send queue (kverbs_nudge trace event), the
 *              revoke and the read complete and the connection still
 *              echoes.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/inet.h>
#include <linux/ktime.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include <kverbs/kvmsg.h>
#include <kverbs/kverbs.h>

static char *server;
module_param(server, charp, 0444);
MODULE_PARM_DESC(server, "peer address; empty: be the server");
static char *addr;
module_param(addr, charp, 0444);
MODULE_PARM_DESC(addr, "server: listen on this address only");
static ushort port = 18517;
module_param(port, ushort, 0444);
MODULE_PARM_DESC(port, "rdma_cm port");
static uint node_id = 1;
module_param(node_id, uint, 0444);
MODULE_PARM_DESC(node_id, "this node's id, non-zero");
static ushort depth = 16;
module_param(depth, ushort, 0444);
MODULE_PARM_DESC(depth, "receive depth");
static char *scenario = "echo";
module_param(scenario, charp, 0444);
MODULE_PARM_DESC(scenario, "client: echo, reconnect, sqfull, greet, scope, large, leave, nodone, deadline, freed or late");
static uint count = 100;
module_param(count, uint, 0444);
MODULE_PARM_DESC(count, "client: round trips or cycles");
static bool greet;
module_param(greet, bool, 0444);
MODULE_PARM_DESC(greet, "server: send a greeting from ->connected");
static unsigned int fanout;
module_param(fanout, uint, 0444);
MODULE_PARM_DESC(fanout, "server: answer other messages this many times, deferred");

static bool keep;
module_param(keep, bool, 0444);
MODULE_PARM_DESC(keep, "server: keep each message, release it from a work item");
static uint large;
module_param(large, uint, 0444);
MODULE_PARM_DESC(large, "server: MiB of a second region, each page holding its index");
static uint hold_ms = 5;
module_param(hold_ms, uint, 0444);
MODULE_PARM_DESC(hold_ms, "server with @keep: each handler sleeps this long");
static bool slow;
module_param(slow, bool, 0444);
MODULE_PARM_DESC(slow, "server: ->connected sleeps; no ->recv may overlap it");

#define KVTEST_PAGES	16	/* 64 KiB writes stay in the send queue until acked */
#define KVTEST_LEN	(KVTEST_PAGES * PAGE_SIZE)
#define KVTEST_MAGIC	0x6b767473U

enum kvtest_type { KVTEST_DATA = 1, KVTEST_GREETING, KVTEST_HELLO,
		   KVTEST_INFO, KVTEST_LARGE };

struct kvtest_msg {
	u32 magic;
	u32 type;
	u32 seq;
	u32 page;			/* KVTEST_LARGE: which page */
	struct kverbs_remote remote;	/* KVTEST_INFO: the server's region */
};

static struct kverbs_domain *kvtest_dom;
static atomic_t kvtest_in_connected = ATOMIC_INIT(0);
static struct kverbs_listener *kvtest_listener;
static struct workqueue_struct *kvtest_wq;	/* releases of kept messages */

static int kvtest_send(struct kverbs_ep *ep, const struct kvtest_msg *m,
		       unsigned int flags)
{
	struct kvmsg_buf *b = kvmsg_reserve(ep, sizeof(*m), flags);

	if (IS_ERR(b))
		return PTR_ERR(b);
	memcpy(kvmsg_buf_data(b), m, sizeof(*m));
	return kvmsg_send(b, sizeof(*m), 0, NULL);
}

/* kvtest never sends with KVMSG_NOTIFY. */
static void kvtest_send_done(struct kverbs_ep *ep, void *cookie, int status)
{
}

/* ------------------------------------------------------------- server */

/*
 * The server's memory belongs to its domain: one small region, and with
 * @large a second one of @large MiB.  Each peer gets its own grants on
 * its first request; they die with its connection.
 */
struct kvtest_mem {
	struct page **pages;
	unsigned long npages;
	unsigned int order;	/* of each allocation of 1 << order pages */
	struct kverbs_region *region;
};

static struct kvtest_mem kvtest_small, kvtest_large;

struct kvtest_peer {
	struct kverbs_grant *small;
	struct kverbs_grant *large;
};

static void kvtest_mem_free(struct kvtest_mem *mem)
{
	unsigned long i;

	if (mem->region)
		kverbs_region_destroy(mem->region);
	mem->region = NULL;
	for (i = 0; mem->pages && i < mem->npages; i += 1UL << mem->order)
		if (mem->pages[i])
			__free_pages(mem->pages[i], mem->order);
	kvfree(mem->pages);
	mem->pages = NULL;
}

/* @npages in runs of 1 << @order contiguous pages; page i holds i. */
static int kvtest_mem_alloc(struct kvtest_mem *mem, unsigned long npages,
			    unsigned int order)
{
	unsigned long i, k;
	struct page *p;
	int ret;

	/* Whole runs only: @npages a multiple of 1 << @order. */
	order = min_t(unsigned int, order, ilog2(npages));
	if (npages & ((1UL << order) - 1))
		return -EINVAL;
	mem->npages = npages;
	mem->order = order;
	mem->pages = kvcalloc(npages, sizeof(*mem->pages), GFP_KERNEL);
	if (!mem->pages)
		return -ENOMEM;
	for (i = 0; i < npages; i += 1UL << order) {
		p = alloc_pages(GFP_KERNEL | __GFP_ZERO, order);
		if (!p) {
			kvtest_mem_free(mem);
			return -ENOMEM;
		}
		for (k = 0; k < 1UL << order; k++) {
			mem->pages[i + k] = p + k;
			*(u64 *)page_address(p + k) = i + k;
		}
		cond_resched();
	}
	mem->region = kverbs_region_create(kvtest_dom, mem->pages, npages);
	if (IS_ERR(mem->region)) {
		ret = PTR_ERR(mem->region);
		mem->region = NULL;
		kvtest_mem_free(mem);
		return ret;
	}
	return 0;
}

static void kvtest_peer_free(struct kvtest_peer *peer)
{
	if (!peer)
		return;
	if (peer->small)
		kverbs_grant_revoke(peer->small);
	if (peer->large)
		kverbs_grant_revoke(peer->large);
	kfree(peer);
}

/* Process context: the grants of @ep's peer, made on first use. */
static struct kvtest_peer *kvtest_peer_get(struct kverbs_ep *ep)
{
	struct kvtest_peer *peer = kverbs_ep_priv(ep);
	const u32 access = KVERBS_ACCESS_REMOTE_READ |
			   KVERBS_ACCESS_REMOTE_WRITE;
	struct kverbs_grant *g;

	if (peer)
		return peer;
	peer = kzalloc(sizeof(*peer), GFP_KERNEL);
	if (!peer)
		return ERR_PTR(-ENOMEM);
	g = kverbs_region_grant(kvtest_small.region, ep, access);
	if (IS_ERR(g))
		goto fail;
	peer->small = g;
	if (kvtest_large.region) {
		g = kverbs_region_grant(kvtest_large.region, ep, access);
		if (IS_ERR(g))
			goto fail;
		peer->large = g;
	}
	kverbs_ep_set_priv(ep, peer);
	return peer;
fail:
	kvtest_peer_free(peer);
	return ERR_CAST(g);
}

struct kvtest_release {
	struct work_struct work;
	struct kvmsg_rx *rx;
};

static void kvtest_release_work(struct work_struct *work)
{
	struct kvtest_release *r = container_of(work, struct kvtest_release,
						work);

	kvmsg_rx_release(r->rx);
	kfree(r);
}

/* Keep @rx and let another task release it while this handler sleeps. */
static void kvtest_keep_race(struct kvmsg_rx *rx)
{
	struct kvtest_release *r = kmalloc(sizeof(*r), GFP_KERNEL);

	if (!r || kvmsg_rx_keep(rx)) {
		kfree(r);
		return;
	}
	r->rx = rx;
	INIT_WORK(&r->work, kvtest_release_work);
	queue_work(kvtest_wq, &r->work);
	msleep(hold_ms);
}

/*
 * @fanout copies of @rx, from process context.  A copy without a send
 * buffer hands the -EAGAIN back: in process context kvmsg parks the
 * endpoint instead of waiting there for the peer's credits (and sends the
 * copies before it again when it calls back).
 */
static int kvtest_fanout(struct kverbs_ep *ep, struct kvmsg_rx *rx,
			 enum kvmsg_ctx ctx)
{
	struct kvmsg_buf *b;
	unsigned int i;
	int ret;

	if (!fanout)
		return 0;
	if (ctx != KVMSG_CTX_PROCESS)
		return -EAGAIN;
	for (i = 0; i < fanout; i++) {
		b = kvmsg_reserve(ep, kvmsg_rx_len(rx), 0);
		if (IS_ERR(b))
			return PTR_ERR(b) == -EAGAIN ? -EAGAIN : 0;
		memcpy(kvmsg_buf_data(b), kvmsg_rx_data(rx), kvmsg_rx_len(rx));
		ret = kvmsg_send(b, kvmsg_rx_len(rx), 0, NULL);
		if (ret)
			return 0;	/* the endpoint is going down */
	}
	return 0;
}

static int kvtest_server_recv(struct kverbs_ep *ep, struct kvmsg_rx *rx,
			      enum kvmsg_ctx ctx)
{
	struct kvtest_peer *peer;
	struct kvtest_msg m;
	int ret;

	if (atomic_read(&kvtest_in_connected))
		pr_err("recv during ->connected (ctx %d)\n", ctx);
	if (kvmsg_rx_len(rx) != sizeof(m))
		return kvtest_fanout(ep, rx, ctx);
	memcpy(&m, kvmsg_rx_data(rx), sizeof(m));
	/* Granting a region and @keep's handler sleep. */
	if ((m.type == KVTEST_HELLO || m.type == KVTEST_LARGE || keep) &&
	    ctx != KVMSG_CTX_PROCESS)
		return -EAGAIN;
	if (m.type == KVTEST_HELLO || m.type == KVTEST_LARGE) {
		peer = kvtest_peer_get(ep);
		if (IS_ERR(peer)) {
			pr_err("region grant: %ld\n", PTR_ERR(peer));
			return 0;
		}
		if (m.type == KVTEST_HELLO)
			ret = kverbs_grant_remote(peer->small, 0, KVTEST_LEN,
						  &m.remote);
		else if (peer->large)
			ret = kverbs_grant_remote(peer->large,
						  (u64)m.page << PAGE_SHIFT,
						  PAGE_SIZE, &m.remote);
		else
			ret = -ENOENT;
		if (ret) {
			pr_err("region grant: remote: %d\n", ret);
			return 0;
		}
		m.type = KVTEST_INFO;
	}
	ret = kvtest_send(ep, &m, 0);
	if (ret == -EAGAIN)
		return ret;	/* no send buffer in softirq: echo from process */
	if (ret)
		return 0;	/* the endpoint is going down: no echo */
	if (keep)
		kvtest_keep_race(rx);
	return 0;
}

static void kvtest_server_connected(struct kverbs_ep *ep)
{
	struct kvtest_msg m = { .magic = KVTEST_MAGIC,
				.type = KVTEST_GREETING };
	int ret;

	if (slow) {
		atomic_inc(&kvtest_in_connected);
		msleep(200);
		atomic_dec(&kvtest_in_connected);
	}
	if (!greet)
		return;
	ret = kvtest_send(ep, &m, KVERBS_NOWAIT);
	if (ret)
		pr_err("greeting to node %u: %d\n", kverbs_ep_peer_node(ep),
		       ret);
}

static void kvtest_server_disconnected(struct kverbs_ep *ep, int err)
{
	kvtest_peer_free(kverbs_ep_priv(ep));
	kverbs_ep_set_priv(ep, NULL);
}

static const struct kverbs_domain_ops kvtest_server_ops = {
	.connected = kvtest_server_connected,
	.disconnected = kvtest_server_disconnected,
};

static const struct kvmsg_ops kvtest_server_msg = {
	.recv = kvtest_server_recv,
	.send_done = kvtest_send_done,
};

static int kvtest_parse(const char *s, struct sockaddr_storage *ss)
{
	return inet_pton_with_scope(&init_net, AF_UNSPEC, s, NULL, ss) ?
	       -EINVAL : 0;
}

static int kvtest_server(void)
{
	struct kverbs_domain_attr attr = {
		.ops = &kvtest_server_ops, .msg = &kvtest_server_msg,
		.name = "kvtest-server", .node_id = node_id, .depth = depth,
		.max_msg = 256, .max_eps = 8,
	};
	struct sockaddr_storage ss = {};
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	int ret;

	if (addr && *addr) {
		if (kvtest_parse(addr, &ss))
			return -EINVAL;
	} else {
		sin->sin_family = AF_INET;
	}
	sin->sin_port = htons(port);	/* same offset for IPv6 */
	kvtest_wq = alloc_workqueue("kvtest", 0, 0);
	if (!kvtest_wq)
		return -ENOMEM;
	kvtest_dom = kverbs_domain_create(&attr);
	if (IS_ERR(kvtest_dom)) {
		ret = PTR_ERR(kvtest_dom);
		goto out_wq;
	}
	/* Regions before the first connection: the domain maps them later. */
	ret = kvtest_mem_alloc(&kvtest_small, KVTEST_PAGES, 0);
	if (!ret && large)
		ret = kvtest_mem_alloc(&kvtest_large,
				       (unsigned long)large << (20 - PAGE_SHIFT),
				       9);
	if (ret)
		goto out_mem;
	kvtest_listener = kverbs_listen(kvtest_dom, (struct sockaddr *)&ss);
	if (IS_ERR(kvtest_listener)) {
		ret = PTR_ERR(kvtest_listener);
		/*
		 * Busybox insmod, whose finit_module() fails, loads the
		 * module again with init_module(): tests read the first.
		 */
		pr_err("listen on %pISpc: %d\n", &ss, ret);
		goto out_mem;
	}
	pr_info("server listening on %pISpc\n", &ss);
	return 0;

out_mem:
	kvtest_mem_free(&kvtest_large);
	kvtest_mem_free(&kvtest_small);
	kverbs_domain_destroy(kvtest_dom);
out_wq:
	destroy_workqueue(kvtest_wq);
	return ret;
}

/* ------------------------------------------------------------- client */

struct kvtest_client {
	struct completion reply;
	struct kvtest_msg msg;
	u32 received;
	bool down;		/* ->disconnected ran: no reply will come */
};

static int kvtest_client_recv(struct kverbs_ep *ep, struct kvmsg_rx *rx,
			      enum kvmsg_ctx ctx)
{
	/* Set by kverbs_ep_connect() before any callback for @ep. */
	struct kvtest_client *c = kverbs_ep_priv(ep);

	if (!c || kvmsg_rx_len(rx) != sizeof(c->msg))
		return 0;
	memcpy(&c->msg, kvmsg_rx_data(rx), sizeof(c->msg));
	c->received++;
	complete(&c->reply);
	return 0;
}

/* Callbacks the client's domain ran, for the deadline scenario. */
static atomic_t kvtest_client_up = ATOMIC_INIT(0);
static atomic_t kvtest_client_down = ATOMIC_INIT(0);

static void kvtest_client_connected(struct kverbs_ep *ep)
{
	atomic_inc(&kvtest_client_up);
}

static void kvtest_client_disconnected(struct kverbs_ep *ep, int err)
{
	struct kvtest_client *c = kverbs_ep_priv(ep);

	atomic_inc(&kvtest_client_down);
	if (!c)
		return;
	WRITE_ONCE(c->down, true);
	complete(&c->reply);
}

static const struct kverbs_domain_ops kvtest_client_ops = {
	.connected = kvtest_client_connected,
	.disconnected = kvtest_client_disconnected,
};

static const struct kvmsg_ops kvtest_client_msg = {
	.recv = kvtest_client_recv,
	.send_done = kvtest_send_done,
};

static int kvtest_wait(struct kvtest_client *c, u32 type, u32 seq)
{
	if (!wait_for_completion_timeout(&c->reply, 10 * HZ))
		return -ETIMEDOUT;
	if (READ_ONCE(c->down))
		return -ECONNRESET;
	if (c->msg.magic != KVTEST_MAGIC || c->msg.type != type ||
	    c->msg.seq != seq) {
		pr_err("unexpected reply: type %u seq %u (want %u/%u)\n",
		       c->msg.type, c->msg.seq, type, seq);
		return -EBADMSG;
	}
	return 0;
}

static int kvtest_ask(struct kverbs_ep *ep, struct kvtest_client *c, u32 type,
		      u32 want, u32 seq)
{
	struct kvtest_msg m = { .magic = KVTEST_MAGIC, .type = type,
				.seq = seq, .page = seq };
	int ret;

	reinit_completion(&c->reply);
	ret = kvtest_send(ep, &m, 0);
	return ret ?: kvtest_wait(c, want, seq);
}

static struct kverbs_ep *kvtest_connect(struct kvtest_client *c,
					struct sockaddr_storage *dst)
{
	init_completion(&c->reply);
	c->received = 0;
	c->down = false;
	return kverbs_ep_connect(kvtest_dom, (struct sockaddr *)dst, 10000, c);
}

static int kvtest_echo(struct kverbs_ep *ep, struct kvtest_client *c, u32 n)
{
	u32 i;
	int ret;

	for (i = 0; i < n; i++) {
		ret = kvtest_ask(ep, c, KVTEST_DATA, KVTEST_DATA, i);
		if (ret)
			return ret;
	}
	return 0;
}

/* @count messages, then the caller closes: no echo is waited for. */
static int kvtest_leave(struct kverbs_ep *ep)
{
	struct kvtest_msg m = { .magic = KVTEST_MAGIC, .type = KVTEST_DATA };
	int ret;

	for (m.seq = 0; m.seq < count; m.seq++) {
		ret = kvtest_send(ep, &m, 0);
		if (ret)
			return ret;
	}
	pr_info("leave: %u messages sent, closing without waiting\n", count);
	return 0;
}

struct kvtest_wait {
	struct completion done;
	int status;
};

static void kvtest_rdma_done(void *ctx, int status)
{
	struct kvtest_wait *w = ctx;

	w->status = status;
	complete(&w->done);
}

/* Post an RDMA read of @len bytes from @remote into @mem at @off; @w ends. */
static int kvtest_read_start(struct kverbs_ep *ep, struct kvtest_mem *mem,
			     u64 off, const struct kverbs_remote *remote,
			     u32 len, struct kvtest_wait *w)
{
	struct kverbs_rdma_op op = { .local = mem->region, .local_off = off,
				     .remote = *remote, .len = len,
				     .done = kvtest_rdma_done, .ctx = w };

	init_completion(&w->done);
	return kverbs_rdma_read(ep, &op, 0);
}

/* One RDMA read of @len bytes from @remote into @mem at @off; its status. */
static int kvtest_read(struct kverbs_ep *ep, struct kvtest_mem *mem, u64 off,
		       const struct kverbs_remote *remote, u32 len)
{
	struct kvtest_wait w;
	int ret;

	ret = kvtest_read_start(ep, mem, off, remote, len, &w);
	if (ret)
		return ret;
	/* Bounded: a completion, an access error or, on teardown, a flush. */
	wait_for_completion(&w.done);
	return w.status;
}

/*
 * @depth unsignaled 64 KiB writes and @depth sends, nothing waited for: a
 * write stays in the send queue until the peer acknowledged all of it, so
 * they are all outstanding at once.
 */
static int kvtest_sqfull(struct kverbs_ep *ep, struct kvtest_client *c)
{
	struct kvtest_msg m = { .magic = KVTEST_MAGIC, .type = KVTEST_DATA };
	struct kverbs_rdma_op op = { .len = KVTEST_LEN };
	struct kvtest_mem mem = {};
	int i, ret;

	ret = kvtest_ask(ep, c, KVTEST_HELLO, KVTEST_INFO, 0);
	if (ret)
		return ret;
	if (kverbs_remote_slice(&c->msg.remote, 0, op.len, &op.remote))
		return -EPROTO;
	/* One contiguous allocation: each write is one segment. */
	ret = kvtest_mem_alloc(&mem, KVTEST_PAGES, ilog2(KVTEST_PAGES));
	if (ret)
		return ret;
	op.local = mem.region;
	/*
	 * A signaled read first: its completion reclaims the HELLO's send
	 * buffer and slot, which were not signaled, so the whole window is
	 * free however fast the device completes (rxe in 6.12's work items
	 * had not, and the 13th send got -EAGAIN).
	 */
	ret = kvtest_read(ep, &mem, 0, &op.remote, PAGE_SIZE);
	if (ret) {
		pr_err("read before the window: %d\n", ret);
		goto out;
	}
	for (i = 0; i < depth; i++) {
		ret = kverbs_rdma_write(ep, &op, KVERBS_NOWAIT);
		if (ret) {
			pr_err("RDMA write %d of %u: %d\n", i + 1, depth, ret);
			goto out;
		}
	}
	for (i = 0; i < depth; i++) {
		m.seq = i;
		ret = kvtest_send(ep, &m, KVERBS_NOWAIT);
		if (ret) {
			pr_err("send %d of %u after %u writes: %d\n", i + 1,
			       depth, depth, ret);
			goto out;
		}
	}
	pr_info("%u RDMA writes and %u sends posted without waiting\n",
		depth, depth);
out:
	kverbs_ep_close(ep);	/* the writes are done or flushed */
	kvtest_mem_free(&mem);
	return ret;
}

/*
 * The key of a grant made for one connection must not work on another
 * connection to the same server, not even one from the same domain: read
 * it through @ep (must work), then through a second endpoint (must fail).
 */
static int kvtest_scope(struct kverbs_ep *ep, struct kvtest_client *c,
			struct sockaddr_storage *dst)
{
	static struct kvtest_client c2;
	struct kvtest_mem mem = {};
	struct kverbs_remote remote;
	struct kverbs_ep *ep2;
	int ret;

	ret = kvtest_ask(ep, c, KVTEST_HELLO, KVTEST_INFO, 0);
	if (ret)
		return ret;
	remote = c->msg.remote;
	ret = kvtest_mem_alloc(&mem, 1, 0);
	if (ret)
		return ret;
	ret = kvtest_read(ep, &mem, 0, &remote, PAGE_SIZE);
	if (ret) {
		pr_err("scope: read through the granted connection: %d\n", ret);
		goto out;
	}
	ep2 = kvtest_connect(&c2, dst);
	if (IS_ERR(ep2)) {
		ret = PTR_ERR(ep2);
		goto out;
	}
	ret = kvtest_read(ep2, &mem, 0, &remote, PAGE_SIZE);
	kverbs_ep_close(ep2);
	if (!ret) {
		pr_err("scope: another connection read the region with its key\n");
		ret = -EACCES;
		goto out;
	}
	pr_info("scope: the key works on its connection only (other: %d)\n",
		ret);
	ret = 0;
out:
	kvtest_mem_free(&mem);
	return ret;
}

/*
 * The device writes a read's or an atomic's result into our memory when it
 * executes it; without a callback the caller could never learn when, so
 * kverbs refuses them.  Each refusal must come before anything is posted:
 * the connection then still reads.
 */
static int kvtest_nodone(struct kverbs_ep *ep, struct kvtest_client *c)
{
	struct kvtest_mem mem = {};
	struct kverbs_rdma_op op = {};
	int r1, r2, r3, ret;

	ret = kvtest_ask(ep, c, KVTEST_HELLO, KVTEST_INFO, 0);
	if (ret)
		return ret;
	ret = kvtest_mem_alloc(&mem, 1, 0);
	if (ret)
		return ret;
	op.local = mem.region;
	op.remote = c->msg.remote;
	op.len = PAGE_SIZE;
	r1 = kverbs_rdma_read(ep, &op, 0);
	r2 = kverbs_rdma_read_pages(ep, mem.pages, 1, &c->msg.remote, NULL,
				    NULL, 0);
	r3 = kverbs_atomic_fetch_add(ep, &op, 1, 0);
	if (r1 != -EINVAL || r2 != -EINVAL ||
	    (r3 != -EINVAL && r3 != -EOPNOTSUPP)) {
		pr_err("nodone: read %d, page read %d, atomic %d; want -EINVAL\n",
		       r1, r2, r3);
		/* What was posted lands when it lands: not in freed pages. */
		msleep(2000);
		ret = -EPROTO;
		goto out;
	}
	ret = kvtest_read(ep, &mem, 0, &c->msg.remote, PAGE_SIZE);
	if (!ret)
		pr_info("nodone: refused (%d, %d, %d) and the connection reads\n",
			r1, r2, r3);
out:
	kvtest_mem_free(&mem);
	return ret;
}

/*
 * Planted fault for test builds' page check (kverbs/rdma_pages.c): an
 * RDMA write from a page whose reference count reads zero, as a freed
 * page's does.  The page is ours all along (its count frozen, not
 * dropped), so the device reads valid memory and nothing else can take
 * the page meanwhile; kverbs must WARN "unreferenced at post".
 */
static int kvtest_freed(struct kverbs_ep *ep, struct kvtest_client *c)
{
	struct kvtest_wait w;
	struct page *page;
	int ret;

	ret = kvtest_ask(ep, c, KVTEST_HELLO, KVTEST_INFO, 0);
	if (ret)
		return ret;
	page = alloc_page(GFP_KERNEL | __GFP_ZERO);
	if (!page)
		return -ENOMEM;
	if (!page_ref_freeze(page, 1)) {
		__free_page(page);
		return -EBUSY;
	}
	init_completion(&w.done);
	ret = kverbs_rdma_write_pages(ep, &page, 1, &c->msg.remote,
				      kvtest_rdma_done, &w, 0);
	if (!ret)
		wait_for_completion(&w.done);
	page_ref_unfreeze(page, 1);
	__free_page(page);
	if (ret)
		return ret;
	pr_info("freed: written from a page of count 0, status %d\n",
		w.status);
	return 0;
}

/*
 * A LOCAL_INV posted behind an RDMA read that is still in flight: rxe
 * fences it until the read completes, which the test delays past kverbs'
 * nudge interval, so the revoke nudges the send queue (and in 6.1, where
 * rxe can lose the fenced request's wake-up, that nudge is what ends it).
 */
static int kvtest_late(struct kverbs_ep *ep, struct kvtest_client *c)
{
	struct kvtest_mem mem = {};
	struct kverbs_grant *g;
	struct kvtest_wait w;
	ktime_t t0;
	s64 ms;
	int ret;

	ret = kvtest_ask(ep, c, KVTEST_HELLO, KVTEST_INFO, 0);
	if (ret)
		return ret;
	ret = kvtest_mem_alloc(&mem, 2, 0);
	if (ret)
		return ret;
	g = kverbs_region_grant(mem.region, ep, KVERBS_ACCESS_REMOTE_READ);
	if (IS_ERR(g)) {
		ret = PTR_ERR(g);
		goto out;
	}
	ret = kvtest_read_start(ep, &mem, 0, &c->msg.remote, PAGE_SIZE, &w);
	if (ret) {
		kverbs_grant_revoke(g);
		goto out;
	}
	t0 = ktime_get();
	kverbs_grant_revoke(g);
	ms = ktime_ms_delta(ktime_get(), t0);
	wait_for_completion(&w.done);	/* bounded: completion or flush */
	ret = w.status;
	if (!ret)
		ret = kvtest_echo(ep, c, 1);
	pr_info("late: revoked in %lld ms behind a read, read %d, then %d\n",
		ms, w.status, ret);
out:
	kvtest_mem_free(&mem);
	return ret;
}

/*
 * The server's @large MiB region, granted in extents: read the first and
 * last page of several extents, each holding its own index.
 */
static int kvtest_large_read(struct kverbs_ep *ep, struct kvtest_client *c)
{
	u32 npages = count << (20 - PAGE_SHIFT), ext = 0, i, n = 0;
	struct kvtest_mem mem = {};
	u32 want[] = { 0, 1, 511, 512, 513, npages / 2, npages - 1 };
	u64 got;
	int ret;

	ret = kvtest_mem_alloc(&mem, 1, 0);
	if (ret)
		return ret;
	for (i = 0; i < ARRAY_SIZE(want); i++) {
		if (want[i] >= npages)
			continue;
		ret = kvtest_ask(ep, c, KVTEST_LARGE, KVTEST_INFO, want[i]) ?:
		      kvtest_read(ep, &mem, 0, &c->msg.remote, PAGE_SIZE);
		if (ret)
			break;
		got = *(u64 *)page_address(mem.pages[0]);
		if (got != want[i]) {
			pr_err("large: page %u holds %llu\n", want[i], got);
			ret = -EIO;
			break;
		}
		if (c->msg.remote.rkey != ext)
			n++;
		ext = c->msg.remote.rkey;
	}
	if (!ret)
		pr_info("large: %u MiB region, %zu pages read in %u keys: ok\n",
			count, ARRAY_SIZE(want), n);
	kvtest_mem_free(&mem);
	return ret;
}

/*
 * One connect whose handshake ends after its deadline of @count ms, then
 * the domain's destruction, after which every callback has run: the
 * domain's ->connected and ->disconnected ran once each if the connect
 * returned an endpoint, and never if it failed.
 */
static int kvtest_deadline(struct kvtest_client *c,
			   struct sockaddr_storage *dst)
{
	struct kverbs_ep *ep;
	long err = 0;
	int up, down;

	init_completion(&c->reply);
	ep = kverbs_ep_connect(kvtest_dom, (struct sockaddr *)dst, count, c);
	if (IS_ERR(ep))
		err = PTR_ERR(ep);
	else
		kverbs_ep_close(ep);
	kverbs_domain_destroy(kvtest_dom);
	kvtest_dom = NULL;
	up = atomic_read(&kvtest_client_up);
	down = atomic_read(&kvtest_client_down);
	if (err ? up || down : up != 1 || down != 1) {
		pr_err("deadline: connect %ld, ->connected %d, ->disconnected %d: inconsistent\n",
		       err, up, down);
		return -EPROTO;
	}
	pr_info("deadline: connect %ld, ->connected %d, ->disconnected %d\n",
		err, up, down);
	return 0;
}

static int kvtest_client(void)
{
	static struct kvtest_client c;
	struct kverbs_domain_attr attr = {
		.ops = &kvtest_client_ops, .msg = &kvtest_client_msg,
		.name = "kvtest-client", .node_id = node_id, .depth = depth,
		.max_msg = 256, .max_eps = 2,
		.write_pages = 1,	/* kvtest_freed()'s one page */
	};
	struct sockaddr_storage dst;
	struct kverbs_ep *ep;
	u32 i, ok = 0, failed = 0;
	int ret;

	if (kvtest_parse(server, &dst))
		return -EINVAL;
	((struct sockaddr_in *)&dst)->sin_port = htons(port);
	kvtest_dom = kverbs_domain_create(&attr);
	if (IS_ERR(kvtest_dom))
		return PTR_ERR(kvtest_dom);

	if (!strcmp(scenario, "deadline"))
		return kvtest_deadline(&c, &dst);
	if (!strcmp(scenario, "reconnect")) {
		for (i = 0; i < count; i++) {
			ep = kvtest_connect(&c, &dst);
			if (IS_ERR(ep)) {
				failed++;
				continue;
			}
			if (kvtest_echo(ep, &c, 1))
				failed++;
			else
				ok++;
			kverbs_ep_close(ep);
		}
		pr_info("reconnect: %u cycles, %u ok, %u failed\n", count, ok,
			failed);
		ret = 0;
		goto out;
	}

	ep = kvtest_connect(&c, &dst);
	if (IS_ERR(ep)) {
		ret = PTR_ERR(ep);
		pr_err("connect: %d\n", ret);
		goto out;
	}
	if (!strcmp(scenario, "echo")) {
		ret = kvtest_echo(ep, &c, count);
		if (!ret)
			pr_info("echo: %u round trips ok\n", count);
	} else if (!strcmp(scenario, "sqfull")) {
		ret = kvtest_sqfull(ep, &c);
		ep = NULL;	/* closed there */
	} else if (!strcmp(scenario, "scope")) {
		ret = kvtest_scope(ep, &c, &dst);
	} else if (!strcmp(scenario, "large")) {
		ret = kvtest_large_read(ep, &c);
	} else if (!strcmp(scenario, "leave")) {
		ret = kvtest_leave(ep);
	} else if (!strcmp(scenario, "nodone")) {
		ret = kvtest_nodone(ep, &c);
	} else if (!strcmp(scenario, "freed")) {
		ret = kvtest_freed(ep, &c);
	} else if (!strcmp(scenario, "late")) {
		ret = kvtest_late(ep, &c);
	} else if (!strcmp(scenario, "greet")) {
		ret = kvtest_wait(&c, KVTEST_GREETING, 0);
		if (!ret && c.received != 1)
			ret = -EBADMSG;
		if (!ret)
			pr_info("greeting from ->connected received first\n");
	} else {
		ret = -EINVAL;
	}
	if (ret)
		pr_err("%s: %d\n", scenario, ret);
	if (ep)
		kverbs_ep_close(ep);
out:
	kverbs_domain_destroy(kvtest_dom);
	return ret;
}

static int __init kvtest_init(void)
{
	if (!node_id)
		return -EINVAL;
	if (server && *server)
		return kvtest_client();
	return kvtest_server();
}

static void __exit kvtest_exit(void)
{
	if (server && *server)
		return;
	kverbs_listener_destroy(kvtest_listener);
	kverbs_domain_destroy(kvtest_dom);	/* every ->disconnected ran */
	kvtest_mem_free(&kvtest_large);
	kvtest_mem_free(&kvtest_small);
	destroy_workqueue(kvtest_wq);	/* after the last kept message */
}

module_init(kvtest_init);
module_exit(kvtest_exit);
MODULE_DESCRIPTION("kverbs integration test scenarios");
MODULE_LICENSE("GPL");
KVERBS_IMPORT_NS();
