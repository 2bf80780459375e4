// SPDX-License-Identifier: GPL-2.0-only
/*
 * krdma: one-sided operations between two nodes, end to end.
 *
 *   insmod krdma.ko                              # server
 *   insmod krdma.ko server=10.77.0.1 node_id=2   # client, runs the checks
 *
 * The server makes 16 pages holding a known pattern a region of its
 * domain, grants it to the client's connection and describes it as a
 * struct kverbs_remote: an rkey and a length, which the client addresses
 * by offset (no address of the server's travels).  The client reads them
 * with RDMA read, overwrites them with RDMA write (the server checks),
 * runs compare-and-swap and fetch-and-add on the first word, asks the
 * server to revoke the grant, and finally checks that a read through the
 * old rkey is refused.  The insmod fails with the first error.
 *
 * Each grant gives the peer only the access it needs: the client reads,
 * writes and updates the server's region atomically, so the server grants
 * exactly that; the client's region is only the local side of its
 * operations and is granted to nobody.
 *
 * Both sides check every field of every message they receive and reject
 * a malformed one, which closes the connection.
 *
 * Uses only the exported API (include/kverbs/).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/build_bug.h>
#include <linux/completion.h>
#include <linux/err.h>
#include <linux/gfp.h>
#include <linux/inet.h>
#include <linux/log2.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

#include <kverbs/kvmsg.h>
#include <kverbs/kverbs.h>

static char *server;
module_param(server, charp, 0444);
MODULE_PARM_DESC(server, "peer to test against; empty: be the server");
static ushort port = 18516;
module_param(port, ushort, 0444);
MODULE_PARM_DESC(port, "rdma_cm port");
static uint node_id = 1;
module_param(node_id, uint, 0444);
MODULE_PARM_DESC(node_id, "this node's id, non-zero");

#define KRDMA_PAGES	16
#define KRDMA_ORDER	ilog2(KRDMA_PAGES)
#define KRDMA_LEN	(KRDMA_PAGES * PAGE_SIZE)
#define KRDMA_ROUNDS	20	/* reads overlapped by a request */

/* What the client does to the server's region, and nothing more. */
#define KRDMA_SERVER_ACCESS	(KVERBS_ACCESS_REMOTE_READ | \
				 KVERBS_ACCESS_REMOTE_WRITE | \
				 KVERBS_ACCESS_REMOTE_ATOMIC)

/* Requests from the client, each answered by the server with the next. */
enum krdma_type {
	KRDMA_HELLO = 1,	/* describe your region */
	KRDMA_INFO,		/* @status, and @remote if 0 */
	KRDMA_CHECK,		/* does your region hold pattern @salt? */
	KRDMA_RESULT,		/* @status: 0 or -EBADMSG */
	KRDMA_UNREG,		/* revoke my access to your region */
	KRDMA_UNREG_DONE,	/* its rkey is dead */
};

/*
 * The message, both ways: fixed-size fields in host byte order (both
 * nodes run the same architecture; struct kverbs_remote is laid out the
 * same way).  Fields a message does not use are zero.
 */
struct krdma_msg {
	u32 type;			/* enum krdma_type */
	u32 salt;			/* KRDMA_CHECK: the pattern to expect */
	s32 status;			/* replies: 0 or a -errno */
	u32 reserved;
	struct kverbs_remote remote;	/* KRDMA_INFO: the server's region */
};

static_assert(sizeof(struct krdma_msg) == 40);

/*
 * Pages and their region, one per server endpoint and one for the client.
 * The server grants its region to the peer of that endpoint alone; the
 * client's region is only the local side of its operations (no grant).
 */
struct krdma_mem {
	struct page *pages[KRDMA_PAGES];
	struct kverbs_region *region;
	struct kverbs_grant *grant;
};

static struct kverbs_domain *krdma_dom;
static struct kverbs_listener *krdma_listener;

static u8 krdma_pattern(u32 i, u32 salt)
{
	return (i * 7 + salt) & 0xff;
}

static void krdma_fill(struct krdma_mem *m, u32 salt)
{
	u32 p, i;

	for (p = 0; p < KRDMA_PAGES; p++) {
		u8 *v = page_address(m->pages[p]);

		for (i = 0; i < PAGE_SIZE; i++)
			v[i] = krdma_pattern(p * PAGE_SIZE + i, salt);
	}
}

static int krdma_verify(struct krdma_mem *m, u32 salt)
{
	u32 p, i;

	for (p = 0; p < KRDMA_PAGES; p++) {
		const u8 *v = page_address(m->pages[p]);

		for (i = 0; i < PAGE_SIZE; i++)
			if (v[i] != krdma_pattern(p * PAGE_SIZE + i, salt))
				return -EBADMSG;
	}
	return 0;
}

