/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kmsg: messages on kverbs endpoints.
 *
 * Sending: kmsg_reserve() hands out a registered send buffer, the caller
 * writes the message into kmsg_buf_data() and kmsg_send() posts it.  The
 * buffer goes back to the endpoint's pool by itself once the adapter is done
 * with it; the caller never frees it.  Sends are posted unsignaled and the
 * library asks for a completion every signal_interval work requests, so a
 * caller that wants to know when its message left asks with KMSG_NOTIFY
 * and gets exactly one ->send_done().
 *
 * Flow control: a message is posted only when the peer has a receive
 * buffer for it (a credit); otherwise it waits, in order, inside the
 * library and goes out when credits return.  kmsg_reserve() is bounded by
 * the send buffers, never by credits, so it never overflows the send queue.
 *
 * Receiving: each endpoint keeps a ring of @depth posted receive buffers.
 * ->recv() sees a message in place (zero copy) and only during the call;
 * the buffer is re-posted when it returns, unless kept with kmsg_rx_keep().
 * A handler in an atomic context that needs to sleep, or finds no send
 * buffer, returns KMSG_DEFER: the library calls it again, for the same
 * message and before any later message of that endpoint, in process
 * context on the domain's workqueue.
 *
 * See Documentation/kmsg.rst for contexts, credits and teardown.
 */
#ifndef _KVERBS_KMSG_H
#define _KVERBS_KMSG_H

#include <linux/completion.h>
#include <linux/types.h>

#include <kverbs/kverbs.h>

struct kmsg_buf;

/* kmsg_reserve() flags */
#define KMSG_NOWAIT	0x1	/* do not sleep: -EAGAIN when no buffer is free */

/* kmsg_send() flags */
#define KMSG_NOTIFY	0x1	/* signaled; ->send_done(cookie) exactly once */

struct kmsg_buf *kmsg_reserve(struct kverbs_ep *ep, u32 len,
			      unsigned int flags);
void *kmsg_buf_data(struct kmsg_buf *buf);
int kmsg_send(struct kmsg_buf *buf, u32 len, unsigned int flags,
	      void *cookie);
void kmsg_unreserve(struct kmsg_buf *buf);

const void *kmsg_rx_data(const struct kmsg_rx *rx);
u32 kmsg_rx_len(const struct kmsg_rx *rx);
struct kverbs_ep *kmsg_rx_ep(const struct kmsg_rx *rx);
int kmsg_rx_keep(struct kmsg_rx *rx);
void kmsg_rx_release(struct kmsg_rx *rx);

long kmsg_wait_poll(struct kverbs_domain *dom, struct completion *done,
		    unsigned int poll_us, unsigned long timeout);

#endif /* _KVERBS_KMSG_H */
