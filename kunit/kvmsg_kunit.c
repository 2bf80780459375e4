// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit: the pure logic of kvmsg (kmsg/flow.c, kmsg/wire.c) and of the
 * send-queue ledger and queue budget it relies on (kverbs/sq.c,
 * kverbs/ep.c): credit accounting, ledger wrap, the signal interval,
 * reclaim on signaled and flushed completions, the numbered budget,
 * deferral order and header validation.
 */
#include <kunit/test.h>
#include <linux/bitmap.h>
#include <linux/log2.h>
#include <linux/prandom.h>
#include <linux/random.h>

#include "../kmsg/kvmsg-pri.h"

static void kvmsg_credit_accounting(struct kunit *test)
{
	struct kvmsg_credit c;
	u16 g = 99;
	int i;

	kvmsg_credit_init(&c, 4, 8);
	KUNIT_EXPECT_EQ(test, c.threshold, 4U);
	for (i = 0; i < 3; i++) {
		KUNIT_ASSERT_TRUE(test, kvmsg_credit_take(&c, &g));
		KUNIT_EXPECT_EQ(test, g, 0);
	}
	/* The last credit needs something to grant. */
	KUNIT_EXPECT_FALSE(test, kvmsg_credit_take(&c, &g));
	kvmsg_credit_reposted(&c);
	kvmsg_credit_reposted(&c);
	KUNIT_ASSERT_TRUE(test, kvmsg_credit_take(&c, &g));
	KUNIT_EXPECT_EQ(test, g, 2);
	KUNIT_EXPECT_EQ(test, c.avail, 0U);
	KUNIT_EXPECT_EQ(test, c.ungranted, 0U);
	KUNIT_EXPECT_FALSE(test, kvmsg_credit_take(&c, &g));

	/* Grants come back, never beyond the peer's depth. */
	KUNIT_EXPECT_EQ(test, kvmsg_credit_receive(&c, 5), -EPROTO);
	KUNIT_EXPECT_EQ(test, c.avail, 0U);
	KUNIT_EXPECT_EQ(test, kvmsg_credit_receive(&c, 4), 0);
	KUNIT_EXPECT_EQ(test, kvmsg_credit_receive(&c, 1), -EPROTO);
	KUNIT_EXPECT_EQ(test, kvmsg_credit_receive(&c, 0), 0);
}

static void kvmsg_credit_ctrl_threshold(struct kunit *test)
{
	struct kvmsg_credit c;
	int i;

	kvmsg_credit_init(&c, 16, 16);
	for (i = 0; i < 7; i++)
		kvmsg_credit_reposted(&c);
	KUNIT_EXPECT_FALSE(test, kvmsg_credit_want_ctrl(&c));
	kvmsg_credit_reposted(&c);
	KUNIT_EXPECT_TRUE(test, kvmsg_credit_want_ctrl(&c));
	c.avail = 0;
	KUNIT_EXPECT_FALSE(test, kvmsg_credit_want_ctrl(&c));
	/* Smallest ring: two reposts, never one (see the idle model). */
	kvmsg_credit_init(&c, KVERBS_CM_MIN_DEPTH, KVERBS_CM_MIN_DEPTH);
	kvmsg_credit_reposted(&c);
	KUNIT_EXPECT_FALSE(test, kvmsg_credit_want_ctrl(&c));
	kvmsg_credit_reposted(&c);
	KUNIT_EXPECT_TRUE(test, kvmsg_credit_want_ctrl(&c));
}

/*
 * A model of two peers as kvmsg runs them: every message spends a credit
 * and carries the grants (kvmsg_credit_take()), a receive is re-posted when
 * its handler returns or its kept buffer is released, and after every
 * re-post or grant the peer sends a credit-only message if it wants one
 * (kvmsg_flush_locked()).  Both sides send data and credit messages.
 */
struct kvmsg_sim_peer {
	struct kvmsg_credit c;
	u32 depth;
	u32 posted;		/* receives posted */
	u32 backlog;		/* received, handler not returned yet */
	u32 kept;		/* kept by the handler */
	u32 ctrl_sent;
	u32 data_sent;
};

struct kvmsg_sim {
	struct kunit *test;
	struct kvmsg_sim_peer p[2];
	bool failed;
};

static void kvmsg_sim_init(struct kvmsg_sim *s, struct kunit *test, u32 depth)
{
	int i;

	memset(s, 0, sizeof(*s));
	s->test = test;
	for (i = 0; i < 2; i++) {
		s->p[i].depth = depth;
		s->p[i].posted = depth;
		kvmsg_credit_init(&s->p[i].c, depth, depth);
	}
}

static void kvmsg_sim_deliver(struct kvmsg_sim *s, int to, u16 grant);

/* What kvmsg_flush_locked() does after a re-post or a grant. */
static void kvmsg_sim_flush(struct kvmsg_sim *s, int i)
{
	struct kvmsg_sim_peer *p = &s->p[i];
	u16 g;

	if (kvmsg_credit_want_ctrl(&p->c) && kvmsg_credit_take(&p->c, &g)) {
		p->ctrl_sent++;
		kvmsg_sim_deliver(s, !i, g);
	}
}

/* A credit-only message is re-posted at once, in the receive path. */
static void kvmsg_sim_deliver(struct kvmsg_sim *s, int to, u16 grant)
{
	struct kvmsg_sim_peer *p = &s->p[to];

	if (!p->posted || kvmsg_credit_receive(&p->c, grant)) {
		KUNIT_FAIL(s->test, "message without a posted receive or with a bad grant");
		s->failed = true;
		return;
	}
	p->posted--;
	p->backlog++;
	/* kvmsg_recv_done() flushes when a message returned credits. */
	if (grant)
		kvmsg_sim_flush(s, to);
}

