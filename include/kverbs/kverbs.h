/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kverbs: in-kernel RDMA endpoints for kernel modules.
 *
 * A domain owns one completion queue shared by all of its endpoints, one
 * set of callbacks and its regions; each endpoint has its own protection
 * domain, so what is granted to one peer is reachable by no other.
 * Because every endpoint of a domain completes on the same CQ, the
 * callbacks that completions run (->recv() in softirq, ->send_done(), RDMA
 * @done) never run concurrently with each other; the connection callbacks
 * and deferred ->recv() calls run in process context, concurrently with
 * them but never with another call for the same endpoint's messages.
 * A domain binds to an RDMA device when its first endpoint resolves a
 * route or accepts a connection; endpoints on a different device are
 * refused with -EXDEV.
 *
 * Endpoints are RC queue pairs set up through rdma_cm, so IB, RoCE and iWARP
 * work alike.  Both sides announce their node id, receive depth and largest
 * message in the connection's private data (uapi/kverbs/cm.h); a peer whose
 * announcement is malformed is refused and the refusal logged.
 *
 * Messages are sent and received through kvmsg (include/kverbs/kvmsg.h),
 * whose callbacks a domain is created with.
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
struct kvmsg_ops;

/*
 * Sleeping: a call that can wait for a resource (a send buffer, an
 * operation slot, a page protection) sleeps for it unless told not to:
 * pass KVERBS_NOWAIT from any atomic context, and it fails with -EAGAIN
 * instead.  Inside kverbs' and kvmsg's own callbacks that run in softirq
 * (a ->recv() in KVMSG_CTX_SOFTIRQ or KVMSG_CTX_POLL, ->send_done(), an
 * RDMA @done), kverbs and kvmsg calls never sleep whatever the flags, so a
 * handler passes 0 and returns the -EAGAIN it got to be deferred.  In a
 * deferred ->recv() (KVMSG_CTX_PROCESS) they do not sleep for a send
 * buffer or an operation slot either, which only the peer gives back:
 * the handler returns the -EAGAIN and is called again when the endpoint
 * has room (Documentation/kvmsg.rst).
 * kvmem_protect() does not know these callbacks: pass KVERBS_NOWAIT to it
 * from any of them.
 */
#define KVERBS_NOWAIT	0x1

/**
 * struct kverbs_domain_ops - connection callbacks of a domain
 * @authorize: a connection request on one of the domain's listeners, its
 *	connection data valid (in a keyed domain, before the peer proved
 *	the key: decide by address here, and trust the node id only from
 *	->connected on): return 0 to accept it, non-zero to refuse it
 *	(the peer sees KVERBS_CM_EREFUSED).  @peer_node is what the peer
 *	wrote into its own connection data; @peer is the address the RDMA
 *	CM saw, as trustworthy as the fabric.  Runs before any endpoint,
 *	QP or buffer exists for the request, so nothing of the client runs
 *	for a refused peer.  NULL: every valid request is accepted.
 *	Context: process (rdma_cm handler, under the listener's handler
 *	lock); must not sleep on anything a peer controls.
 * @connected: an endpoint became usable: sends work from here on, on the
 *	accepting side too; no message callback for it runs before this
 *	returns.  In a keyed domain, only for a peer that proved the key.
 *	Runs in process context (the rdma_cm handler; for an accepted
 *	endpoint under the listener's handler lock; in a keyed domain, the
 *	domain's workqueue); may sleep, must not destroy the endpoint, a
 *	listener or the domain.
 * @disconnected: an endpoint is gone: peer disconnect, error, device
 *	removal (@err -ENODEV) or local close (@err 0).  The last callback
 *	for @ep.  An accepted endpoint is freed after it returns; an endpoint
 *	from kverbs_ep_connect() lives until kverbs_ep_close().  Context:
 *	process (domain workqueue); may sleep.
 */
struct kverbs_domain_ops {
	int (*authorize)(struct kverbs_domain *dom, u32 peer_node,
			 const struct sockaddr *peer);
	void (*connected)(struct kverbs_ep *ep);
	void (*disconnected)(struct kverbs_ep *ep, int err);
};

