// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit: the pure logic of kmsg (kmsg/flow.c, kmsg/wire.c): credit
 * accounting, send-queue wrap, the signal interval, reclaim on signaled
 * and flushed completions, deferral order and header validation.
 */
#include <kunit/test.h>
#include <linux/prandom.h>
#include <linux/random.h>

#include "../kverbs/kverbs-pri.h"

static void kmsg_credit_accounting(struct kunit *test)
{
	struct kmsg_credit c;
	u16 g = 99;
	int i;

	kmsg_credit_init(&c, 4, 8);
	KUNIT_EXPECT_EQ(test, c.threshold, 4U);
	for (i = 0; i < 3; i++) {
		KUNIT_ASSERT_TRUE(test, kmsg_credit_take(&c, &g));
		KUNIT_EXPECT_EQ(test, g, 0);
	}
	/* The last credit needs something to grant. */
	KUNIT_EXPECT_FALSE(test, kmsg_credit_take(&c, &g));
	kmsg_credit_reposted(&c);
	kmsg_credit_reposted(&c);
	KUNIT_ASSERT_TRUE(test, kmsg_credit_take(&c, &g));
	KUNIT_EXPECT_EQ(test, g, 2);
	KUNIT_EXPECT_EQ(test, c.avail, 0U);
	KUNIT_EXPECT_EQ(test, c.ungranted, 0U);
	KUNIT_EXPECT_FALSE(test, kmsg_credit_take(&c, &g));

	/* Grants come back, never beyond the peer's depth. */
	KUNIT_EXPECT_EQ(test, kmsg_credit_receive(&c, 5), -EPROTO);
	KUNIT_EXPECT_EQ(test, c.avail, 0U);
	KUNIT_EXPECT_EQ(test, kmsg_credit_receive(&c, 4), 0);
	KUNIT_EXPECT_EQ(test, kmsg_credit_receive(&c, 1), -EPROTO);
	KUNIT_EXPECT_EQ(test, kmsg_credit_receive(&c, 0), 0);
}

static void kmsg_credit_ctrl_threshold(struct kunit *test)
{
	struct kmsg_credit c;
	int i;

	kmsg_credit_init(&c, 16, 16);
	for (i = 0; i < 7; i++)
		kmsg_credit_reposted(&c);
	KUNIT_EXPECT_FALSE(test, kmsg_credit_want_ctrl(&c));
	kmsg_credit_reposted(&c);
	KUNIT_EXPECT_TRUE(test, kmsg_credit_want_ctrl(&c));
	c.avail = 0;
	KUNIT_EXPECT_FALSE(test, kmsg_credit_want_ctrl(&c));
	/* Smallest ring: two reposts, never one (see the idle model). */
	kmsg_credit_init(&c, KVERBS_CM_MIN_DEPTH, KVERBS_CM_MIN_DEPTH);
	kmsg_credit_reposted(&c);
	KUNIT_EXPECT_FALSE(test, kmsg_credit_want_ctrl(&c));
	kmsg_credit_reposted(&c);
	KUNIT_EXPECT_TRUE(test, kmsg_credit_want_ctrl(&c));
}

/*
 * A model of two peers as kmsg runs them: every message spends a credit
 * and carries the grants (kmsg_credit_take()), a receive is re-posted when
 * its handler returns or its kept buffer is released, and after every
 * re-post or grant the peer sends a credit-only message if it wants one
 * (kmsg_flush_locked()).  Both sides send data and credit messages.
 */
struct kmsg_sim_peer {
	struct kmsg_credit c;
	u32 depth;
	u32 posted;		/* receives posted */
	u32 backlog;		/* received, handler not returned yet */
	u32 kept;		/* kept by the handler */
	u32 ctrl_sent;
	u32 data_sent;
};

struct kmsg_sim {
	struct kunit *test;
	struct kmsg_sim_peer p[2];
	bool failed;
};