static bool kvmsg_sim_send(struct kvmsg_sim *s, int i)
{
	u16 g;

	if (!kvmsg_credit_take(&s->p[i].c, &g))
		return false;
	s->p[i].data_sent++;
	kvmsg_sim_deliver(s, !i, g);
	return true;
}

/* The handler of one received message returns, keeping it if @keep. */
static void kvmsg_sim_handle(struct kvmsg_sim *s, int i, bool keep)
{
	struct kvmsg_sim_peer *p = &s->p[i];

	p->backlog--;
	if (keep && p->kept < kvmsg_max_kept(p->depth)) {
		p->kept++;
		return;
	}
	p->posted++;
	kvmsg_credit_reposted(&p->c);
	kvmsg_sim_flush(s, i);
}

static void kvmsg_sim_release(struct kvmsg_sim *s, int i)
{
	struct kvmsg_sim_peer *p = &s->p[i];

	p->kept--;
	p->posted++;
	kvmsg_credit_reposted(&p->c);
	kvmsg_sim_flush(s, i);
}

/* Let both handlers return everything; false if it does not settle. */
static bool kvmsg_sim_settle(struct kvmsg_sim *s, u32 *msgs)
{
	u32 before = s->p[0].ctrl_sent + s->p[1].ctrl_sent, n;

	for (n = 0; n < 1000 && !s->failed; n++) {
		if (s->p[0].backlog)
			kvmsg_sim_handle(s, 0, false);
		else if (s->p[1].backlog)
			kvmsg_sim_handle(s, 1, false);
		else
			break;
	}
	*msgs = s->p[0].ctrl_sent + s->p[1].ctrl_sent - before;
	return !s->p[0].backlog && !s->p[1].backlog;
}

/*
 * Random two-way traffic with keeps and releases, then idle: both peers
 * go quiet after a bounded number of credit messages (no endless
 * exchange), and either can still send at once.  Every depth from the
 * smallest allowed up to 16.
 */
static void kvmsg_credit_idle_quiet(struct kunit *test)
{
	struct kvmsg_sim s;
	struct rnd_state rnd;
	u32 depth, step, msgs;
	int i;

	prandom_seed_state(&rnd, 7);
	for (depth = KVERBS_CM_MIN_DEPTH; depth <= 16; depth++) {
		kvmsg_sim_init(&s, test, depth);
		for (step = 0; step < 5000 && !s.failed; step++) {
			u32 r = prandom_u32_state(&rnd);

			i = r & 1;
			switch ((r >> 1) % 4) {
			case 0:
				kvmsg_sim_send(&s, i);
				break;
			case 1:
			case 2:
				if (s.p[i].backlog)
					kvmsg_sim_handle(&s, i, (r >> 8) % 4 == 0);
				break;
			case 3:
				if (s.p[i].kept)
					kvmsg_sim_release(&s, i);
				break;
			}
		}
		for (i = 0; i < 2; i++)
			while (s.p[i].kept)
				kvmsg_sim_release(&s, i);
		KUNIT_ASSERT_TRUE_MSG(test, kvmsg_sim_settle(&s, &msgs),
				      "depth %u: credit messages never stop", depth);
		KUNIT_EXPECT_LE_MSG(test, msgs, 2 * depth,
				    "depth %u: %u credit messages when idle",
				    depth, msgs);
		/* Idle, nothing kept: a message goes out on either side. */
		for (i = 0; i < 2; i++)
			KUNIT_EXPECT_TRUE_MSG(test, kvmsg_sim_send(&s, i),
					      "depth %u: peer %d cannot send when idle",
					      depth, i);
	}
}

/*
 * One-way sender, receiver keeping every message it may and releasing
 * none: the sender still gets 10 x depth messages through, as the
 * kvmsg_rx_keep() documentation promises.
 */
static void kvmsg_credit_oneway_kept(struct kunit *test)
{
	struct kvmsg_sim s;
	u32 depth, sent, n;

	for (depth = KVERBS_CM_MIN_DEPTH; depth <= 16; depth++) {
		kvmsg_sim_init(&s, test, depth);
		for (sent = 0, n = 0; n < 100 * depth && sent < 10 * depth &&
		     !s.failed; n++) {
			if (kvmsg_sim_send(&s, 0))
				sent++;
			while (s.p[1].backlog)
				kvmsg_sim_handle(&s, 1, true);
			while (s.p[0].backlog)
				kvmsg_sim_handle(&s, 0, false);
		}
		KUNIT_EXPECT_EQ_MSG(test, sent, 10 * depth,
				    "depth %u: one-way sender stalled with %u kept",
				    depth, s.p[1].kept);
		KUNIT_EXPECT_EQ(test, s.p[1].kept, kvmsg_max_kept(depth));
	}
}

/*
 * Two peers exchanging one-way bursts through the credit rules, with
 * random handler delays: no message is ever sent without a posted
 * receive, and neither side stalls forever.
 */
