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
 * buffer, returns KVMSG_DEFER: the library calls it again, for the same
 * message and before any later message of that endpoint, in process
 * context on the domain's workqueue.
 *
 * See Documentation/kvmsg.rst for contexts, credits and teardown.
 */
#ifndef _KVERBS_KVMSG_H
#define _KVERBS_KVMSG_H

#include <linux/completion.h>
#include <linux/types.h>

#include <kverbs/kverbs.h>

struct kvmsg_buf;

/* kvmsg_reserve() flags */
#define KVMSG_NOWAIT	0x1	/* do not sleep: -EAGAIN when no buffer is free */

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

long kvmsg_wait_poll(struct kverbs_domain *dom, struct completion *done,
		    unsigned int poll_us, unsigned long timeout);

#endif /* _KVERBS_KVMSG_H */
