// SPDX-License-Identifier: GPL-2.0-only
/*
 * krdma: one-sided operations between two nodes, end to end.
 *
 *   insmod krdma.ko                              # server
 *   insmod krdma.ko server=10.77.0.1 node_id=2   # client, runs the checks
 *
 * The server registers 16 pages holding a known pattern and tells the
 * client their address and rkey.  The client reads them with RDMA read,
 * overwrites them with RDMA write (the server checks), runs
 * compare-and-swap and fetch-and-add on the first word, asks the server to
 * unregister, and finally checks that a read through the old rkey is
 * refused.  The insmod fails with the first error.
 *
 * Uses only the exported API (include/kverbs/).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/gfp.h>
#include <linux/inet.h>
#include <linux/module.h>
#include <linux/slab.h>

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
#define KRDMA_LEN	(KRDMA_PAGES * PAGE_SIZE)

enum krdma_type { KRDMA_HELLO = 1, KRDMA_INFO, KRDMA_CHECK, KRDMA_RESULT,
		  KRDMA_UNREG, KRDMA_UNREG_DONE };

struct krdma_msg {
	u32 type;
	s32 status;
	u64 addr;
	u64 len;
	u32 rkey;
	u32 pad;
};

/* Pages and their region; one per server endpoint, one for the client. */
struct krdma_mem {
	struct page *pages[KRDMA_PAGES];
	struct kverbs_region *region;
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
	int i;

	if (!m)
		return;
	if (m->region)
		kverbs_region_unregister(m->region);
	for (i = 0; i < KRDMA_PAGES; i++)
		if (m->pages[i])
			__free_page(m->pages[i]);
	kfree(m);
}

static struct krdma_mem *krdma_mem_alloc(struct kverbs_ep *ep, u32 salt)
{
	struct krdma_mem *m = kzalloc(sizeof(*m), GFP_KERNEL);
	int i;

	if (!m)
		return ERR_PTR(-ENOMEM);
	for (i = 0; i < KRDMA_PAGES; i++) {
		m->pages[i] = alloc_page(GFP_KERNEL);
		if (!m->pages[i]) {
			krdma_mem_free(m);
			return ERR_PTR(-ENOMEM);
		}
	}
	krdma_fill(m, salt);
	m->region = kverbs_region_register(ep, m->pages, KRDMA_PAGES,
					   KVERBS_ACCESS_ALL);
	if (IS_ERR(m->region)) {
		int err = PTR_ERR(m->region);

		m->region = NULL;
		krdma_mem_free(m);
		return ERR_PTR(err);
	}
	return m;
}

static int krdma_send(struct kverbs_ep *ep, const struct krdma_msg *msg)
{
	struct kvmsg_buf *b = kvmsg_reserve(ep, sizeof(*msg), 0);

	if (IS_ERR(b))
		return PTR_ERR(b);
	memcpy(kvmsg_buf_data(b), msg, sizeof(*msg));
	return kvmsg_send(b, sizeof(*msg), 0, NULL);
}

/* Server: everything runs in process context, where registration sleeps. */
static enum kvmsg_verdict krdma_server_recv(struct kverbs_ep *ep,
					   struct kvmsg_rx *rx,
					   enum kvmsg_ctx ctx)
{
	struct krdma_mem *m = kverbs_ep_priv(ep);
	struct krdma_msg in, out = {};

	if (ctx != KVMSG_CTX_PROCESS)
		return KVMSG_DEFER;
	if (kvmsg_rx_len(rx) != sizeof(in))
		return KVMSG_DONE;
	memcpy(&in, kvmsg_rx_data(rx), sizeof(in));
	switch (in.type) {
	case KRDMA_HELLO:
		if (!m) {
			m = krdma_mem_alloc(ep, 1);
			if (IS_ERR(m)) {
				out.status = PTR_ERR(m);
				m = NULL;
			}
			kverbs_ep_set_priv(ep, m);
		}
		out.type = KRDMA_INFO;
		if (m) {
			out.addr = kverbs_region_addr(m->region);
			out.len = kverbs_region_len(m->region);
			out.rkey = kverbs_region_rkey(m->region);
		}
		break;
	case KRDMA_CHECK:
		out.type = KRDMA_RESULT;
		out.status = m ? krdma_verify(m, in.status) : -ENOENT;
		break;
	case KRDMA_UNREG:
		out.type = KRDMA_UNREG_DONE;
		if (m && m->region) {
			kverbs_region_unregister(m->region);
			m->region = NULL;
		}
		break;
	default:
		return KVMSG_DONE;
	}
	if (krdma_send(ep, &out))
		pr_warn_ratelimited("reply to node %u failed\n",
				    kverbs_ep_peer_node(ep));
	return KVMSG_DONE;
}

static void krdma_server_disconnected(struct kverbs_ep *ep, int err)
{
	krdma_mem_free(kverbs_ep_priv(ep));
	kverbs_ep_set_priv(ep, NULL);
}

static const struct kverbs_domain_ops krdma_server_ops = {
	.disconnected = krdma_server_disconnected,
	.recv = krdma_server_recv,
};

