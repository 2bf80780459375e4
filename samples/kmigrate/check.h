/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kmigrate: validation of peer messages and of the user's migration
 * request.  Pure functions of their arguments, shared by the module and
 * its KUnit suite (kunit/kmigrate_kunit.c), which breaks every field.
 * A peer message that fails is counted and closes the connection.
 */
#ifndef _KMIGRATE_CHECK_H
#define _KMIGRATE_CHECK_H

#include <linux/bits.h>
#include <linux/err.h>
#include <linux/errno.h>
#include <linux/overflow.h>
#include <linux/string.h>
#include <linux/types.h>

#include "proto.h"

/* User addresses an arena may take: below 2^47, the smallest x86-64 split */
#define KMIG_VA_LIMIT		BIT_ULL(47)
#define KMIG_PAGE_SHIFT		12

/*
 * @n ranges of two u32 each (first, count), big endian if @be: sorted,
 * disjoint, non-empty, inside @npages.
 */
static inline bool kmig_ranges_ok(const void *ranges, u32 n, u32 npages,
				  bool be)
{
	const __be32 *w = ranges;
	const u32 *h = ranges;
	u64 end = 0;
	u32 i;

	if (!n || n > KMIGRATE_MAX_RANGES)
		return false;
	for (i = 0; i < n; i++) {
		u32 first = be ? be32_to_cpu(w[2 * i]) : h[2 * i];
		u32 count = be ? be32_to_cpu(w[2 * i + 1]) : h[2 * i + 1];

		if (!count || first < end || (u64)first + count > npages)
			return false;
		end = (u64)first + count;
	}
	return true;
}

/* Pages of @n valid ranges */
static inline u64 kmig_ranges_pages(const void *ranges, u32 n, bool be)
{
	const __be32 *w = ranges;
	const u32 *h = ranges;
	u64 sum = 0;
	u32 i;

	for (i = 0; i < n; i++)
		sum += be ? be32_to_cpu(w[2 * i + 1]) : h[2 * i + 1];
	return sum;
}

/* An arena's place: page aligned, not empty, below KMIG_VA_LIMIT */
static inline bool kmig_arena_ok(u64 va, u32 npages)
{
	return npages && npages <= KMIGRATE_MAX_PAGES &&
	       !(va & ((1ULL << KMIG_PAGE_SHIFT) - 1)) && va &&
	       va + ((u64)npages << KMIG_PAGE_SHIFT) <= KMIG_VA_LIMIT;
}

/* A path: absolute, @len bytes with exactly one NUL, at the end */
static inline bool kmig_path_ok(const char *p, u32 len)
{
	return len >= 2 && len <= KMIGRATE_PATH_MAX && p[0] == '/' &&
	       p[len - 1] == '\0' && strnlen(p, len) == len - 1;
}

/* argv: NUL-terminated strings back to back, at least one */
static inline bool kmig_args_ok(const char *a, u32 len)
{
	return len >= 1 && len <= KMIGRATE_ARGS_MAX && a[len - 1] == '\0';
}

/* Keys of a grant of @npages pages in extents of 1 << @shift bytes */
static inline u64 kmig_nkeys(u32 npages, u32 shift)
{
	u64 bytes = (u64)npages << KMIG_PAGE_SHIFT;

	return (bytes + (1ULL << shift) - 1) >> shift;
}

/* The header of @len received bytes; its type, or -EPROTO */
static inline int kmig_check_hdr(const void *data, u32 len)
{
	const struct kmig_hdr *h = data;
	u16 type;

	if (len < sizeof(*h) || be32_to_cpu(h->len) != len ||
	    be16_to_cpu(h->version) != KMIG_PROTO_VERSION)
		return -EPROTO;
	type = be16_to_cpu(h->type);
	if (!type || type >= __KMIG_MSG_MAX)
		return -EPROTO;
	return type;
}

static inline int kmig_check_prepare(const struct kmig_prepare *p, u32 len)
{
	u32 path_len, args_len, fp_len, shift, npages;

	if (len < sizeof(*p) || p->reserved || p->reserved2)
		return -EPROTO;
	npages = be32_to_cpu(p->npages);
	shift = be32_to_cpu(p->extent_shift);
	path_len = be16_to_cpu(p->path_len);
	args_len = be16_to_cpu(p->args_len);
	fp_len = be16_to_cpu(p->fp_len);
	if (!kmig_arena_ok(be64_to_cpu(p->va), npages) ||
	    be32_to_cpu(p->mode) > KMIGRATE_MODE_PRECOPY ||
	    be32_to_cpu(p->flags) & ~KMIGRATE_F_NO_PREFETCH ||
	    shift < KMIG_PAGE_SHIFT || shift > 40 ||
	    be32_to_cpu(p->nkeys) != kmig_nkeys(npages, shift))
		return -EPROTO;
	if (len != sizeof(*p) + path_len + args_len + fp_len ||
	    !fp_len || fp_len > KMIGRATE_FP_MAX ||
	    !kmig_path_ok((const char *)p->data, path_len) ||
	    !kmig_args_ok((const char *)p->data + path_len, args_len))
		return -EPROTO;
	return 0;
}

/* KEYS arrive in order: @have of @nkeys are here */
static inline int kmig_check_keys(const struct kmig_keys *k, u32 len,
				  u32 nkeys, u32 have)
{
	u32 count;

	if (len < sizeof(*k))
		return -EPROTO;
	count = be32_to_cpu(k->count);
	if (!count || count > KMIG_KEYS_PER_MSG ||
	    be32_to_cpu(k->first) != have || count > nkeys - have ||
	    len != sizeof(*k) + count * sizeof(k->key[0]))
		return -EPROTO;
	return 0;
}

/* READY's status: 0 or one of the refusals a destination makes */
static inline int kmig_check_ready(const struct kmig_ready *r, u32 len)
{
	if (len != sizeof(*r) || r->reserved)
		return -EPROTO;
	switch (be32_to_cpu(r->status)) {
	case 0:
	case ENOEXEC:
	case EXDEV:
	case ESRCH:
	case ENOMEM:
	case EOPNOTSUPP:
	case EBUSY:
	case EACCES:	/* the spawner's policy (KMIGRATE_IOC_REFUSE) */
	case EINVAL:
	case EAGAIN:
		return 0;
	}
	return -EPROTO;
}

static inline int kmig_check_frozen(const struct kmig_frozen *f, u32 len,
				    u32 npages)
{
	u32 n, ctx_len;

	if (len < sizeof(*f) || f->reserved)
		return -EPROTO;
	n = be16_to_cpu(f->nranges);
	ctx_len = be16_to_cpu(f->ctx_len);
	if (!ctx_len || ctx_len > KMIGRATE_CTX_MAX ||
	    n > KMIGRATE_MAX_RANGES ||
	    len != sizeof(*f) + n * sizeof(f->range[0]) + ctx_len ||
	    !kmig_ranges_ok(f->range, n, npages, true))
		return -EPROTO;
	return 0;
}

static inline int kmig_check_done(const struct kmig_done *d, u32 len)
{
	if (len != sizeof(*d) || d->reserved ||
	    be32_to_cpu(d->status) > KMIG_DONE_ABORTED)
		return -EPROTO;
	return 0;
}

#endif /* _KMIGRATE_CHECK_H */