static void kvmsg_credit_no_deadlock(struct kunit *test)
{
	struct kvmsg_credit a, b;
	u32 a_posted = 4, b_posted = 4;	/* receives posted at each side */
	u32 a_backlog = 0, b_backlog = 0;	/* received, not yet reposted */
	u32 delivered = 0, step;
	struct rnd_state rnd;
	u16 g;

	prandom_seed_state(&rnd, 42);
	kvmsg_credit_init(&a, 4, 4);
	kvmsg_credit_init(&b, 4, 4);
	for (step = 0; step < 100000 && delivered < 20000; step++) {
		u32 r = prandom_u32_state(&rnd) % 3;

		if (r == 0 && kvmsg_credit_take(&a, &g)) {
			/* a sends data to b */
			KUNIT_ASSERT_GT(test, b_posted, 0U);
			b_posted--;
			b_backlog++;
			KUNIT_ASSERT_EQ(test, kvmsg_credit_receive(&b, g), 0);
			delivered++;
		} else if (r == 1 && b_backlog) {
			/* b's handler returns: repost, maybe a credit message */
			b_backlog--;
			b_posted++;
			kvmsg_credit_reposted(&b);
			if (kvmsg_credit_want_ctrl(&b) &&
			    kvmsg_credit_take(&b, &g)) {
				KUNIT_ASSERT_GT(test, a_posted, 0U);
				a_posted--;
				a_backlog++;
				KUNIT_ASSERT_EQ(test,
						kvmsg_credit_receive(&a, g), 0);
			}
		} else if (r == 2 && a_backlog) {
			a_backlog--;
			a_posted++;
			kvmsg_credit_reposted(&a);
		}
	}
	KUNIT_EXPECT_EQ(test, delivered, 20000U);
}

/*
 * Positions are free-running u32 counters that wrap at 2^32, and entry p
 * lives in ring slot p % size.  Across the wrap positions keep counting
 * one by one, so the slots keep cycling through the ring; used() and
 * reclaim() keep working; and a full window of entries straddling the
 * wrap holds every slot exactly once.
 */
static void kverbs_ledger_wrap(struct kunit *test)
{
	static const bool want_sig[8] = { false, false, false, true,
					  false, false, false, true };
	const u32 start = U32_MAX - 5;	/* start % 8 == 2 */
	struct kverbs_ledger l;
	u32 pos[8], i, slots = 0;
	bool sig;

	kverbs_ledger_init(&l, 8, 4);
	l.head = start;
	l.tail = start;
	for (i = 0; i < 100; i++) {
		kverbs_ledger_post(&l, false, &pos[0]);
		KUNIT_EXPECT_EQ_MSG(test, pos[0], start + i, "post %u", i);
		KUNIT_EXPECT_EQ_MSG(test, pos[0] % l.size, (2 + i) % 8,
				    "post %u", i);
		KUNIT_EXPECT_EQ(test, kverbs_ledger_used(&l), 1U);
		KUNIT_EXPECT_EQ(test, kverbs_ledger_reclaim(&l, pos[0]), 1U);
		KUNIT_EXPECT_EQ(test, kverbs_ledger_used(&l), 0U);
	}
	KUNIT_EXPECT_EQ(test, l.head, 94U);	/* start + 100 - 2^32 */
	KUNIT_EXPECT_EQ(test, l.tail, 94U);

	/* Eight in flight over the wrap: U32_MAX - 3 .. 4. */
	kverbs_ledger_init(&l, 8, 4);
	l.head = U32_MAX - 3;
	l.tail = l.head;
	for (i = 0; i < 8; i++) {
		sig = kverbs_ledger_post(&l, false, &pos[i]);
		KUNIT_EXPECT_EQ_MSG(test, pos[i], U32_MAX - 3 + i, "post %u", i);
		KUNIT_EXPECT_EQ_MSG(test, sig, want_sig[i], "post %u", i);
		slots |= BIT(pos[i] % l.size);
	}
	KUNIT_EXPECT_EQ(test, pos[4], 0U);
	KUNIT_EXPECT_EQ(test, slots, 0xffU);
	KUNIT_EXPECT_EQ(test, kverbs_ledger_used(&l), 8U);
	/* Position 0 completes: it and the four before the wrap go. */
	KUNIT_EXPECT_EQ(test, kverbs_ledger_reclaim(&l, pos[4]), 5U);
	KUNIT_EXPECT_EQ(test, l.tail, 1U);
	KUNIT_EXPECT_EQ(test, kverbs_ledger_used(&l), 3U);
	/* U32_MAX is behind the tail now, however large it looks. */
	KUNIT_EXPECT_EQ(test, kverbs_ledger_reclaim(&l, pos[3]), 0U);
	KUNIT_EXPECT_EQ(test, kverbs_ledger_reclaim(&l, pos[7] + 1), 0U);
	KUNIT_EXPECT_EQ(test, kverbs_ledger_reclaim(&l, pos[7]), 3U);
	KUNIT_EXPECT_EQ(test, kverbs_ledger_used(&l), 0U);
	KUNIT_EXPECT_EQ(test, l.tail, 4U);
}

/*
 * Ring slots across the u32 wrap, for ledger sizes that are not powers of
 * two (the send queue's is 2 * depth + 1, always odd): any @size
 * consecutive positions, wherever they straddle U32_MAX, need distinct
 * slots, or a reclaim runs the callbacks of the wrong WR.  p % size fails
 * this: at size 33, U32_MAX - 3 and 0 share slot 0.
 */
