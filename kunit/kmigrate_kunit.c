// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit: kmigrate's checks of what arrives from a peer and from the user
 * (samples/kmigrate/check.h).  Each case builds a valid message, checks
 * that it passes, then breaks one field at a time and checks that it is
 * refused.
 */
#include <kunit/test.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "../samples/kmigrate/check.h"

static void kmig_kunit_hdr(struct kmig_hdr *h, int type, u32 len)
{
	h->type = cpu_to_be16(type);
	h->version = cpu_to_be16(KMIG_PROTO_VERSION);
	h->len = cpu_to_be32(len);
}

static void kmig_kunit_hdr_check(struct kunit *test)
{
	struct kmig_hdr h;

	kmig_kunit_hdr(&h, KMIG_DONE, sizeof(h));
	KUNIT_EXPECT_EQ(test, kmig_check_hdr(&h, sizeof(h)), KMIG_DONE);
	KUNIT_EXPECT_EQ(test, kmig_check_hdr(&h, sizeof(h) - 1), -EPROTO);
	KUNIT_EXPECT_EQ(test, kmig_check_hdr(&h, sizeof(h) + 4), -EPROTO);
	h.version = cpu_to_be16(KMIG_PROTO_VERSION + 1);
	KUNIT_EXPECT_EQ(test, kmig_check_hdr(&h, sizeof(h)), -EPROTO);
	kmig_kunit_hdr(&h, 0, sizeof(h));
	KUNIT_EXPECT_EQ(test, kmig_check_hdr(&h, sizeof(h)), -EPROTO);
	kmig_kunit_hdr(&h, __KMIG_MSG_MAX, sizeof(h));
	KUNIT_EXPECT_EQ(test, kmig_check_hdr(&h, sizeof(h)), -EPROTO);
}

#define KMIG_KUNIT_PATH	"/kvlab/bin/kmigrate-sum"
#define KMIG_KUNIT_ARGS	"kmigrate-sum\0--mb\0008"

/* A valid PREPARE of 1000 pages at 1 GiB, in 1 MiB extents */
static struct kmig_prepare *kmig_kunit_prepare(struct kunit *test, u32 *len)
{
	u32 path_len = sizeof(KMIG_KUNIT_PATH), args_len = sizeof(KMIG_KUNIT_ARGS);
	struct kmig_prepare *p;

	*len = sizeof(*p) + path_len + args_len + 16;
	p = kunit_kzalloc(test, *len, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, p);
	kmig_kunit_hdr(&p->hdr, KMIG_PREPARE, *len);
	p->va = cpu_to_be64(1ULL << 30);
	p->npages = cpu_to_be32(1000);
	p->extent_shift = cpu_to_be32(20);
	p->nkeys = cpu_to_be32(4);
	p->path_len = cpu_to_be16(path_len);
	p->args_len = cpu_to_be16(args_len);
	p->fp_len = cpu_to_be16(16);
	memcpy(p->data, KMIG_KUNIT_PATH, path_len);
	memcpy(p->data + path_len, KMIG_KUNIT_ARGS, args_len);
	return p;
}

static void kmig_kunit_prepare_check(struct kunit *test)
{
	struct kmig_prepare *p;
	u32 len;

	p = kmig_kunit_prepare(test, &len);
	KUNIT_EXPECT_EQ(test, kmig_check_prepare(p, len), 0);
	KUNIT_EXPECT_EQ(test, kmig_check_prepare(p, len - 1), -EPROTO);
	KUNIT_EXPECT_EQ(test, kmig_check_prepare(p, sizeof(*p) - 1), -EPROTO);

#define KMIG_BREAK(assignment) do {					\
		p = kmig_kunit_prepare(test, &len);			\
		(assignment);						\
		KUNIT_EXPECT_EQ_MSG(test, kmig_check_prepare(p, len), -EPROTO, \
				    #assignment);			\
	} while (0)

	KMIG_BREAK(p->va = cpu_to_be64((1ULL << 30) + 1));	/* not aligned */
	KMIG_BREAK(p->va = 0);
	KMIG_BREAK(p->va = cpu_to_be64(KMIG_VA_LIMIT - 4096));	/* runs past */
	KMIG_BREAK(p->npages = 0);
	KMIG_BREAK(p->npages = cpu_to_be32(KMIGRATE_MAX_PAGES + 1));
	KMIG_BREAK(p->npages = cpu_to_be32(2000));	/* keys no longer match */
	KMIG_BREAK(p->mode = cpu_to_be32(KMIGRATE_MODE_PRECOPY + 1));
	KMIG_BREAK(p->flags = cpu_to_be32(0x2));
	KMIG_BREAK(p->nkeys = cpu_to_be32(3));
	KMIG_BREAK(p->nkeys = cpu_to_be32(5));
	KMIG_BREAK(p->extent_shift = cpu_to_be32(11));
	KMIG_BREAK(p->extent_shift = cpu_to_be32(41));
	KMIG_BREAK(p->path_len = cpu_to_be16(1));
	KMIG_BREAK(p->path_len = cpu_to_be16(sizeof(KMIG_KUNIT_PATH) + 1));
	KMIG_BREAK(p->args_len = 0);
	KMIG_BREAK(p->fp_len = 0);
	KMIG_BREAK(p->fp_len = cpu_to_be16(KMIGRATE_FP_MAX + 1));
	KMIG_BREAK(p->reserved = cpu_to_be16(1));
	KMIG_BREAK(p->reserved2 = cpu_to_be32(1));
	KMIG_BREAK(p->data[0] = 'k');			/* relative path */
	KMIG_BREAK(p->data[3] = '\0');			/* NUL inside it */
	KMIG_BREAK(p->data[sizeof(KMIG_KUNIT_PATH) - 1] = 'x');	/* no NUL */
	/* argv not NUL-terminated */
	KMIG_BREAK(p->data[sizeof(KMIG_KUNIT_PATH) +
			   sizeof(KMIG_KUNIT_ARGS) - 1] = 'x');
#undef KMIG_BREAK
}

