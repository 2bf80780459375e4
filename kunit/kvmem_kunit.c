// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit: the pure logic of kvmem (kmem/ranges.c): batch validation, bitmap
 * coalescing and protection transitions.
 */
#include <kunit/test.h>
#include <linux/bitmap.h>
#include <linux/random.h>

#include "../kmem/kvmem-pri.h"

static void kvmem_ranges_valid(struct kunit *test)
{
	struct kvmem_range ok[] = { { 0, 1 }, { 2, 3 }, { 5, 1 }, { 9, 1 } };

	KUNIT_EXPECT_EQ(test, kvmem_ranges_check(ok, 4, 10), 0);
	KUNIT_EXPECT_EQ(test, kvmem_ranges_check(ok, 1, 1), 0);
}

static void kvmem_ranges_invalid(struct kunit *test)
{
	struct kvmem_range r[2];

	KUNIT_EXPECT_EQ(test, kvmem_ranges_check(r, 0, 10), -EINVAL);
	r[0] = (struct kvmem_range){ 0, 0 };
	KUNIT_EXPECT_EQ(test, kvmem_ranges_check(r, 1, 10), -EINVAL);
	r[0] = (struct kvmem_range){ 10, 1 };
	KUNIT_EXPECT_EQ(test, kvmem_ranges_check(r, 1, 10), -EINVAL);
	r[0] = (struct kvmem_range){ 8, 3 };
	KUNIT_EXPECT_EQ(test, kvmem_ranges_check(r, 1, 10), -EINVAL);
	r[0] = (struct kvmem_range){ 1, U32_MAX };	/* first + count wraps */
	KUNIT_EXPECT_EQ(test, kvmem_ranges_check(r, 1, 10), -EINVAL);
	r[0] = (struct kvmem_range){ 0, 4 };
	r[1] = (struct kvmem_range){ 3, 1 };		/* overlap */
	KUNIT_EXPECT_EQ(test, kvmem_ranges_check(r, 2, 10), -EINVAL);
	r[0] = (struct kvmem_range){ 5, 1 };
	r[1] = (struct kvmem_range){ 1, 1 };		/* out of order */
	KUNIT_EXPECT_EQ(test, kvmem_ranges_check(r, 2, 10), -EINVAL);
	r[1] = (struct kvmem_range){ 6, 1 };		/* adjacent is fine */
	KUNIT_EXPECT_EQ(test, kvmem_ranges_check(r, 2, 10), 0);
	KUNIT_EXPECT_EQ(test, kvmem_ranges_check(r, KVMEM_MAX_RANGES + 1, 10),
			-EINVAL);
}

static void kvmem_bitmap_coalescing(struct kunit *test)
{
	DECLARE_BITMAP(b, 64);
	struct kvmem_range r[8];

	bitmap_zero(b, 64);
	KUNIT_EXPECT_EQ(test, kvmem_bitmap_to_ranges(b, 64, r, 8), 0U);
	bitmap_set(b, 3, 4);
	bitmap_set(b, 7, 1);		/* merges with 3..6 */
	bitmap_set(b, 20, 1);
	bitmap_set(b, 63, 1);
	KUNIT_ASSERT_EQ(test, kvmem_bitmap_to_ranges(b, 64, r, 8), 3U);
	KUNIT_EXPECT_EQ(test, r[0].first, 3U);
	KUNIT_EXPECT_EQ(test, r[0].count, 5U);
	KUNIT_EXPECT_EQ(test, r[1].first, 20U);
	KUNIT_EXPECT_EQ(test, r[1].count, 1U);
	KUNIT_EXPECT_EQ(test, r[2].first, 63U);
	KUNIT_EXPECT_EQ(test, r[2].count, 1U);
	KUNIT_EXPECT_EQ(test, kvmem_bitmap_to_ranges(b, 64, r, 2), 3U);
	bitmap_fill(b, 64);
	KUNIT_ASSERT_EQ(test, kvmem_bitmap_to_ranges(b, 64, r, 8), 1U);
	KUNIT_EXPECT_EQ(test, r[0].count, 64U);
}

/* Random bitmaps: the ranges are valid and cover exactly the set bits. */
static void kvmem_bitmap_random(struct kunit *test)
{
	DECLARE_BITMAP(b, 300);
	DECLARE_BITMAP(back, 300);
	struct kvmem_range *r;
	u32 i, n, j;

	r = kunit_kcalloc(test, 300, sizeof(*r), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, r);
	for (i = 0; i < 2000; i++) {
		get_random_bytes(b, sizeof(b));
		if (i & 1)	/* sparser, longer runs */
			for (j = 0; j < BITS_TO_LONGS(300); j++)
				b[j] &= get_random_long();
		n = kvmem_bitmap_to_ranges(b, 300, r, 300);
		KUNIT_ASSERT_LE(test, n, 150U);
		bitmap_zero(back, 300);
		for (j = 0; j < n; j++)
			bitmap_set(back, r[j].first, r[j].count);
		KUNIT_ASSERT_TRUE(test, bitmap_equal(b, back, 300));
		if (n) {
			KUNIT_ASSERT_EQ(test, kvmem_ranges_check(r, n, 300), 0);
			for (j = 1; j < n; j++)	/* maximal: never adjacent */
				KUNIT_ASSERT_GT(test, r[j].first,
						r[j - 1].first + r[j - 1].count);
		}
	}
}

static void kvmem_transitions(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, kvmem_prot_change(KVMEM_PROT_NONE, KVMEM_PROT_RW),
			KVMEM_GRANT);
	KUNIT_EXPECT_EQ(test, kvmem_prot_change(KVMEM_PROT_READ, KVMEM_PROT_RW),
			KVMEM_GRANT);
	KUNIT_EXPECT_EQ(test, kvmem_prot_change(KVMEM_PROT_RW, KVMEM_PROT_READ),
			KVMEM_REVOKE);
	KUNIT_EXPECT_EQ(test, kvmem_prot_change(KVMEM_PROT_READ,
						KVMEM_PROT_NONE), KVMEM_REVOKE);
	KUNIT_EXPECT_EQ(test, kvmem_prot_change(KVMEM_PROT_READ,
						KVMEM_PROT_READ), KVMEM_SAME);
	KUNIT_EXPECT_FALSE(test, kvmem_prot_allows(KVMEM_PROT_NONE, false));
	KUNIT_EXPECT_TRUE(test, kvmem_prot_allows(KVMEM_PROT_READ, false));
	KUNIT_EXPECT_FALSE(test, kvmem_prot_allows(KVMEM_PROT_READ, true));
	KUNIT_EXPECT_TRUE(test, kvmem_prot_allows(KVMEM_PROT_RW, true));
}

static struct kunit_case kvmem_cases[] = {
	KUNIT_CASE(kvmem_ranges_valid),
	KUNIT_CASE(kvmem_ranges_invalid),
	KUNIT_CASE(kvmem_bitmap_coalescing),
	KUNIT_CASE(kvmem_bitmap_random),
	KUNIT_CASE(kvmem_transitions),
	{}
};

static struct kunit_suite kvmem_suite = {
	.name = "kvmem",
	.test_cases = kvmem_cases,
};

kunit_test_suite(kvmem_suite);

MODULE_DESCRIPTION("KUnit tests for kvmem");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS(KVERBS_KUNIT_NS);