static void krdma_mem_free(struct krdma_mem *m)
{
	if (!m)
		return;
	if (m->region)
		kverbs_region_destroy(m->region);	/* and its grant */
	if (m->pages[0])
		__free_pages(m->pages[0], KRDMA_ORDER);
	kfree(m);
}

/* Pages filled with pattern @salt; granted to @ep's peer if @access. */
static struct krdma_mem *krdma_mem_alloc(struct kverbs_ep *ep, u32 salt,
					 u32 access)
{
	struct krdma_mem *m = kzalloc(sizeof(*m), GFP_KERNEL);
	struct page *p;
	int i, err;

	if (!m)
		return ERR_PTR(-ENOMEM);
	/* Contiguous: one operation moves all of it in one segment. */
	p = alloc_pages(GFP_KERNEL, KRDMA_ORDER);
	if (!p) {
		kfree(m);
		return ERR_PTR(-ENOMEM);
	}
	for (i = 0; i < KRDMA_PAGES; i++)
		m->pages[i] = p + i;
	krdma_fill(m, salt);
	m->region = kverbs_region_create(kverbs_ep_domain(ep), m->pages,
					 KRDMA_PAGES);
	if (IS_ERR(m->region)) {
		err = PTR_ERR(m->region);
		m->region = NULL;
		goto fail;
	}
	if (access) {
		m->grant = kverbs_region_grant(m->region, ep, access);
		if (IS_ERR(m->grant)) {
			err = PTR_ERR(m->grant);
			m->grant = NULL;
			goto fail;
		}
	}
	return m;
fail:
	krdma_mem_free(m);
	return ERR_PTR(err);
}

/*
 * Process context: in the deferred handler the reserve does not wait for
 * the peer's credits; its -EAGAIN has the handler called again.
 */
static int krdma_send(struct kverbs_ep *ep, const struct krdma_msg *msg)
{
	struct kvmsg_buf *b = kvmsg_reserve(ep, sizeof(*msg), 0);

	if (IS_ERR(b))
		return PTR_ERR(b);
	memcpy(kvmsg_buf_data(b), msg, sizeof(*msg));
	return kvmsg_send(b, sizeof(*msg), 0, NULL);
}

/* Copy a received message out, if it has the size of one. */
static int krdma_msg_copy(const struct kvmsg_rx *rx, struct krdma_msg *m)
{
	if (kvmsg_rx_len(rx) != sizeof(*m))
		return -EPROTO;
	memcpy(m, kvmsg_rx_data(rx), sizeof(*m));
	return 0;
}

static bool krdma_remote_is_zero(const struct kverbs_remote *r)
{
	return !memchr_inv(r, 0, sizeof(*r));
}

/* A request is its type and, for KRDMA_CHECK, a salt; nothing else. */
static int krdma_request_check(const struct krdma_msg *m)
{
	switch (m->type) {
	case KRDMA_HELLO:
	case KRDMA_UNREG:
		if (m->salt)
			return -EPROTO;
		break;
	case KRDMA_CHECK:
		break;
	default:
		return -EPROTO;
	}
	if (m->status || m->reserved || !krdma_remote_is_zero(&m->remote))
		return -EPROTO;
	return 0;
}

/* Never called: no message is sent with KVMSG_NOTIFY here. */
static void krdma_send_done(struct kverbs_ep *ep, void *cookie, int status)
{
}

/*
 * Server: everything runs in process context, where registration sleeps;
 * a message that arrives in softirq is deferred there with -EAGAIN.
 */
static int krdma_server_recv(struct kverbs_ep *ep, struct kvmsg_rx *rx,
			     enum kvmsg_ctx ctx)
{
	struct krdma_mem *m = kverbs_ep_priv(ep);
	struct krdma_msg in, out = {};
	int ret;

	if (ctx != KVMSG_CTX_PROCESS)
		return -EAGAIN;
	ret = krdma_msg_copy(rx, &in);
	if (!ret)
		ret = krdma_request_check(&in);
	if (ret)
		return ret;	/* malformed: the connection is closed */

