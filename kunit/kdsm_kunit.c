// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit: the kdsm protocol (samples/kdsm/proto.c, compiled into this test
 * module: the sample exports nothing).  Message validation field by
 * field, the transitions that must refuse an event, and a simulated
 * cluster: 2 to 4 nodes run the real transitions over per-pair FIFO
 * channels (RC order, page data travelling ahead of its reply), with
 * random faults and random delivery order, and the checker asserts
 * single writer or many readers, that every readable copy holds the last
 * write, and that page data never lands in an accessible page; half the
 * runs place homes in blocks, half cyclically.  A weakened run, in which
 * one sharer keeps its copy after acking an invalidation, must be caught
 * by the same checker (not only by a later refusal).  Half the runs use
 * the fetch option: a read of a shared page is an RDMA read of the
 * owner's copy at a random later step, checked like page data.
 *
 * The queue lock (samples/kdsm/qproto.c, also compiled in): its messages'
 * validation, the word's decoding in both byte orders, and simulated
 * clusters of 2 to 4 nodes contending for one word, with CAS results and
 * messages overtaking each other and waiters killed at random; the
 * checker asserts one holder at a time, no refused event, and that every
 * node leaves the queue and the word ends free.
 */
#include <kunit/test.h>
#include <linux/prandom.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "../samples/kdsm/proto.c"
#include "../samples/kdsm/qproto.c"

static const struct kdsm_geo kdsm_t_geo = {
	.self = 1, .nnodes = 4, .npages = 64, .fetch = true,
};

static void kdsm_home_placement(struct kunit *test)
{
	struct kdsm_geo g = { .self = 1, .nnodes = 3, .npages = 10 };
	u32 per[KDSM_MAX_NODES + 1] = {};
	u32 p;

	for (p = 0; p < g.npages; p++)
		KUNIT_EXPECT_EQ(test, kdsm_home_of(&g, p), p % 3 + 1);
	g.block = true;
	for (p = 0; p < g.npages; p++) {
		u8 h = kdsm_home_of(&g, p);

		KUNIT_ASSERT_TRUE(test, h >= 1 && h <= 3);
		if (p)	/* blocks: never decreasing */
			KUNIT_EXPECT_GE(test, h, kdsm_home_of(&g, p - 1));
		per[h]++;
	}
	KUNIT_EXPECT_EQ(test, per[1], 4U);	/* 0..3 */
	KUNIT_EXPECT_EQ(test, per[2], 3U);	/* 4..6 */
	KUNIT_EXPECT_EQ(test, per[3], 3U);	/* 7..9 */
}

static struct kdsm_msg kdsm_t_msg(u8 type, u32 page, u8 node, u8 acks,
				  u8 flags)
{
	return (struct kdsm_msg){ .type = type, .page = cpu_to_be32(page),
				  .node = node, .acks = acks, .flags = flags };
}

/* @m, @len bytes from @from, must be refused; @what names the case. */
static void kdsm_t_refused(struct kunit *test, struct kdsm_msg m, u32 len,
			   u8 from, const char *what, unsigned int i)
{
	KUNIT_EXPECT_EQ_MSG(test, kdsm_msg_check(&kdsm_t_geo, &m, len, from),
			    -EPROTO, "%s, message %u", what, i);
}

/* Each valid message of each type, then each field broken alone. */
static void kdsm_msg_validation(struct kunit *test)
{
	const struct kdsm_geo *g = &kdsm_t_geo;
	/* page 4 is homed at node 1 (self), page 5 at node 2 */
	const struct {
		struct kdsm_msg m;
		u8 from;
	} ok[] = {
		{ kdsm_t_msg(KDSM_READ_REQ, 4, 0, 0, 0), 3 },
		{ kdsm_t_msg(KDSM_WRITE_REQ, 4, 0, 0, 0), 2 },
		{ kdsm_t_msg(KDSM_DONE, 4, 0, 0, 0), 4 },
		{ kdsm_t_msg(KDSM_FWD_READ, 5, 3, 0, 0), 2 },
		{ kdsm_t_msg(KDSM_FWD_WRITE, 5, 2, 2, KDSM_F_DATA), 2 },
		{ kdsm_t_msg(KDSM_INV, 5, 4, 0, 0), 2 },
		{ kdsm_t_msg(KDSM_INV_ACK, 5, 0, 0, 0), 3 },
		{ kdsm_t_msg(KDSM_READ_REPLY, 5, 0, 0, KDSM_F_DATA), 3 },
		{ kdsm_t_msg(KDSM_READ_REPLY, 5, 3, 0, KDSM_F_FETCH), 2 },
		{ kdsm_t_msg(KDSM_WRITE_REPLY, 5, 0, 2, 0), 4 },
	};
	struct kdsm_msg m;
	unsigned int i;
	u8 from;

	for (i = 0; i < ARRAY_SIZE(ok); i++) {
		m = ok[i].m;
		from = ok[i].from;
		KUNIT_EXPECT_EQ_MSG(test, kdsm_msg_check(g, &m, 32, from), 0,
				    "valid message %u", i);
		kdsm_t_refused(test, m, 31, from, "short", i);
		kdsm_t_refused(test, m, 33, from, "long", i);
		kdsm_t_refused(test, m, 32, 1, "from self", i);
		kdsm_t_refused(test, m, 32, 5, "from no node", i);
		m.page = cpu_to_be32(64);
		kdsm_t_refused(test, m, 32, from, "page", i);
		m = ok[i].m;
		m.reserved0 = cpu_to_be16(1);
		kdsm_t_refused(test, m, 32, from, "reserved0", i);
		m = ok[i].m;
		m.reserved1 = cpu_to_be16(1);
		kdsm_t_refused(test, m, 32, from, "reserved1", i);
		m = ok[i].m;
		m.reserved2 = cpu_to_be64(1);
		kdsm_t_refused(test, m, 32, from, "reserved2", i);
		m = ok[i].m;
		m.arg = cpu_to_be64(1);
		kdsm_t_refused(test, m, 32, from, "arg", i);
		m = ok[i].m;
		m.flags |= 0x80;
		kdsm_t_refused(test, m, 32, from, "flags", i);
		m = ok[i].m;
		m.acks = 4;	/* more than nnodes - 1 */
		kdsm_t_refused(test, m, 32, from, "acks", i);
	}
	i = ARRAY_SIZE(ok);	/* the single cases below */
	kdsm_t_refused(test, kdsm_t_msg(0, 4, 0, 0, 0), 32, 2, "type 0", i);
	kdsm_t_refused(test, kdsm_t_msg(KDSM_MSG_TYPES, 4, 0, 0, 0), 32, 2,
		       "unknown type", i);
	/* requests and DONE only to the page's home */
	kdsm_t_refused(test, kdsm_t_msg(KDSM_READ_REQ, 5, 0, 0, 0), 32, 3,
		       "request to a node not the home", i);
	kdsm_t_refused(test, kdsm_t_msg(KDSM_DONE, 5, 0, 0, 0), 32, 3,
		       "DONE to a node not the home", i);
	/* forwards and invalidations only from it, for another node */
	kdsm_t_refused(test, kdsm_t_msg(KDSM_INV, 5, 4, 0, 0), 32, 3,
		       "INV not from the home", i);
	kdsm_t_refused(test, kdsm_t_msg(KDSM_FWD_READ, 5, 1, 0, 0), 32, 2,
		       "forward for ourselves", i);
	kdsm_t_refused(test, kdsm_t_msg(KDSM_FWD_READ, 5, 0, 0, 0), 32, 2,
		       "forward for node 0", i);
	kdsm_t_refused(test, kdsm_t_msg(KDSM_FWD_WRITE, 5, 5, 0, 0), 32, 2,
		       "forward for no node", i);
	/* a node field where none belongs */
	kdsm_t_refused(test, kdsm_t_msg(KDSM_INV_ACK, 5, 2, 0, 0), 32, 3,
		       "node in an ack", i);
	kdsm_t_refused(test, kdsm_t_msg(KDSM_READ_REQ, 4, 2, 0, 0), 32, 3,
		       "node in a request", i);
	kdsm_t_refused(test, kdsm_t_msg(KDSM_READ_REPLY, 5, 2, 0,
					KDSM_F_DATA), 32, 3,
		       "node in a read reply with data", i);
	/* a fetch names another node than us and the home, from the home */
	kdsm_t_refused(test, kdsm_t_msg(KDSM_READ_REPLY, 5, 4, 0,
					KDSM_F_FETCH), 32, 3,
		       "fetch reply not from the home", i);
	kdsm_t_refused(test, kdsm_t_msg(KDSM_READ_REPLY, 5, 1, 0,
					KDSM_F_FETCH), 32, 2,
		       "fetch from ourselves", i);
	kdsm_t_refused(test, kdsm_t_msg(KDSM_READ_REPLY, 5, 2, 0,
					KDSM_F_FETCH), 32, 2,
		       "fetch from the home", i);
	kdsm_t_refused(test, kdsm_t_msg(KDSM_READ_REPLY, 5, 0, 0,
					KDSM_F_FETCH), 32, 2,
		       "fetch from node 0", i);
	kdsm_t_refused(test, kdsm_t_msg(KDSM_READ_REPLY, 5, 3, 0,
					KDSM_F_FETCH | KDSM_F_DATA), 32, 2,
		       "fetch and data", i);
	kdsm_t_refused(test, kdsm_t_msg(KDSM_READ_REPLY, 5, 0, 0, 0), 32, 3,
		       "read reply without data", i);
	kdsm_t_refused(test, kdsm_t_msg(KDSM_FETCHED, 5, 0, 0, 0), 32, 3,
		       "the local completion event on the wire", i);
	m = kdsm_t_msg(KDSM_READ_REPLY, 5, 3, 0, KDSM_F_FETCH);
	KUNIT_EXPECT_EQ_MSG(test, kdsm_msg_check(&(struct kdsm_geo){
		.self = 1, .nnodes = 4, .npages = 64 }, &m, 32, 2), -EPROTO,
		"fetch without the option");
}

