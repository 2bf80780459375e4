// SPDX-License-Identifier: GPL-2.0-only
/*
 * kdsm protocol transitions: pure functions of (state, event), no locks,
 * no I/O.  The caller holds the page's lock, runs the returned actions in
 * order, and feeds messages addressed to itself back in as events (a
 * request to its own home, a forward to itself as the owner).
 */
#include <asm/byteorder.h>
#include <linux/bitops.h>
#include <linux/errno.h>
#include <linux/math64.h>

#include "proto.h"

u8 kdsm_home_of(const struct kdsm_geo *g, u32 page)
{
	if (g->block)
		return div_u64((u64)page * g->nnodes, g->npages) + 1;
	return page % g->nnodes + 1;
}

static u8 kdsm_bit(u8 node)
{
	return BIT(node - 1);
}

static bool kdsm_node_ok(const struct kdsm_geo *g, u8 node)
{
	return node >= 1 && node <= g->nnodes;
}

static int kdsm_push(struct kdsm_act *acts, int n, struct kdsm_act a)
{
	acts[n] = a;
	return n + 1;
}

static int kdsm_send(struct kdsm_act *acts, int n, u8 type, u8 to, u8 node,
		     u8 acks, u8 flags)
{
	return kdsm_push(acts, n, (struct kdsm_act){
		.kind = KDSM_ACT_SEND, .type = type, .to = to, .node = node,
		.acks = acks, .flags = flags });
}

/**
 * kdsm_msg_check - validate a message from peer @from
 * @g: cluster geometry
 * @m: the message, @len bytes
 * @len: its length
 * @from: the sender's node id (from the connection, not the message)
 *
 * Every field against its type: length, type, flags, reserved fields,
 * page, the node it acts for, the ack count, and who may send it to
 * whom (requests and DONE only to the page's home, forwards and
 * invalidations only from it).  Whether the event fits the page's
 * state is the transition's check.
 *
 * Context: any.
 * Return: 0, or -EPROTO.
 */
int kdsm_msg_check(const struct kdsm_geo *g, const struct kdsm_msg *m,
		   u32 len, u8 from)
{
	u32 page;
	u8 home;

	if (len != KDSM_MSG_LEN || !kdsm_node_ok(g, from) || from == g->self)
		return -EPROTO;
	if (m->type < KDSM_READ_REQ || m->type >= KDSM_MSG_TYPES ||
	    m->reserved0 || m->reserved1 || m->reserved2 || m->arg)
		return -EPROTO;
	page = be32_to_cpu(m->page);
	if (page >= g->npages)
		return -EPROTO;
	home = kdsm_home_of(g, page);
	switch (m->type) {
	case KDSM_READ_REPLY:
		/* data from the owner, or the owner's id from the home */
		if (m->flags == KDSM_F_FETCH && g->fetch && from == home &&
		    kdsm_node_ok(g, m->node) && m->node != g->self &&
		    m->node != from)
			break;
		if (m->flags != KDSM_F_DATA || m->node)
			return -EPROTO;
		break;
	case KDSM_FWD_WRITE:
	case KDSM_WRITE_REPLY:
		if (m->flags & ~KDSM_F_DATA)
			return -EPROTO;
		break;
	default:
		if (m->flags)
			return -EPROTO;
	}
	switch (m->type) {
	case KDSM_FWD_WRITE:
	case KDSM_WRITE_REPLY:
		/* every other node, when the requester owns the page */
		if (m->acks > g->nnodes - 1)
			return -EPROTO;
		break;
	default:
		if (m->acks)
			return -EPROTO;
	}
	switch (m->type) {
	case KDSM_FWD_READ:
	case KDSM_FWD_WRITE:
	case KDSM_INV:
		/* on behalf of another requester, from the page's home */
		if (from != home || !kdsm_node_ok(g, m->node) ||
		    m->node == g->self)
			return -EPROTO;
		break;
	case KDSM_READ_REQ:
	case KDSM_WRITE_REQ:
	case KDSM_DONE:
		if (home != g->self || m->node)
			return -EPROTO;
		break;
	case KDSM_READ_REPLY:
		break;		/* above */
	default:
		if (m->node)
			return -EPROTO;
	}
	return 0;
}

/**
 * kdsm_fault - this node's task needs @page (@write: for writing)
 * @g: cluster geometry
 * @pg: the page here
 * @page: its index
 * @write: access kind
 * @acts: the actions, at least KDSM_MAX_ACTS
 *
 * Context: any; the page's lock held.
 * Return: the number of actions (the request to the page's home), or
 * -EPROTO: the protection already allows the access, or a request is
 * pending (kvmem calls the client once per page until a grant).
 */