/**
 * struct kverbs_domain_attr - parameters of a new domain
 * @ops: connection callbacks; may be NULL
 * @msg: message callbacks (include/kverbs/kvmsg.h); @msg->recv is required
 * @priv: returned by kverbs_domain_priv()
 * @name: short name for logs, traces and debugfs (copied)
 * @node_id: this node's id announced to peers, non-zero
 * @depth: receive buffers posted per endpoint, send buffers per endpoint
 *	and RDMA operations in flight per endpoint
 *	(KVERBS_CM_MIN_DEPTH..KVERBS_CM_MAX_DEPTH)
 * @max_msg: largest message payload this side receives, in bytes
 *	(KVERBS_CM_MIN_MSG..KVERBS_CM_MAX_MSG)
 * @max_eps: endpoints the domain's CQ is sized for (at least 1)
 * @max_accepted: of those, how many peers' connection requests may hold
 *	at once (0: all of @max_eps; at most @max_eps).  The rest stays for
 *	endpoints the node dials itself.  An accepted endpoint counts from
 *	the request until its teardown takes it off the domain, whatever
 *	its state.
 * @max_per_host: accepted endpoints one peer address may hold at once;
 *	0: no cap.  Beyond either cap a request is
 *	refused with KVERBS_CM_EBUSY (the connecting side's
 *	kverbs_ep_connect() returns -ECONNREFUSED; retry later), counted
 *	(debugfs accept_busy) and logged.
 * @write_pages: pages one kverbs_rdma_write_pages() on its endpoints may
 *	carry (0..KVERBS_PAGES_MAX_SGE): a send WR takes that many SGEs, so
 *	a domain that never writes pages keeps its WRs small.  0: refused.
 * @read_pages: likewise for kverbs_rdma_read_pages(), further capped by
 *	the device's RDMA READ SGE limit.  0: refused.
 * @auth_key: the description of a "logon" key (``keyctl add logon
 *	kverbs:NAME ...``), 16 to 64 bytes shared by every peer, looked up
 *	in the creating task's keyrings; every connection of the domain, in
 *	both directions, then proves both sides hold it before ->connected
 *	(Documentation/security.rst), and a peer without it is refused.
 *	Connections that have not proven it yet take at most half of
 *	@max_eps, and one host a quarter (at most 4); beyond, a request
 *	is refused with KVERBS_CM_EBUSY (the connecting side's
 *	kverbs_ep_connect() returns -ECONNREFUSED; retry later).
 *	NULL: peers are not authenticated.
 */
struct kverbs_domain_attr {
	const struct kverbs_domain_ops *ops;
	const struct kvmsg_ops *msg;
	void *priv;
	const char *name;
	u32 node_id;
	u16 depth;
	u32 max_msg;
	u16 max_eps;
	u16 max_accepted;
	u16 max_per_host;
	u8 write_pages;
	u8 read_pages;
	const char *auth_key;
};

struct kverbs_domain *kverbs_domain_create(const struct kverbs_domain_attr *attr);
void kverbs_domain_destroy(struct kverbs_domain *dom);
void *kverbs_domain_priv(const struct kverbs_domain *dom);
int kverbs_domain_poll(struct kverbs_domain *dom);

/**
 * kverbs_key_error - did kverbs_domain_create() fail on its auth_key?
 * @err: its error
 *
 * Context: any.
 * Return: true for the key's errors: none the caller may search
 * (-ENOKEY, -EACCES), revoked, expired, or not 16 to 64 bytes
 * (-EKEYREJECTED).
 */
static inline bool kverbs_key_error(long err)
{
	return err == -ENOKEY || err == -EKEYREVOKED || err == -EKEYEXPIRED ||
	       err == -EKEYREJECTED || err == -EACCES;
}

struct kverbs_listener *kverbs_listen(struct kverbs_domain *dom,
				      const struct sockaddr *addr);
void kverbs_listener_destroy(struct kverbs_listener *l);

struct kverbs_ep *kverbs_ep_connect(struct kverbs_domain *dom,
				    const struct sockaddr *dst,
				    unsigned int timeout_ms, void *priv);
int kverbs_ep_close(struct kverbs_ep *ep);
void kverbs_ep_disconnect(struct kverbs_ep *ep);
int kverbs_ep_probe(struct kverbs_ep *ep);

u32 kverbs_ep_peer_node(const struct kverbs_ep *ep);
void kverbs_ep_peer_addr(const struct kverbs_ep *ep,
			 struct sockaddr_storage *addr);
u32 kverbs_ep_max_send(const struct kverbs_ep *ep);
void kverbs_ep_set_priv(struct kverbs_ep *ep, void *priv);
void *kverbs_ep_priv(const struct kverbs_ep *ep);
struct kverbs_domain *kverbs_ep_domain(const struct kverbs_ep *ep);

/*
 * Registered memory (kverbs/region.c, grant.c) and one-sided operations
 * (rdma.c).  A region is pages of ours that belong to the domain; a grant
 * makes a region reachable by the peer of one endpoint, with the access
 * it names, until it is revoked or the endpoint closes.  Every endpoint
 * has its own protection domain, so a grant's keys work on that
 * endpoint's connection only.
 */
struct kverbs_region;
struct kverbs_grant;
struct page;

