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

static void m_flags(struct kverbs_cm_priv *p)
{
	p->flags = cpu_to_be16(1);
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
	kverbs_cm_priv_fill(&p, 1, KVERBS_CM_MIN_DEPTH, KVERBS_CM_MIN_MSG);
	KUNIT_EXPECT_EQ(test, parse(&p, sizeof(p), &o), KVERBS_CM_OK);
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

/*
 * Random private data: never accepted unless every field is in bounds, and
 * an accepted one reproduces exactly.  Deterministic xorshift so a failure
 * replays.
 */
static void kverbs_cm_random(struct kunit *test)
{
	u32 x = 0x9e3779b9, n, accepted = 0;
	u8 buf[KVERBS_CM_PRIV_MAX];

	for (n = 0; n < 20000; n++) {
		struct kverbs_cm_out o = {};
		struct kverbs_cm_priv *p = (void *)buf;
		unsigned int i, len;
		enum kverbs_cm_reason r;

		for (i = 0; i < sizeof(buf); i++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			buf[i] = x;
		}
		/* Half the time keep magic and version so deeper checks run. */
		if (n & 1) {
			p->magic = cpu_to_be32(KVERBS_CM_MAGIC);
			p->version = cpu_to_be16(KVERBS_CM_VERSION);
			if (n & 2) {
				p->flags = 0;
				p->reserved = 0;
			}
		}
		len = x % (sizeof(buf) + 1);
		r = parse(buf, len, &o);
		KUNIT_ASSERT_LT(test, (unsigned int)r, KVERBS_CM_REASON_MAX);
		if (r != KVERBS_CM_OK)
			continue;
		accepted++;
		KUNIT_ASSERT_GE(test, len, sizeof(*p));
		KUNIT_ASSERT_EQ(test, o.node, be32_to_cpu(p->node_id));
		KUNIT_ASSERT_NE(test, o.node, 0U);
		KUNIT_ASSERT_GE(test, o.depth, KVERBS_CM_MIN_DEPTH);
		KUNIT_ASSERT_LE(test, o.depth, KVERBS_CM_MAX_DEPTH);
		KUNIT_ASSERT_GE(test, o.msg, KVERBS_CM_MIN_MSG);
		KUNIT_ASSERT_LE(test, o.msg, KVERBS_CM_MAX_MSG);
	}
	kunit_info(test, "%u of 20000 random announcements accepted\n",
		   accepted);
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
