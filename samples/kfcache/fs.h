/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kfcache client file system internals: the mount and its connection
 * (fs_super.c), requests and replies (fs_rpc.c), inodes, directories and
 * coherence (fs_inode.c), file data (fs_read.c).
 */
#ifndef _KFCACHE_FS_H
#define _KFCACHE_FS_H

#include <linux/completion.h>
#include <linux/fs.h>
#include <linux/xarray.h>

#include <kverbs/kverbs.h>
#include <kverbs/kvmsg.h>

#include "proto.h"

#define KFC_MAGIC		0x4b464331	/* "KFC1" */
/* Attributes younger than this are trusted by a path walk (not by open). */
#define KFC_ATTR_TIMEOUT	HZ
/*
 * A request unanswered this long probes the connection (kverbs_ep_probe()):
 * a live server answers a READ within milliseconds; a dead one is then
 * found after RC's retries, about 4 s, not after the mount's timeout.
 */
#define KFC_PROBE_MS		1000

/*
 * One mount: its own domain and one endpoint to the server.  @calls:
 * outstanding requests by tag, erased by whoever completes them (the
 * reply in softirq, the disconnect, or the waiter giving up); xa_lock_bh.
 * @dead: the connection is gone; every request fails with -EIO from then
 * on, and the mount can only be unmounted.
 */
struct kfc_sb {
	struct kverbs_domain *dom;
	struct kverbs_ep *ep;
	struct xarray calls;
	bool dead;
	bool closing;		/* unmounting: no FORGET */
	unsigned int timeout_ms;
	bool server_setid;	/* keep S_ISUID/S_ISGID (fs_super.c) */
	struct sockaddr_storage addr;
	char export[KFC_NAME_MAX];
	char key[KFC_KEY_DESC_MAX + 1];	/* the mount's key=, or "" */
	u32 next_tag;
	atomic64_t malformed;
	atomic64_t late;		/* answers to abandoned requests */
	atomic64_t forget_dropped;	/* FORGETs without memory to wait */
	spinlock_t forget_lock;		/* @forgets */
	struct list_head forgets;	/* FORGETs waiting for a buffer */
	struct delayed_work forget_work;
	/* flow control: pages of READs in flight, at most @inflight_max */
	atomic_t inflight;
	unsigned int inflight_max;
	wait_queue_head_t inflight_wait;
	/*
	 * Where a READ's time goes, summed over READs (debugfs
	 * kfcache/<dev>/stats): registering the pages and granting them,
	 * from the send to the answer, revoking the grant.
	 */
	atomic64_t reads;
	atomic64_t read_pages;
	atomic64_t ns_register;
	atomic64_t ns_answer;
	atomic64_t ns_revoke;
	struct dentry *debugfs;
};

static inline struct kfc_sb *KFC_SB(struct super_block *sb)
{
	return sb->s_fs_info;
}

/*
 * A request in flight.  @reply holds up to @max bytes of the answer; the
 * receive handler checks the answer against @op before it copies it and
 * sets @len.  @status: 0, or -EIO when no valid answer came.
 */
struct kfc_call {
	struct completion done;
	u8 op;
	u32 tag;
	int status;
	void *reply;
	u32 max;
	u32 len;
};

/*
 * @handle: the server's name for the object on this mount's connection.
 * @nlookup: LOOKUP and MOUNT replies that named @handle for this inode,
 * returned by one FORGET when the inode goes.  @generation with i_ino is
 * the server object's identity.  @change, @mtime_ns, @ctime_ns, @size:
 * the attributes the cached pages are valid for; @attr_time when they
 * were last checked; changed with the pages, under the mapping's
 * invalidate_lock (kfc_refresh()).  @stale: a read reply showed the
 * object changed; the next read or open drops the pages.  @nlookup: under
 * i_lock.
 */
struct kfc_inode {
	struct inode vfs;
	u64 handle;
	u64 nlookup;
	u32 generation;
	u64 change;
	u64 mtime_ns;
	u64 ctime_ns;
	unsigned long attr_time;
	bool stale;
};

static inline struct kfc_inode *KFC_I(struct inode *inode)
{
	return container_of(inode, struct kfc_inode, vfs);
}

/* fs_rpc.c */
extern const struct kvmsg_ops kfc_fs_msg_ops;
extern const struct kverbs_domain_ops kfc_fs_dom_ops;
int kfc_call_start(struct kfc_sb *s, struct kfc_call *call, u8 op,
		   u64 handle, void *req, u32 len, void *reply, u32 max);
int kfc_call_wait(struct kfc_sb *s, struct kfc_call *call, bool killable);
int kfc_call(struct kfc_sb *s, u8 op, u64 handle, void *req, u32 len,
	     void *reply, u32 max);
void kfc_forget(struct kfc_sb *s, u64 handle, u64 count);
void kfc_forget_work(struct work_struct *work);
void kfc_forget_drain(struct kfc_sb *s);
int kfc_name_call(struct kfc_sb *s, u8 op, u64 handle, const char *name,
		  u16 len, struct kfc_attr_reply *reply);

/* fs_inode.c */
extern const struct dentry_operations kfc_dentry_ops;
struct inode *kfc_iget(struct super_block *sb, const struct kfc_attr *a);
bool kfc_attr_changed(struct inode *inode, const struct kfc_attr *a);

/* fs_read.c */
extern const struct address_space_operations kfc_aops;

#endif /* _KFCACHE_FS_H */
