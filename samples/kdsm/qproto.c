// SPDX-License-Identifier: GPL-2.0-only
/*
 * The queue lock's transitions (after Devulapalli and Wyckoff, ICPP'05):
 * pure functions of one node's struct kdsm_qlock and one event, no locks,
 * no I/O.  qlock.c runs them under kd->lock and carries out the action
 * kdsm_q_action() names; KUnit runs them in simulated clusters.
 *
 * Invariants, for one lock:
 * - The word names the last node that swapped itself in and has not
 *   swapped itself out; 0 when the queue is empty.
 * - A node is in the queue (SWAP whose CAS succeeded, LINK, WAIT, HELD,
 *   FREE, HANDOFF) at most once: a new acquire waits for IDLE.
 * - Every node but the first in the queue swapped in over exactly one
 *   predecessor, which therefore gets exactly one NEXT from it, and
 *   passes the lock to it exactly once: on release if the NEXT is there,
 *   else when it arrives (a CAS self -> 0 that fails proves it is coming).
 * - At most one node is HELD: the lock moves by PASS, and a PASS goes
 *   only to the successor that named itself.
 * A transition changes @q only when it returns >= 0; -EPROTO means the
 * event is impossible in this state (a malformed or misdirected message,
 * or a word that no node wrote).
 */
#include <asm/byteorder.h>
#include <linux/errno.h>
#include <linux/string.h>
#include <linux/swab.h>

#include "proto.h"

/**
 * kdsm_q_helper - the node that runs @node's CAS on @node's own words
 * @g: geometry
 * @node: a manager
 *
 * RDMA atomics are atomic only with respect to other atomics of the
 * responder's HCA, not to the CPU's, and an endpoint does not reach its
 * own node: so a manager's CAS on its own words goes through the next
 * node, which issues it on its endpoint to the manager.
 *
 * Return: the helper's node id, 1..@g->nnodes.
 */
u8 kdsm_q_helper(const struct kdsm_geo *g, u8 node)
{
	return node % g->nnodes + 1;
}

static bool kdsm_q_node_ok(const struct kdsm_geo *g, u8 node)
{
	return node >= 1 && node <= g->nnodes;
}

/**
 * kdsm_q_check - the fields of a queue-lock message from node @from
 * @g: geometry (@g->self receives)
 * @s: KDSM_QL_NEXT, KDSM_QL_PASS, KDSM_QL_CAS or KDSM_QL_CAS_DONE
 * @from: sender, a peer
 *
 * Only what the message itself and the geometry decide; the state checks
 * are the transitions'.  A CAS goes from a lock's manager to its helper
 * and swaps the manager in (@code, any tail -> @node, itself) or out
 * (@code, itself -> @node, 0); its answer comes back from the helper.
 *
 * Return: 0 or -EPROTO.
 */
int kdsm_q_check(const struct kdsm_geo *g, const struct kdsm_sig *s, u8 from)
{
	u32 id = be32_to_cpu(s->id);

	if (id >= KDSM_MAX_LOCKS || s->gen || s->reserved0 ||
	    memchr_inv(s->reserved, 0, sizeof(s->reserved)) ||
	    !kdsm_q_node_ok(g, from) || from == g->self)
		return -EPROTO;
	switch (s->type) {
	case KDSM_QL_NEXT:
	case KDSM_QL_PASS:
		return s->code || s->node ? -EPROTO : 0;
	case KDSM_QL_CAS:
		if (kdsm_lock_mgr_of(g, id) != from ||
		    kdsm_q_helper(g, from) != g->self ||
		    s->code > g->nnodes || s->node > g->nnodes)
			return -EPROTO;
		if (s->node == from && s->code != from)
			return 0;
		return s->code == from && !s->node ? 0 : -EPROTO;
	case KDSM_QL_CAS_DONE:
		if (kdsm_lock_mgr_of(g, id) != g->self ||
		    kdsm_q_helper(g, g->self) != from ||
		    s->node > g->nnodes || s->code > KDSM_QL_NO_ATOMICS ||
		    (s->code && s->node))
			return -EPROTO;
		return 0;
	}
	return -EPROTO;
}

/**
 * kdsm_q_word - the tail a CAS returned, from its raw 8 bytes
 * @g: geometry
 * @raw: the previous value as it landed in our memory
 *
 * The word is only ever written by RDMA atomics, whose values the device
 * may keep big endian (kverbs_atomic_cmp_swap()); a tail is 0..nnodes, so
 * exactly one byte order gives a value below 256.
 *
 * Return: the node id (0: free), or -EPROTO for a value no node wrote.
 */