static void kmsg_sim_init(struct kmsg_sim *s, struct kunit *test, u32 depth)
{
	int i;

	memset(s, 0, sizeof(*s));
	s->test = test;
	for (i = 0; i < 2; i++) {
		s->p[i].depth = depth;
		s->p[i].posted = depth;
		kmsg_credit_init(&s->p[i].c, depth, depth);
	}
}

static void kmsg_sim_deliver(struct kmsg_sim *s, int to, u16 grant);

/* What kmsg_flush_locked() does after a re-post or a grant. */
static void kmsg_sim_flush(struct kmsg_sim *s, int i)
{
	struct kmsg_sim_peer *p = &s->p[i];
	u16 g;

	if (kmsg_credit_want_ctrl(&p->c) && kmsg_credit_take(&p->c, &g)) {
		p->ctrl_sent++;
		kmsg_sim_deliver(s, !i, g);
	}
}

/* A credit-only message is re-posted at once, in the receive path. */
static void kmsg_sim_deliver(struct kmsg_sim *s, int to, u16 grant)
{
	struct kmsg_sim_peer *p = &s->p[to];

	if (!p->posted || kmsg_credit_receive(&p->c, grant)) {
		KUNIT_FAIL(s->test, "message without a posted receive or with a bad grant");
		s->failed = true;
		return;
	}
	p->posted--;
	p->backlog++;
	/* kmsg_recv_done() flushes when a message returned credits. */
	if (grant)
		kmsg_sim_flush(s, to);
}

static bool kmsg_sim_send(struct kmsg_sim *s, int i)
{
	u16 g;

	if (!kmsg_credit_take(&s->p[i].c, &g))
		return false;
	s->p[i].data_sent++;
	kmsg_sim_deliver(s, !i, g);
	return true;
}

/* The handler of one received message returns, keeping it if @keep. */
static void kmsg_sim_handle(struct kmsg_sim *s, int i, bool keep)
{
	struct kmsg_sim_peer *p = &s->p[i];

	p->backlog--;
	if (keep && p->kept < kmsg_max_kept(p->depth)) {
		p->kept++;
		return;
	}
	p->posted++;
	kmsg_credit_reposted(&p->c);
	kmsg_sim_flush(s, i);
}

static void kmsg_sim_release(struct kmsg_sim *s, int i)
{
	struct kmsg_sim_peer *p = &s->p[i];

	p->kept--;
	p->posted++;
	kmsg_credit_reposted(&p->c);
	kmsg_sim_flush(s, i);
}