static void kverbs_ledger_slot_wrap(struct kunit *test)
{
	static const u32 sizes[] = { 3, 8, 33, 257, 259 };
	unsigned long *seen;
	struct kverbs_ledger l;
	u32 i, k, off, slot;

	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		kverbs_ledger_init(&l, sizes[i], 4);
		KUNIT_EXPECT_GE(test, l.slots, sizes[i]);
		KUNIT_EXPECT_TRUE(test, is_power_of_2(l.slots));
		seen = bitmap_zalloc(l.slots, GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, seen);
		/* Every window start from size - 1 before the wrap to 1. */
		for (off = 0; off <= sizes[i]; off++) {
			u32 start = (u32)(0U - (sizes[i] - 1) + off);

			bitmap_zero(seen, l.slots);
			for (k = 0; k < sizes[i]; k++) {
				slot = kverbs_ledger_slot(&l, start + k);
				KUNIT_ASSERT_LT(test, slot, l.slots);
				KUNIT_EXPECT_FALSE_MSG(test, test_bit(slot, seen),
						       "size %u: positions from %u share slot %u",
						       sizes[i], start, slot);
				__set_bit(slot, seen);
			}
		}
		bitmap_free(seen);
	}
}

static void kverbs_ledger_signal_interval(struct kunit *test)
{
	struct kverbs_ledger l;
	u32 pos, i, sig = 0;

	kverbs_ledger_init(&l, 64, 8);
	for (i = 1; i <= 32; i++) {
		bool s = kverbs_ledger_post(&l, false, &pos);

		KUNIT_EXPECT_EQ(test, s, i % 8 == 0);
		sig += s;
		if (s)	/* everything up to a signaled WR goes at once */
			KUNIT_EXPECT_EQ(test, kverbs_ledger_reclaim(&l, pos),
					8U);
	}
	KUNIT_EXPECT_EQ(test, sig, 4U);

	/*
	 * Asked for, or holding the last buffer (callers fold both into
	 * want_signal): signaled at once, mid-interval.
	 */
	KUNIT_EXPECT_FALSE(test, kverbs_ledger_post(&l, false, &pos));
	KUNIT_EXPECT_TRUE(test, kverbs_ledger_post(&l, true, &pos));
	KUNIT_EXPECT_FALSE(test, kverbs_ledger_post(&l, false, &pos));
	KUNIT_EXPECT_FALSE(test, kverbs_ledger_post(&l, false, &pos));
	KUNIT_EXPECT_TRUE(test, kverbs_ledger_post(&l, true, &pos));
	/* The counter restarts after any signaled WR. */
	KUNIT_EXPECT_EQ(test, l.unsignaled, 0U);

	/* Interval 1 signals everything; the interval is clamped to size. */
	kverbs_ledger_init(&l, 4, 0);
	KUNIT_EXPECT_TRUE(test, kverbs_ledger_post(&l, false, &pos));
	kverbs_ledger_init(&l, 4, 100);
	KUNIT_EXPECT_EQ(test, l.interval, 4U);
}

/* A full send queue always has a signaled WR at its newest entry. */
static void kverbs_ledger_full_is_signaled(struct kunit *test)
{
	struct kverbs_ledger l;
	u32 pos, i;
	bool s = false;

	kverbs_ledger_init(&l, 4, 4);
	for (i = 0; i < 4; i++)
		s = kverbs_ledger_post(&l, false, &pos);
	KUNIT_EXPECT_TRUE(test, s);
	KUNIT_EXPECT_EQ(test, kverbs_ledger_used(&l), 4U);
	KUNIT_EXPECT_EQ(test, kverbs_ledger_reclaim(&l, pos), 4U);
}

static void kverbs_ledger_reclaim_flush(struct kunit *test)
{
	struct kverbs_ledger l;
	u32 pos[6], i;

	kverbs_ledger_init(&l, 8, 8);
	for (i = 0; i < 6; i++)
		kverbs_ledger_post(&l, false, &pos[i]);
	/* Signaled completion of WR 2 reclaims 0..2. */
	KUNIT_EXPECT_EQ(test, kverbs_ledger_reclaim(&l, pos[2]), 3U);
	/* Then flushes arrive one by one, unsignaled ones included. */
	KUNIT_EXPECT_EQ(test, kverbs_ledger_reclaim(&l, pos[3]), 1U);
	KUNIT_EXPECT_EQ(test, kverbs_ledger_reclaim(&l, pos[4]), 1U);
	KUNIT_EXPECT_EQ(test, kverbs_ledger_reclaim(&l, pos[5]), 1U);
	KUNIT_EXPECT_EQ(test, kverbs_ledger_used(&l), 0U);
	/* Stale or future positions reclaim nothing. */
	KUNIT_EXPECT_EQ(test, kverbs_ledger_reclaim(&l, pos[1]), 0U);
	KUNIT_EXPECT_EQ(test, kverbs_ledger_reclaim(&l, pos[5] + 3), 0U);
	/*
	 * A failed post is undone exactly: the retry gets the same position
	 * and the same signal decision (the interval's 8th WR).
	 */
	kverbs_ledger_post(&l, false, &pos[0]);
	i = l.unsignaled;
	KUNIT_EXPECT_EQ(test, i, 7U);
	KUNIT_EXPECT_TRUE(test, kverbs_ledger_post(&l, false, &pos[1]));
	kverbs_ledger_unpost(&l, i);
	KUNIT_EXPECT_EQ(test, kverbs_ledger_used(&l), 1U);
	KUNIT_EXPECT_EQ(test, l.unsignaled, i);
	KUNIT_EXPECT_TRUE(test, kverbs_ledger_post(&l, false, &pos[2]));
	KUNIT_EXPECT_EQ(test, pos[2], pos[1]);
	KUNIT_EXPECT_EQ(test, kverbs_ledger_used(&l), 2U);
}

