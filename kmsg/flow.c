// SPDX-License-Identifier: GPL-2.0-only
/*
 * The pure logic of kvmsg: credit accounting and deferral order (the
 * send-queue ledger is kverbs/sq.c).  No locking and no device here:
 * callers hold the endpoint's lock, and KUnit drives these directly.
 */
#include <linux/kernel.h>
#include <linux/limits.h>

#include "kvmsg-pri.h"

/**
 * kvmsg_max_kept - receive buffers of one endpoint a handler may keep
 * @depth: our receive ring
 *
 * A one-way sender can use depth - 1 credits without a grant (the last
 * one needs one); of those buffers, the ones not kept must reach the
 * credit-message threshold, or the sender waits for a release.  So
 * (depth - 1) / 2 may be kept: 1 at depth 4, 63 at 128.
 *
 * Context: any.
 * Return: the limit kvmsg_rx_keep() enforces.
 */
u32 kvmsg_max_kept(u32 depth)
{
	return (depth - 1) / 2;
}
EXPORT_SYMBOL_IF_KUNIT(kvmsg_max_kept);

/**
 * kvmsg_credit_init - credits of a new connection
 * @c: credit state
 * @peer_depth: receives the peer announced, hence our first credits
 * @our_depth: our receive ring, at least KVERBS_CM_MIN_DEPTH (4)
 *
 * A credit-only message goes out once @threshold re-posted receives wait
 * to be announced.  The threshold is what a one-way sender is sure to
 * leave us even when our handler keeps all it may: depth - 1 -
 * kvmsg_max_kept(depth), depth / 2 for even depths.  It is at least 2, and
 * that is what keeps two idle peers quiet: a credit message costs the
 * peer one receive, so each one lowers the receives waiting to be
 * announced on both sides together by at least one, and the exchange
 * dies out.  With a threshold of 1 (depths 2 and 3) it never would,
 * which is why the smallest depth is 4.
 *
 * Context: any.
 */
void kvmsg_credit_init(struct kvmsg_credit *c, u32 peer_depth, u32 our_depth)
{
	c->avail = peer_depth;
	c->limit = peer_depth;
	c->ungranted = 0;
	c->threshold = max(2U, our_depth - 1 - kvmsg_max_kept(our_depth));
}
EXPORT_SYMBOL_IF_KUNIT(kvmsg_credit_init);

/**
 * kvmsg_credit_take - spend one credit on a message about to be posted
 * @c: credit state
 * @grant: set to the credits the message returns to the peer
 *
 * The last credit goes only to a message that also returns credits, so
 * the peer, whatever it holds, learns of receive buffers it may use.
 *
 * Context: any.
 * Return: true if the message may be posted now.
 */
bool kvmsg_credit_take(struct kvmsg_credit *c, u16 *grant)
{
	if (!c->avail || (c->avail == 1 && !c->ungranted))
		return false;
	c->avail--;
	*grant = min_t(u32, c->ungranted, U16_MAX);
	c->ungranted -= *grant;
	return true;
}
EXPORT_SYMBOL_IF_KUNIT(kvmsg_credit_take);

/**
 * kvmsg_credit_receive - apply the credits a received message returns
 * @c: credit state
 * @grant: the header's credits field
 *
 * Context: any.
 * Return: 0, or -EPROTO if the peer returned more receives than it has.
 */
int kvmsg_credit_receive(struct kvmsg_credit *c, u32 grant)
{
	if (grant > c->limit - c->avail)
		return -EPROTO;
	c->avail += grant;
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(kvmsg_credit_receive);

/**
 * kvmsg_credit_reposted - one of our receive buffers is posted again
 * @c: credit state
 *
 * Context: any.
 */
void kvmsg_credit_reposted(struct kvmsg_credit *c)
{
	c->ungranted++;
}
EXPORT_SYMBOL_IF_KUNIT(kvmsg_credit_reposted);

/**
 * kvmsg_credit_want_ctrl - should a credit-only message go out
 * @c: credit state
 *
 * Context: any.
 * Return: true when enough grants wait and a credit allows sending them.
 */
bool kvmsg_credit_want_ctrl(const struct kvmsg_credit *c)
{
	return c->ungranted >= c->threshold && c->avail;
}
EXPORT_SYMBOL_IF_KUNIT(kvmsg_credit_want_ctrl);

/**
 * kvmsg_backlog_init - empty backlog
 * @b: backlog
 *
 * Context: any.
 */
void kvmsg_backlog_init(struct kvmsg_backlog *b)
{
	INIT_LIST_HEAD(&b->q);
	b->busy = false;
}
EXPORT_SYMBOL_IF_KUNIT(kvmsg_backlog_init);

/**
 * kvmsg_backlog_must_queue - may a new message be dispatched in place
 * @b: backlog
 *
 * Context: any.
 * Return: true if earlier messages wait or are being handled in process
 * context, so the new one must queue behind them.
 */
bool kvmsg_backlog_must_queue(const struct kvmsg_backlog *b)
{
	return b->busy || !list_empty(&b->q);
}
EXPORT_SYMBOL_IF_KUNIT(kvmsg_backlog_must_queue);

/**
 * kvmsg_backlog_add - queue a new message behind the others
 * @b: backlog
 * @rx: message
 *
 * Context: any.
 */
void kvmsg_backlog_add(struct kvmsg_backlog *b, struct kvmsg_rx *rx)
{
	list_add_tail(&rx->node, &b->q);
}
EXPORT_SYMBOL_IF_KUNIT(kvmsg_backlog_add);

/**
 * kvmsg_backlog_push_front - queue a message whose handler deferred it
 * @b: backlog
 * @rx: message; older than any queued one
 *
 * Context: any.
 */
void kvmsg_backlog_push_front(struct kvmsg_backlog *b, struct kvmsg_rx *rx)
{
	list_add(&rx->node, &b->q);
}
EXPORT_SYMBOL_IF_KUNIT(kvmsg_backlog_push_front);

/**
 * kvmsg_backlog_next - the next message for process context
 * @b: backlog
 *
 * Marks the backlog busy while it hands out messages and idle once it
 * returns NULL, so arrivals in between queue instead of overtaking.
 *
 * Context: any.
 * Return: the oldest queued message, or NULL.
 */
struct kvmsg_rx *kvmsg_backlog_next(struct kvmsg_backlog *b)
{
	struct kvmsg_rx *rx;

	rx = list_first_entry_or_null(&b->q, struct kvmsg_rx, node);
	if (rx)
		list_del_init(&rx->node);
	b->busy = rx;
	return rx;
}
EXPORT_SYMBOL_IF_KUNIT(kvmsg_backlog_next);
