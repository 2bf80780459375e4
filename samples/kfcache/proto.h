/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kfcache wire protocol, shared by the server (kfcache_srv.ko) and the
 * client file system (kfcache.ko).  Documentation/kfcache.rst explains it.
 *
 * Every message starts with struct kfc_hdr, big endian.  A client sends
 * requests, each with a tag unique among its outstanding ones; the server
 * answers each (but FORGET) with one reply carrying the same tag and the
 * request's op | KFC_REPLY.  File data never travels in a message: for a
 * READ the client grants the server write access to its page-cache pages
 * for that request only, the server RDMA-writes them and then replies on
 * the same connection, so the reply arrives after the data (RC order).
 *
 * Trust: both sides validate every field of what they receive against the
 * op's fixed length and their own state; a message that fails is counted
 * and its connection closed.  A handle names a server object for one
 * connection only: handles die with the connection, and a handle the
 * server does not know (wrong generation, forgotten) gets -ESTALE.
 */
#ifndef _KFCACHE_PROTO_H
#define _KFCACHE_PROTO_H

#include <linux/types.h>
#include <uapi/kverbs/kfcache.h>

#define KFC_PROTO_VERSION	1
/* Pages of one READ: what one readahead batch asks for */
#define KFC_READ_MAX_PAGES	32
/* Largest message either side receives (a READDIR or READLINK reply) */
#define KFC_MAX_MSG		4096
/* Credits: messages in flight per connection each way */
#define KFC_DEPTH		64

enum kfc_op {
	KFC_MOUNT = 1,		/* name of an export -> its root's attributes */
	KFC_LOOKUP,		/* dir handle, name -> child attributes */
	KFC_GETATTR,		/* handle -> attributes */
	KFC_READDIR,		/* dir handle, cookie -> entries */
	KFC_READ,		/* file handle, pages, grant -> data by RDMA */
	KFC_READLINK,		/* symlink handle -> target */
	KFC_FORGET,		/* handle, count: the client's lookups dropped */
	KFC_OPS,
	KFC_REPLY = 0x80,
};

/*
 * @op: enum kfc_op, | KFC_REPLY in a reply.  @version: KFC_PROTO_VERSION.
 * @status: 0 in a request; in a reply 0 or a negative errno.  @tag: the
 * client's.  @handle: the object a request is about; 0 in a reply.
 */
struct kfc_hdr {
	u8 op;
	u8 version;
	__be16 reserved;
	__be32 status;
	__be32 tag;
	__be32 reserved2;
	__be64 handle;
};

/* Attributes of an object, in every reply that names one. */
struct kfc_attr {
	__be64 handle;		/* this connection's name for the object */
	__be64 ino;		/* the server's inode number */
	__be64 size;
	__be64 blocks;		/* 512-byte blocks allocated */
	__be64 mtime_ns;
	__be64 ctime_ns;
	__be64 change;		/* i_version, 0 where the fs keeps none */
	__be32 generation;	/* i_generation: with @ino, the identity */
	__be32 mode;
	__be32 nlink;
	__be32 uid;
	__be32 gid;
	__be32 access;		/* KFC_ACCESS_*: what the server lets us do */
};

/* kfc_attr.access */
#define KFC_ACCESS_READ		0x1	/* reading it is allowed */
#define KFC_ACCESS_ALL		0x1

/* MOUNT and LOOKUP: a name follows (not NUL-terminated). */
struct kfc_name_req {
	struct kfc_hdr hdr;
	__be16 len;		/* 1..NAME_MAX (an export: < KFC_NAME_MAX) */
	__be16 reserved[3];
	char name[];
};

struct kfc_attr_reply {
	struct kfc_hdr hdr;
	struct kfc_attr attr;
};

struct kfc_readdir_req {
	struct kfc_hdr hdr;
	__be64 cookie;		/* 0 first, then the last reply's @next */
};

/* Entries follow: struct kfc_dirent then its name, padded to 8 bytes. */
struct kfc_readdir_reply {
	struct kfc_hdr hdr;
	__be64 next;
	__be16 count;
	u8 eof;
	u8 reserved[5];
};

struct kfc_dirent {
	__be64 ino;
	u8 type;		/* DT_* */
	u8 len;			/* 1..NAME_MAX */
	__be16 reserved[3];
};

/*
 * READ: @npages pages from page @index, into the client's extent @remote
 * (offset, rkey, len >= npages pages).  Pages wholly past the server's
 * end of file are not written: the reply's @pages says how many were, and
 * @attr.size is the size the data was read against.
 */
struct kfc_read_req {
	struct kfc_hdr hdr;
	__be64 index;
	__be32 npages;		/* 1..KFC_READ_MAX_PAGES */
	__be32 rkey;
	__be64 offset;
	__be64 len;
};

struct kfc_read_reply {
	struct kfc_hdr hdr;
	struct kfc_attr attr;
	__be32 pages;
	__be32 reserved;
};

struct kfc_readlink_reply {
	struct kfc_hdr hdr;
	__be16 len;		/* 1..PATH_MAX - 1, not NUL-terminated */
	__be16 reserved[3];
	char target[];
};

struct kfc_forget_req {
	struct kfc_hdr hdr;
	__be64 count;		/* lookups of @hdr.handle the client drops */
};

#define KFC_DIRENT_SIZE(len)	ALIGN(sizeof(struct kfc_dirent) + (len), 8)

/* An object's identity across handles and lookups. */
static inline bool kfc_attr_same_object(const struct kfc_attr *a,
					u64 ino, u32 generation)
{
	return be64_to_cpu(a->ino) == ino &&
	       be32_to_cpu(a->generation) == generation;
}

#endif /* _KFCACHE_PROTO_H */