int kdsm_q_word(const struct kdsm_geo *g, u64 raw)
{
	u64 v = raw <= U8_MAX ? raw : swab64(raw);

	return v <= g->nnodes ? (int)v : -EPROTO;
}

/*
 * A task of this node is acquiring or holds the lock, or has not taken the
 * outcome of its acquire yet: another gets -EBUSY.
 */
bool kdsm_q_busy(const struct kdsm_qlock *q)
{
	if (q->waiter)
		return true;
	switch (q->state) {
	case KDSM_Q_SWAP:
	case KDSM_Q_LINK:
	case KDSM_Q_WAIT:
		return !q->abandoned;
	case KDSM_Q_HELD:
		return true;
	}
	return false;
}

/* A task wants the lock: IDLE, the last outcome taken (else -EBUSY). */
int kdsm_q_acquire(struct kdsm_qlock *q)
{
	if (q->state != KDSM_Q_IDLE || q->waiter)
		return -EBUSY;
	*q = (struct kdsm_qlock){ .state = KDSM_Q_SWAP, .waiter = true };
	return 0;
}

/* Out of the queue; the waiter's outcome stays until it is taken. */
static void kdsm_q_out(struct kdsm_qlock *q)
{
	*q = (struct kdsm_qlock){ .waiter = q->waiter, .granted = q->granted };
}

/* The waiting task's outcome is known: the lock came, or it never got in. */
bool kdsm_q_settled(const struct kdsm_qlock *q)
{
	return q->granted || q->state == KDSM_Q_IDLE;
}

/*
 * The waiting task takes its outcome, after kdsm_q_settled() or after it
 * died (then kdsm_q_abandon() first).  Return: whether the lock came to it.
 */
bool kdsm_q_collect(struct kdsm_qlock *q)
{
	bool granted = q->granted;

	q->waiter = false;
	q->granted = false;
	return granted;
}

/* Give the lock on: to the successor if its NEXT came, else free it. */
static void kdsm_q_give(struct kdsm_qlock *q)
{
	q->state = q->succ ? KDSM_Q_PASS : KDSM_Q_FREE;
}

/* The lock came: to the task, or straight on if the task died. */
static int kdsm_q_arrived(struct kdsm_qlock *q)
{
	if (q->abandoned) {
		kdsm_q_give(q);
		return 0;
	}
	q->state = KDSM_Q_HELD;
	q->granted = true;
	return KDSM_Q_GRANTED;
}

/* The holding task gives it back: -EPERM unless HELD. */
int kdsm_q_release(struct kdsm_qlock *q)
{
	if (q->state != KDSM_Q_HELD)
		return -EPERM;
	kdsm_q_give(q);
	return 0;
}

/*
 * The waiting task died.  Not yet in the queue (SWAP, no CAS in flight):
 * out at once.  In it: the lock is passed on when it comes.  HELD (it came
 * as the task died): released now.
 */
void kdsm_q_abandon(struct kdsm_qlock *q)
{
	switch (q->state) {
	case KDSM_Q_SWAP:
		if (!q->cas_busy) {
			q->state = KDSM_Q_IDLE;
			return;
		}
		fallthrough;
	case KDSM_Q_LINK:
	case KDSM_Q_WAIT:
		q->abandoned = true;
		return;
	case KDSM_Q_HELD:
		kdsm_q_give(q);
		return;
	}
}

/**
 * kdsm_q_action - what this node must do next for the lock
 * @g: geometry
 * @q: the lock at this node
 * @a: filled for KDSM_QA_CAS (@cmp, @swap) and the sends (@to)
 *
 * The effector does it, then reports it with kdsm_q_performed(); if it
 * cannot now (no buffer or slot), it asks again later.
 *
 * Return: enum kdsm_qact.
 */
int kdsm_q_action(const struct kdsm_geo *g, const struct kdsm_qlock *q,
		  struct kdsm_qact_arg *a)
{
	*a = (struct kdsm_qact_arg){};
	switch (q->state) {
	case KDSM_Q_SWAP:
		if (q->cas_busy)
			return KDSM_QA_NONE;
		a->cmp = q->guess;
		a->swap = g->self;
		return KDSM_QA_CAS;
	case KDSM_Q_FREE:
		if (q->cas_busy)
			return KDSM_QA_NONE;
		a->cmp = g->self;
		return KDSM_QA_CAS;
	case KDSM_Q_LINK:
		a->to = q->pred;
		return KDSM_QA_NEXT;
	case KDSM_Q_PASS:
		a->to = q->succ;
		return KDSM_QA_PASS;
	}
	return KDSM_QA_NONE;
}

