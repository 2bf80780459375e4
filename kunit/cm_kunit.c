// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit: validation of connection private data (kverbs/cm.c).
 */
#include <kunit/test.h>
#include <linux/string.h>

#include "../kverbs/kverbs-pri.h"

struct kverbs_cm_out {
	u32 node;
	u16 depth;
	u32 msg;
};

static enum kverbs_cm_reason parse(const void *p, unsigned int len,
				   struct kverbs_cm_out *o)
{
	return kverbs_cm_priv_parse(p, len, &o->node, &o->depth, &o->msg);
}

static void kverbs_cm_roundtrip(struct kunit *test)
{
	struct kverbs_cm_priv p;
	struct kverbs_cm_out o = {};

	kverbs_cm_priv_fill(&p, 7, 128, 4096);
	KUNIT_EXPECT_EQ(test, parse(&p, sizeof(p), &o), KVERBS_CM_OK);
	KUNIT_EXPECT_EQ(test, o.node, 7U);
	KUNIT_EXPECT_EQ(test, o.depth, 128);
	KUNIT_EXPECT_EQ(test, o.msg, 4096U);
}

static void kverbs_cm_padding_accepted(struct kunit *test)
{
	u8 buf[KVERBS_CM_PRIV_MAX] = {};
	struct kverbs_cm_out o = {};

	kverbs_cm_priv_fill((struct kverbs_cm_priv *)buf, 1, KVERBS_CM_MIN_DEPTH,
			    KVERBS_CM_MIN_MSG);
	KUNIT_EXPECT_EQ(test, parse(buf, sizeof(buf), &o), KVERBS_CM_OK);
	KUNIT_EXPECT_EQ(test, o.node, 1U);
	KUNIT_EXPECT_EQ(test, o.depth, KVERBS_CM_MIN_DEPTH);
	KUNIT_EXPECT_EQ(test, o.msg, KVERBS_CM_MIN_MSG);
}

static void kverbs_cm_short(struct kunit *test)
{
	struct kverbs_cm_priv p;
	struct kverbs_cm_out o = { .node = 99 };

	kverbs_cm_priv_fill(&p, 7, 16, 4096);
	KUNIT_EXPECT_EQ(test, parse(NULL, 0, &o), KVERBS_CM_ESHORT);
	KUNIT_EXPECT_EQ(test, parse(NULL, sizeof(p), &o), KVERBS_CM_ESHORT);
	KUNIT_EXPECT_EQ(test, parse(&p, sizeof(p) - 1, &o), KVERBS_CM_ESHORT);
	KUNIT_EXPECT_EQ(test, o.node, 99U);
}

struct kverbs_cm_bad_case {
	const char *name;
	void (*mangle)(struct kverbs_cm_priv *p);
	enum kverbs_cm_reason want;
};

static void m_magic(struct kverbs_cm_priv *p)
{
	p->magic = cpu_to_be32(0x12345678);
}

static void m_version(struct kverbs_cm_priv *p)
{
	p->version = cpu_to_be16(KVERBS_CM_VERSION + 1);
}

/* Any bit but KVERBS_CM_F_AUTH */
static void m_flags(struct kverbs_cm_priv *p)
{
	p->flags = cpu_to_be16(2);
}

static void m_reserved(struct kverbs_cm_priv *p)
{
	p->reserved = cpu_to_be16(0x8000);
}

static void m_node(struct kverbs_cm_priv *p)
{
	p->node_id = 0;
}

static void m_depth0(struct kverbs_cm_priv *p)
{
	p->depth = 0;
}

static void m_depth_big(struct kverbs_cm_priv *p)
{
	p->depth = cpu_to_be16(KVERBS_CM_MAX_DEPTH + 1);
}

static void m_msg_small(struct kverbs_cm_priv *p)
{
	p->max_msg = cpu_to_be32(KVERBS_CM_MIN_MSG - 1);
}

static void m_msg_big(struct kverbs_cm_priv *p)
{
	p->max_msg = cpu_to_be32(KVERBS_CM_MAX_MSG + 1);
}

static const struct kverbs_cm_bad_case kverbs_cm_bad_cases[] = {
	{ .name = "magic", .mangle = m_magic, .want = KVERBS_CM_EMAGIC },
	{ .name = "version", .mangle = m_version, .want = KVERBS_CM_EVERSION },
	{ .name = "flags", .mangle = m_flags, .want = KVERBS_CM_EFLAGS },
	{ "reserved", m_reserved, KVERBS_CM_EFLAGS },
	{ "node 0", m_node, KVERBS_CM_ENODE },
	{ "depth 0", m_depth0, KVERBS_CM_EDEPTH },
	{ "depth too big", m_depth_big, KVERBS_CM_EDEPTH },
	{ "max_msg too small", m_msg_small, KVERBS_CM_EMSG },
	{ "max_msg too big", m_msg_big, KVERBS_CM_EMSG },
};