	/* krdma_request_check() let only these three through. */
	switch (in.type) {
	case KRDMA_HELLO:
		out.type = KRDMA_INFO;
		if (!m) {
			m = krdma_mem_alloc(ep, 1, KRDMA_SERVER_ACCESS);
			if (IS_ERR(m)) {
				out.status = PTR_ERR(m);
				break;
			}
			kverbs_ep_set_priv(ep, m);
		}
		if (m->grant)
			out.status = kverbs_grant_remote(m->grant, 0, KRDMA_LEN,
							 &out.remote);
		else
			out.status = -ENOENT;	/* revoked already */
		break;
	case KRDMA_CHECK:
		out.type = KRDMA_RESULT;
		out.status = m ? krdma_verify(m, in.salt) : -ENOENT;
		break;
	case KRDMA_UNREG:
		out.type = KRDMA_UNREG_DONE;
		if (m && m->grant) {
			kverbs_grant_revoke(m->grant);
			m->grant = NULL;
		}
		break;
	}
	/*
	 * No buffer: called again for the same message, which repeats
	 * nothing (HELLO registers once, UNREG revokes once, CHECK reads).
	 * Any other failed reply is no fault of the message: consumed.
	 */
	ret = krdma_send(ep, &out);
	if (ret == -EAGAIN)
		return ret;
	if (ret)
		pr_warn_ratelimited("reply to node %u failed: %d\n",
				    kverbs_ep_peer_node(ep), ret);
	return 0;
}

static void krdma_server_disconnected(struct kverbs_ep *ep, int err)
{
	krdma_mem_free(kverbs_ep_priv(ep));
	kverbs_ep_set_priv(ep, NULL);
}

static const struct kverbs_domain_ops krdma_server_ops = {
	.disconnected = krdma_server_disconnected,
};

static const struct kvmsg_ops krdma_server_msg_ops = {
	.recv = krdma_server_recv,
	.send_done = krdma_send_done,
};

/*
 * Client: one request outstanding; the handler checks and copies the
 * reply.  @local is only ever the local side of the operations.
 */
struct krdma_client {
	struct kverbs_ep *ep;
	struct krdma_mem *local;
	struct kverbs_remote remote;	/* the server's region */
	struct completion reply;
	u32 want;			/* reply type awaited; 0: none */
	int reply_err;			/* the reply was malformed */
	struct krdma_msg msg;		/* the reply */
	struct completion op;
	int op_status;
	bool no_atomics;		/* the device refused them: iWARP */
};

/* A reply: the type awaited, a status, and a region in a good KRDMA_INFO. */
static int krdma_reply_check(const struct krdma_msg *m, u32 want)
{
	if (!want || m->type != want || m->salt || m->reserved ||
	    m->status > 0 || m->status < -MAX_ERRNO)
		return -EPROTO;
	if (m->type != KRDMA_INFO || m->status)
		return krdma_remote_is_zero(&m->remote) ? 0 : -EPROTO;
	/* The server's whole region; its rkey is opaque to us. */
	if (m->remote.offset || m->remote.len != KRDMA_LEN ||
	    m->remote.reserved)
		return -EPROTO;
	return 0;
}

/* In softirq: copy, check, wake the task; a malformed reply wakes it too. */
static int krdma_client_recv(struct kverbs_ep *ep, struct kvmsg_rx *rx,
			     enum kvmsg_ctx ctx)
{
	struct krdma_client *c = kverbs_ep_priv(ep);
	int ret;

	ret = krdma_msg_copy(rx, &c->msg);
	if (!ret)
		ret = krdma_reply_check(&c->msg, c->want);
	c->want = 0;
	c->reply_err = ret;
	complete(&c->reply);
	return ret;
}

static const struct kvmsg_ops krdma_client_msg_ops = {
	.recv = krdma_client_recv,
	.send_done = krdma_send_done,
};

/* Send request @type and wait for its reply @want; returns its status. */
static int krdma_ask(struct krdma_client *c, u32 type, u32 salt, u32 want)
{
	struct krdma_msg m = { .type = type, .salt = salt };
	int ret;

	reinit_completion(&c->reply);
	c->want = want;
	ret = krdma_send(c->ep, &m);
	if (ret)
		return ret;
	if (!wait_for_completion_timeout(&c->reply, 10 * HZ))
		return -ETIMEDOUT;
	return c->reply_err ?: c->msg.status;
}

static void krdma_op_done(void *ctx, int status)
{
	struct krdma_client *c = ctx;

	c->op_status = status;
	complete(&c->op);
}

/* Wait for the operation @post started; returns its status. */
static int krdma_wait_op(struct krdma_client *c, int post)
{
	if (post)
		return post;
	if (!wait_for_completion_timeout(&c->op, 10 * HZ))
		return -ETIMEDOUT;
	reinit_completion(&c->op);
	return c->op_status;
}