/* The effector did @act (kdsm_q_action()'s). */
void kdsm_q_performed(struct kdsm_qlock *q, int act)
{
	switch (act) {
	case KDSM_QA_CAS:
		q->cas_busy = true;
		return;
	case KDSM_QA_NEXT:
		q->state = KDSM_Q_WAIT;
		return;
	case KDSM_QA_PASS:
		q->state = KDSM_Q_IDLE;
		q->succ = 0;
		return;
	}
}

/*
 * The first CAS of an acquire cannot be issued (no atomics on a device on
 * the way): back to IDLE, never having been in the queue.  Return: 0, or
 * -EPROTO when this node cannot be out of the queue (not swapping in, or
 * a NEXT named it the tail already).
 */
int kdsm_q_unsupported(struct kdsm_qlock *q)
{
	if (q->state != KDSM_Q_SWAP || q->succ)
		return -EPROTO;
	kdsm_q_out(q);
	return 0;
}

/**
 * kdsm_q_cas_result - our CAS on the word returned the tail @old
 * @g: geometry
 * @q: the lock at this node, with a CAS in flight
 * @old: the word before the CAS, 0..nnodes (kdsm_q_word())
 *
 * Return: 0, KDSM_Q_GRANTED, KDSM_Q_RETRY, or -EPROTO.
 */
int kdsm_q_cas_result(const struct kdsm_geo *g, struct kdsm_qlock *q, u8 old)
{
	u8 self = g->self;

	if (!q->cas_busy || old > g->nnodes)
		return -EPROTO;
	if (q->state == KDSM_Q_SWAP) {
		/* the word never names us while we are out of the queue */
		if (old == self)
			return -EPROTO;
		if (old == q->guess) {		/* we are the tail */
			q->cas_busy = false;
			if (!old)
				return kdsm_q_arrived(q);
			q->pred = old;
			q->state = KDSM_Q_LINK;
			return 0;
		}
		if (q->succ)	/* a NEXT for a swap that did not happen */
			return -EPROTO;
		q->cas_busy = false;
		if (q->abandoned) {
			q->state = KDSM_Q_IDLE;
			return 0;
		}
		q->guess = old;
		return KDSM_Q_RETRY;
	}
	if (q->state != KDSM_Q_FREE)
		return -EPROTO;
	if (old == self) {			/* nobody followed: free */
		if (q->succ)
			return -EPROTO;
		kdsm_q_out(q);
		return 0;
	}
	/* someone swapped in behind us: the word is never 0 while we are in */
	if (!old)
		return -EPROTO;
	q->cas_busy = false;
	q->state = q->succ ? KDSM_Q_PASS : KDSM_Q_HANDOFF;
	return 0;
}

/**
 * kdsm_q_next - node @from says it follows us
 * @g: geometry
 * @q: the lock at this node
 * @from: the successor
 *
 * It swapped in over us, so we are in the queue, or our swap's CAS
 * succeeded and its result is still on the way.  A FREE whose CAS is not
 * posted yet need not post it: the word names @from or a later node.
 *
 * Return: 0 or -EPROTO.
 */
int kdsm_q_next(const struct kdsm_geo *g, struct kdsm_qlock *q, u8 from)
{
	if (q->succ || from == g->self || !kdsm_q_node_ok(g, from))
		return -EPROTO;
	switch (q->state) {
	case KDSM_Q_SWAP:
		if (!q->cas_busy)
			return -EPROTO;
		break;
	case KDSM_Q_LINK:
	case KDSM_Q_WAIT:
	case KDSM_Q_HELD:
		break;
	case KDSM_Q_FREE:
		if (!q->cas_busy)
			q->state = KDSM_Q_PASS;
		break;
	case KDSM_Q_HANDOFF:
		q->state = KDSM_Q_PASS;
		break;
	default:
		return -EPROTO;
	}
	q->succ = from;
	return 0;
}

/**
 * kdsm_q_pass - node @from passes us the lock
 * @q: the lock at this node
 * @from: the predecessor we sent NEXT to
 *
 * Return: 0 (passed straight on: the task died), KDSM_Q_GRANTED, or
 * -EPROTO.
 */
int kdsm_q_pass(struct kdsm_qlock *q, u8 from)
{
	if (q->state != KDSM_Q_WAIT || q->pred != from)
		return -EPROTO;
	q->pred = 0;
	return kdsm_q_arrived(q);
}
