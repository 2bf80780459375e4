// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit: the pure logic of kvmsg (kvmsg/flow.c, kvmsg/wire.c) and of the
 * send-queue ledger and queue budget it relies on (kverbs/sq.c,
 * kverbs/ep.c): credit accounting, ledger wrap, the signal interval,
 * reclaim on signaled and flushed completions, the numbered budget,
 * deferral order and header validation.
 */
#include <kunit/test.h>
#include <linux/prandom.h>
#include <linux/random.h>

#include "../kvmsg/kvmsg-pri.h"

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

static void kverbs_ledger_wrap(struct kunit *test)
{
	struct kverbs_ledger l;
	u32 pos, i;

	kverbs_ledger_init(&l, 8, 4);
	l.head = U32_MAX - 5;	/* positions wrap around 2^32 */
	l.tail = l.head;
	for (i = 0; i < 100; i++) {
		kverbs_ledger_post(&l, false, &pos);
		KUNIT_EXPECT_EQ(test, pos, l.head - 1);
		KUNIT_EXPECT_EQ(test, kverbs_ledger_reclaim(&l, pos), 1U);
		KUNIT_EXPECT_EQ(test, kverbs_ledger_used(&l), 0U);
	}
	/* Slot indices stay in range across the wrap. */
	KUNIT_EXPECT_LT(test, pos % l.size, l.size);
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
	/* A failed post is undone exactly. */
	kverbs_ledger_post(&l, false, &pos[0]);
	i = l.unsignaled;
	kverbs_ledger_post(&l, false, &pos[1]);
	kverbs_ledger_unpost(&l, i);
	KUNIT_EXPECT_EQ(test, kverbs_ledger_used(&l), 1U);
	KUNIT_EXPECT_EQ(test, l.unsignaled, i);
}

/*
 * The numbered budget of kverbs-pri.h: send WRs are the upper layer's,
 * the operation slots and the drain WR; receive WRs are the upper layer's
 * and the drain WR; one CQE per WR of both queues.
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
	}
}

/*
 * Arrivals interleaved with a process-context dispatcher; some handlers
 * defer.  The handler must see 0, 1, 2, ... and nothing may overtake.
 */
static void kvmsg_defer_order(struct kunit *test)
{
	struct kvmsg_rx *rx;
	struct kvmsg_backlog b;
	u32 next_in = 0, seen = 0, step;
	struct rnd_state rnd;

	rx = kunit_kcalloc(test, 64, sizeof(*rx), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, rx);
	prandom_seed_state(&rnd, 7);
	kvmsg_backlog_init(&b);
	for (step = 0; step < 100000 && seen < 64; step++) {
		u32 r = prandom_u32_state(&rnd) % 4;
		struct kvmsg_rx *m;

		if (r < 2 && next_in < 64) {
			m = &rx[next_in];
			m->seq = next_in++;
			INIT_LIST_HEAD(&m->node);
			if (kvmsg_backlog_must_queue(&b)) {
				kvmsg_backlog_add(&b, m);
			} else if (r == 0) {	/* handler deferred it */
				kvmsg_backlog_push_front(&b, m);
			} else {
				KUNIT_ASSERT_EQ(test, m->seq, seen);
				seen++;
			}
		} else if (r >= 2) {	/* the worker handles one */
			m = kvmsg_backlog_next(&b);
			if (m) {
				KUNIT_ASSERT_EQ(test, m->seq, seen);
				seen++;
			}
		}
	}
	while (kvmsg_backlog_next(&b))
		seen++;
	KUNIT_EXPECT_EQ(test, seen, 64U);
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

/* Random headers: every verdict is consistent with the fields. */
static void kvmsg_hdr_random(struct kunit *test)
{
	u8 buf[sizeof(struct kvmsg_hdr) + 64];
	const struct kvmsg_hdr *h = (void *)buf;
	u32 i, ok = 0, n, len;
	u16 cr;
	u8 type;

	for (i = 0; i < 20000; i++) {
		enum kvmsg_wire_err e;

		get_random_bytes(buf, sizeof(buf));
		/* Bias towards near-valid headers so deep checks run. */
		if (i & 1) {
			((struct kvmsg_hdr *)buf)->flags = 0;
			((struct kvmsg_hdr *)buf)->reserved = 0;
			((struct kvmsg_hdr *)buf)->type = 1 + (buf[20] & 1);
			((struct kvmsg_hdr *)buf)->seq = cpu_to_be32(5);
			((struct kvmsg_hdr *)buf)->len =
				cpu_to_be32(buf[21] % 65);
		}
		n = get_random_u32() % (sizeof(buf) + 1);
		e = kvmsg_hdr_check(buf, n, 5, 48, &len, &cr, &type);
		KUNIT_ASSERT_LT(test, e, KVMSG_WIRE_MAX);
		if (e != KVMSG_WIRE_OK)
			continue;
		ok++;
		KUNIT_ASSERT_GE(test, n, (u32)sizeof(*h));
		KUNIT_ASSERT_EQ(test, len, n - (u32)sizeof(*h));
		KUNIT_ASSERT_LE(test, len, 48U);
		KUNIT_ASSERT_EQ(test, be32_to_cpu(h->seq), 5U);
		KUNIT_ASSERT_TRUE(test, type == KVMSG_TYPE_DATA ||
				  (type == KVMSG_TYPE_CREDIT && !len && cr));
	}
	kunit_info(test, "%u of 20000 random headers accepted\n", ok);
	KUNIT_EXPECT_GT(test, ok, 0U);
}

static struct kunit_case kvmsg_cases[] = {
	KUNIT_CASE(kvmsg_credit_accounting),
	KUNIT_CASE(kvmsg_credit_ctrl_threshold),
	KUNIT_CASE(kvmsg_credit_no_deadlock),
	KUNIT_CASE(kvmsg_credit_idle_quiet),
	KUNIT_CASE(kvmsg_credit_oneway_kept),
	KUNIT_CASE(kverbs_ledger_wrap),
	KUNIT_CASE(kverbs_ledger_signal_interval),
	KUNIT_CASE(kverbs_ledger_full_is_signaled),
	KUNIT_CASE(kverbs_ledger_reclaim_flush),
	KUNIT_CASE(kverbs_ep_budget_numbered),
	KUNIT_CASE(kvmsg_defer_order),
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
