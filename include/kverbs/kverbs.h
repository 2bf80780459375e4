/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kverbs: in-kernel RDMA endpoints for kernel modules.
 *
 * A domain owns a protection domain, one completion queue shared by all of
 * its endpoints, and one set of callbacks.  Because every endpoint of a
 * domain completes on the same CQ, callbacks of one domain never run
 * concurrently with each other.  A domain binds to an RDMA device when its
 * first endpoint resolves a route or accepts a connection; endpoints on a
 * different device are refused with -EXDEV.
 *
 * Endpoints are RC queue pairs set up through rdma_cm, so IB, RoCE and iWARP
 * work alike.  Both sides announce their node id, receive depth and largest
 * message in the connection's private data (uapi/kverbs/cm.h); a peer whose
 * announcement is malformed is refused and the refusal logged.
 *
 * Messages are sent and received through kvmsg (include/kverbs/kvmsg.h).
 * Users import the KVERBS symbol namespace.  See
 * Documentation/kverbs-api.rst for contexts and lifetimes.
 */
#ifndef _KVERBS_KVERBS_H
#define _KVERBS_KVERBS_H

#include <linux/types.h>
#include <linux/socket.h>
#include <kverbs/compat.h>

struct kverbs_domain;
struct kverbs_ep;
struct kverbs_listener;

/**
 * enum kvmsg_ctx - where a receive handler runs
 * @KVMSG_CTX_SOFTIRQ: the domain CQ's softirq poll; must not sleep
 * @KVMSG_CTX_POLL: the CQ's softirq poller run by a task busy-polling in
 *	kverbs_domain_poll(); must not sleep
 * @KVMSG_CTX_PROCESS: the domain workqueue, after a deferral; may sleep
 */
enum kvmsg_ctx {
	KVMSG_CTX_SOFTIRQ,
	KVMSG_CTX_POLL,
	KVMSG_CTX_PROCESS,
};

/**
 * enum kvmsg_verdict - what a receive handler did with a message
 * @KVMSG_DONE: consumed (or kept with kvmsg_rx_keep())
 * @KVMSG_DEFER: call again in process context; only from an atomic context
 */
enum kvmsg_verdict {
	KVMSG_DONE,
	KVMSG_DEFER,
};

struct kvmsg_rx;

/**
 * struct kverbs_domain_ops - callbacks of a domain
 * @connected: an endpoint became usable: sends work from here on, on the
 *	accepting side too; no @recv for it runs before this returns.
 *	Context: process (rdma_cm handler; for an accepted endpoint under the
 *	listener's handler lock); may sleep, must not destroy the endpoint,
 *	a listener or the domain.
 * @disconnected: an endpoint is gone: peer disconnect, error, device
 *	removal (@err -ENODEV) or local close (@err 0).  The last callback
 *	for @ep.  An accepted endpoint is freed after it returns; an endpoint
 *	from kverbs_ep_connect() lives until kverbs_ep_close().  Context:
 *	process (domain workqueue); may sleep.
 * @recv: a message arrived; see include/kverbs/kvmsg.h.  @rx is valid only
 *	during the call unless kept.  Calls for one endpoint are never
 *	concurrent and come in the order the peer sent; calls in @ctx
 *	SOFTIRQ and POLL are serialised domain-wide.  Required.
 * @send_done: a send posted with KVMSG_NOTIFY completed (@status 0) or was
 *	flushed (@status < 0); exactly once per such send.  Context: softirq
 *	or poll (atomic), or process during teardown.
 */
struct kverbs_domain_ops {
	void (*connected)(struct kverbs_ep *ep);
	void (*disconnected)(struct kverbs_ep *ep, int err);
	enum kvmsg_verdict (*recv)(struct kverbs_ep *ep, struct kvmsg_rx *rx,
				  enum kvmsg_ctx ctx);
	void (*send_done)(struct kverbs_ep *ep, void *cookie, int status);
};