/* Let both handlers return everything; false if it does not settle. */
static bool kmsg_sim_settle(struct kmsg_sim *s, u32 *msgs)
{
	u32 before = s->p[0].ctrl_sent + s->p[1].ctrl_sent, n;

	for (n = 0; n < 1000 && !s->failed; n++) {
		if (s->p[0].backlog)
			kmsg_sim_handle(s, 0, false);
		else if (s->p[1].backlog)
			kmsg_sim_handle(s, 1, false);
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
static void kmsg_credit_idle_quiet(struct kunit *test)
{
	struct kmsg_sim s;
	struct rnd_state rnd;
	u32 depth, step, msgs;
	int i;

	prandom_seed_state(&rnd, 7);
	for (depth = KVERBS_CM_MIN_DEPTH; depth <= 16; depth++) {
		kmsg_sim_init(&s, test, depth);
		for (step = 0; step < 5000 && !s.failed; step++) {
			u32 r = prandom_u32_state(&rnd);

			i = r & 1;
			switch ((r >> 1) % 4) {
			case 0:
				kmsg_sim_send(&s, i);
				break;
			case 1:
			case 2:
				if (s.p[i].backlog)
					kmsg_sim_handle(&s, i, (r >> 8) % 4 == 0);
				break;
			case 3:
				if (s.p[i].kept)
					kmsg_sim_release(&s, i);
				break;
			}
		}
		for (i = 0; i < 2; i++)
			while (s.p[i].kept)
				kmsg_sim_release(&s, i);
		KUNIT_ASSERT_TRUE_MSG(test, kmsg_sim_settle(&s, &msgs),
				      "depth %u: credit messages never stop", depth);
		KUNIT_EXPECT_LE_MSG(test, msgs, 2 * depth,
				    "depth %u: %u credit messages when idle",
				    depth, msgs);
		/* Idle, nothing kept: a message goes out on either side. */
		for (i = 0; i < 2; i++)
			KUNIT_EXPECT_TRUE_MSG(test, kmsg_sim_send(&s, i),
					      "depth %u: peer %d cannot send when idle",
					      depth, i);
	}
}

/*
 * One-way sender, receiver keeping every message it may and releasing
 * none: the sender still gets 10 x depth messages through, as the
 * kmsg_rx_keep() documentation promises.
 */
static void kmsg_credit_oneway_kept(struct kunit *test)
{
	struct kmsg_sim s;
	u32 depth, sent, n;

	for (depth = KVERBS_CM_MIN_DEPTH; depth <= 16; depth++) {
		kmsg_sim_init(&s, test, depth);
		for (sent = 0, n = 0; n < 100 * depth && sent < 10 * depth &&
		     !s.failed; n++) {
			if (kmsg_sim_send(&s, 0))
				sent++;
			while (s.p[1].backlog)
				kmsg_sim_handle(&s, 1, true);
			while (s.p[0].backlog)
				kmsg_sim_handle(&s, 0, false);
		}
		KUNIT_EXPECT_EQ_MSG(test, sent, 10 * depth,
				    "depth %u: one-way sender stalled with %u kept",
				    depth, s.p[1].kept);
		KUNIT_EXPECT_EQ(test, s.p[1].kept, kmsg_max_kept(depth));
	}
}

/*
 * Two peers exchanging one-way bursts through the credit rules, with
 * random handler delays: no message is ever sent without a posted
 * receive, and neither side stalls forever.
 */
static void kmsg_credit_no_deadlock(struct kunit *test)
{
	struct kmsg_credit a, b;
	u32 a_posted = 4, b_posted = 4;	/* receives posted at each side */
	u32 a_backlog = 0, b_backlog = 0;	/* received, not yet reposted */
	u32 delivered = 0, step;
	struct rnd_state rnd;
	u16 g;

	prandom_seed_state(&rnd, 42);
	kmsg_credit_init(&a, 4, 4);
	kmsg_credit_init(&b, 4, 4);
	for (step = 0; step < 100000 && delivered < 20000; step++) {
		u32 r = prandom_u32_state(&rnd) % 3;

		if (r == 0 && kmsg_credit_take(&a, &g)) {
			/* a sends data to b */
			KUNIT_ASSERT_GT(test, b_posted, 0U);
			b_posted--;
			b_backlog++;
			KUNIT_ASSERT_EQ(test, kmsg_credit_receive(&b, g), 0);
			delivered++;
		} else if (r == 1 && b_backlog) {
			/* b's handler returns: repost, maybe a credit message */
			b_backlog--;
			b_posted++;
			kmsg_credit_reposted(&b);
			if (kmsg_credit_want_ctrl(&b) &&
			    kmsg_credit_take(&b, &g)) {
				KUNIT_ASSERT_GT(test, a_posted, 0U);
				a_posted--;
				a_backlog++;
				KUNIT_ASSERT_EQ(test,
						kmsg_credit_receive(&a, g), 0);
			}
		} else if (r == 2 && a_backlog) {
			a_backlog--;
			a_posted++;
			kmsg_credit_reposted(&a);
		}
	}
	KUNIT_EXPECT_EQ(test, delivered, 20000U);
}

static void kmsg_sq_wrap(struct kunit *test)
{
	struct kmsg_sq sq;
	u32 pos, i;

	kmsg_sq_init(&sq, 8, 4);
	sq.head = U32_MAX - 5;	/* positions wrap around 2^32 */
	sq.tail = sq.head;
	for (i = 0; i < 100; i++) {
		kmsg_sq_post(&sq, false, false, &pos);
		KUNIT_EXPECT_EQ(test, pos, sq.head - 1);
		KUNIT_EXPECT_EQ(test, kmsg_sq_reclaim(&sq, pos), 1U);
		KUNIT_EXPECT_EQ(test, kmsg_sq_used(&sq), 0U);
	}
	/* Slot indices stay in range across the wrap. */
	KUNIT_EXPECT_LT(test, pos % sq.size, sq.size);
}

static void kmsg_sq_signal_interval(struct kunit *test)
{
	struct kmsg_sq sq;
	u32 pos, i, sig = 0;

	kmsg_sq_init(&sq, 64, 8);
	for (i = 1; i <= 32; i++) {
		bool s = kmsg_sq_post(&sq, false, false, &pos);

		KUNIT_EXPECT_EQ(test, s, i % 8 == 0);
		sig += s;
		if (s)	/* everything up to a signaled WR goes at once */
			KUNIT_EXPECT_EQ(test, kmsg_sq_reclaim(&sq, pos), 8U);
	}
	KUNIT_EXPECT_EQ(test, sig, 4U);

	/* Asked for, or holding the last buffer: signaled at once. */
	KUNIT_EXPECT_FALSE(test, kmsg_sq_post(&sq, false, false, &pos));
	KUNIT_EXPECT_TRUE(test, kmsg_sq_post(&sq, true, false, &pos));
	KUNIT_EXPECT_FALSE(test, kmsg_sq_post(&sq, false, false, &pos));
	KUNIT_EXPECT_TRUE(test, kmsg_sq_post(&sq, false, true, &pos));
	/* The counter restarts after any signaled WR. */
	KUNIT_EXPECT_EQ(test, sq.unsignaled, 0U);

	/* Interval 1 signals everything; the interval is clamped to size. */
	kmsg_sq_init(&sq, 4, 0);
	KUNIT_EXPECT_TRUE(test, kmsg_sq_post(&sq, false, false, &pos));
	kmsg_sq_init(&sq, 4, 100);
	KUNIT_EXPECT_EQ(test, sq.interval, 4U);
}

/* A full send queue always has a signaled WR at its newest entry. */
static void kmsg_sq_full_is_signaled(struct kunit *test)
{
	struct kmsg_sq sq;
	u32 pos, i;
	bool s = false;

	kmsg_sq_init(&sq, 4, 4);
	for (i = 0; i < 4; i++)
		s = kmsg_sq_post(&sq, false, false, &pos);
	KUNIT_EXPECT_TRUE(test, s);
	KUNIT_EXPECT_EQ(test, kmsg_sq_used(&sq), 4U);
	KUNIT_EXPECT_EQ(test, kmsg_sq_reclaim(&sq, pos), 4U);
}

static void kmsg_sq_reclaim_flush(struct kunit *test)
{
	struct kmsg_sq sq;
	u32 pos[6], i;

	kmsg_sq_init(&sq, 8, 8);
	for (i = 0; i < 6; i++)
		kmsg_sq_post(&sq, false, false, &pos[i]);
	/* Signaled completion of WR 2 reclaims 0..2. */
	KUNIT_EXPECT_EQ(test, kmsg_sq_reclaim(&sq, pos[2]), 3U);
	/* Then flushes arrive one by one, unsignaled ones included. */
	KUNIT_EXPECT_EQ(test, kmsg_sq_reclaim(&sq, pos[3]), 1U);
	KUNIT_EXPECT_EQ(test, kmsg_sq_reclaim(&sq, pos[4]), 1U);
	KUNIT_EXPECT_EQ(test, kmsg_sq_reclaim(&sq, pos[5]), 1U);
	KUNIT_EXPECT_EQ(test, kmsg_sq_used(&sq), 0U);
	/* Stale or future positions reclaim nothing. */
	KUNIT_EXPECT_EQ(test, kmsg_sq_reclaim(&sq, pos[1]), 0U);
	KUNIT_EXPECT_EQ(test, kmsg_sq_reclaim(&sq, pos[5] + 3), 0U);
	/* A failed post is undone exactly. */
	kmsg_sq_post(&sq, false, false, &pos[0]);
	i = sq.unsignaled;
	kmsg_sq_post(&sq, false, false, &pos[1]);
	kmsg_sq_unpost(&sq, i);
	KUNIT_EXPECT_EQ(test, kmsg_sq_used(&sq), 1U);
	KUNIT_EXPECT_EQ(test, sq.unsignaled, i);
}

/*
 * Arrivals interleaved with a process-context dispatcher; some handlers
 * defer.  The handler must see 0, 1, 2, ... and nothing may overtake.
 */
static void kmsg_defer_order(struct kunit *test)
{
	struct kmsg_rx *rx;
	struct kmsg_backlog b;
	u32 next_in = 0, seen = 0, step;
	struct rnd_state rnd;

	rx = kunit_kcalloc(test, 64, sizeof(*rx), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, rx);
	prandom_seed_state(&rnd, 7);
	kmsg_backlog_init(&b);
	for (step = 0; step < 100000 && seen < 64; step++) {
		u32 r = prandom_u32_state(&rnd) % 4;
		struct kmsg_rx *m;

		if (r < 2 && next_in < 64) {
			m = &rx[next_in];
			m->seq = next_in++;
			INIT_LIST_HEAD(&m->node);
			if (kmsg_backlog_must_queue(&b)) {
				kmsg_backlog_add(&b, m);
			} else if (r == 0) {	/* handler deferred it */
				kmsg_backlog_push_front(&b, m);
			} else {
				KUNIT_ASSERT_EQ(test, m->seq, seen);
				seen++;
			}
		} else if (r >= 2) {	/* the worker handles one */
			m = kmsg_backlog_next(&b);
			if (m) {
				KUNIT_ASSERT_EQ(test, m->seq, seen);
				seen++;
			}
		}
	}
	while (kmsg_backlog_next(&b))
		seen++;
	KUNIT_EXPECT_EQ(test, seen, 64U);
	KUNIT_EXPECT_FALSE(test, kmsg_backlog_must_queue(&b));
}

static void kmsg_hdr_good(struct kunit *test)
{
	u8 buf[sizeof(struct kmsg_hdr) + 32] = {};
	u32 len;
	u16 cr;
	u8 type;

	kmsg_hdr_fill((void *)buf, KMSG_TYPE_DATA, 3, 9, 32);
	KUNIT_EXPECT_EQ(test, kmsg_hdr_check(buf, sizeof(buf), 9, 64, &len,
					     &cr, &type), KMSG_WIRE_OK);
	KUNIT_EXPECT_EQ(test, len, 32U);
	KUNIT_EXPECT_EQ(test, cr, 3);
	KUNIT_EXPECT_EQ(test, type, KMSG_TYPE_DATA);
	kmsg_hdr_fill((void *)buf, KMSG_TYPE_CREDIT, 1, 10, 0);
	KUNIT_EXPECT_EQ(test, kmsg_hdr_check(buf, sizeof(struct kmsg_hdr), 10,
					     64, &len, &cr, &type),
			KMSG_WIRE_OK);
}

static void kmsg_hdr_each_violation(struct kunit *test)
{
	u8 buf[sizeof(struct kmsg_hdr) + 8];
	struct kmsg_hdr *h = (void *)buf;
	u32 n = sizeof(buf), len;
	u16 cr;
	u8 type;

#define CHECK(want, seq, max) KUNIT_EXPECT_EQ(test, \
	kmsg_hdr_check(buf, n, seq, max, &len, &cr, &type), want)
	kmsg_hdr_fill(h, KMSG_TYPE_DATA, 0, 0, 8);
	n = sizeof(*h) - 1;
	CHECK(KMSG_WIRE_SHORT, 0, 64);
	n = sizeof(buf);
	h->type = 0;
	CHECK(KMSG_WIRE_TYPE, 0, 64);
	h->type = KMSG_TYPE_DATA;
	h->flags = 0x80;
	CHECK(KMSG_WIRE_FLAGS, 0, 64);
	h->flags = 0;
	h->reserved = cpu_to_be32(1);
	CHECK(KMSG_WIRE_FLAGS, 0, 64);
	h->reserved = 0;
	h->len = cpu_to_be32(9);
	CHECK(KMSG_WIRE_LEN, 0, 64);
	h->len = cpu_to_be32(8);
	CHECK(KMSG_WIRE_LEN, 0, 4);
	CHECK(KMSG_WIRE_SEQ, 1, 64);
	h->type = KMSG_TYPE_CREDIT;
	CHECK(KMSG_WIRE_CREDIT, 0, 64);
	n = sizeof(*h);
	h->len = 0;
	CHECK(KMSG_WIRE_CREDIT, 0, 64);	/* credit message granting nothing */
	KUNIT_EXPECT_STREQ(test, kmsg_wire_err_str(KMSG_WIRE_SEQ),
			   "out of sequence");
#undef CHECK
}

/* Random headers: every verdict is consistent with the fields. */
static void kmsg_hdr_random(struct kunit *test)
{
	u8 buf[sizeof(struct kmsg_hdr) + 64];
	const struct kmsg_hdr *h = (void *)buf;
	u32 i, ok = 0, n, len;
	u16 cr;
	u8 type;

	for (i = 0; i < 20000; i++) {
		enum kmsg_wire_err e;

		get_random_bytes(buf, sizeof(buf));
		/* Bias towards near-valid headers so deep checks run. */
		if (i & 1) {
			((struct kmsg_hdr *)buf)->flags = 0;
			((struct kmsg_hdr *)buf)->reserved = 0;
			((struct kmsg_hdr *)buf)->type = 1 + (buf[20] & 1);
			((struct kmsg_hdr *)buf)->seq = cpu_to_be32(5);
			((struct kmsg_hdr *)buf)->len =
				cpu_to_be32(buf[21] % 65);
		}
		n = get_random_u32() % (sizeof(buf) + 1);
		e = kmsg_hdr_check(buf, n, 5, 48, &len, &cr, &type);
		KUNIT_ASSERT_LT(test, e, KMSG_WIRE_MAX);
		if (e != KMSG_WIRE_OK)
			continue;
		ok++;
		KUNIT_ASSERT_GE(test, n, (u32)sizeof(*h));
		KUNIT_ASSERT_EQ(test, len, n - (u32)sizeof(*h));
		KUNIT_ASSERT_LE(test, len, 48U);
		KUNIT_ASSERT_EQ(test, be32_to_cpu(h->seq), 5U);
		KUNIT_ASSERT_TRUE(test, type == KMSG_TYPE_DATA ||
				  (type == KMSG_TYPE_CREDIT && !len && cr));
	}
	kunit_info(test, "%u of 20000 random headers accepted\n", ok);
	KUNIT_EXPECT_GT(test, ok, 0U);
}

static struct kunit_case kmsg_cases[] = {
	KUNIT_CASE(kmsg_credit_accounting),
	KUNIT_CASE(kmsg_credit_ctrl_threshold),
	KUNIT_CASE(kmsg_credit_no_deadlock),
	KUNIT_CASE(kmsg_credit_idle_quiet),
	KUNIT_CASE(kmsg_credit_oneway_kept),
	KUNIT_CASE(kmsg_sq_wrap),
	KUNIT_CASE(kmsg_sq_signal_interval),
	KUNIT_CASE(kmsg_sq_full_is_signaled),
	KUNIT_CASE(kmsg_sq_reclaim_flush),
	KUNIT_CASE(kmsg_defer_order),
	KUNIT_CASE(kmsg_hdr_good),
	KUNIT_CASE(kmsg_hdr_each_violation),
	KUNIT_CASE(kmsg_hdr_random),
	{}
};

static struct kunit_suite kmsg_suite = {
	.name = "kmsg",
	.test_cases = kmsg_cases,
};

kunit_test_suite(kmsg_suite);