/*
 * With the fetch option the home answers a read with the owner's id when
 * the owner is another node holding the page READ, and forwards it
 * otherwise; the requester reads, and its completion grants the page.
 */
static void kdsm_fetch_read(struct kunit *test)
{
	struct kdsm_geo g = { .self = 2, .nnodes = 4, .npages = 64,
			      .fetch = true };
	struct kdsm_act acts[KDSM_MAX_ACTS];
	struct kdsm_home h = { .owner = 3, .copyset = BIT(4 - 1) };
	struct kdsm_page pg = {};
	struct kdsm_msg m;
	int n;

	/* page 5: home node 2; owner 3 READ (node 4 shares), node 1 asks */
	n = kdsm_home_request(&g, &h, 1, false, acts);
	KUNIT_ASSERT_EQ(test, n, 1);
	KUNIT_EXPECT_EQ(test, acts[0].type, KDSM_READ_REPLY);
	KUNIT_EXPECT_EQ(test, acts[0].to, 1);
	KUNIT_EXPECT_EQ(test, acts[0].node, 3);
	KUNIT_EXPECT_EQ(test, acts[0].flags, KDSM_F_FETCH);
	KUNIT_EXPECT_TRUE(test, h.busy);
	KUNIT_EXPECT_EQ(test, h.copyset, (u8)(BIT(0) | BIT(3)));
	/* owner RW (no sharers): forwarded; owner the home: forwarded */
	h = (struct kdsm_home){ .owner = 3 };
	n = kdsm_home_request(&g, &h, 1, false, acts);
	KUNIT_ASSERT_EQ(test, n, 1);
	KUNIT_EXPECT_EQ(test, acts[0].type, KDSM_FWD_READ);
	h = (struct kdsm_home){ .owner = 2, .copyset = BIT(4 - 1) };
	n = kdsm_home_request(&g, &h, 1, false, acts);
	KUNIT_ASSERT_EQ(test, n, 1);
	KUNIT_EXPECT_EQ(test, acts[0].type, KDSM_FWD_READ);
	/* without the option: forwarded */
	g.fetch = false;
	h = (struct kdsm_home){ .owner = 3, .copyset = BIT(4 - 1) };
	KUNIT_ASSERT_EQ(test, kdsm_home_request(&g, &h, 1, false, acts), 1);
	KUNIT_EXPECT_EQ(test, acts[0].type, KDSM_FWD_READ);

	/* the requester (node 1): fetch, then the completion grants */
	g = (struct kdsm_geo){ .self = 1, .nnodes = 4, .npages = 64,
			       .fetch = true };
	KUNIT_ASSERT_EQ(test, kdsm_fault(&g, &pg, 5, false, acts), 1);
	m = kdsm_t_msg(KDSM_FETCHED, 5, 0, 0, 0);
	KUNIT_EXPECT_EQ(test, kdsm_page_event(&g, &pg, 5, 1, &m, acts),
			-EPROTO);	/* no read in flight */
	m = kdsm_t_msg(KDSM_READ_REPLY, 5, 3, 0, KDSM_F_FETCH);
	n = kdsm_page_event(&g, &pg, 5, 2, &m, acts);
	KUNIT_ASSERT_EQ(test, n, 1);
	KUNIT_EXPECT_EQ(test, acts[0].kind, KDSM_ACT_FETCH);
	KUNIT_EXPECT_EQ(test, acts[0].to, 3);
	KUNIT_EXPECT_EQ(test, pg.prot, KDSM_NONE);	/* not before the data */
	KUNIT_EXPECT_EQ(test, kdsm_page_event(&g, &pg, 5, 2, &m, acts),
			-EPROTO);	/* a second reply */
	m = kdsm_t_msg(KDSM_FETCHED, 5, 0, 0, 0);
	n = kdsm_page_event(&g, &pg, 5, 1, &m, acts);
	KUNIT_ASSERT_EQ(test, n, 2);
	KUNIT_EXPECT_EQ(test, acts[0].kind, KDSM_ACT_GRANT);
	KUNIT_EXPECT_EQ(test, acts[0].prot, KDSM_READ);
	KUNIT_EXPECT_EQ(test, acts[1].type, KDSM_DONE);
	KUNIT_EXPECT_EQ(test, acts[1].to, 2);
	KUNIT_EXPECT_EQ(test, pg.prot, KDSM_READ);
	KUNIT_EXPECT_EQ(test, pg.pending, 0);
	KUNIT_EXPECT_EQ(test, kdsm_page_event(&g, &pg, 5, 1, &m, acts),
			-EPROTO);	/* a second completion */
}