/**
 * struct kverbs_domain_attr - parameters of a new domain
 * @ops: callbacks; @ops->recv is required
 * @priv: returned by kverbs_domain_priv()
 * @name: short name for logs and debugfs (copied)
 * @node_id: this node's id announced to peers, non-zero
 * @depth: receive buffers posted per endpoint, and send buffers per
 *	endpoint (KVERBS_CM_MIN_DEPTH..KVERBS_CM_MAX_DEPTH)
 * @max_msg: largest message payload this side receives, in bytes
 *	(KVERBS_CM_MIN_MSG..KVERBS_CM_MAX_MSG)
 * @max_eps: endpoints the domain's CQ is sized for (at least 1)
 * @rnr_retry: RNR retry count for connections (0..7, 7 = infinite);
 *	tests use 0 so that a flow-control bug fails instead of stalling
 * @signal_interval: request a send completion every this many work
 *	requests (1..@depth); 0 picks @depth / 4
 */
struct kverbs_domain_attr {
	const struct kverbs_domain_ops *ops;
	void *priv;
	const char *name;
	u32 node_id;
	u16 depth;
	u32 max_msg;
	u16 max_eps;
	u8 rnr_retry;
	u16 signal_interval;
};

struct kverbs_domain *kverbs_domain_create(const struct kverbs_domain_attr *attr);
void kverbs_domain_destroy(struct kverbs_domain *dom);
void *kverbs_domain_priv(const struct kverbs_domain *dom);

struct kverbs_listener *kverbs_listen(struct kverbs_domain *dom,
				      const struct sockaddr *addr);
void kverbs_listener_destroy(struct kverbs_listener *l);

struct kverbs_ep *kverbs_ep_connect(struct kverbs_domain *dom,
				    const struct sockaddr *dst,
				    unsigned int timeout_ms);
void kverbs_ep_close(struct kverbs_ep *ep);

u32 kverbs_ep_peer_node(const struct kverbs_ep *ep);
u32 kverbs_ep_max_send(const struct kverbs_ep *ep);
void kverbs_ep_set_priv(struct kverbs_ep *ep, void *priv);
void *kverbs_ep_priv(const struct kverbs_ep *ep);

int kverbs_domain_poll(struct kverbs_domain *dom);

/* Registered regions and one-sided operations (kverbs/region.c, rdma.c) */
struct kverbs_region;
struct page;

#define KVERBS_ACCESS_REMOTE_READ	0x1
#define KVERBS_ACCESS_REMOTE_WRITE	0x2
#define KVERBS_ACCESS_REMOTE_ATOMIC	0x4
#define KVERBS_ACCESS_ALL		0x7
#define KVERBS_REGION_MAX_PAGES		1024

typedef void (*kverbs_rdma_done_t)(void *ctx, int status);

struct kverbs_region *kverbs_region_register(struct kverbs_ep *ep,
					     struct page **pages,
					     unsigned int npages, u32 access);
void kverbs_region_unregister(struct kverbs_region *r);
u32 kverbs_region_rkey(const struct kverbs_region *r);
u64 kverbs_region_addr(const struct kverbs_region *r);
u64 kverbs_region_len(const struct kverbs_region *r);

int kverbs_rdma_read(struct kverbs_ep *ep, struct kverbs_region *local,
		     u64 off, u64 raddr, u32 rkey, u32 len,
		     kverbs_rdma_done_t done, void *ctx, unsigned int flags);
int kverbs_rdma_write(struct kverbs_ep *ep, struct kverbs_region *local,
		      u64 off, u64 raddr, u32 rkey, u32 len,
		      kverbs_rdma_done_t done, void *ctx, unsigned int flags);
int kverbs_atomic_cmp_swap(struct kverbs_ep *ep, struct kverbs_region *local,
			   u64 off, u64 raddr, u32 rkey, u64 compare,
			   u64 swap, kverbs_rdma_done_t done, void *ctx,
			   unsigned int flags);
int kverbs_atomic_fetch_add(struct kverbs_ep *ep, struct kverbs_region *local,
			    u64 off, u64 raddr, u32 rkey, u64 add,
			    kverbs_rdma_done_t done, void *ctx,
			    unsigned int flags);

#endif /* _KVERBS_KVERBS_H */