/*
 * The numbered budget of kverbs-pri.h: send WRs are the upper layer's,
 * the operation slots and the drain WR; receive WRs are the upper layer's
 * and the drain WR; one CQE per WR of both queues, and on iWARP two more
 * per operation slot.
 */
static void kverbs_ep_budget_numbered(struct kunit *test)
{
	struct kverbs_ep_budget b;
	u32 depth;

	/* kvmsg at depth 16: 16 data buffers + 1 credit buffer, 16 receives */
	kverbs_ep_budget(16, 17, 16, &b);
	KUNIT_EXPECT_EQ(test, b.upper_send, 17);
	KUNIT_EXPECT_EQ(test, b.nops, 16);
	KUNIT_EXPECT_EQ(test, b.upper_recv, 16);
	KUNIT_EXPECT_EQ(test, b.send_wr, 34U);
	KUNIT_EXPECT_EQ(test, b.recv_wr, 17U);
	KUNIT_EXPECT_EQ(test, b.cqes, 51U);
	/* iWARP: rdma_rw's LOCAL_INV and REG_MR per slot, flushed (6) */
	KUNIT_EXPECT_EQ(test, b.rw_cqes, 32U);

	/* Upper sizes are taken as given, not derived from the depth. */
	kverbs_ep_budget(16, 3, 5, &b);
	KUNIT_EXPECT_EQ(test, b.send_wr, 3U + 16 + 1);
	KUNIT_EXPECT_EQ(test, b.recv_wr, 5U + 1);
	KUNIT_EXPECT_EQ(test, b.cqes, 3U + 16 + 1 + 5 + 1);

	for (depth = KVERBS_CM_MIN_DEPTH; depth <= KVERBS_CM_MAX_DEPTH;
	     depth++) {
		kverbs_ep_budget(depth, depth + 1, depth, &b);
		KUNIT_ASSERT_EQ_MSG(test, b.send_wr, 2 * depth + 2,
				    "depth %u", depth);
		KUNIT_ASSERT_EQ_MSG(test, b.recv_wr, depth + 1,
				    "depth %u", depth);
		KUNIT_ASSERT_EQ_MSG(test, b.cqes, b.send_wr + b.recv_wr,
				    "depth %u", depth);
		KUNIT_ASSERT_EQ_MSG(test, b.nops, depth, "depth %u", depth);
		KUNIT_ASSERT_EQ_MSG(test, b.rw_cqes, 2 * depth,
				    "depth %u", depth);
	}
}

#define KVMSG_DEFER_N		256	/* messages */
#define KVMSG_DEFER_TAIL	8	/* the last ones, arriving as scripted */

struct kvmsg_defer_sim {
	struct kunit *test;
	struct kvmsg_rx *rx;
	u32 seen;		/* messages handled for good */
};

/* A handler ran to completion on @m: it must be the next one in order. */
static void kvmsg_defer_deliver(struct kvmsg_defer_sim *d, struct kvmsg_rx *m)
{
	KUNIT_ASSERT_LT(d->test, d->seen, KVMSG_DEFER_N);
	KUNIT_ASSERT_PTR_EQ_MSG(d->test, m, &d->rx[d->seen],
				"message %u handled, %u expected",
				(u32)(m - d->rx), d->seen);
	KUNIT_ASSERT_EQ(d->test, m->seq, d->seen);
	d->seen++;
}

/*
 * Arrivals (softirq) interleaved with the process-context dispatcher, as
 * kvmsg_recv_done() and kvmsg_defer_ep() use the backlog: an arrival
 * queues when kvmsg_backlog_must_queue(), else its handler runs in place
 * and either finishes or defers it (push_front); the dispatcher takes a
 * message and runs its handler, which takes a while (arrivals come in
 * between), and never defers.  Handlers must finish 0, 1, 2, ... with
 * nothing overtaking, every message exactly once.
 *
 * The last KVMSG_DEFER_TAIL arrivals are scripted so the final drain has
 * a known content: once the dispatcher ran dry, one is deferred and the
 * rest arrive while its deferred handler runs.  The final drain must hand
 * out exactly those, in order, and leave the backlog empty and idle.
 */