/* Events that cannot happen in a state are refused, the state unchanged. */
static void kdsm_refusals(struct kunit *test)
{
	const struct kdsm_geo *g = &kdsm_t_geo;
	struct kdsm_act acts[KDSM_MAX_ACTS];
	struct kdsm_page pg, before;
	struct kdsm_home h, hb;
	struct kdsm_msg m;

	pg = (struct kdsm_page){ .prot = KDSM_READ };
	KUNIT_EXPECT_EQ(test, kdsm_fault(g, &pg, 4, false, acts), -EPROTO);
	pg = (struct kdsm_page){ .pending = KDSM_READ_REQ };
	KUNIT_EXPECT_EQ(test, kdsm_fault(g, &pg, 4, true, acts), -EPROTO);

	/* a forward to a node that does not own the page */
	pg = (struct kdsm_page){ .prot = KDSM_READ };
	before = pg;
	m = kdsm_t_msg(KDSM_FWD_READ, 5, 3, 0, 0);
	KUNIT_EXPECT_EQ(test, kdsm_page_event(g, &pg, 5, 2, &m, acts), -EPROTO);
	KUNIT_EXPECT_EQ(test, memcmp(&pg, &before, sizeof(pg)), 0);
	/* an invalidation of the owner, or of a page not held */
	pg = (struct kdsm_page){ .prot = KDSM_READ, .owner = true };
	m = kdsm_t_msg(KDSM_INV, 5, 3, 0, 0);
	KUNIT_EXPECT_EQ(test, kdsm_page_event(g, &pg, 5, 2, &m, acts), -EPROTO);
	pg = (struct kdsm_page){};
	KUNIT_EXPECT_EQ(test, kdsm_page_event(g, &pg, 5, 2, &m, acts), -EPROTO);
	/* replies and acks nobody asked for */
	m = kdsm_t_msg(KDSM_READ_REPLY, 5, 0, 0, KDSM_F_DATA);
	KUNIT_EXPECT_EQ(test, kdsm_page_event(g, &pg, 5, 3, &m, acts), -EPROTO);
	m = kdsm_t_msg(KDSM_INV_ACK, 5, 0, 0, 0);
	KUNIT_EXPECT_EQ(test, kdsm_page_event(g, &pg, 5, 3, &m, acts), -EPROTO);
	/* a read reply without data; data for a page whose copy is valid */
	pg = (struct kdsm_page){ .pending = KDSM_READ_REQ };
	m = kdsm_t_msg(KDSM_READ_REPLY, 5, 0, 0, 0);
	KUNIT_EXPECT_EQ(test, kdsm_page_event(g, &pg, 5, 3, &m, acts), -EPROTO);
	pg = (struct kdsm_page){ .prot = KDSM_READ,
				 .pending = KDSM_WRITE_REQ };
	m = kdsm_t_msg(KDSM_WRITE_REPLY, 5, 0, 0, KDSM_F_DATA);
	KUNIT_EXPECT_EQ(test, kdsm_page_event(g, &pg, 5, 3, &m, acts), -EPROTO);
	/* more acks than the reply announced, a second reply */
	pg = (struct kdsm_page){ .pending = KDSM_WRITE_REQ, .reply_seen = true,
				 .acks_needed = 1, .acks_seen = 1 };
	m = kdsm_t_msg(KDSM_INV_ACK, 5, 0, 0, 0);
	KUNIT_EXPECT_EQ(test, kdsm_page_event(g, &pg, 5, 3, &m, acts), -EPROTO);
	m = kdsm_t_msg(KDSM_WRITE_REPLY, 5, 0, 1, KDSM_F_DATA);
	KUNIT_EXPECT_EQ(test, kdsm_page_event(g, &pg, 5, 3, &m, acts), -EPROTO);
	/* fewer acks announced than already arrived */
	pg = (struct kdsm_page){ .pending = KDSM_WRITE_REQ, .acks_seen = 2 };
	m = kdsm_t_msg(KDSM_WRITE_REPLY, 5, 0, 1, KDSM_F_DATA);
	KUNIT_EXPECT_EQ(test, kdsm_page_event(g, &pg, 5, 3, &m, acts), -EPROTO);

	/* the home: a holder reading, DONE out of turn, asking twice */
	h = (struct kdsm_home){ .owner = 2, .copyset = BIT(2) };
	hb = h;
	KUNIT_EXPECT_EQ(test, kdsm_home_request(g, &h, 2, false, acts), -EPROTO);
	KUNIT_EXPECT_EQ(test, kdsm_home_request(g, &h, 3, false, acts), -EPROTO);
	h = (struct kdsm_home){ .owner = 2, .busy = true, .cur = 3 };
	KUNIT_EXPECT_EQ(test, kdsm_home_request(g, &h, 3, true, acts), -EPROTO);
	h = hb;
	KUNIT_EXPECT_EQ(test, kdsm_home_done(g, &h, 2, acts), -EPROTO);
	KUNIT_EXPECT_EQ(test, memcmp(&h, &hb, sizeof(h)), 0);
	h = (struct kdsm_home){ .owner = 2, .busy = true, .cur = 3 };
	KUNIT_EXPECT_EQ(test, kdsm_home_done(g, &h, 4, acts), -EPROTO);
	/* busy: the request queues, nothing changes */
	hb = h;
	KUNIT_ASSERT_EQ(test, kdsm_home_request(g, &h, 4, true, acts), 1);
	KUNIT_EXPECT_EQ(test, acts[0].kind, KDSM_ACT_QUEUE);
	KUNIT_EXPECT_EQ(test, memcmp(&h, &hb, sizeof(h)), 0);
}

/* The messages of one write fault with sharers, as the design table says. */
static void kdsm_write_fault_messages(struct kunit *test)
{
	const struct kdsm_geo *g = &kdsm_t_geo;
	struct kdsm_act acts[KDSM_MAX_ACTS];
	struct kdsm_home h = { .owner = 2, .copyset = BIT(2) | BIT(3) };
	int n, i, inv = 0;

	/* node 1 (home of page 4) asks for write: owner 2, sharers 3, 4 */
	n = kdsm_home_request(g, &h, 1, true, acts);
	KUNIT_ASSERT_EQ(test, n, 3);
	for (i = 0; i < n; i++) {
		KUNIT_EXPECT_EQ(test, acts[i].kind, KDSM_ACT_SEND);
		KUNIT_EXPECT_EQ(test, acts[i].node, 1);
		inv += acts[i].type == KDSM_INV;
	}
	KUNIT_EXPECT_EQ(test, inv, 2);
	KUNIT_EXPECT_EQ(test, acts[2].type, KDSM_FWD_WRITE);
	KUNIT_EXPECT_EQ(test, acts[2].to, 2);
	KUNIT_EXPECT_EQ(test, acts[2].acks, 2);
	KUNIT_EXPECT_EQ(test, acts[2].flags, KDSM_F_DATA);
	KUNIT_EXPECT_EQ(test, h.owner, 1);
	KUNIT_EXPECT_EQ(test, h.copyset, 0);
	KUNIT_EXPECT_TRUE(test, h.busy);

	/*
	 * The owner upgrading (it holds READ, so it served a reader, who is
	 * a sharer): the reply comes from home, no data, one ack to wait for.
	 */
	h = (struct kdsm_home){ .owner = 3, .copyset = BIT(1) };
	n = kdsm_home_request(g, &h, 3, true, acts);
	KUNIT_ASSERT_EQ(test, n, 2);
	KUNIT_EXPECT_EQ(test, acts[0].type, KDSM_INV);
	KUNIT_EXPECT_EQ(test, acts[0].to, 2);
	KUNIT_EXPECT_EQ(test, acts[1].type, KDSM_WRITE_REPLY);
	KUNIT_EXPECT_EQ(test, acts[1].to, 3);
	KUNIT_EXPECT_EQ(test, acts[1].acks, 1);
	KUNIT_EXPECT_EQ(test, acts[1].flags, 0);
}

/* ---- the simulated cluster ------------------------------------------ */

