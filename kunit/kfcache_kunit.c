// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit: kfcache's checks of what arrives from the wire
 * (samples/kfcache/check.h), the only defence of the server and of the
 * client against a malformed peer.  Each case builds a valid message,
 * checks that it passes, then breaks one field at a time and checks that
 * it is refused.
 */
#include <kunit/test.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "../samples/kfcache/check.h"

static void kfc_kunit_attr(struct kfc_attr *a, u32 mode)
{
	memset(a, 0, sizeof(*a));
	a->handle = cpu_to_be64(0x100000001ULL);
	a->ino = cpu_to_be64(12);
	a->mode = cpu_to_be32(mode);
	a->nlink = cpu_to_be32(1);
}

static void kfc_kunit_hdr(struct kfc_hdr *h, u8 op, int status)
{
	memset(h, 0, sizeof(*h));
	h->op = op;
	h->version = KFC_PROTO_VERSION;
	h->status = cpu_to_be32(status);
	h->tag = cpu_to_be32(7);
}

static void kfc_kunit_attr_reply(struct kunit *test)
{
	struct kfc_attr_reply r;
	u32 max = sizeof(r);

	kfc_kunit_hdr(&r.hdr, KFC_LOOKUP | KFC_REPLY, 0);
	kfc_kunit_attr(&r.attr, S_IFREG | 0644);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_LOOKUP, max, &r, sizeof(r)), 0);
	/* another op's reply, a short or long one, room exceeded */
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_GETATTR, max, &r, sizeof(r)),
			-EPROTO);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_LOOKUP, max, &r,
					      sizeof(r) - 1), -EPROTO);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_LOOKUP, max - 8, &r,
					      sizeof(r)), -EPROTO);
	/* an error is a bare header with a plain negative errno */
	r.hdr.status = cpu_to_be32(-ENOENT);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_LOOKUP, max, &r,
					      sizeof(r.hdr)), 0);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_LOOKUP, max, &r, sizeof(r)),
			-EPROTO);
	r.hdr.status = cpu_to_be32(5);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_LOOKUP, max, &r,
					      sizeof(r.hdr)), -EPROTO);
	r.hdr.status = cpu_to_be32(-ERESTARTSYS);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_LOOKUP, max, &r,
					      sizeof(r.hdr)), -EPROTO);
	r.hdr.status = cpu_to_be32(-5000);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_LOOKUP, max, &r,
					      sizeof(r.hdr)), -EPROTO);
	r.hdr.status = 0;
	/* the attributes: a handle, a known type, nothing reserved */
	r.attr.handle = 0;
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_LOOKUP, max, &r, sizeof(r)),
			-EPROTO);
	kfc_kunit_attr(&r.attr, 0170644);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_LOOKUP, max, &r, sizeof(r)),
			-EPROTO);
	kfc_kunit_attr(&r.attr, S_IFDIR | 0755 | 0x10000);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_LOOKUP, max, &r, sizeof(r)),
			-EPROTO);
	kfc_kunit_attr(&r.attr, S_IFDIR | 0755);
	r.attr.access = cpu_to_be32(2);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_LOOKUP, max, &r, sizeof(r)),
			-EPROTO);
}

static void kfc_kunit_read_reply(struct kunit *test)
{
	struct kfc_read_reply r;

	kfc_kunit_hdr(&r.hdr, KFC_READ | KFC_REPLY, 0);
	kfc_kunit_attr(&r.attr, S_IFREG | 0644);
	r.pages = cpu_to_be32(KFC_READ_MAX_PAGES);
	r.reserved = 0;
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READ, sizeof(r), &r,
					      sizeof(r)), 0);
	r.pages = cpu_to_be32(KFC_READ_MAX_PAGES + 1);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READ, sizeof(r), &r,
					      sizeof(r)), -EPROTO);
	/* an error writes no page */
	r.hdr.status = cpu_to_be32(-EIO);
	r.pages = cpu_to_be32(1);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READ, sizeof(r), &r,
					      sizeof(r)), -EPROTO);
	r.pages = 0;
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READ, sizeof(r), &r,
					      sizeof(r)), 0);
	r.hdr.status = 0;
	r.reserved = cpu_to_be32(1);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READ, sizeof(r), &r,
					      sizeof(r)), -EPROTO);
}

/* A READDIR reply with the given names; returns its length. */
static u32 kfc_kunit_readdir(void *buf, const char *const *names, int n,
			     int count)
{
	struct kfc_readdir_reply *r = buf;
	u8 *p = (u8 *)(r + 1);
	int i;

	memset(r, 0, sizeof(*r));
	kfc_kunit_hdr(&r->hdr, KFC_READDIR | KFC_REPLY, 0);
	r->count = cpu_to_be16(count);
	r->eof = 1;
	for (i = 0; i < n; i++) {
		struct kfc_dirent *e = (struct kfc_dirent *)p;
		u8 len = strlen(names[i]);

		memset(e, 0, KFC_DIRENT_SIZE(len));
		e->ino = cpu_to_be64(i + 2);
		e->type = DT_REG;
		e->len = len;
		memcpy(e + 1, names[i], len);
		p += KFC_DIRENT_SIZE(len);
	}
	return p - (u8 *)buf;
}