static void kmig_kunit_keys_check(struct kunit *test)
{
	u32 len = sizeof(struct kmig_keys) + 3 * sizeof(__be32);
	struct kmig_keys *k = kunit_kzalloc(test, len, GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, k);
	kmig_kunit_hdr(&k->hdr, KMIG_KEYS, len);
	k->first = cpu_to_be32(2);
	k->count = cpu_to_be32(3);
	KUNIT_EXPECT_EQ(test, kmig_check_keys(k, len, 5, 2), 0);
	/* out of order, past the grant, a wrong count, a wrong length */
	KUNIT_EXPECT_EQ(test, kmig_check_keys(k, len, 5, 1), -EPROTO);
	KUNIT_EXPECT_EQ(test, kmig_check_keys(k, len, 4, 2), -EPROTO);
	KUNIT_EXPECT_EQ(test, kmig_check_keys(k, len - 4, 5, 2), -EPROTO);
	KUNIT_EXPECT_EQ(test, kmig_check_keys(k, sizeof(*k) - 1, 5, 2),
			-EPROTO);
	k->count = 0;
	KUNIT_EXPECT_EQ(test, kmig_check_keys(k, sizeof(*k), 5, 2), -EPROTO);
	k->count = cpu_to_be32(KMIG_KEYS_PER_MSG + 1);
	KUNIT_EXPECT_EQ(test, kmig_check_keys(k, len, 5000, 2), -EPROTO);
	/* a count whose byte length wraps */
	k->count = cpu_to_be32(0x40000001);
	KUNIT_EXPECT_EQ(test, kmig_check_keys(k, sizeof(*k) + 4, ~0U, 2),
			-EPROTO);
}

static struct kmig_frozen *kmig_kunit_frozen(struct kunit *test, u32 *len)
{
	struct kmig_frozen *f;

	*len = sizeof(*f) + 2 * sizeof(f->range[0]) + 64;
	f = kunit_kzalloc(test, *len, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, f);
	kmig_kunit_hdr(&f->hdr, KMIG_FROZEN, *len);
	f->nranges = cpu_to_be16(2);
	f->ctx_len = cpu_to_be16(64);
	f->range[0].first = cpu_to_be32(0);
	f->range[0].count = cpu_to_be32(10);
	f->range[1].first = cpu_to_be32(900);
	f->range[1].count = cpu_to_be32(100);
	return f;
}

static void kmig_kunit_frozen_check(struct kunit *test)
{
	struct kmig_frozen *f;
	u32 len;

	f = kmig_kunit_frozen(test, &len);
	KUNIT_EXPECT_EQ(test, kmig_check_frozen(f, len, 1000), 0);
	KUNIT_EXPECT_EQ(test, kmig_check_frozen(f, len, 999), -EPROTO);
	KUNIT_EXPECT_EQ(test, kmig_check_frozen(f, len - 1, 1000), -EPROTO);
	f->range[1].first = cpu_to_be32(5);	/* overlaps */
	KUNIT_EXPECT_EQ(test, kmig_check_frozen(f, len, 1000), -EPROTO);
	f = kmig_kunit_frozen(test, &len);
	f->range[1].count = 0;			/* empty */
	KUNIT_EXPECT_EQ(test, kmig_check_frozen(f, len, 1000), -EPROTO);
	f = kmig_kunit_frozen(test, &len);
	f->range[1].count = cpu_to_be32(0xffffffff);	/* wraps */
	KUNIT_EXPECT_EQ(test, kmig_check_frozen(f, len, 1000), -EPROTO);
	f = kmig_kunit_frozen(test, &len);
	f->ctx_len = 0;
	KUNIT_EXPECT_EQ(test, kmig_check_frozen(f, len, 1000), -EPROTO);
	f = kmig_kunit_frozen(test, &len);
	f->nranges = 0;
	KUNIT_EXPECT_EQ(test, kmig_check_frozen(f, len - 16, 1000), -EPROTO);
	f = kmig_kunit_frozen(test, &len);
	f->reserved = cpu_to_be32(1);
	KUNIT_EXPECT_EQ(test, kmig_check_frozen(f, len, 1000), -EPROTO);
}