#define KDSM_SIM_NODES	4
#define KDSM_SIM_PAGES	3
#define KDSM_SIM_QLEN	64	/* a few messages per page in flight */

struct kdsm_sim_item {
	bool data;		/* page data, else a message */
	bool fetch;		/* an RDMA read of the page from m.node */
	u32 value;		/* the data */
	struct kdsm_msg m;
};

struct kdsm_sim_chan {
	struct kdsm_sim_item q[KDSM_SIM_QLEN];
	u32 head, tail;
};

struct kdsm_sim {
	struct kunit *test;
	struct rnd_state rnd;
	u8 n;
	bool weaken;		/* one sharer keeps its copy after an INV */
	bool bad_fetch;		/* homes fetch from owners that hold RW */
	bool weakened;
	u32 violations;		/* found by the checker */
	u32 refusals;		/* weakened runs only */
	u32 steps, faults, msgs, grants, fetches;
	struct kdsm_geo geo[KDSM_SIM_NODES + 1];
	struct kdsm_page pg[KDSM_SIM_NODES + 1][KDSM_SIM_PAGES];
	u32 val[KDSM_SIM_NODES + 1][KDSM_SIM_PAGES];
	struct kdsm_home home[KDSM_SIM_PAGES];
	struct kdsm_act homeq[KDSM_SIM_PAGES][KDSM_SIM_NODES];
	u8 homeq_len[KDSM_SIM_PAGES];
	u32 latest[KDSM_SIM_PAGES];
	struct kdsm_sim_chan chan[KDSM_SIM_NODES + 1][KDSM_SIM_NODES + 1];
};

static void kdsm_sim_deliver(struct kdsm_sim *s, u8 to, u8 from,
			     const struct kdsm_msg *m);

static void kdsm_sim_push(struct kdsm_sim *s, u8 from, u8 to,
			  struct kdsm_sim_item it)
{
	struct kdsm_sim_chan *c = &s->chan[from][to];

	KUNIT_ASSERT_LT(s->test, c->tail - c->head, (u32)KDSM_SIM_QLEN);
	c->q[c->tail++ % KDSM_SIM_QLEN] = it;
}

/* Run @n actions of node @x for @page. */
static void kdsm_sim_run(struct kdsm_sim *s, u8 x, u32 page,
			 const struct kdsm_act *acts, int n)
{
	struct kdsm_act local[KDSM_MAX_ACTS], next;
	struct kdsm_msg m;
	int i, k;

	KUNIT_ASSERT_GE(s->test, n, 0);
	for (i = 0; i < n; i++) {
		const struct kdsm_act *a = &acts[i];

		switch (a->kind) {
		case KDSM_ACT_SEND:
			m = kdsm_t_msg(a->type, page, a->node, a->acks,
				       a->flags);
			s->msgs++;
			if (a->to == x)
				kdsm_sim_deliver(s, x, x, &m);
			else
				kdsm_sim_push(s, x, a->to,
					      (struct kdsm_sim_item){ .m = m });
			break;
		case KDSM_ACT_DATA:
			KUNIT_ASSERT_NE(s->test, a->to, x);
			kdsm_sim_push(s, x, a->to, (struct kdsm_sim_item){
				.data = true, .value = s->val[x][page] });
			break;
		case KDSM_ACT_FETCH:
			/* the read runs later, on x's own queue */
			KUNIT_ASSERT_NE(s->test, a->to, x);
			if (s->pg[a->to][page].prot != KDSM_READ)
				s->violations++;
			m = kdsm_t_msg(KDSM_FETCHED, page, a->to, 0, 0);
			kdsm_sim_push(s, x, x, (struct kdsm_sim_item){
				.fetch = true, .m = m });
			break;
		case KDSM_ACT_GRANT:
			s->grants++;
			break;
		case KDSM_ACT_REVOKE:
			break;
		case KDSM_ACT_QUEUE:
			/* one request per node and page at most */
			for (k = 0; k < s->homeq_len[page]; k++)
				KUNIT_ASSERT_NE(s->test,
						s->homeq[page][k].node, a->node);
			KUNIT_ASSERT_LT(s->test, s->homeq_len[page],
					(u8)KDSM_SIM_NODES);
			s->homeq[page][s->homeq_len[page]++] = *a;
			break;
		case KDSM_ACT_NEXT:
			if (!s->homeq_len[page])
				break;
			next = s->homeq[page][0];
			memmove(s->homeq[page], s->homeq[page] + 1,
				--s->homeq_len[page] * sizeof(next));
			k = kdsm_home_request(&s->geo[x], &s->home[page],
					      next.node,
					      next.type == KDSM_WRITE_REQ,
					      local);
			kdsm_sim_run(s, x, page, local, k);
			break;
		default:
			KUNIT_FAIL(s->test, "unknown action %u", a->kind);
		}
	}
}

static void kdsm_sim_deliver(struct kdsm_sim *s, u8 to, u8 from,
			     const struct kdsm_msg *m)
{
	struct kdsm_act acts[KDSM_MAX_ACTS];
	u32 page = be32_to_cpu(m->page);
	int n;

	if (from != to)
		KUNIT_ASSERT_EQ(s->test,
				kdsm_msg_check(&s->geo[to], m, KDSM_MSG_LEN,
					       from), 0);
	switch (m->type) {
	case KDSM_READ_REQ:
	case KDSM_WRITE_REQ:
		n = kdsm_home_request(&s->geo[to], &s->home[page], from,
				      m->type == KDSM_WRITE_REQ, acts);
		/* planted: a home that fetches from any other owner */
		if (s->bad_fetch && n == 1 && acts[0].type == KDSM_FWD_READ &&
		    acts[0].to != to)
			acts[0] = (struct kdsm_act){
				.kind = KDSM_ACT_SEND, .type = KDSM_READ_REPLY,
				.to = from, .node = acts[0].to,
				.flags = KDSM_F_FETCH };
		break;
	case KDSM_DONE:
		n = kdsm_home_done(&s->geo[to], &s->home[page], from, acts);
		break;
	default:
		n = kdsm_page_event(&s->geo[to], &s->pg[to][page], page, from,
				    m, acts);
		/* weakened: the sharer acks but keeps reading its copy */
		if (m->type == KDSM_INV && s->weaken && !s->weakened && n > 0) {
			s->pg[to][page].prot = KDSM_READ;
			s->weakened = true;
		}
	}
	if (n < 0 && (s->weaken || s->bad_fetch)) {	/* planted faults */
		s->refusals++;
		return;
	}
	KUNIT_ASSERT_GE_MSG(s->test, n, 0, "node %u refused type %u from %u",
			    to, m->type, from);
	kdsm_sim_run(s, to, page, acts, n);
}

/* Single writer or many readers; every readable copy is the latest. */
static void kdsm_sim_check(struct kdsm_sim *s)
{
	u32 p, writers, readers;
	u8 x;

	for (p = 0; p < KDSM_SIM_PAGES; p++) {
		writers = 0;
		readers = 0;
		for (x = 1; x <= s->n; x++) {
			if (s->pg[x][p].prot == KDSM_RW)
				writers++;
			else if (s->pg[x][p].prot == KDSM_READ)
				readers++;
			if (s->pg[x][p].prot != KDSM_NONE &&
			    s->val[x][p] != s->latest[p])
				s->violations++;
		}
		if (writers > 1 || (writers && readers))
			s->violations++;
	}
}