int kdsm_fault(const struct kdsm_geo *g, struct kdsm_page *pg, u32 page,
	       bool write, struct kdsm_act *acts)
{
	u8 type = write ? KDSM_WRITE_REQ : KDSM_READ_REQ;

	if (pg->pending || pg->prot >= (write ? KDSM_RW : KDSM_READ))
		return -EPROTO;
	pg->pending = type;
	pg->reply_seen = false;
	pg->acks_needed = 0;
	pg->acks_seen = 0;
	return kdsm_send(acts, 0, type, kdsm_home_of(g, page), 0, 0, 0);
}

/**
 * kdsm_home_request - a request for a page of this home
 * @g: cluster geometry
 * @h: the page's directory entry
 * @from: the requester (may be this node)
 * @write: a WRITE_REQ
 * @acts: the actions, at least KDSM_MAX_ACTS
 *
 * A busy page queues the request.  Otherwise the transaction starts: a
 * read joins the copyset and is forwarded to the owner, or, with the
 * fetch option, answered with the owner's id when the owner is another
 * node that holds the page READ (it has sharers: an owner drops to READ
 * when it serves a reader, and only a write through this home raises it
 * again, not before this transaction's DONE); a write makes
 * the requester the owner, invalidates every other copy (acks to the
 * requester) and is forwarded to the old owner, with data unless the
 * requester's copy is valid; a requester that owns the page already
 * gets its reply from the home.
 *
 * The effector queues at most one request per node and page (a node
 * has one outstanding), and refuses a second.
 *
 * Context: any; the page's lock held.
 * Return: the number of actions, or -EPROTO (a holder asked to read, or
 * the current requester asked again).
 */
int kdsm_home_request(const struct kdsm_geo *g, struct kdsm_home *h,
		      u8 from, bool write, struct kdsm_act *acts)
{
	u8 others, flags, k, node, sharers;
	int n = 0;

	if (!kdsm_node_ok(g, from) || !kdsm_node_ok(g, h->owner))
		return -EPROTO;
	/* the requester of the transaction in flight has nothing to ask */
	if (h->busy && from == h->cur)
		return -EPROTO;
	if (h->busy)
		return kdsm_push(acts, 0, (struct kdsm_act){
			.kind = KDSM_ACT_QUEUE, .node = from,
			.type = write ? KDSM_WRITE_REQ : KDSM_READ_REQ });
	if (!write) {
		/* the owner and the sharers can read already */
		if (from == h->owner || h->copyset & kdsm_bit(from))
			return -EPROTO;
		sharers = h->copyset;
		h->copyset |= kdsm_bit(from);
		h->busy = true;
		h->cur = from;
		if (g->fetch && sharers && h->owner != g->self)
			return kdsm_send(acts, 0, KDSM_READ_REPLY, from,
					 h->owner, 0, KDSM_F_FETCH);
		return kdsm_send(acts, 0, KDSM_FWD_READ, h->owner, from, 0, 0);
	}
	others = h->copyset & ~kdsm_bit(from) & ~kdsm_bit(h->owner);
	k = hweight8(others);
	for (node = 1; node <= g->nnodes; node++)
		if (others & kdsm_bit(node))
			n = kdsm_send(acts, n, KDSM_INV, node, from, 0, 0);
	if (from == h->owner) {
		n = kdsm_send(acts, n, KDSM_WRITE_REPLY, from, 0, k, 0);
	} else {
		flags = h->copyset & kdsm_bit(from) ? 0 : KDSM_F_DATA;
		n = kdsm_send(acts, n, KDSM_FWD_WRITE, h->owner, from, k,
			      flags);
	}
	h->owner = from;
	h->copyset = 0;
	h->busy = true;
	h->cur = from;
	return n;
}

/**
 * kdsm_home_done - the requester of the page's transaction completed it
 * @g: cluster geometry
 * @h: the page's directory entry
 * @from: the node whose DONE this is
 * @acts: the actions, at least KDSM_MAX_ACTS
 *
 * Context: any; the page's lock held.
 * Return: the number of actions (serve the next queued request), or
 * -EPROTO: no transaction of @from is in flight.
 */
int kdsm_home_done(const struct kdsm_geo *g, struct kdsm_home *h, u8 from,
		   struct kdsm_act *acts)
{
	if (!h->busy || h->cur != from)
		return -EPROTO;
	h->busy = false;
	h->cur = 0;
	return kdsm_push(acts, 0, (struct kdsm_act){ .kind = KDSM_ACT_NEXT });
}

/* A write request completes when its reply and every ack arrived. */
static int kdsm_write_complete(const struct kdsm_geo *g, struct kdsm_page *pg,
			       u32 page, struct kdsm_act *acts, int n)
{
	if (!pg->reply_seen || pg->acks_seen < pg->acks_needed)
		return n;
	pg->prot = KDSM_RW;
	pg->owner = true;
	pg->pending = 0;
	n = kdsm_push(acts, n, (struct kdsm_act){
		.kind = KDSM_ACT_GRANT, .prot = KDSM_RW });
	return kdsm_send(acts, n, KDSM_DONE, kdsm_home_of(g, page), 0, 0, 0);
}