#define KVERBS_ACCESS_REMOTE_READ	0x1
#define KVERBS_ACCESS_REMOTE_WRITE	0x2
#define KVERBS_ACCESS_REMOTE_ATOMIC	0x4
#define KVERBS_ACCESS_ALL		0x7
#define KVERBS_RDMA_MAX_SEGS		4
/* Pages one kverbs_rdma_{read,write}_pages() call may carry, at most */
#define KVERBS_PAGES_MAX_SGE		16

/**
 * struct kverbs_remote - an extent of a peer's registered memory
 * @offset: first byte, as an offset in the peer's region (no kernel or
 *	DMA address ever travels)
 * @len: bytes of the extent
 * @rkey: the key of the peer's grant that covers the extent
 * @reserved: zero
 *
 * kverbs_grant_remote() describes bytes within one extent of a granted
 * region; kverbs_remote_slice() narrows it to the bytes one operation
 * touches.  Fixed layout, host byte order: a client sends it as it is to
 * a peer of the same architecture, or converts the fields itself.
 */
struct kverbs_remote {
	u64 offset;
	u64 len;
	u32 rkey;
	u32 reserved;
};

/**
 * kverbs_remote_slice - the part of @r from @off on, @len bytes long
 * @r: extent
 * @off: offset in @r
 * @len: bytes
 * @out: the slice; may be @r
 *
 * Context: any.
 * Return: 0, or -EINVAL if the slice is not inside @r.
 */
static inline int kverbs_remote_slice(const struct kverbs_remote *r, u64 off,
				      u64 len, struct kverbs_remote *out)
{
	if (off > r->len || len > r->len - off)
		return -EINVAL;
	out->rkey = r->rkey;
	out->offset = r->offset + off;
	out->len = len;
	out->reserved = 0;
	return 0;
}

typedef void (*kverbs_rdma_done_t)(void *ctx, int status);

/**
 * struct kverbs_rdma_op - one RDMA read, write or atomic
 * @local: a region of ours, of the endpoint's domain (no grant needed):
 *	the source of a write, the sink of a read or of an atomic's previous
 *	value; the bytes may span pages, up to KVERBS_RDMA_MAX_SEGS runs of
 *	physically contiguous memory
 * @local_off: offset in @local
 * @remote: where in the peer's memory; @remote.offset is the first byte
 * @len: bytes; an atomic is always 8
 * @done: called once when the operation completed (0) or failed (-errno);
 *	NULL for none on a write only (a read or an atomic lands in @local
 *	at a time only its completion tells).  Context: softirq, or process
 *	during teardown.
 * @ctx: passed to @done
 */
struct kverbs_rdma_op {
	struct kverbs_region *local;
	u64 local_off;
	struct kverbs_remote remote;
	u32 len;
	kverbs_rdma_done_t done;
	void *ctx;
};

struct kverbs_region *kverbs_region_create(struct kverbs_domain *dom,
					   struct page **pages,
					   unsigned long npages);
void kverbs_region_destroy(struct kverbs_region *r);
u64 kverbs_region_len(const struct kverbs_region *r);

struct kverbs_grant *kverbs_region_grant(struct kverbs_region *r,
					 struct kverbs_ep *ep, u32 access);
void kverbs_grant_revoke(struct kverbs_grant *g);
int kverbs_grant_remote(const struct kverbs_grant *g, u64 offset, u64 len,
			struct kverbs_remote *remote);
u64 kverbs_grant_extent(const struct kverbs_grant *g);

int kverbs_rdma_read(struct kverbs_ep *ep, const struct kverbs_rdma_op *op,
		     unsigned int flags);
int kverbs_rdma_write(struct kverbs_ep *ep, const struct kverbs_rdma_op *op,
		      unsigned int flags);
int kverbs_rdma_write_pages(struct kverbs_ep *ep, struct page **pages,
			    unsigned int npages,
			    const struct kverbs_remote *remote,
			    kverbs_rdma_done_t done, void *ctx,
			    unsigned int flags);
unsigned int kverbs_ep_max_write_pages(const struct kverbs_ep *ep);
int kverbs_rdma_read_pages(struct kverbs_ep *ep, struct page **pages,
			   unsigned int npages,
			   const struct kverbs_remote *remote,
			   kverbs_rdma_done_t done, void *ctx,
			   unsigned int flags);
unsigned int kverbs_ep_max_read_pages(const struct kverbs_ep *ep);
int kverbs_atomic_cmp_swap(struct kverbs_ep *ep,
			   const struct kverbs_rdma_op *op, u64 compare,
			   u64 swap, unsigned int flags);
int kverbs_atomic_fetch_add(struct kverbs_ep *ep,
			    const struct kverbs_rdma_op *op, u64 add,
			    unsigned int flags);

#endif /* _KVERBS_KVERBS_H */