/* A random access by node @x: done if allowed, else a fault. */
static void kdsm_sim_access(struct kdsm_sim *s, u8 x, u32 p, bool write)
{
	struct kdsm_act acts[KDSM_MAX_ACTS];
	struct kdsm_page *pg = &s->pg[x][p];

	if (pg->prot >= (write ? KDSM_RW : KDSM_READ)) {
		if (write)
			s->latest[p] = ++s->val[x][p];
		else if (s->val[x][p] != s->latest[p])
			s->violations++;	/* a stale read */
		return;
	}
	if (pg->pending)
		return;		/* kvmem: the task waits for the grant */
	s->faults++;
	kdsm_sim_run(s, x, p, acts, kdsm_fault(&s->geo[x], pg, p, write, acts));
}

static bool kdsm_sim_step(struct kdsm_sim *s, bool faults)
{
	struct kdsm_sim_item it;
	struct kdsm_sim_chan *c;
	u32 start, i, nch = (KDSM_SIM_NODES + 1) * (KDSM_SIM_NODES + 1);
	u8 from, to;

	s->steps++;
	if (faults && prandom_u32_state(&s->rnd) % 3 == 0) {
		u8 x = prandom_u32_state(&s->rnd) % s->n + 1;

		kdsm_sim_access(s, x, prandom_u32_state(&s->rnd) %
				KDSM_SIM_PAGES,
				prandom_u32_state(&s->rnd) % 3 == 0);
		kdsm_sim_check(s);
		return true;
	}
	start = prandom_u32_state(&s->rnd) % nch;
	for (i = 0; i < nch; i++) {
		from = (start + i) % nch / (KDSM_SIM_NODES + 1);
		to = (start + i) % nch % (KDSM_SIM_NODES + 1);
		c = &s->chan[from][to];
		if (c->head == c->tail)
			continue;
		it = c->q[c->head++ % KDSM_SIM_QLEN];
		if (it.fetch) {
			/*
			 * The owner's copy must be READ while it is read
			 * (nobody writes it), and the reader's inaccessible.
			 */
			u32 p = be32_to_cpu(it.m.page);
			u8 o = it.m.node;

			if (s->pg[o][p].prot != KDSM_READ ||
			    !s->pg[o][p].owner || s->pg[to][p].prot != KDSM_NONE)
				s->violations++;
			s->val[to][p] = s->val[o][p];
			s->fetches++;
			it.m.node = 0;
			kdsm_sim_deliver(s, to, to, &it.m);
		} else if (it.data) {
			/*
			 * The RDMA write must land in a page nobody can
			 * read; the reply behind it names the page.
			 */
			u32 p;

			KUNIT_ASSERT_NE(s->test, c->head, c->tail);
			p = be32_to_cpu(c->q[c->head % KDSM_SIM_QLEN].m.page);
			if (s->pg[to][p].prot != KDSM_NONE)
				s->violations++;
			s->val[to][p] = it.value;
		} else {
			kdsm_sim_deliver(s, to, from, &it.m);
		}
		kdsm_sim_check(s);
		return true;
	}
	return faults;
}

static struct kdsm_sim *kdsm_sim_new(struct kunit *test, u8 n, u64 seed,
				     bool weaken, bool block, bool fetch)
{
	struct kdsm_sim *s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);
	u32 p;
	u8 x;

	KUNIT_ASSERT_NOT_NULL(test, s);
	s->test = test;
	s->n = n;
	s->weaken = weaken;
	prandom_seed_state(&s->rnd, seed);
	for (x = 1; x <= n; x++)
		s->geo[x] = (struct kdsm_geo){ .self = x, .nnodes = n,
					       .block = block, .fetch = fetch,
					       .npages = KDSM_SIM_PAGES };
	/* each page starts owned, writable, at its home */
	for (p = 0; p < KDSM_SIM_PAGES; p++) {
		x = kdsm_home_of(&s->geo[1], p);
		s->home[p].owner = x;
		s->pg[x][p] = (struct kdsm_page){ .prot = KDSM_RW,
						  .owner = true };
	}
	return s;
}

static void kdsm_sim_run_to_quiet(struct kdsm_sim *s, u32 steps)
{
	u32 i, p;
	u8 x;

	for (i = 0; i < steps; i++)
		kdsm_sim_step(s, true);
	for (i = 0; i < 100000 && kdsm_sim_step(s, false); i++)
		;
	if (s->weaken || s->bad_fetch)
		return;
	/* quiet: every request answered, every home free */
	for (p = 0; p < KDSM_SIM_PAGES; p++) {
		KUNIT_EXPECT_FALSE(s->test, s->home[p].busy);
		KUNIT_EXPECT_EQ(s->test, s->homeq_len[p], 0);
		for (x = 1; x <= s->n; x++)
			KUNIT_EXPECT_EQ(s->test, s->pg[x][p].pending, 0);
	}
}

static void kdsm_sim_coherent(struct kunit *test)
{
	u32 fetches = 0;
	u64 seed;
	u8 n;

	for (n = 2; n <= 4; n++) {
		for (seed = 1; seed <= 20; seed++) {
			struct kdsm_sim *s = kdsm_sim_new(test, n, seed, false,
							  seed & 1, seed & 2);

			kdsm_sim_run_to_quiet(s, 3000);
			KUNIT_EXPECT_EQ_MSG(test, s->violations, 0,
					    "%u nodes, seed %llu", n, seed);
			/* the run did work: faults, messages, grants */
			KUNIT_EXPECT_GT(test, s->faults, 100U);
			KUNIT_EXPECT_GE(test, s->grants, s->faults);
			fetches += s->fetches;
			kunit_kfree(test, s);
		}
	}
	/* the fetch runs read pages (3 and more nodes have sharers) */
	KUNIT_EXPECT_GT(test, fetches, 100U);
}

/* The checker catches a protocol that skips one invalidation. */
static void kdsm_sim_catches_weakened(struct kunit *test)
{
	u32 caught = 0;
	u64 seed;

	for (seed = 1; seed <= 20; seed++) {
		struct kdsm_sim *s = kdsm_sim_new(test, 3, seed, true, false,
						  false);

		kdsm_sim_run_to_quiet(s, 3000);
		KUNIT_ASSERT_TRUE(test, s->weakened);
		caught += s->violations > 0;	/* the checker, not a refusal */
		kunit_kfree(test, s);
	}
	KUNIT_EXPECT_EQ(test, caught, 20U);
}

static struct kdsm_sig kdsm_t_sig(u8 type, u32 id, u8 code, u8 node)
{
	return (struct kdsm_sig){ .type = type, .id = cpu_to_be32(id),
				  .code = code, .node = node };
}

/*
 * Queue-lock messages at node 2 of 4: lock 5's manager is node 2, whose
 * helper is node 3; lock 4's manager is node 1, whose helper is node 2.
 */