static void kverbs_cm_bad_desc(const struct kverbs_cm_bad_case *c, char *desc)
{
	strscpy(desc, c->name, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(kverbs_cm_bad, kverbs_cm_bad_cases, kverbs_cm_bad_desc);

/* Each malformed field is refused with its reason; outputs stay untouched. */
static void kverbs_cm_refused(struct kunit *test)
{
	const struct kverbs_cm_bad_case *c = test->param_value;
	struct kverbs_cm_out o = { .node = 42, .depth = 42, .msg = 42 };
	struct kverbs_cm_priv p;

	kverbs_cm_priv_fill(&p, 3, 16, 4096);
	c->mangle(&p);
	KUNIT_EXPECT_EQ(test, parse(&p, sizeof(p), &o), c->want);
	KUNIT_EXPECT_EQ(test, o.node, 42U);
	KUNIT_EXPECT_EQ(test, o.depth, 42);
	KUNIT_EXPECT_EQ(test, o.msg, 42U);
	KUNIT_EXPECT_STRNEQ(test, kverbs_cm_reason_str(c->want), "ok");
}

static void kverbs_cm_bounds_accepted(struct kunit *test)
{
	struct kverbs_cm_out o = {};
	struct kverbs_cm_priv p;

	kverbs_cm_priv_fill(&p, U32_MAX, KVERBS_CM_MAX_DEPTH, KVERBS_CM_MAX_MSG);
	KUNIT_EXPECT_EQ(test, parse(&p, sizeof(p), &o), KVERBS_CM_OK);
	KUNIT_EXPECT_EQ(test, o.node, U32_MAX);
	KUNIT_EXPECT_EQ(test, o.depth, KVERBS_CM_MAX_DEPTH);
	KUNIT_EXPECT_EQ(test, o.msg, KVERBS_CM_MAX_MSG);
	kverbs_cm_priv_fill(&p, 1, KVERBS_CM_MIN_DEPTH, KVERBS_CM_MIN_MSG);
	KUNIT_EXPECT_EQ(test, parse(&p, sizeof(p), &o), KVERBS_CM_OK);
	KUNIT_EXPECT_EQ(test, o.node, 1U);
	KUNIT_EXPECT_EQ(test, o.depth, KVERBS_CM_MIN_DEPTH);
	KUNIT_EXPECT_EQ(test, o.msg, KVERBS_CM_MIN_MSG);
}

static void kverbs_cm_reject_data(struct kunit *test)
{
	struct kverbs_cm_rej rej = {
		.magic = cpu_to_be32(KVERBS_CM_MAGIC),
		.version = cpu_to_be16(KVERBS_CM_VERSION),
		.reason = cpu_to_be16(KVERBS_CM_EDEPTH),
	};

	KUNIT_EXPECT_EQ(test, kverbs_cm_rej_parse(&rej, sizeof(rej)),
			KVERBS_CM_EDEPTH);
	KUNIT_EXPECT_EQ(test, kverbs_cm_rej_parse(&rej, sizeof(rej) - 1),
			KVERBS_CM_REASON_MAX);
	KUNIT_EXPECT_EQ(test, kverbs_cm_rej_parse(NULL, 0),
			KVERBS_CM_REASON_MAX);
	rej.magic = 0;
	KUNIT_EXPECT_EQ(test, kverbs_cm_rej_parse(&rej, sizeof(rej)),
			KVERBS_CM_REASON_MAX);
	KUNIT_EXPECT_STREQ(test, kverbs_cm_reason_str(KVERBS_CM_REASON_MAX),
			   "unknown reason");
	KUNIT_EXPECT_STREQ(test, kverbs_cm_reason_str(0xffff),
			   "unknown reason");
}

/* Deterministic xorshift32, so a failure replays. */
static u32 cm_rand(u32 *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

/* One announcement in host order, and the length it arrives with. */
struct kverbs_cm_fields {
	u32 magic;
	u16 version;
	u16 flags;
	u32 node;
	u16 depth;
	u16 reserved;
	u32 msg;
	unsigned int len;
};

/*
 * The reference: the first rule of include/uapi/kverbs/cm.h that @f
 * breaks, checked in the order of enum kverbs_cm_reason.
 */
static enum kverbs_cm_reason cm_ref_verdict(const struct kverbs_cm_fields *f)
{
	if (f->len < sizeof(struct kverbs_cm_priv))
		return KVERBS_CM_ESHORT;
	if (f->magic != KVERBS_CM_MAGIC)
		return KVERBS_CM_EMAGIC;
	if (f->version != KVERBS_CM_VERSION)
		return KVERBS_CM_EVERSION;
	if ((f->flags & ~KVERBS_CM_F_AUTH) || f->reserved)
		return KVERBS_CM_EFLAGS;
	if (!f->node)
		return KVERBS_CM_ENODE;
	if (f->depth < KVERBS_CM_MIN_DEPTH || f->depth > KVERBS_CM_MAX_DEPTH)
		return KVERBS_CM_EDEPTH;
	if (f->msg < KVERBS_CM_MIN_MSG || f->msg > KVERBS_CM_MAX_MSG)
		return KVERBS_CM_EMSG;
	return KVERBS_CM_OK;
}

/* Half the time a value at or next to a bound (or byte swapped), else any. */
static u32 cm_pick(u32 *x, const u32 *near, unsigned int n)
{
	u32 r = cm_rand(x);

	return r & 1 ? near[(r >> 1) % n] : cm_rand(x);
}

static void cm_mutate(u32 *x, struct kverbs_cm_fields *f)
{
	static const u32 magic[] = { KVERBS_CM_MAGIC, KVERBS_CM_MAGIC ^ 1,
				     KVERBS_CM_MAGIC ^ 0x80000000,
				     ___constant_swab32(KVERBS_CM_MAGIC), 0 };
	static const u32 version[] = { KVERBS_CM_VERSION, KVERBS_CM_VERSION - 1,
				       KVERBS_CM_VERSION + 1,
				       ___constant_swab16(KVERBS_CM_VERSION),
				       0 };
	static const u32 bits16[] = { 0, 1, 0x8000, 0xffff };
	static const u32 node[] = { 1, U32_MAX, 0x01000000 };
	static const u32 depth[] = { 0, KVERBS_CM_MIN_DEPTH - 1,
				     KVERBS_CM_MIN_DEPTH,
				     KVERBS_CM_MIN_DEPTH + 1,
				     KVERBS_CM_MAX_DEPTH - 1,
				     KVERBS_CM_MAX_DEPTH,
				     KVERBS_CM_MAX_DEPTH + 1, 0xffff,
				     ___constant_swab16(KVERBS_CM_MAX_DEPTH) };
	static const u32 msg[] = { 0, KVERBS_CM_MIN_MSG - 1, KVERBS_CM_MIN_MSG,
				   KVERBS_CM_MIN_MSG + 1, KVERBS_CM_MAX_MSG - 1,
				   KVERBS_CM_MAX_MSG, KVERBS_CM_MAX_MSG + 1,
				   U32_MAX,
				   ___constant_swab32(KVERBS_CM_MIN_MSG) };
	static const u32 len[] = { 0, sizeof(struct kverbs_cm_priv) - 1,
				   sizeof(struct kverbs_cm_priv),
				   KVERBS_CM_PRIV_MAX };

	switch (cm_rand(x) % 8) {
	case 0:
		f->magic = cm_pick(x, magic, ARRAY_SIZE(magic));
		break;
	case 1:
		f->version = cm_pick(x, version, ARRAY_SIZE(version));
		break;
	case 2:
		f->flags = cm_pick(x, bits16, ARRAY_SIZE(bits16));
		break;
	case 3:
		f->reserved = cm_pick(x, bits16, ARRAY_SIZE(bits16));
		break;
	case 4:	/* 0 is the one node id refused */
		f->node = cm_rand(x) & 1 ? 0 : cm_pick(x, node, ARRAY_SIZE(node));
		break;
	case 5:
		f->depth = cm_pick(x, depth, ARRAY_SIZE(depth));
		break;
	case 6:
		f->msg = cm_pick(x, msg, ARRAY_SIZE(msg));
		break;
	default:
		f->len = cm_pick(x, len, ARRAY_SIZE(len)) %
			 (KVERBS_CM_PRIV_MAX + 1);
		break;
	}
}

/*
 * Random announcements: a valid one with random fields and random padding,
 * half of them with one or two fields changed, often to a value at or next
 * to a bound so that a change may keep it valid.  The verdict must be the
 * reference's, an accepted announcement must come back exactly, and a
 * refused one must leave the outputs alone.  Both verdicts, and every
 * reason, must come up often.
 */
static void kverbs_cm_random(struct kunit *test)
{
	const struct kverbs_cm_out unset = { .node = 0xa5a5a5a5,
					     .depth = 0xa5a5,
					     .msg = 0xa5a5a5a5 };
	u32 x = 0x9e3779b9, n, i, accepted = 0, refused = 0;
	static const unsigned int changes[] = { 0, 0, 1, 2 };
	u32 by_reason[KVERBS_CM_REASON_MAX] = {};
	u8 buf[KVERBS_CM_PRIV_MAX];

	for (n = 0; n < 20000; n++) {
		struct kverbs_cm_out o = unset;
		struct kverbs_cm_fields f;
		struct kverbs_cm_priv p;
		enum kverbs_cm_reason want, got;
		unsigned int k;

		f.magic = KVERBS_CM_MAGIC;
		f.version = KVERBS_CM_VERSION;
		f.flags = 0;
		f.reserved = 0;
		f.node = cm_rand(&x);	/* xorshift never yields 0 */
		f.depth = KVERBS_CM_MIN_DEPTH + cm_rand(&x) %
			  (KVERBS_CM_MAX_DEPTH - KVERBS_CM_MIN_DEPTH + 1);
		f.msg = KVERBS_CM_MIN_MSG + cm_rand(&x) %
			(KVERBS_CM_MAX_MSG - KVERBS_CM_MIN_MSG + 1);
		f.len = sizeof(p) + cm_rand(&x) %
			(KVERBS_CM_PRIV_MAX - sizeof(p) + 1);
		k = changes[cm_rand(&x) % ARRAY_SIZE(changes)];
		for (i = 0; i < k; i++)
			cm_mutate(&x, &f);

		/* Encode by hand, then random bytes past the header. */
		p.magic = cpu_to_be32(f.magic);
		p.version = cpu_to_be16(f.version);
		p.flags = cpu_to_be16(f.flags);
		p.node_id = cpu_to_be32(f.node);
		p.depth = cpu_to_be16(f.depth);
		p.reserved = cpu_to_be16(f.reserved);
		p.max_msg = cpu_to_be32(f.msg);
		memcpy(buf, &p, sizeof(p));
		for (i = sizeof(p); i < sizeof(buf); i++)
			buf[i] = cm_rand(&x);

		want = cm_ref_verdict(&f);
		got = parse(buf, f.len, &o);
		KUNIT_ASSERT_EQ_MSG(test, got, want,
				    "#%u: magic %#x version %u flags %#x reserved %#x node %u depth %u max_msg %u len %u",
				    n, f.magic, f.version, f.flags, f.reserved,
				    f.node, f.depth, f.msg, f.len);
		by_reason[want]++;
		if (want == KVERBS_CM_OK) {
			accepted++;
			KUNIT_ASSERT_EQ_MSG(test, o.node, f.node, "#%u", n);
			KUNIT_ASSERT_EQ_MSG(test, o.depth, f.depth, "#%u", n);
			KUNIT_ASSERT_EQ_MSG(test, o.msg, f.msg, "#%u", n);
		} else {
			refused++;
			KUNIT_ASSERT_EQ_MSG(test, o.node, unset.node, "#%u", n);
			KUNIT_ASSERT_EQ_MSG(test, o.depth, unset.depth, "#%u", n);
			KUNIT_ASSERT_EQ_MSG(test, o.msg, unset.msg, "#%u", n);
		}
	}
	kunit_info(test, "%u of 20000 random announcements accepted, %u refused\n",
		   accepted, refused);
	KUNIT_EXPECT_GE(test, accepted, 5000U);
	KUNIT_EXPECT_GE(test, refused, 5000U);
	for (i = KVERBS_CM_ESHORT; i <= KVERBS_CM_EMSG; i++)
		KUNIT_EXPECT_GE_MSG(test, by_reason[i], 200U, "reason %u", i);
}

static struct kunit_case kverbs_cm_cases[] = {
	KUNIT_CASE(kverbs_cm_roundtrip),
	KUNIT_CASE(kverbs_cm_padding_accepted),
	KUNIT_CASE(kverbs_cm_short),
	KUNIT_CASE_PARAM(kverbs_cm_refused, kverbs_cm_bad_gen_params),
	KUNIT_CASE(kverbs_cm_bounds_accepted),
	KUNIT_CASE(kverbs_cm_reject_data),
	KUNIT_CASE(kverbs_cm_random),
	{}
};

static struct kunit_suite kverbs_cm_suite = {
	.name = "kverbs_cm",
	.test_cases = kverbs_cm_cases,
};

kunit_test_suite(kverbs_cm_suite);

MODULE_DESCRIPTION("KUnit tests for kverbs connection parameters");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS(KVERBS_KUNIT_NS);