static void kvmsg_defer_order(struct kunit *test)
{
	struct kvmsg_defer_sim d = { .test = test };
	u32 next_in = 0, step, i, drained = 0;
	u32 deferred = 0, queued = 0, in_place = 0, taken = 0;
	struct kvmsg_rx *m, *in_hand = NULL;	/* the dispatcher's */
	struct kvmsg_backlog b;
	struct rnd_state rnd;

	d.rx = kunit_kcalloc(test, KVMSG_DEFER_N, sizeof(*d.rx), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, d.rx);
	for (i = 0; i < KVMSG_DEFER_N; i++) {
		d.rx[i].seq = i;
		INIT_LIST_HEAD(&d.rx[i].node);
	}
	prandom_seed_state(&rnd, 7);
	kvmsg_backlog_init(&b);
	for (step = 0; step < 100000 &&
	     next_in < KVMSG_DEFER_N - KVMSG_DEFER_TAIL; step++) {
		u32 r = prandom_u32_state(&rnd) % 8;

		if (r < 2) {
			m = &d.rx[next_in++];
			if (kvmsg_backlog_must_queue(&b)) {
				kvmsg_backlog_add(&b, m);
				queued++;
			} else if (r == 0) {	/* handler deferred it */
				kvmsg_backlog_push_front(&b, m);
				deferred++;
			} else {
				kvmsg_defer_deliver(&d, m);
				in_place++;
			}
		} else if (in_hand) {	/* the dispatcher's handler returns */
			kvmsg_defer_deliver(&d, in_hand);
			in_hand = NULL;
		} else {
			in_hand = kvmsg_backlog_next(&b);
			taken += !!in_hand;
		}
	}
	KUNIT_ASSERT_EQ(test, next_in, KVMSG_DEFER_N - KVMSG_DEFER_TAIL);
	kunit_info(test, "%u in place, %u deferred, %u queued, %u dispatched\n",
		   in_place, deferred, queued, taken);
	KUNIT_EXPECT_GE(test, in_place, 20U);
	KUNIT_EXPECT_GE(test, deferred, 20U);
	KUNIT_EXPECT_GE(test, queued, 20U);

	/* The dispatcher runs dry and goes idle. */
	for (i = 0; i < KVMSG_DEFER_N; i++) {
		if (in_hand)
			kvmsg_defer_deliver(&d, in_hand);
		in_hand = kvmsg_backlog_next(&b);
		if (!in_hand)
			break;
	}
	KUNIT_ASSERT_NULL(test, in_hand);
	KUNIT_ASSERT_FALSE(test, kvmsg_backlog_must_queue(&b));
	KUNIT_ASSERT_EQ(test, d.seen, next_in);

	/*
	 * The tail: the first arrival's handler defers it; the dispatcher
	 * takes it, and while its handler runs the others arrive and must
	 * queue behind it, though the list is empty.
	 */
	m = &d.rx[next_in++];
	kvmsg_backlog_push_front(&b, m);
	KUNIT_ASSERT_TRUE(test, kvmsg_backlog_must_queue(&b));
	in_hand = kvmsg_backlog_next(&b);
	KUNIT_ASSERT_PTR_EQ(test, in_hand, m);
	while (next_in < KVMSG_DEFER_N) {
		m = &d.rx[next_in++];
		KUNIT_ASSERT_TRUE_MSG(test, kvmsg_backlog_must_queue(&b),
				      "message %u would overtake %u", m->seq,
				      in_hand->seq);
		kvmsg_backlog_add(&b, m);
	}

	/* The final drain: exactly the tail, in order, then nothing. */
	while (in_hand) {
		kvmsg_defer_deliver(&d, in_hand);
		drained++;
		in_hand = kvmsg_backlog_next(&b);
	}
	KUNIT_EXPECT_EQ(test, drained, KVMSG_DEFER_TAIL);
	KUNIT_EXPECT_EQ(test, d.seen, KVMSG_DEFER_N);
	KUNIT_EXPECT_TRUE(test, list_empty(&b.q));
	KUNIT_EXPECT_FALSE(test, kvmsg_backlog_must_queue(&b));
	KUNIT_EXPECT_NULL(test, kvmsg_backlog_next(&b));
}

/*
 * A message whose handler deferred it goes in front of anything queued
 * (kvmsg_backlog_push_front(): it is older than any of them); kvmsg only
 * defers onto an idle, empty backlog, so the model above cannot tell it
 * from a queue at the back.
 */
static void kvmsg_backlog_push_front_first(struct kunit *test)
{
	struct kvmsg_backlog b;
	struct kvmsg_rx rx[3] = {};
	int i;

	kvmsg_backlog_init(&b);
	for (i = 0; i < 3; i++)
		INIT_LIST_HEAD(&rx[i].node);
	kvmsg_backlog_add(&b, &rx[1]);
	kvmsg_backlog_add(&b, &rx[2]);
	kvmsg_backlog_push_front(&b, &rx[0]);
	for (i = 0; i < 3; i++)
		KUNIT_EXPECT_PTR_EQ(test, kvmsg_backlog_next(&b), &rx[i]);
	KUNIT_EXPECT_NULL(test, kvmsg_backlog_next(&b));
	KUNIT_EXPECT_FALSE(test, kvmsg_backlog_must_queue(&b));
}

static void kvmsg_hdr_good(struct kunit *test)
{
	u8 buf[sizeof(struct kvmsg_hdr) + 32] = {};
	u32 len;
	u16 cr;
	u8 type;

	kvmsg_hdr_fill((void *)buf, KVMSG_TYPE_DATA, 3, 9, 32);
	KUNIT_EXPECT_EQ(test, kvmsg_hdr_check(buf, sizeof(buf), 9, 64, &len,
					      &cr, &type), KVMSG_WIRE_OK);
	KUNIT_EXPECT_EQ(test, len, 32U);
	KUNIT_EXPECT_EQ(test, cr, 3);
	KUNIT_EXPECT_EQ(test, type, KVMSG_TYPE_DATA);
	kvmsg_hdr_fill((void *)buf, KVMSG_TYPE_CREDIT, 1, 10, 0);
	KUNIT_EXPECT_EQ(test, kvmsg_hdr_check(buf, sizeof(struct kvmsg_hdr), 10,
					      64, &len, &cr, &type),
			KVMSG_WIRE_OK);
	KUNIT_EXPECT_EQ(test, len, 0U);
	KUNIT_EXPECT_EQ(test, cr, 1);
	KUNIT_EXPECT_EQ(test, type, KVMSG_TYPE_CREDIT);
}