static void kdsm_qlock_validation(struct kunit *test)
{
	const struct kdsm_geo g = { .self = 2, .nnodes = 4, .npages = 64 };
	const struct {
		struct kdsm_sig s;
		u8 from;
	} ok[] = {
		{ kdsm_t_sig(KDSM_QL_NEXT, 5, 0, 0), 3 },
		{ kdsm_t_sig(KDSM_QL_PASS, 1023, 0, 0), 4 },
		{ kdsm_t_sig(KDSM_QL_CAS, 4, 3, 1), 1 },	/* swap in */
		{ kdsm_t_sig(KDSM_QL_CAS, 4, 0, 1), 1 },
		{ kdsm_t_sig(KDSM_QL_CAS, 4, 1, 0), 1 },	/* swap out */
		{ kdsm_t_sig(KDSM_QL_CAS_DONE, 5, 0, 4), 3 },
		{ kdsm_t_sig(KDSM_QL_CAS_DONE, 5, KDSM_QL_NO_ATOMICS, 0), 3 },
	};
	const struct {
		struct kdsm_sig s;
		u8 from;
		const char *what;
	} bad[] = {
		{ kdsm_t_sig(KDSM_QL_NEXT, 5, 0, 0), 2, "from itself" },
		{ kdsm_t_sig(KDSM_QL_NEXT, 5, 0, 0), 5, "from no node" },
		{ kdsm_t_sig(KDSM_QL_NEXT, 5, 0, 0), 0, "from node 0" },
		{ kdsm_t_sig(KDSM_QL_NEXT, KDSM_MAX_LOCKS, 0, 0), 3, "id" },
		{ kdsm_t_sig(KDSM_QL_NEXT, 5, 1, 0), 3, "NEXT code" },
		{ kdsm_t_sig(KDSM_QL_PASS, 5, 0, 3), 3, "PASS node" },
		{ kdsm_t_sig(KDSM_QL_CAS, 5, 3, 1), 1, "CAS not from the manager" },
		{ kdsm_t_sig(KDSM_QL_CAS, 7, 3, 4), 4, "CAS to a non-helper" },
		{ kdsm_t_sig(KDSM_QL_CAS, 4, 1, 1), 1, "CAS self -> self" },
		{ kdsm_t_sig(KDSM_QL_CAS, 4, 3, 4), 1, "CAS of another node" },
		{ kdsm_t_sig(KDSM_QL_CAS, 4, 1, 3), 1, "CAS out to a node" },
		{ kdsm_t_sig(KDSM_QL_CAS, 4, 5, 1), 1, "CAS compare > nnodes" },
		{ kdsm_t_sig(KDSM_QL_CAS_DONE, 4, 0, 1), 1, "DONE for no manager" },
		{ kdsm_t_sig(KDSM_QL_CAS_DONE, 5, 0, 1), 4, "DONE not from the helper" },
		{ kdsm_t_sig(KDSM_QL_CAS_DONE, 5, 0, 5), 3, "DONE tail > nnodes" },
		{ kdsm_t_sig(KDSM_QL_CAS_DONE, 5, 2, 0), 3, "DONE code" },
		{ kdsm_t_sig(KDSM_QL_CAS_DONE, 5, 1, 2), 3, "DONE refused, tail" },
		{ kdsm_t_sig(KDSM_BAR_GO, 5, 0, 0), 3, "another type" },
	};
	struct kdsm_sig s;
	unsigned int i, b;

	for (i = 0; i < ARRAY_SIZE(ok); i++)
		KUNIT_EXPECT_EQ_MSG(test, kdsm_q_check(&g, &ok[i].s, ok[i].from),
				    0, "valid message %u", i);
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		KUNIT_EXPECT_EQ_MSG(test, kdsm_q_check(&g, &bad[i].s,
						       bad[i].from),
				    -EPROTO, "%s", bad[i].what);
	/* every reserved byte, and the generation, of every valid one */
	for (i = 0; i < ARRAY_SIZE(ok); i++) {
		s = ok[i].s;
		s.gen = cpu_to_be32(1);
		KUNIT_EXPECT_EQ(test, kdsm_q_check(&g, &s, ok[i].from), -EPROTO);
		s = ok[i].s;
		s.reserved0 = 1;
		KUNIT_EXPECT_EQ(test, kdsm_q_check(&g, &s, ok[i].from), -EPROTO);
		for (b = 0; b < sizeof(s.reserved); b++) {
			s = ok[i].s;
			s.reserved[b] = 0x80;
			KUNIT_EXPECT_EQ_MSG(test, kdsm_q_check(&g, &s, ok[i].from),
					    -EPROTO, "message %u, byte %u", i, b);
		}
	}
}

/* The tail a CAS returns, in either byte order; nothing else. */
static void kdsm_qlock_word(struct kunit *test)
{
	const struct kdsm_geo g = { .self = 1, .nnodes = 4, .npages = 64 };
	u64 v;

	for (v = 0; v <= 4; v++) {
		KUNIT_EXPECT_EQ(test, kdsm_q_word(&g, v), (int)v);
		KUNIT_EXPECT_EQ(test, kdsm_q_word(&g, swab64(v)), (int)v);
	}
	KUNIT_EXPECT_EQ(test, kdsm_q_word(&g, 5), -EPROTO);
	KUNIT_EXPECT_EQ(test, kdsm_q_word(&g, swab64(5)), -EPROTO);
	KUNIT_EXPECT_EQ(test, kdsm_q_word(&g, 0x100), -EPROTO);
	KUNIT_EXPECT_EQ(test, kdsm_q_word(&g, U64_MAX), -EPROTO);
}

/* A release, an abandon, and a NEXT that comes before the CAS result. */
static void kdsm_qlock_transitions(struct kunit *test)
{
	const struct kdsm_geo g = { .self = 2, .nnodes = 3, .npages = 64 };
	struct kdsm_qlock q = {};
	struct kdsm_qact_arg a;

	KUNIT_EXPECT_EQ(test, kdsm_q_release(&q), -EPERM);
	KUNIT_ASSERT_EQ(test, kdsm_q_acquire(&q), 0);
	KUNIT_EXPECT_EQ(test, kdsm_q_acquire(&q), -EBUSY);
	KUNIT_EXPECT_TRUE(test, kdsm_q_busy(&q));
	KUNIT_ASSERT_EQ(test, kdsm_q_action(&g, &q, &a), KDSM_QA_CAS);
	KUNIT_EXPECT_EQ(test, a.cmp, 0);
	KUNIT_EXPECT_EQ(test, a.swap, 2);
	kdsm_q_performed(&q, KDSM_QA_CAS);
	KUNIT_EXPECT_EQ(test, kdsm_q_action(&g, &q, &a), KDSM_QA_NONE);
	/* a PASS before we asked for it, a result we did not ask for */
	KUNIT_EXPECT_EQ(test, kdsm_q_pass(&q, 1), -EPROTO);
	/* the tail was 3: again, expecting 3 */
	KUNIT_EXPECT_EQ(test, kdsm_q_cas_result(&g, &q, 3), KDSM_Q_RETRY);
	KUNIT_EXPECT_EQ(test, kdsm_q_cas_result(&g, &q, 3), -EPROTO);
	KUNIT_ASSERT_EQ(test, kdsm_q_action(&g, &q, &a), KDSM_QA_CAS);
	KUNIT_EXPECT_EQ(test, a.cmp, 3);
	kdsm_q_performed(&q, KDSM_QA_CAS);
	/* node 1 swapped in behind us; its NEXT overtakes our result */
	KUNIT_EXPECT_EQ(test, kdsm_q_next(&g, &q, 1), 0);
	KUNIT_EXPECT_EQ(test, kdsm_q_next(&g, &q, 3), -EPROTO);
	KUNIT_EXPECT_EQ(test, kdsm_q_cas_result(&g, &q, 3), 0);
	KUNIT_ASSERT_EQ(test, kdsm_q_action(&g, &q, &a), KDSM_QA_NEXT);
	KUNIT_EXPECT_EQ(test, a.to, 3);
	kdsm_q_performed(&q, KDSM_QA_NEXT);
	/* the waiter dies; node 3 passes; the lock goes straight to node 1 */
	kdsm_q_abandon(&q);
	KUNIT_EXPECT_FALSE(test, kdsm_q_collect(&q));
	KUNIT_EXPECT_FALSE(test, kdsm_q_busy(&q));
	KUNIT_EXPECT_EQ(test, kdsm_q_acquire(&q), -EBUSY);
	KUNIT_EXPECT_EQ(test, kdsm_q_pass(&q, 1), -EPROTO);
	KUNIT_EXPECT_EQ(test, kdsm_q_pass(&q, 3), 0);
	KUNIT_ASSERT_EQ(test, kdsm_q_action(&g, &q, &a), KDSM_QA_PASS);
	KUNIT_EXPECT_EQ(test, a.to, 1);
	kdsm_q_performed(&q, KDSM_QA_PASS);
	KUNIT_EXPECT_EQ(test, q.state, KDSM_Q_IDLE);
	/* alone: held at once, freed by a CAS that finds us */
	KUNIT_ASSERT_EQ(test, kdsm_q_acquire(&q), 0);
	kdsm_q_performed(&q, kdsm_q_action(&g, &q, &a));
	KUNIT_EXPECT_EQ(test, kdsm_q_cas_result(&g, &q, 0), KDSM_Q_GRANTED);
	KUNIT_EXPECT_TRUE(test, kdsm_q_collect(&q));
	KUNIT_EXPECT_EQ(test, kdsm_q_release(&q), 0);
	KUNIT_EXPECT_EQ(test, kdsm_q_release(&q), -EPERM);
	KUNIT_ASSERT_EQ(test, kdsm_q_action(&g, &q, &a), KDSM_QA_CAS);
	KUNIT_EXPECT_EQ(test, a.cmp, 2);
	KUNIT_EXPECT_EQ(test, a.swap, 0);
	kdsm_q_performed(&q, KDSM_QA_CAS);
	KUNIT_EXPECT_EQ(test, kdsm_q_cas_result(&g, &q, 0), -EPROTO);
	KUNIT_EXPECT_EQ(test, kdsm_q_cas_result(&g, &q, 2), 0);
	KUNIT_EXPECT_EQ(test, q.state, KDSM_Q_IDLE);
}