/* Client: one request outstanding; the handler copies the reply. */
struct krdma_client {
	struct completion reply;
	struct krdma_msg msg;
	struct completion op;
	int op_status;
};

static enum kvmsg_verdict krdma_client_recv(struct kverbs_ep *ep,
					   struct kvmsg_rx *rx,
					   enum kvmsg_ctx ctx)
{
	struct krdma_client *c = kverbs_ep_priv(ep);

	if (c && kvmsg_rx_len(rx) == sizeof(c->msg)) {
		memcpy(&c->msg, kvmsg_rx_data(rx), sizeof(c->msg));
		complete(&c->reply);
	}
	return KVMSG_DONE;
}

static const struct kverbs_domain_ops krdma_client_ops = {
	.recv = krdma_client_recv,
};

static int krdma_ask(struct kverbs_ep *ep, struct krdma_client *c,
		     u32 type, s32 arg, u32 want)
{
	struct krdma_msg m = { .type = type, .status = arg };
	int ret;

	reinit_completion(&c->reply);
	ret = krdma_send(ep, &m);
	if (ret)
		return ret;
	if (!wait_for_completion_timeout(&c->reply, 10 * HZ))
		return -ETIMEDOUT;
	return c->msg.type == want ? c->msg.status : -EPROTO;
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

static int krdma_checks(struct kverbs_ep *ep, struct krdma_client *c,
			struct krdma_mem *lm)
{
	u64 raddr, *word = page_address(lm->pages[0]), first;
	u32 rkey;
	int ret;

	ret = krdma_ask(ep, c, KRDMA_HELLO, 0, KRDMA_INFO);
	if (ret || c->msg.len != KRDMA_LEN)
		return ret ?: -EPROTO;
	raddr = c->msg.addr;
	rkey = c->msg.rkey;

	ret = krdma_wait_op(c, kverbs_rdma_read(ep, lm->region, 0, raddr,
						rkey, KRDMA_LEN, krdma_op_done,
						c, 0));
	if (!ret)
		ret = krdma_verify(lm, 1);
	if (ret) {
		pr_err("RDMA read: %d\n", ret);
		return ret;
	}
	krdma_fill(lm, 2);
	first = *word;
	ret = krdma_wait_op(c, kverbs_rdma_write(ep, lm->region, 0, raddr,
						 rkey, KRDMA_LEN,
						 krdma_op_done, c, 0));
	if (!ret)
		ret = krdma_ask(ep, c, KRDMA_CHECK, 2, KRDMA_RESULT);
	if (ret) {
		pr_err("RDMA write: %d\n", ret);
		return ret;
	}
	ret = krdma_wait_op(c, kverbs_atomic_cmp_swap(ep, lm->region, 0, raddr,
						      rkey, first, 0x1234,
						      krdma_op_done, c, 0));
	if (!ret && *word != first)
		ret = -EBADMSG;
	if (!ret)
		ret = krdma_wait_op(c, kverbs_atomic_fetch_add(ep, lm->region,
							       0, raddr, rkey,
							       5, krdma_op_done,
							       c, 0));
	if (!ret && *word != 0x1234)
		ret = -EBADMSG;
	if (!ret)
		ret = krdma_wait_op(c, kverbs_rdma_read(ep, lm->region, 8,
							raddr, rkey, 8,
							krdma_op_done, c, 0));
	if (!ret && word[1] != 0x1239)
		ret = -EBADMSG;
	if (ret) {
		pr_err("atomics: %d (word %#llx %#llx)\n", ret, word[0],
		       word[1]);
		return ret;
	}
	pr_info("read, write, compare-and-swap and fetch-and-add ok\n");

	ret = krdma_ask(ep, c, KRDMA_UNREG, 0, KRDMA_UNREG_DONE);
	if (ret)
		return ret;
	ret = krdma_wait_op(c, kverbs_rdma_read(ep, lm->region, 0, raddr,
						rkey, 64, krdma_op_done, c,
						0));
	if (ret != -EREMOTEIO) {
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
		.ops = &krdma_client_ops, .name = "krdma-client",
		.node_id = node_id, .depth = 16, .max_msg = 256, .max_eps = 1,
		.rnr_retry = 7,
	};
	struct krdma_client c = {};
	struct krdma_mem *lm;
	struct kverbs_ep *ep;
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
	ep = kverbs_ep_connect(krdma_dom, (struct sockaddr *)&dst, 10000);
	if (IS_ERR(ep)) {
		ret = PTR_ERR(ep);
		goto out_dom;
	}
	kverbs_ep_set_priv(ep, &c);
	lm = krdma_mem_alloc(ep, 0);
	if (IS_ERR(lm)) {
		ret = PTR_ERR(lm);
		goto out_ep;
	}
	ret = krdma_checks(ep, &c, lm);
out_ep:
	kverbs_ep_close(ep);
	if (!IS_ERR(lm))
		krdma_mem_free(lm);
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
		.ops = &krdma_server_ops, .name = "krdma-server",
		.node_id = node_id, .depth = 16, .max_msg = 256, .max_eps = 4,
		.rnr_retry = 7,
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
MODULE_IMPORT_NS(KVERBS_NS);