static void kvmsg_hdr_each_violation(struct kunit *test)
{
	u8 buf[sizeof(struct kvmsg_hdr) + 8];
	struct kvmsg_hdr *h = (void *)buf;
	u32 n = sizeof(buf), len;
	u16 cr;
	u8 type;

#define CHECK(want, seq, max) KUNIT_EXPECT_EQ(test, \
	kvmsg_hdr_check(buf, n, seq, max, &len, &cr, &type), want)
	kvmsg_hdr_fill(h, KVMSG_TYPE_DATA, 0, 0, 8);
	n = sizeof(*h) - 1;
	CHECK(KVMSG_WIRE_SHORT, 0, 64);
	n = sizeof(buf);
	h->type = 0;
	CHECK(KVMSG_WIRE_TYPE, 0, 64);
	h->type = KVMSG_TYPE_AUTH + 1;
	CHECK(KVMSG_WIRE_TYPE, 0, 64);
	h->type = KVMSG_TYPE_AUTH;	/* well formed; kverbs decides the rest */
	CHECK(KVMSG_WIRE_OK, 0, 64);
	h->type = KVMSG_TYPE_DATA;
	h->flags = 0x80;
	CHECK(KVMSG_WIRE_FLAGS, 0, 64);
	h->flags = 0;
	h->reserved = cpu_to_be32(1);
	CHECK(KVMSG_WIRE_FLAGS, 0, 64);
	h->reserved = 0;
	h->len = cpu_to_be32(9);
	CHECK(KVMSG_WIRE_LEN, 0, 64);
	h->len = cpu_to_be32(8);
	CHECK(KVMSG_WIRE_LEN, 0, 4);
	CHECK(KVMSG_WIRE_SEQ, 1, 64);
	h->type = KVMSG_TYPE_CREDIT;
	CHECK(KVMSG_WIRE_CREDIT, 0, 64);
	n = sizeof(*h);
	h->len = 0;
	CHECK(KVMSG_WIRE_CREDIT, 0, 64);	/* credit message granting nothing */
	KUNIT_EXPECT_STREQ(test, kvmsg_wire_err_str(KVMSG_WIRE_SEQ),
			   "out of sequence");
#undef CHECK
}

/* One received message in host order: header fields and bytes received. */
struct kvmsg_hdr_fields {
	u8 type;
	u8 flags;
	u16 credits;
	u32 seq;
	u32 len;
	u32 reserved;
	u32 byte_len;
};

/*
 * The reference: the first rule of kvmsg_hdr_check()'s documentation
 * that @f breaks, for the expected @seq and largest payload @max_len.
 */
static enum kvmsg_wire_err kvmsg_hdr_ref(const struct kvmsg_hdr_fields *f,
					 u32 seq, u32 max_len)
{
	if (f->byte_len < sizeof(struct kvmsg_hdr))
		return KVMSG_WIRE_SHORT;
	/* KVMSG_TYPE_AUTH's place and size are kverbs_ep_auth_check()'s. */
	if (f->type != KVMSG_TYPE_DATA && f->type != KVMSG_TYPE_CREDIT &&
	    f->type != KVMSG_TYPE_AUTH)
		return KVMSG_WIRE_TYPE;
	if (f->flags || f->reserved)
		return KVMSG_WIRE_FLAGS;
	if (f->len != f->byte_len - sizeof(struct kvmsg_hdr) ||
	    f->len > max_len)
		return KVMSG_WIRE_LEN;
	if (f->type == KVMSG_TYPE_CREDIT && (f->len || !f->credits))
		return KVMSG_WIRE_CREDIT;
	if (f->seq != seq)
		return KVMSG_WIRE_SEQ;
	return KVMSG_WIRE_OK;
}

/* Half the time a value at or next to a bound, else anything. */
static u32 kvmsg_hdr_pick(struct rnd_state *rnd, const u32 *near,
			  unsigned int n)
{
	u32 r = prandom_u32_state(rnd);

	return r & 1 ? near[(r >> 1) % n] : prandom_u32_state(rnd);
}

#define KVMSG_HDR_MAX	48	/* max_len of the random test */

static void kvmsg_hdr_mutate(struct rnd_state *rnd, struct kvmsg_hdr_fields *f,
			     u32 seq)
{
	const u32 seqs[] = { seq, seq - 1, seq + 1, swab32(seq) };
	static const u32 types[] = { 0, KVMSG_TYPE_DATA, KVMSG_TYPE_CREDIT,
				     KVMSG_TYPE_AUTH, 4, 0xff };
	static const u32 bits[] = { 0, 1, 0x80, 0x80000000 };
	static const u32 credits[] = { 1, 0xffff };
	static const u32 lens[] = { 0, 1, KVMSG_HDR_MAX - 1, KVMSG_HDR_MAX,
				    KVMSG_HDR_MAX + 1, 64, 0x01000000 };
	u32 hdr = sizeof(struct kvmsg_hdr);

	switch (prandom_u32_state(rnd) % 7) {
	case 0:
		f->type = kvmsg_hdr_pick(rnd, types, ARRAY_SIZE(types));
		break;
	case 1:
		f->flags = kvmsg_hdr_pick(rnd, bits, ARRAY_SIZE(bits));
		break;
	case 2:
		f->reserved = kvmsg_hdr_pick(rnd, bits, ARRAY_SIZE(bits));
		break;
	case 3:	/* a credit message must grant some */
		f->credits = prandom_u32_state(rnd) & 1 ? 0 :
			     kvmsg_hdr_pick(rnd, credits, ARRAY_SIZE(credits));
		break;
	case 4:
		f->seq = kvmsg_hdr_pick(rnd, seqs, ARRAY_SIZE(seqs));
		break;
	case 5:	/* the header's length, half the time matching what arrives */
		f->len = kvmsg_hdr_pick(rnd, lens, ARRAY_SIZE(lens));
		if (prandom_u32_state(rnd) & 1)
			f->byte_len = hdr + f->len;
		break;
	default:
		f->byte_len = hdr + f->len + prandom_u32_state(rnd) % 3 - 1;
		if (prandom_u32_state(rnd) & 1)
			f->byte_len = prandom_u32_state(rnd) % (hdr + 65);
		break;
	}
}