/*
 * A waiter takes its own acquire's outcome, never the next one's: review
 * s9 found a task told "locked" while another task's acquire ran.
 */
static void kdsm_qlock_outcome(struct kunit *test)
{
	const struct kdsm_geo g = { .self = 2, .nnodes = 3, .npages = 64 };
	struct kdsm_qlock q = {};
	struct kdsm_qact_arg a;

	/* A's first CAS cannot be issued: A never got in ... */
	KUNIT_ASSERT_EQ(test, kdsm_q_acquire(&q), 0);
	KUNIT_ASSERT_EQ(test, kdsm_q_action(&g, &q, &a), KDSM_QA_CAS);
	KUNIT_ASSERT_EQ(test, kdsm_q_unsupported(&q), 0);
	KUNIT_EXPECT_TRUE(test, kdsm_q_settled(&q));
	/* ... and B starts only once A has heard so */
	KUNIT_EXPECT_EQ(test, kdsm_q_acquire(&q), -EBUSY);
	KUNIT_EXPECT_TRUE(test, kdsm_q_busy(&q));
	KUNIT_EXPECT_FALSE(test, kdsm_q_collect(&q));
	KUNIT_EXPECT_FALSE(test, kdsm_q_busy(&q));
	KUNIT_EXPECT_EQ(test, kdsm_q_unsupported(&q), -EPROTO);
	/* A gets it; C of the same node frees it before A wakes: A got it */
	KUNIT_ASSERT_EQ(test, kdsm_q_acquire(&q), 0);
	kdsm_q_performed(&q, kdsm_q_action(&g, &q, &a));
	KUNIT_EXPECT_EQ(test, kdsm_q_cas_result(&g, &q, 0), KDSM_Q_GRANTED);
	KUNIT_EXPECT_EQ(test, kdsm_q_release(&q), 0);
	kdsm_q_performed(&q, kdsm_q_action(&g, &q, &a));
	KUNIT_EXPECT_EQ(test, kdsm_q_cas_result(&g, &q, 2), 0);
	KUNIT_EXPECT_EQ(test, q.state, KDSM_Q_IDLE);
	KUNIT_EXPECT_EQ(test, kdsm_q_acquire(&q), -EBUSY);
	KUNIT_EXPECT_TRUE(test, kdsm_q_settled(&q));
	KUNIT_EXPECT_TRUE(test, kdsm_q_collect(&q));
	/* a NEXT named us the tail: "no atomics" cannot be true any more */
	KUNIT_ASSERT_EQ(test, kdsm_q_acquire(&q), 0);
	kdsm_q_performed(&q, kdsm_q_action(&g, &q, &a));
	KUNIT_EXPECT_EQ(test, kdsm_q_next(&g, &q, 1), 0);
	KUNIT_EXPECT_EQ(test, kdsm_q_unsupported(&q), -EPROTO);
}

#define KDSM_QSIM_NODES		4
#define KDSM_QSIM_QLEN		8

/* NEXT, PASS (node to node), a CAS (to the word), a result (back) */
struct kdsm_qsim_item {
	u8 type;
	u8 a;
	u8 b;
};

struct kdsm_qsim_chan {
	struct kdsm_qsim_item q[KDSM_QSIM_QLEN];
	u32 head, tail;
};

struct kdsm_qsim {
	struct kunit *test;
	struct rnd_state rnd;
	u8 n;
	bool busy;		/* tasks still start acquires */
	u64 word;
	struct kdsm_geo geo[KDSM_QSIM_NODES + 1];
	struct kdsm_qlock q[KDSM_QSIM_NODES + 1];
	struct kdsm_qsim_chan msg[KDSM_QSIM_NODES + 1][KDSM_QSIM_NODES + 1];
	struct kdsm_qsim_chan cas[KDSM_QSIM_NODES + 1];
	struct kdsm_qsim_chan res[KDSM_QSIM_NODES + 1];
	u32 refused, overlaps, grants, collected, abandons, retries, steps;
};

static void kdsm_qsim_push(struct kdsm_qsim *s, struct kdsm_qsim_chan *c,
			   struct kdsm_qsim_item it)
{
	KUNIT_ASSERT_LT(s->test, c->tail - c->head, (u32)KDSM_QSIM_QLEN);
	c->q[c->tail++ % KDSM_QSIM_QLEN] = it;
}

static struct kdsm_qsim_item kdsm_qsim_pop(struct kdsm_qsim_chan *c)
{
	return c->q[c->head++ % KDSM_QSIM_QLEN];
}

/* A transition's result: count it; -EPROTO is a bug of the protocol. */
static void kdsm_qsim_ret(struct kdsm_qsim *s, int ret)
{
	if (ret < 0) {
		s->refused++;
		return;
	}
	s->retries += !!(ret & KDSM_Q_RETRY);
	s->grants += !!(ret & KDSM_Q_GRANTED);
}

/*
 * One random enabled event; false when none is.  Events: a task starts,
 * releases or dies; a node does its action; the word runs a CAS; a
 * result or a message arrives (in order per channel, channels in any).
 */