static int kdsm_revoke(struct kdsm_page *pg, u8 prot, struct kdsm_act *acts,
		       int n)
{
	if (pg->prot <= prot)
		return n;
	pg->prot = prot;
	return kdsm_push(acts, n, (struct kdsm_act){
		.kind = KDSM_ACT_REVOKE, .prot = prot });
}

static int kdsm_data(struct kdsm_act *acts, int n, u8 to)
{
	return kdsm_push(acts, n, (struct kdsm_act){
		.kind = KDSM_ACT_DATA, .to = to });
}

/**
 * kdsm_page_event - a message for this node's copy of a page
 * @g: cluster geometry
 * @pg: the page here
 * @page: its index
 * @from: the sender (this node for its own home's forwards and replies)
 * @m: the message, checked by kdsm_msg_check() if it came from a peer
 * @acts: the actions, at least KDSM_MAX_ACTS
 *
 * Forwards reach the owner: for a read it keeps the page READ and sends
 * it; for a write it drops the page, sends it if asked, and replies with
 * the ack count.  An invalidation drops a READ copy and acks the
 * requester.  Replies and acks answer this node's pending request; a
 * read reply without data names the owner to read the page from, and
 * KDSM_FETCHED (this node's read completed) then grants it.
 * Revokes come before the data and the reply that depend on them.
 *
 * Context: any; the page's lock held.
 * Return: the number of actions, or -EPROTO when @m does not fit @pg.
 */
int kdsm_page_event(const struct kdsm_geo *g, struct kdsm_page *pg,
		    u32 page, u8 from, const struct kdsm_msg *m,
		    struct kdsm_act *acts)
{
	bool data = m->flags & KDSM_F_DATA;
	bool no_copy = pg->prot == KDSM_NONE;
	int n = 0;

	switch (m->type) {
	case KDSM_FWD_READ:
		if (!pg->owner || pg->prot == KDSM_NONE || m->node == g->self)
			return -EPROTO;
		n = kdsm_revoke(pg, KDSM_READ, acts, n);
		n = kdsm_data(acts, n, m->node);
		return kdsm_send(acts, n, KDSM_READ_REPLY, m->node, 0, 0,
				 KDSM_F_DATA);
	case KDSM_FWD_WRITE:
		if (!pg->owner || pg->prot == KDSM_NONE || m->node == g->self)
			return -EPROTO;
		n = kdsm_revoke(pg, KDSM_NONE, acts, n);
		pg->owner = false;
		if (data)
			n = kdsm_data(acts, n, m->node);
		return kdsm_send(acts, n, KDSM_WRITE_REPLY, m->node, 0, m->acks,
				 m->flags);
	case KDSM_INV:
		if (pg->owner || pg->prot != KDSM_READ || m->node == g->self)
			return -EPROTO;
		n = kdsm_revoke(pg, KDSM_NONE, acts, n);
		return kdsm_send(acts, n, KDSM_INV_ACK, m->node, 0, 0, 0);
	case KDSM_READ_REPLY:
		if (pg->pending != KDSM_READ_REQ || pg->prot != KDSM_NONE ||
		    pg->fetching || data == !!(m->flags & KDSM_F_FETCH))
			return -EPROTO;
		if (!data) {
			pg->fetching = true;
			return kdsm_push(acts, n, (struct kdsm_act){
				.kind = KDSM_ACT_FETCH, .to = m->node });
		}
		fallthrough;
	case KDSM_FETCHED:
		if (pg->pending != KDSM_READ_REQ || pg->prot != KDSM_NONE ||
		    (m->type == KDSM_FETCHED && !pg->fetching))
			return -EPROTO;
		pg->fetching = false;
		pg->prot = KDSM_READ;
		pg->pending = 0;
		n = kdsm_push(acts, n, (struct kdsm_act){
			.kind = KDSM_ACT_GRANT, .prot = KDSM_READ });
		return kdsm_send(acts, n, KDSM_DONE, kdsm_home_of(g, page), 0,
				 0, 0);
	case KDSM_WRITE_REPLY:
		/* data exactly when this node holds no copy */
		if (pg->pending != KDSM_WRITE_REQ || pg->reply_seen ||
		    data != no_copy || m->acks < pg->acks_seen)
			return -EPROTO;
		pg->reply_seen = true;
		pg->acks_needed = m->acks;
		return kdsm_write_complete(g, pg, page, acts, n);
	case KDSM_INV_ACK:
		if (pg->pending != KDSM_WRITE_REQ ||
		    pg->acks_seen >= g->nnodes - 1 ||
		    (pg->reply_seen && pg->acks_seen >= pg->acks_needed))
			return -EPROTO;
		pg->acks_seen++;
		return kdsm_write_complete(g, pg, page, acts, n);
	default:
		return -EPROTO;
	}
}