static void kfc_kunit_readdir_reply(struct kunit *test)
{
	static const char *const ok[] = { "a", "file.txt", "x y" };
	static const char *const dots[] = { "a", ".." };
	static const char *const slash[] = { "a/b" };
	u8 *buf = kunit_kzalloc(test, KFC_MAX_MSG, GFP_KERNEL);
	struct kfc_dirent *e;
	u32 len;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	len = kfc_kunit_readdir(buf, ok, 3, 3);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READDIR, KFC_MAX_MSG, buf,
					      len), 0);
	/* the count disagrees with the entries either way */
	len = kfc_kunit_readdir(buf, ok, 3, 2);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READDIR, KFC_MAX_MSG, buf,
					      len), -EPROTO);
	len = kfc_kunit_readdir(buf, ok, 3, 4);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READDIR, KFC_MAX_MSG, buf,
					      len), -EPROTO);
	/* an entry runs past the end */
	len = kfc_kunit_readdir(buf, ok, 3, 3);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READDIR, KFC_MAX_MSG, buf,
					      len - 8), -EPROTO);
	/* names that would walk, an unknown type, a set reserved field */
	len = kfc_kunit_readdir(buf, dots, 2, 2);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READDIR, KFC_MAX_MSG, buf,
					      len), -EPROTO);
	len = kfc_kunit_readdir(buf, slash, 1, 1);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READDIR, KFC_MAX_MSG, buf,
					      len), -EPROTO);
	len = kfc_kunit_readdir(buf, ok, 1, 1);
	e = (struct kfc_dirent *)(buf + sizeof(struct kfc_readdir_reply));
	e->type = 200;
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READDIR, KFC_MAX_MSG, buf,
					      len), -EPROTO);
	e->type = DT_REG;
	e->reserved[1] = cpu_to_be16(1);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READDIR, KFC_MAX_MSG, buf,
					      len), -EPROTO);
	e->reserved[1] = 0;
	((char *)(e + 1))[0] = '\0';
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READDIR, KFC_MAX_MSG, buf,
					      len), -EPROTO);
}

/*
 * Issue 25, finding 6: the late answer to a READDIR whose caller was
 * killed was checked against the size of an attribute reply, so any
 * listing of three entries or more closed the mount's connection.
 */
static void kfc_kunit_late_reply(struct kunit *test)
{
	static const char *const many[] = { "one", "two", "three", "four",
					    "five", "six", "seven", "eight" };
	u8 *buf = kunit_kzalloc(test, KFC_MAX_MSG, GFP_KERNEL);
	u32 len;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	len = kfc_kunit_readdir(buf, many, 8, 8);
	KUNIT_EXPECT_GT(test, len, (u32)sizeof(struct kfc_attr_reply));
	KUNIT_EXPECT_EQ(test, kfc_check_late_reply(KFC_READDIR, buf, len), 0);
	/* still every field checked */
	len = kfc_kunit_readdir(buf, many, 8, 7);
	KUNIT_EXPECT_EQ(test, kfc_check_late_reply(KFC_READDIR, buf, len),
			-EPROTO);
	len = kfc_kunit_readdir(buf, many, 8, 8);
	KUNIT_EXPECT_EQ(test, kfc_check_late_reply(KFC_READDIR, buf,
						   KFC_MAX_MSG + 1), -EPROTO);
}

static void kfc_kunit_readlink_reply(struct kunit *test)
{
	struct kfc_readlink_reply *r;
	u32 len = sizeof(*r) + 4;

	r = kunit_kzalloc(test, KFC_MAX_MSG, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, r);
	kfc_kunit_hdr(&r->hdr, KFC_READLINK | KFC_REPLY, 0);
	r->len = cpu_to_be16(4);
	memcpy(r->target, "../x", 4);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READLINK, KFC_MAX_MSG, r,
					      len), 0);
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READLINK, KFC_MAX_MSG, r,
					      len + 1), -EPROTO);
	r->target[1] = '\0';
	KUNIT_EXPECT_EQ(test, kfc_check_reply(KFC_READLINK, KFC_MAX_MSG, r,
					      len), -EPROTO);
}