/*
 * Random messages: a valid header (data with a payload up to the maximum,
 * or credit-only) for a random expected sequence number, half of them with
 * one or two fields or the received length changed, often to a value next
 * to a bound.  The verdict must be the reference's, an accepted header's
 * outputs must be its fields, and both verdicts and every violation must
 * come up often.  Seeded, so a failure replays.
 */
static void kvmsg_hdr_random(struct kunit *test)
{
	static const unsigned int changes[] = { 0, 0, 1, 2 };
	u8 buf[sizeof(struct kvmsg_hdr) + 64];
	u32 i, k, n, ok = 0, bad = 0, len, seq;
	u32 by_err[KVMSG_WIRE_MAX] = {};
	struct rnd_state rnd;
	u16 cr;
	u8 type;

	prandom_seed_state(&rnd, 11);
	for (n = 0; n < 20000; n++) {
		struct kvmsg_hdr_fields f = {};
		struct kvmsg_hdr h;
		enum kvmsg_wire_err want, got;

		seq = prandom_u32_state(&rnd);
		f.seq = seq;
		if (prandom_u32_state(&rnd) % 4) {
			f.type = KVMSG_TYPE_DATA;
			f.len = prandom_u32_state(&rnd) % (KVMSG_HDR_MAX + 1);
		} else {
			f.type = KVMSG_TYPE_CREDIT;
			f.credits = 1 + prandom_u32_state(&rnd) % 0xffff;
		}
		f.byte_len = sizeof(h) + f.len;
		k = changes[prandom_u32_state(&rnd) % ARRAY_SIZE(changes)];
		for (i = 0; i < k; i++)
			kvmsg_hdr_mutate(&rnd, &f, seq);
		f.byte_len = min_t(u32, f.byte_len, sizeof(buf));

		/* Encode by hand; the payload is noise. */
		prandom_bytes_state(&rnd, buf, sizeof(buf));
		h.type = f.type;
		h.flags = f.flags;
		h.credits = cpu_to_be16(f.credits);
		h.seq = cpu_to_be32(f.seq);
		h.len = cpu_to_be32(f.len);
		h.reserved = cpu_to_be32(f.reserved);
		memcpy(buf, &h, sizeof(h));

		len = 0xa5a5a5a5;
		cr = 0xa5a5;
		type = 0xa5;
		want = kvmsg_hdr_ref(&f, seq, KVMSG_HDR_MAX);
		got = kvmsg_hdr_check(buf, f.byte_len, seq, KVMSG_HDR_MAX, &len,
				      &cr, &type);
		KUNIT_ASSERT_EQ_MSG(test, got, want,
				    "#%u: type %u flags %#x credits %u seq %u (want %u) len %u reserved %#x received %u",
				    n, f.type, f.flags, f.credits, f.seq, seq,
				    f.len, f.reserved, f.byte_len);
		by_err[want]++;
		if (want != KVMSG_WIRE_OK) {
			bad++;
			continue;
		}
		ok++;
		KUNIT_ASSERT_EQ_MSG(test, len, f.len, "#%u", n);
		KUNIT_ASSERT_EQ_MSG(test, cr, f.credits, "#%u", n);
		KUNIT_ASSERT_EQ_MSG(test, type, f.type, "#%u", n);
	}
	kunit_info(test, "%u of 20000 random headers accepted, %u refused\n",
		   ok, bad);
	KUNIT_EXPECT_GE(test, ok, 5000U);
	KUNIT_EXPECT_GE(test, bad, 5000U);
	for (i = KVMSG_WIRE_SHORT; i < KVMSG_WIRE_MAX; i++)
		KUNIT_EXPECT_GE_MSG(test, by_err[i], 100U, "verdict %u", i);
}

static struct kunit_case kvmsg_cases[] = {
	KUNIT_CASE(kvmsg_credit_accounting),
	KUNIT_CASE(kvmsg_credit_ctrl_threshold),
	KUNIT_CASE(kvmsg_credit_no_deadlock),
	KUNIT_CASE(kvmsg_credit_idle_quiet),
	KUNIT_CASE(kvmsg_credit_oneway_kept),
	KUNIT_CASE(kverbs_ledger_wrap),
	KUNIT_CASE(kverbs_ledger_slot_wrap),
	KUNIT_CASE(kverbs_ledger_signal_interval),
	KUNIT_CASE(kverbs_ledger_full_is_signaled),
	KUNIT_CASE(kverbs_ledger_reclaim_flush),
	KUNIT_CASE(kverbs_ep_budget_numbered),
	KUNIT_CASE(kvmsg_defer_order),
	KUNIT_CASE(kvmsg_backlog_push_front_first),
	KUNIT_CASE(kvmsg_hdr_good),
	KUNIT_CASE(kvmsg_hdr_each_violation),
	KUNIT_CASE(kvmsg_hdr_random),
	{}
};

static struct kunit_suite kvmsg_suite = {
	.name = "kvmsg",
	.test_cases = kvmsg_cases,
};

kunit_test_suite(kvmsg_suite);
