/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kfcache: the checks of what arrives from the wire, pure functions of the
 * bytes, shared by the server (requests, names), the client (replies) and
 * KUnit (kunit/kfcache_kunit.c).
 */
#ifndef _KFCACHE_CHECK_H
#define _KFCACHE_CHECK_H

#include <linux/errno.h>
#include <linux/fs.h>
#include <linux/string.h>

#include "proto.h"

/* "." or "..": names the client's dcache answers, never the wire. */
static inline bool kfc_name_is_dots(const char *name, unsigned int len)
{
	return name[0] == '.' && (len == 1 || (len == 2 && name[1] == '.'));
}

/*
 * kfc_check_request - a request's header and length for its op: 0, or
 * -EPROTO (the server closes the connection).  Names (MOUNT, LOOKUP) are
 * checked by kfc_check_name() when handled.
 */
static inline int kfc_check_request(const void *msg, u32 len)
{
	static const u32 fixed[KFC_OPS] = {
		[KFC_GETATTR] = sizeof(struct kfc_hdr),
		[KFC_READDIR] = sizeof(struct kfc_readdir_req),
		[KFC_READ] = sizeof(struct kfc_read_req),
		[KFC_READLINK] = sizeof(struct kfc_hdr),
		[KFC_FORGET] = sizeof(struct kfc_forget_req),
	};
	const struct kfc_hdr *rq = msg;

	if (len < sizeof(*rq) || rq->version != KFC_PROTO_VERSION ||
	    !rq->op || rq->op >= KFC_OPS || rq->status || rq->reserved ||
	    rq->reserved2)
		return -EPROTO;
	/* 0: a name follows */
	if (fixed[rq->op] ? len != fixed[rq->op] :
	    len < sizeof(struct kfc_name_req))
		return -EPROTO;
	if (rq->op == KFC_MOUNT && rq->handle)
		return -EPROTO;
	return 0;
}

/*
 * A name from the wire: one component, nothing that walks.  "." and ".."
 * are the client's own business (its dcache answers them), and a '/' or
 * a NUL would make the server walk further than one step.
 */
static inline int kfc_check_name(const struct kfc_name_req *rq, u32 len,
				 u16 max, const char **name, u16 *nlen)
{
	u16 n = be16_to_cpu(rq->len);

	if (len != sizeof(*rq) + n || rq->reserved[0] || rq->reserved[1] ||
	    rq->reserved[2])
		return -EPROTO;
	if (!n || n > max || memchr(rq->name, '/', n) ||
	    memchr(rq->name, '\0', n) || kfc_name_is_dots(rq->name, n))
		return -EINVAL;
	*name = rq->name;
	*nlen = n;
	return 0;
}

/* Directory entries: each within the reply, a sane name, @count of them. */
static inline int kfc_check_dirents(const struct kfc_readdir_reply *r, u32 len)
{
	const u8 *p = (const u8 *)(r + 1), *end = (const u8 *)r + len;
	u16 n = be16_to_cpu(r->count);

	if (r->eof > 1 || memchr_inv(r->reserved, 0, sizeof(r->reserved)))
		return -EPROTO;
	while (n--) {
		const struct kfc_dirent *e = (const void *)p;
		const char *name = (const char *)(e + 1);

		if (end - p < sizeof(*e) || !e->len || e->type > DT_WHT ||
		    end - p < KFC_DIRENT_SIZE(e->len) ||
		    e->reserved[0] || e->reserved[1] || e->reserved[2] ||
		    memchr(name, '/', e->len) || memchr(name, '\0', e->len) ||
		    kfc_name_is_dots(name, e->len))
			return -EPROTO;
		p += KFC_DIRENT_SIZE(e->len);
	}
	return p == end ? 0 : -EPROTO;
}

/* An object's attributes: a handle, a known type, known access bits. */
static inline int kfc_check_attr(const struct kfc_attr *a)
{
	u32 mode = be32_to_cpu(a->mode);

	if (!a->handle || (be32_to_cpu(a->access) & ~KFC_ACCESS_ALL) ||
	    (mode & ~(S_IFMT | 07777)))
		return -EPROTO;
	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFCHR:
	case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		return 0;
	}
	return -EPROTO;
}

/*
 * kfc_check_reply - a reply's length and every field, for the request it
 * answers (@op, with room for @max bytes).  0, or -EPROTO: the client
 * closes the connection.
 */
static inline int kfc_check_reply(u8 op, u32 max, const void *msg, u32 len)
{
	const struct kfc_hdr *h = msg;
	const struct kfc_readlink_reply *rl = msg;
	const struct kfc_read_reply *rd = msg;
	s32 status = be32_to_cpu(h->status);

	if (h->op != (op | KFC_REPLY) || len > max)
		return -EPROTO;
	if (status > 0 || status < -MAX_ERRNO || status <= -ERESTARTSYS)
		return -EPROTO;
	if (status && len == sizeof(*h))
		return 0;
	switch (op) {
	case KFC_MOUNT:
	case KFC_LOOKUP:
	case KFC_GETATTR:
		if (status || len != sizeof(struct kfc_attr_reply))
			return -EPROTO;
		return kfc_check_attr(&((const struct kfc_attr_reply *)msg)->attr);
	case KFC_READ:
		if (len != sizeof(*rd) || rd->reserved ||
		    be32_to_cpu(rd->pages) > KFC_READ_MAX_PAGES ||
		    (status && rd->pages))
			return -EPROTO;
		return status ? 0 : kfc_check_attr(&rd->attr);
	case KFC_READDIR:
		if (status || len < sizeof(struct kfc_readdir_reply))
			return -EPROTO;
		return kfc_check_dirents(msg, len);
	case KFC_READLINK:
		if (status || len < sizeof(*rl) ||
		    len != sizeof(*rl) + be16_to_cpu(rl->len) || !rl->len ||
		    rl->reserved[0] || rl->reserved[1] || rl->reserved[2] ||
		    memchr(rl->target, '\0', be16_to_cpu(rl->len)))
			return -EPROTO;
		return 0;
	}
	return -EPROTO;
}

/*
 * kfc_check_late_reply - kfc_check_reply() for the answer to a request its
 * caller gave up on (a killed `ls`): no reply buffer bounds it, only the
 * mount's largest message, so a READDIR or READLINK answer of any length
 * its op allows is well formed.  Dropping it must not close the
 * connection that every user of the mount shares.
 */
static inline int kfc_check_late_reply(u8 op, const void *msg, u32 len)
{
	return kfc_check_reply(op, KFC_MAX_MSG, msg, len);
}

#endif /* _KFCACHE_CHECK_H */