static void kfc_kunit_request(struct kunit *test)
{
	struct kfc_read_req rq = {};

	kfc_kunit_hdr(&rq.hdr, KFC_READ, 0);
	rq.hdr.tag = 0;
	rq.hdr.handle = cpu_to_be64(5);
	KUNIT_EXPECT_EQ(test, kfc_check_request(&rq, sizeof(rq)), 0);
	KUNIT_EXPECT_EQ(test, kfc_check_request(&rq, sizeof(rq) - 1), -EPROTO);
	KUNIT_EXPECT_EQ(test, kfc_check_request(&rq, 3), -EPROTO);
	rq.hdr.version = 2;
	KUNIT_EXPECT_EQ(test, kfc_check_request(&rq, sizeof(rq)), -EPROTO);
	rq.hdr.version = KFC_PROTO_VERSION;
	rq.hdr.op = KFC_OPS;
	KUNIT_EXPECT_EQ(test, kfc_check_request(&rq, sizeof(rq)), -EPROTO);
	rq.hdr.op = 0;
	KUNIT_EXPECT_EQ(test, kfc_check_request(&rq, sizeof(rq)), -EPROTO);
	rq.hdr.op = KFC_READ | KFC_REPLY;
	KUNIT_EXPECT_EQ(test, kfc_check_request(&rq, sizeof(rq)), -EPROTO);
	rq.hdr.op = KFC_READ;
	rq.hdr.status = cpu_to_be32(-1);
	KUNIT_EXPECT_EQ(test, kfc_check_request(&rq, sizeof(rq)), -EPROTO);
	rq.hdr.status = 0;
	rq.hdr.reserved2 = cpu_to_be32(1);
	KUNIT_EXPECT_EQ(test, kfc_check_request(&rq, sizeof(rq)), -EPROTO);
	rq.hdr.reserved2 = 0;
	/* MOUNT names no handle */
	rq.hdr.op = KFC_MOUNT;
	KUNIT_EXPECT_EQ(test, kfc_check_request(&rq, sizeof(rq)), -EPROTO);
}

/* @rq names @name; returns the message's length. */
static u32 kfc_kunit_name_set(struct kfc_name_req *rq, const char *name)
{
	size_t n = strlen(name);

	rq->len = cpu_to_be16(n);
	memcpy(rq->name, name, n);
	return sizeof(*rq) + n;
}

static void kfc_kunit_name(struct kunit *test)
{
	struct kfc_name_req *rq = kunit_kzalloc(test, sizeof(*rq) + 300,
						 GFP_KERNEL);
	const char *name;
	u16 n;

	KUNIT_ASSERT_NOT_NULL(test, rq);
	KUNIT_EXPECT_EQ(test, kfc_check_name(rq, kfc_kunit_name_set(rq, "f.txt"), NAME_MAX,
					     &name, &n), 0);
	KUNIT_EXPECT_EQ(test, n, 5);
	/* a length that disagrees with the message is malformed */
	KUNIT_EXPECT_EQ(test, kfc_check_name(rq, kfc_kunit_name_set(rq, "f.txt") + 1,
					     NAME_MAX, &name, &n), -EPROTO);
	/* names that would walk are refused, the connection kept */
	KUNIT_EXPECT_EQ(test, kfc_check_name(rq, kfc_kunit_name_set(rq, ".."), NAME_MAX,
					     &name, &n), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfc_check_name(rq, kfc_kunit_name_set(rq, "."), NAME_MAX,
					     &name, &n), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfc_check_name(rq, kfc_kunit_name_set(rq, "a/../b"), NAME_MAX,
					     &name, &n), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfc_check_name(rq, kfc_kunit_name_set(rq, "abc"), 2,
					     &name, &n), -EINVAL);
	rq->name[1] = '\0';
	KUNIT_EXPECT_EQ(test, kfc_check_name(rq, sizeof(*rq) + 3, NAME_MAX,
					     &name, &n), -EINVAL);
	rq->len = 0;
	KUNIT_EXPECT_EQ(test, kfc_check_name(rq, sizeof(*rq), NAME_MAX,
					     &name, &n), -EINVAL);
}

static struct kunit_case kfc_check_cases[] = {
	KUNIT_CASE(kfc_kunit_attr_reply),
	KUNIT_CASE(kfc_kunit_read_reply),
	KUNIT_CASE(kfc_kunit_readdir_reply),
	KUNIT_CASE(kfc_kunit_late_reply),
	KUNIT_CASE(kfc_kunit_readlink_reply),
	KUNIT_CASE(kfc_kunit_request),
	KUNIT_CASE(kfc_kunit_name),
	{}
};

static struct kunit_suite kfc_check_suite = {
	.name = "kfcache_check",
	.test_cases = kfc_check_cases,
};

kunit_test_suite(kfc_check_suite);

MODULE_DESCRIPTION("KUnit: kfcache's checks of wire messages");
MODULE_LICENSE("GPL");