/*
 * Describe an operation on @len bytes at @off in the server's region and
 * at @local_off in ours; krdma_op_done() gets its status.
 */
static int krdma_op(struct krdma_client *c, struct kverbs_rdma_op *op,
		    u64 local_off, u64 off, u32 len)
{
	*op = (struct kverbs_rdma_op){
		.local = c->local->region,
		.local_off = local_off,
		.len = len,
		.done = krdma_op_done,
		.ctx = c,
	};
	return kverbs_remote_slice(&c->remote, off, len, &op->remote);
}

static int krdma_read(struct krdma_client *c, u64 local_off, u64 off,
		      u32 len)
{
	struct kverbs_rdma_op op;
	int ret;

	ret = krdma_op(c, &op, local_off, off, len);
	if (!ret)
		ret = kverbs_rdma_read(c->ep, &op, 0);
	return krdma_wait_op(c, ret);
}

/* A read's completion that checks the data is in place when it runs. */
static void krdma_checked_done(void *ctx, int status)
{
	struct krdma_client *c = ctx;

	c->op_status = status ?: krdma_verify(c->local, 1);
	complete(&c->op);
}

/*
 * A whole-region read with a request posted right behind it, KRDMA_ROUNDS
 * times, our copy poisoned each time.  The request's completion may come
 * first on the wire's side (siw completes a send once TCP has it); it
 * must not end the read: the read's own completion must find the server's
 * data (salt 1) in place.  Run with kverbs' signal_interval=1 so that
 * every request is signaled.
 */
static int krdma_read_overlapped(struct krdma_client *c)
{
	struct kverbs_rdma_op op;
	int i, ret, asked;

	for (i = 0; i < KRDMA_ROUNDS; i++) {
		krdma_fill(c->local, 3);
		ret = krdma_op(c, &op, 0, 0, KRDMA_LEN);
		if (ret)
			return ret;
		op.done = krdma_checked_done;
		ret = kverbs_rdma_read(c->ep, &op, 0);
		if (ret)
			return ret;
		asked = krdma_ask(c, KRDMA_HELLO, 0, KRDMA_INFO);
		ret = krdma_wait_op(c, 0) ?: asked;
		if (ret)
			return ret;
	}
	return 0;
}

static int krdma_write(struct krdma_client *c, u64 local_off, u64 off,
		       u32 len)
{
	struct kverbs_rdma_op op;
	int ret;

	ret = krdma_op(c, &op, local_off, off, len);
	if (!ret)
		ret = kverbs_rdma_write(c->ep, &op, 0);
	return krdma_wait_op(c, ret);
}

/*
 * Atomics act on the 8-byte word at @off; its previous value lands in the
 * same word of ours.
 */
static int krdma_cmp_swap(struct krdma_client *c, u64 off, u64 compare,
			  u64 swap)
{
	struct kverbs_rdma_op op;
	int ret;

	ret = krdma_op(c, &op, off, off, sizeof(u64));
	if (!ret)
		ret = kverbs_atomic_cmp_swap(c->ep, &op, compare, swap, 0);
	return krdma_wait_op(c, ret);
}

static int krdma_fetch_add(struct krdma_client *c, u64 off, u64 add)
{
	struct kverbs_rdma_op op;
	int ret;

	ret = krdma_op(c, &op, off, off, sizeof(u64));
	if (!ret)
		ret = kverbs_atomic_fetch_add(c->ep, &op, add, 0);
	return krdma_wait_op(c, ret);
}

