/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kfcache server internals: exports (srv_main.c, under kfc_srv.lock),
 * connections and their handle tables (srv_conn.c), the request handlers
 * (srv_ops.c).
 */
#ifndef _KFCACHE_SRV_PRI_H
#define _KFCACHE_SRV_PRI_H

#include <linux/fs.h>
#include <linux/hashtable.h>
#include <linux/mutex.h>
#include <linux/path.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>

#include <kverbs/kverbs.h>
#include <kverbs/kvmsg.h>

#include "proto.h"

/*
 * Handles one connection may hold at once, each a pinned dentry and most
 * an open file (about 0.5 KB): a client caching more inodes than this
 * gets -ENOSPC from lookups until it forgets some.
 */
#define KFC_SRV_MAX_HANDLES	65536
/*
 * Connections the server takes (its CQ is sized for them), and how many
 * one host may hold: a client host has one per mount, a busy one a
 * handful; the rest stay for other hosts.
 */
#define KFC_SRV_MAX_EPS		32
#define KFC_SRV_PER_HOST	8
/*
 * A connection must MOUNT within this long (module parameter mount_ms),
 * or the server closes it: an endpoint is a slot of the budget above,
 * and one that never mounts only holds it.  A client mounts at once
 * after connecting.
 */
#define KFC_SRV_MOUNT_MS	10000
/* Who clients are on the server: nobody, as NFS's all_squash */
#define KFC_SRV_ANON_ID		65534

/* @clients: who may mount it, @nclients of them; none: every client. */
struct kfc_export {
	struct list_head node;
	char name[KFC_NAME_MAX];
	struct path root;
	u8 nclients;
	struct kfc_client clients[KFC_CLIENTS_MAX];
};

/*
 * The server: one listener, one domain.  @lock (process context) orders
 * start/stop and export changes; @exports is read under it by MOUNT.
 */
struct kfc_srv {
	struct mutex lock;		/* see above */
	struct list_head exports;
	unsigned int exports_gen;	/* changes with @exports, under @lock; not 0 */
	struct kverbs_domain *dom;
	struct kverbs_listener *listener;
	struct sockaddr_storage addr;
	const struct cred *cred;	/* clients' requests run as this */
	atomic64_t stats[KFC_S_MAX + 1];
};

extern struct kfc_srv kfc_srv;

static inline void kfc_srv_count(int counter, s64 n)
{
	atomic64_add(n, &kfc_srv.stats[counter]);
}

/*
 * One open object of a connection.  @file: regular files and directories
 * are opened when the handle is made, so READ never opens (it may run in
 * softirq); symlinks have none, nor objects nobody may read (@open_err).
 * @nlookup: LOOKUP replies naming this handle not yet forgotten by the
 * client; at 0 the handle goes.
 */
struct kfc_handle {
	u32 id;
	u64 nlookup;
	struct path path;
	struct file *file;
	int open_err;			/* why @file is NULL for a file or dir */
	struct hlist_node hnode;	/* in kfc_conn.by_dentry */
};

/*
 * A client connection.  Every message of one endpoint is handled in order
 * and never concurrently (kvmsg), so @handles and @by_dentry need no lock
 * of their own: the handlers are their only users, then the disconnect.
 * @gen: the high half of every handle of this connection, so a handle of
 * another connection or server instance is refused (-ESTALE).
 * @mounted: a MOUNT succeeded (set by its handler, read by @deadline).
 * @deadline: closes the connection KFC_SRV_MOUNT_MS after it connected
 * unless @mounted; cancelled before the connection's state is freed.
 */
struct kfc_conn {
	struct kverbs_ep *ep;
	struct delayed_work deadline;
	bool mounted;
	u32 gen;
	u32 nhandles;
	struct xarray handles;
	DECLARE_HASHTABLE(by_dentry, 8);
};

/* srv_conn.c */
extern const struct kverbs_domain_ops kfc_srv_dom_ops;
struct kfc_handle *kfc_handle_get(struct kfc_conn *c, u64 wire);
int kfc_handle_make(struct kfc_conn *c, const struct path *path,
		    struct kfc_handle **out);
void kfc_handle_forget(struct kfc_conn *c, struct kfc_handle *h, u64 n);
u64 kfc_handle_wire(const struct kfc_conn *c, const struct kfc_handle *h);

/* srv_main.c */
bool kfc_export_allows(const struct kfc_export *e,
		       const struct sockaddr_storage *peer);

/* srv_ops.c */
extern const struct kvmsg_ops kfc_srv_msg_ops;

#endif /* _KFCACHE_SRV_PRI_H */