static bool kdsm_qsim_step(struct kdsm_qsim *s)
{
	struct kdsm_qsim_chan *ch[3 * (KDSM_QSIM_NODES + 1) *
				  (KDSM_QSIM_NODES + 1)];
	u8 node[ARRAY_SIZE(ch)], kind[ARRAY_SIZE(ch)];
	struct kdsm_qsim_item it;
	struct kdsm_qact_arg a;
	u32 n = 0, pick;
	u8 x, y;
	int act;

	for (x = 1; x <= s->n; x++) {
		struct kdsm_qlock *q = &s->q[x];

		/* kind 0: the task's move; 1: the action; 2..4: channels */
		if ((q->waiter && kdsm_q_settled(q)) ||
		    (q->state == KDSM_Q_IDLE && s->busy) ||
		    q->state == KDSM_Q_HELD || (kdsm_q_busy(q) && s->busy)) {
			ch[n] = NULL;
			node[n] = x;
			kind[n++] = 0;
		}
		if (kdsm_q_action(&s->geo[x], q, &a) != KDSM_QA_NONE) {
			ch[n] = NULL;
			node[n] = x;
			kind[n++] = 1;
		}
		if (s->cas[x].head != s->cas[x].tail) {
			ch[n] = &s->cas[x];
			node[n] = x;
			kind[n++] = 2;
		}
		if (s->res[x].head != s->res[x].tail) {
			ch[n] = &s->res[x];
			node[n] = x;
			kind[n++] = 3;
		}
		for (y = 1; y <= s->n; y++) {
			if (s->msg[y][x].head == s->msg[y][x].tail)
				continue;
			ch[n] = &s->msg[y][x];
			node[n] = x;
			kind[n++] = 4;
		}
	}
	if (!n)
		return false;
	s->steps++;
	pick = prandom_u32_state(&s->rnd) % n;
	x = node[pick];
	switch (kind[pick]) {
	case 0:		/* the node's tasks: any of them may release */
		if (s->q[x].waiter && kdsm_q_settled(&s->q[x]) &&
		    prandom_u32_state(&s->rnd) % 2) {
			s->collected += kdsm_q_collect(&s->q[x]);
		} else if (s->q[x].state == KDSM_Q_IDLE && s->busy) {
			int want = s->q[x].waiter ? -EBUSY : 0;

			KUNIT_EXPECT_EQ(s->test, kdsm_q_acquire(&s->q[x]), want);
		} else if (s->q[x].state == KDSM_Q_HELD &&
			   prandom_u32_state(&s->rnd) % 8) {
			KUNIT_EXPECT_EQ(s->test, kdsm_q_release(&s->q[x]), 0);
		} else if (s->q[x].waiter &&
			   prandom_u32_state(&s->rnd) % 64 == 0) {
			kdsm_q_abandon(&s->q[x]);	/* killed */
			s->collected += kdsm_q_collect(&s->q[x]);
			s->abandons++;
		}
		break;
	case 1:
		act = kdsm_q_action(&s->geo[x], &s->q[x], &a);
		if (act == KDSM_QA_CAS)
			kdsm_qsim_push(s, &s->cas[x], (struct kdsm_qsim_item){
				.type = KDSM_QA_CAS, .a = a.cmp, .b = a.swap });
		else
			kdsm_qsim_push(s, &s->msg[x][a.to],
				       (struct kdsm_qsim_item){ .type = act });
		kdsm_q_performed(&s->q[x], act);
		break;
	case 2:		/* the word, atomically */
		it = kdsm_qsim_pop(ch[pick]);
		kdsm_qsim_push(s, &s->res[x], (struct kdsm_qsim_item){
			.a = s->word });
		if (s->word == it.a)
			s->word = it.b;
		break;
	case 3:
		it = kdsm_qsim_pop(ch[pick]);
		kdsm_qsim_ret(s, kdsm_q_cas_result(&s->geo[x], &s->q[x], it.a));
		break;
	default:
		y = (ch[pick] - &s->msg[0][x]) / ARRAY_SIZE(s->msg[0]);
		it = kdsm_qsim_pop(ch[pick]);
		if (it.type == KDSM_QA_NEXT)
			kdsm_qsim_ret(s, kdsm_q_next(&s->geo[x], &s->q[x], y));
		else
			kdsm_qsim_ret(s, kdsm_q_pass(&s->q[x], y));
		break;
	}
	for (n = 0, x = 1; x <= s->n; x++)
		n += s->q[x].state == KDSM_Q_HELD;
	s->overlaps += n > 1;
	return true;
}

static void kdsm_qlock_sim(struct kunit *test)
{
	struct kdsm_qsim *s;
	u64 seed;
	u32 i;
	u8 n, x;

	s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, s);
	for (n = 2; n <= KDSM_QSIM_NODES; n++) {
		for (seed = 1; seed <= 30; seed++) {
			memset(s, 0, sizeof(*s));
			s->test = test;
			s->n = n;
			s->busy = true;
			prandom_seed_state(&s->rnd, seed * 131 + n);
			for (x = 1; x <= n; x++)
				s->geo[x] = (struct kdsm_geo){ .self = x,
							       .nnodes = n,
							       .npages = 1 };
			for (i = 0; i < 6000; i++)
				kdsm_qsim_step(s);
			s->busy = false;	/* holders release, all drain */
			for (i = 0; i < 100000 && kdsm_qsim_step(s); i++)
				;
			KUNIT_EXPECT_EQ_MSG(test, s->refused, 0,
					    "%u nodes, seed %llu", n, seed);
			KUNIT_EXPECT_EQ_MSG(test, s->overlaps, 0,
					    "%u nodes, seed %llu", n, seed);
			KUNIT_EXPECT_EQ(test, s->word, 0);
			for (x = 1; x <= n; x++) {
				KUNIT_EXPECT_EQ_MSG(test, s->q[x].state,
						    KDSM_Q_IDLE, "node %u", x);
				KUNIT_EXPECT_FALSE(test, s->q[x].waiter);
			}
			/* each grant reached the waiter it was for, once */
			KUNIT_EXPECT_EQ_MSG(test, s->collected, s->grants,
					    "%u nodes, seed %llu", n, seed);
			/* the run did contend: grants, retries, deaths */
			KUNIT_EXPECT_GT(test, s->grants, 100U);
			KUNIT_EXPECT_GT(test, s->retries, 0U);
			KUNIT_EXPECT_GT(test, s->abandons, 0U);
		}
	}
}

/* The checker catches a home that lets a reader fetch from an RW owner. */
static void kdsm_sim_catches_bad_fetch(struct kunit *test)
{
	u32 caught = 0;
	u64 seed;

	for (seed = 1; seed <= 20; seed++) {
		struct kdsm_sim *s = kdsm_sim_new(test, 3, seed, false, false,
						  true);

		s->bad_fetch = true;
		kdsm_sim_run_to_quiet(s, 3000);
		caught += s->violations > 0;
		kunit_kfree(test, s);
	}
	KUNIT_EXPECT_EQ(test, caught, 20U);
}

static struct kunit_case kdsm_proto_cases[] = {
	KUNIT_CASE(kdsm_home_placement),
	KUNIT_CASE(kdsm_msg_validation),
	KUNIT_CASE(kdsm_refusals),
	KUNIT_CASE(kdsm_write_fault_messages),
	KUNIT_CASE(kdsm_fetch_read),
	KUNIT_CASE(kdsm_sim_coherent),
	KUNIT_CASE(kdsm_sim_catches_weakened),
	KUNIT_CASE(kdsm_sim_catches_bad_fetch),
	KUNIT_CASE(kdsm_qlock_validation),
	KUNIT_CASE(kdsm_qlock_word),
	KUNIT_CASE(kdsm_qlock_transitions),
	KUNIT_CASE(kdsm_qlock_outcome),
	KUNIT_CASE(kdsm_qlock_sim),
	{}
};

static struct kunit_suite kdsm_proto_suite = {
	.name = "kdsm_proto",
	.test_cases = kdsm_proto_cases,
};

kunit_test_suite(kdsm_proto_suite);

MODULE_DESCRIPTION("KUnit tests for the kdsm protocol");
MODULE_LICENSE("GPL");