static int krdma_checks(struct krdma_client *c)
{
	u64 *word = page_address(c->local->pages[0]), first;
	int ret;

	ret = krdma_ask(c, KRDMA_HELLO, 0, KRDMA_INFO);
	if (ret)
		return ret;
	c->remote = c->msg.remote;	/* checked by krdma_reply_check() */

	ret = krdma_read(c, 0, 0, KRDMA_LEN);
	if (!ret)
		ret = krdma_verify(c->local, 1);
	if (ret) {
		pr_err("RDMA read: %d\n", ret);
		return ret;
	}
	ret = krdma_read_overlapped(c);
	if (ret) {
		pr_err("RDMA read overlapped by a request: %d\n", ret);
		return ret;
	}
	pr_info("read overlapped by a request: the data in place at its completion\n");
	krdma_fill(c->local, 2);
	first = *word;
	ret = krdma_write(c, 0, 0, KRDMA_LEN);
	if (!ret)
		ret = krdma_ask(c, KRDMA_CHECK, 2, KRDMA_RESULT);
	if (ret) {
		pr_err("RDMA write: %d\n", ret);
		return ret;
	}
	ret = krdma_cmp_swap(c, 0, first, 0x1234);
	if (ret == -EOPNOTSUPP) {	/* iWARP has no atomics */
		pr_info("read and write ok; atomics refused by the device (%d)\n",
			ret);
		c->no_atomics = true;
		goto unreg;
	}
	if (!ret && *word != first)
		ret = -EBADMSG;
	if (!ret)
		ret = krdma_fetch_add(c, 0, 5);
	if (!ret && *word != 0x1234)
		ret = -EBADMSG;
	if (!ret)	/* the server's first word into our second */
		ret = krdma_read(c, sizeof(u64), 0, sizeof(u64));
	if (!ret && word[1] != 0x1239)
		ret = -EBADMSG;
	if (ret) {
		pr_err("atomics: %d (word %#llx %#llx)\n", ret, word[0],
		       word[1]);
		return ret;
	}
	pr_info("read, write, compare-and-swap and fetch-and-add ok\n");
unreg:
	ret = krdma_ask(c, KRDMA_UNREG, 0, KRDMA_UNREG_DONE);
	if (ret)
		return ret;
	/*
	 * IB and RoCE complete the read with a remote access error; on
	 * iWARP the peer's TERMINATE takes the connection down first and
	 * the read is flushed.  Either way the data never came.
	 */
	ret = krdma_read(c, 0, 0, 64);
	if (ret != -EREMOTEIO && !(c->no_atomics && ret == -ECONNRESET)) {
		pr_err("read through an invalidated rkey gave %d\n", ret);
		return -EPROTO;
	}
	pr_info("read through the invalidated rkey refused (%d)\n", ret);
	return 0;
}

static int krdma_client(void)
{
	struct sockaddr_storage dst;
	struct kverbs_domain_attr attr = {
		.msg = &krdma_client_msg_ops,
		.name = "krdma-client",
		.node_id = node_id,
		.depth = 16,
		.max_msg = 256,
		.max_eps = 1,
	};
	struct krdma_client c = {};
	char portstr[8];
	int ret;

	snprintf(portstr, sizeof(portstr), "%u", port);
	ret = inet_pton_with_scope(&init_net, AF_UNSPEC, server, portstr, &dst);
	if (ret)
		return ret;
	init_completion(&c.reply);
	init_completion(&c.op);
	krdma_dom = kverbs_domain_create(&attr);
	if (IS_ERR(krdma_dom))
		return PTR_ERR(krdma_dom);
	c.ep = kverbs_ep_connect(krdma_dom, (struct sockaddr *)&dst, 10000, &c);
	if (IS_ERR(c.ep)) {
		ret = PTR_ERR(c.ep);
		goto out_dom;
	}
	/* Only the local side of our operations: the server gets no access. */
	c.local = krdma_mem_alloc(c.ep, 0, 0);
	if (IS_ERR(c.local)) {
		ret = PTR_ERR(c.local);
		c.local = NULL;
		goto out_ep;
	}
	ret = krdma_checks(&c);
out_ep:
	kverbs_ep_close(c.ep);
	krdma_mem_free(c.local);
out_dom:
	kverbs_domain_destroy(krdma_dom);
	krdma_dom = NULL;
	return ret;
}

static int krdma_server(void)
{
	struct sockaddr_in any = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_ANY),
	};
	struct kverbs_domain_attr attr = {
		.ops = &krdma_server_ops,
		.msg = &krdma_server_msg_ops,
		.name = "krdma-server",
		.node_id = node_id,
		.depth = 16,
		.max_msg = 256,
		.max_eps = 4,
	};

	krdma_dom = kverbs_domain_create(&attr);
	if (IS_ERR(krdma_dom))
		return PTR_ERR(krdma_dom);
	krdma_listener = kverbs_listen(krdma_dom, (struct sockaddr *)&any);
	if (IS_ERR(krdma_listener)) {
		kverbs_domain_destroy(krdma_dom);
		krdma_dom = NULL;
		return PTR_ERR(krdma_listener);
	}
	return 0;
}

static int __init krdma_init(void)
{
	return server && *server ? krdma_client() : krdma_server();
}

static void __exit krdma_exit(void)
{
	if (krdma_dom)
		kverbs_domain_destroy(krdma_dom);
}

module_init(krdma_init);
module_exit(krdma_exit);

MODULE_DESCRIPTION("kverbs sample: RDMA read, write and atomics");
MODULE_LICENSE("GPL");
MODULE_VERSION(KVERBS_VERSION);
KVERBS_IMPORT_NS();