static void kmig_kunit_small_check(struct kunit *test)
{
	struct kmig_ready r = {};
	struct kmig_done d = {};

	kmig_kunit_hdr(&r.hdr, KMIG_READY, sizeof(r));
	KUNIT_EXPECT_EQ(test, kmig_check_ready(&r, sizeof(r)), 0);
	r.status = cpu_to_be32(EXDEV);
	KUNIT_EXPECT_EQ(test, kmig_check_ready(&r, sizeof(r)), 0);
	r.status = cpu_to_be32(-EXDEV);
	KUNIT_EXPECT_EQ(test, kmig_check_ready(&r, sizeof(r)), -EPROTO);
	/* an errno the kernel keeps to itself, or none a destination sends */
	r.status = cpu_to_be32(ERESTARTSYS);
	KUNIT_EXPECT_EQ(test, kmig_check_ready(&r, sizeof(r)), -EPROTO);
	r.status = cpu_to_be32(EPERM);
	KUNIT_EXPECT_EQ(test, kmig_check_ready(&r, sizeof(r)), -EPROTO);
	/* the spawner's refusal (KMIGRATE_IOC_REFUSE) */
	r.status = cpu_to_be32(EACCES);
	KUNIT_EXPECT_EQ(test, kmig_check_ready(&r, sizeof(r)), 0);
	r.status = 0;
	r.reserved = cpu_to_be32(1);
	KUNIT_EXPECT_EQ(test, kmig_check_ready(&r, sizeof(r)), -EPROTO);
	KUNIT_EXPECT_EQ(test, kmig_check_ready(&r, sizeof(r) - 1), -EPROTO);

	kmig_kunit_hdr(&d.hdr, KMIG_DONE, sizeof(d));
	d.status = cpu_to_be32(KMIG_DONE_ABORTED);
	KUNIT_EXPECT_EQ(test, kmig_check_done(&d, sizeof(d)), 0);
	d.status = cpu_to_be32(KMIG_DONE_ABORTED + 1);
	KUNIT_EXPECT_EQ(test, kmig_check_done(&d, sizeof(d)), -EPROTO);
}

static void kmig_kunit_user_check(struct kunit *test)
{
	u32 r[4] = { 0, 1, 5, 2 };

	KUNIT_EXPECT_TRUE(test, kmig_ranges_ok(r, 2, 7, false));
	KUNIT_EXPECT_FALSE(test, kmig_ranges_ok(r, 2, 6, false));
	KUNIT_EXPECT_FALSE(test, kmig_ranges_ok(r, 0, 7, false));
	KUNIT_EXPECT_FALSE(test, kmig_ranges_ok(r, KMIGRATE_MAX_RANGES + 1, 7,
						false));
	KUNIT_EXPECT_EQ(test, kmig_ranges_pages(r, 2, false), 3);
	r[2] = 0;	/* out of order */
	KUNIT_EXPECT_FALSE(test, kmig_ranges_ok(r, 2, 7, false));
	KUNIT_EXPECT_TRUE(test, kmig_arena_ok(1ULL << 30, 10));
	KUNIT_EXPECT_FALSE(test, kmig_arena_ok(0, 10));
	KUNIT_EXPECT_FALSE(test, kmig_arena_ok(1ULL << 30, 0));
	KUNIT_EXPECT_TRUE(test, kmig_path_ok("/a", 3));
	KUNIT_EXPECT_FALSE(test, kmig_path_ok("a/", 3));
	KUNIT_EXPECT_FALSE(test, kmig_path_ok("/a\0b", 5));
	KUNIT_EXPECT_EQ(test, kmig_nkeys(1000, 20), 4);
	KUNIT_EXPECT_EQ(test, kmig_nkeys(1024, 22), 1);
}

static struct kunit_case kmig_check_cases[] = {
	KUNIT_CASE(kmig_kunit_hdr_check),
	KUNIT_CASE(kmig_kunit_prepare_check),
	KUNIT_CASE(kmig_kunit_keys_check),
	KUNIT_CASE(kmig_kunit_frozen_check),
	KUNIT_CASE(kmig_kunit_small_check),
	KUNIT_CASE(kmig_kunit_user_check),
	{}
};

static struct kunit_suite kmig_check_suite = {
	.name = "kmigrate_check",
	.test_cases = kmig_check_cases,
};

kunit_test_suite(kmig_check_suite);

MODULE_DESCRIPTION("KUnit: kmigrate's checks of peer messages");
MODULE_LICENSE("GPL");
