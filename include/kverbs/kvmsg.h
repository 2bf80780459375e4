/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kvmsg: messages on kverbs endpoints.
 *
 * Sending: kvmsg_reserve() hands out a registered send buffer, the caller
 * writes the message into kvmsg_buf_data() and kvmsg_send() posts it.  The
 * buffer goes back to the endpoint's pool by itself once the adapter is done
 * with it; the caller never frees it.  Sends are posted unsignaled and the
 * library asks for a completion every signal_interval work requests, so a
 * caller that wants to know when its message left asks with KVMSG_NOTIFY
 * and gets exactly one ->send_done().
 *
 * Flow control: a message is posted only when the peer has a receive
 * buffer for it (a credit); otherwise it waits, in order, inside the
 * library and goes out when credits return.  kvmsg_reserve() is bounded by
 * the send buffers, never by credits, so it never overflows the send queue.
 *
 * Receiving: each endpoint keeps a ring of @depth posted receive buffers.
 * ->recv() sees a message in place (zero copy) and only during the call;
 * the buffer is re-posted when it returns, unless kept with kvmsg_rx_keep().
 * A handler in an atomic context that needs to sleep, or finds no send
 * buffer, returns -EAGAIN: the library calls it again, for the same
 * message and before any later message of that endpoint, in process
 * context on the domain's workqueue.  There, too, no send buffer or slot
 * is waited for (the work serves every peer): -EAGAIN has the handler
 * called again once the endpoint has one.
 *
 * See Documentation/kvmsg.rst for contexts, credits and teardown.
 */
#ifndef _KVERBS_KVMSG_H
#define _KVERBS_KVMSG_H

#include <linux/completion.h>
#include <linux/types.h>

#include <kverbs/kverbs.h>

struct kvmsg_buf;
struct kvmsg_rx;

/**
 * enum kvmsg_ctx - where a receive handler runs
 * @KVMSG_CTX_SOFTIRQ: the domain CQ's softirq poll; must not sleep
 * @KVMSG_CTX_POLL: the CQ's softirq poller run for a task in
 *	kverbs_domain_poll(); must not sleep
 * @KVMSG_CTX_PROCESS: the domain workqueue, after a deferral; may sleep
 */
enum kvmsg_ctx {
	KVMSG_CTX_SOFTIRQ,
	KVMSG_CTX_POLL,
	KVMSG_CTX_PROCESS,
};

/**
 * struct kvmsg_ops - message callbacks of a domain
 * @recv: a message arrived.  @rx is valid only during the call unless
 *	kept with kvmsg_rx_keep().  Calls for one endpoint are never
 *	concurrent and come in the order the peer sent; calls in SOFTIRQ and
 *	POLL are serialised domain-wide.  Return 0 when done with the
 *	message; -EAGAIN (only from SOFTIRQ or POLL) to be called again for
 *	it, before any later message of the endpoint, in PROCESS context; any
 *	other negative errno rejects it as malformed: it is counted and the
 *	endpoint is closed with that error.  Required.
 * @send_done: a send posted with KVMSG_NOTIFY completed (@status 0) or was
 *	flushed (@status < 0); exactly once per such send.  Required, so
 *	that a domain is refused when it is created (-EINVAL), not when its
 *	first notified send completes.  Context: softirq, or process during
 *	teardown.
 */
struct kvmsg_ops {
	int (*recv)(struct kverbs_ep *ep, struct kvmsg_rx *rx,
		    enum kvmsg_ctx ctx);
	void (*send_done)(struct kverbs_ep *ep, void *cookie, int status);
};

/* kvmsg_send() flags */
#define KVMSG_NOTIFY	0x1	/* signaled; ->send_done(cookie) exactly once */

struct kvmsg_buf *kvmsg_reserve(struct kverbs_ep *ep, u32 len,
				unsigned int flags);
void *kvmsg_buf_data(struct kvmsg_buf *buf);
int kvmsg_send(struct kvmsg_buf *buf, u32 len, unsigned int flags,
	       void *cookie);
void kvmsg_unreserve(struct kvmsg_buf *buf);

const void *kvmsg_rx_data(const struct kvmsg_rx *rx);
u32 kvmsg_rx_len(const struct kvmsg_rx *rx);
struct kverbs_ep *kvmsg_rx_ep(const struct kvmsg_rx *rx);
int kvmsg_rx_keep(struct kvmsg_rx *rx);
void kvmsg_rx_release(struct kvmsg_rx *rx);

int kvmsg_wait_poll_us(struct kverbs_domain *dom, struct completion *done,
		       unsigned int poll_us, unsigned int timeout_us);

#endif /* _KVERBS_KVMSG_H */
