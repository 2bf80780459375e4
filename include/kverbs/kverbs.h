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
 * struct kverbs_domain_ops - callbacks of a domain
 * @connected: an endpoint became usable.  Context: process (rdma_cm
 *	handler); may sleep, must not destroy the endpoint or the domain.
 * @disconnected: an endpoint is gone: peer disconnect, error, device
 *	removal (@err -ENODEV) or local close (@err 0).  The last callback
 *	for @ep.  An accepted endpoint is freed after it returns; an endpoint
 *	from kverbs_ep_connect() lives until kverbs_ep_close().  Context:
 *	process (domain workqueue); may sleep.
 * @recv: a message arrived.  @buf is valid only during the call.
 *	Context: softirq (the domain's CQ poll context); must not sleep.
 */
struct kverbs_domain_ops {
	void (*connected)(struct kverbs_ep *ep);
	void (*disconnected)(struct kverbs_ep *ep, int err);
	void (*recv)(struct kverbs_ep *ep, const void *buf, u32 len);
};

/**
 * struct kverbs_domain_attr - parameters of a new domain
 * @ops: callbacks; @ops->recv is required
 * @priv: returned by kverbs_domain_priv()
 * @name: short name for logs and debugfs (copied)
 * @node_id: this node's id announced to peers, non-zero
 * @depth: receive buffers posted per endpoint, and send slots per endpoint
 *	(KVERBS_CM_MIN_DEPTH..KVERBS_CM_MAX_DEPTH)
 * @max_msg: largest message this side receives, in bytes
 *	(KVERBS_CM_MIN_MSG..KVERBS_CM_MAX_MSG)
 * @max_eps: endpoints the domain's CQ is sized for (at least 1)
 * @rnr_retry: RNR retry count for connections (0..7, 7 = infinite);
 *	tests use 0 so that a flow-control bug fails instead of stalling
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
int kverbs_ep_send(struct kverbs_ep *ep, const void *buf, u32 len);

u32 kverbs_ep_peer_node(const struct kverbs_ep *ep);
u32 kverbs_ep_max_send(const struct kverbs_ep *ep);
void kverbs_ep_set_priv(struct kverbs_ep *ep, void *priv);
void *kverbs_ep_priv(const struct kverbs_ep *ep);

#endif /* _KVERBS_KVERBS_H */
