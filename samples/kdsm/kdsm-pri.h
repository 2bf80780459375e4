/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kdsm internals: the cluster, its peers, the event queue and the
 * control messages.  The protocol's transitions are in proto.h; the
 * effector that runs their actions is engine.c.
 *
 * Locking:
 * - kdsm_ctl_mutex (main.c) serialises CREATE, DELETE and ATTACH and
 *   guards kdsm_cl, the one cluster of this node.
 * - kd->lock (spinlock, BH-safe) guards the protocol state (pages, home
 *   entries and queues), the deferred queue, the peers' endpoint
 *   pointers, the sync state and kd->state.  Actions run under it with
 *   KVERBS_NOWAIT; only the deferral worker drops it, to wait.
 * - An endpoint is used only under kd->lock while its peer's @ep is set:
 *   ->disconnected() clears it under the lock before the endpoint can be
 *   freed.
 */
#ifndef _KDSM_PRI_H
#define _KDSM_PRI_H

#undef pr_fmt
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kthread.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/socket.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include <kverbs/kverbs.h>
#include <kverbs/kvmem.h>
#include <kverbs/kvmsg.h>
#include <uapi/kverbs/kdsm.h>

#include "proto.h"

/* Options every node must share (HELLO); the rest are each node's own */
#define KDSM_OPT_MODES	(KDSM_OPT_MODE_TASK | KDSM_OPT_MODE_SIM)
#define KDSM_OPT_SHARED	(KDSM_OPT_FETCH_READ | KDSM_OPT_WEAK)

#define KDSM_DEPTH		32	/* receive buffers per endpoint */
#define KDSM_CONNECT_MS		4000	/* one connection attempt */
#define KDSM_JOIN_MS		60000	/* default formation deadline */
#define KDSM_PING_MS		1000	/* heartbeat to every peer */

struct kdsm_hello {
	u8 type;
	u8 version;
	u8 nnodes;
	u8 placement;
	__be32 npages;
	__be32 options;
	u8 page_shift;
	u8 extent_shift;
	__be16 nkeys;
	u8 lock_keys;		/* 1: a KEY of our lock words follows; 0: none */
	u8 reserved[15];
};

struct kdsm_key {
	u8 type;
	u8 reserved0[3];
	__be32 index;
	__be32 rkey;
	u8 reserved[20];
};

static_assert(sizeof(struct kdsm_hello) == KDSM_MSG_LEN);
static_assert(sizeof(struct kdsm_key) == KDSM_MSG_LEN);

/* kdsm_sig.code of KDSM_REFUSE */
enum kdsm_refusal {
	KDSM_REFUSE_NODE = 1,	/* unknown, duplicate or misdirected id */
	KDSM_REFUSE_VERSION,
	KDSM_REFUSE_GEOMETRY,	/* nnodes, npages, placement or page size */
	KDSM_REFUSE_OPTIONS,
	KDSM_REFUSE_STATE,	/* this node failed or left: not forming */
};

struct kdsm_peer {
	u8 node;
	bool hello;		/* its HELLO matched ours */
	bool ready;		/* its READY arrived */
	bool refused;		/* messages from it are dropped */
	bool greeting;		/* greet_work took it */
	bool greeted;		/* our HELLO and keys went to it: READY may */
	bool dialing;		/* form or dial work connects to it */
	bool redial;		/* its connection went down while forming */
	u8 rkey_shift;		/* its keys' extent, log2 bytes */
	u32 nkeys;		/* keys received */
	u32 nkeys_want;		/* announced in its HELLO */
	u32 conn;		/* bumped when @ep changes, under kd->lock */
	struct sockaddr_storage addr;
	struct kverbs_ep *ep;	/* connected, under kd->lock */
	struct kverbs_ep *dialed;	/* ours to close */
	struct kverbs_grant *grant;	/* our region, to it */
	struct kverbs_grant *stale;	/* a dropped connection's, to revoke */
	u32 *rkeys;		/* its region's keys, one per extent */
	u32 nkeys_region;	/* of @nkeys_want: the region's */
	bool lock_keyed;	/* @lock_rkey arrived */
	u32 lock_rkey;		/* its lock words (qlock.c) */
	struct kverbs_grant *lock_grant;	/* our lock words, to it */
	struct kverbs_grant *lock_stale;	/* a dropped connection's */
	struct kverbs_ep *grant_ep;	/* its HELLO matched: grant_work's */
};

/* This node holds every key @p announced: page traffic may flow. */
static inline bool kdsm_peer_keyed(const struct kdsm_peer *p)
{
	return p->hello && p->nkeys == p->nkeys_want;
}

/* Deferred work, in arrival order (kd->deferred) */
enum kdsm_ev_kind {
	KDSM_EV_MSG = 1,	/* a protocol message (peer's or our own) */
	KDSM_EV_FAULT,		/* this node's task faulted */
	KDSM_EV_ACTS,		/* the rest of an event's actions */
	KDSM_EV_SYNC,		/* a lock or barrier message (@sig) */
};

enum kdsm_defer_reason {
	KDSM_DEFER_ZAP = 1,
	KDSM_DEFER_NOBUF,
	KDSM_DEFER_ORDER,
	KDSM_DEFER_MODE,	/* mode T or S: every peer message */
};

/* an event's messages to its own node not yet run; see engine.c */
#define KDSM_EV_SELF		2

struct kdsm_ev {
	struct list_head link;
	struct kdsm_cluster *kd;	/* a fetch's completion needs it */
	u8 kind;
	u8 from;
	u8 reason;
	u8 nacts;
	u8 iact;		/* next action to run */
	u8 nself;
	u8 iself;
	bool write;
	u32 page;
	u64 t0;			/* arrival, ns */
	union {
		struct kdsm_msg msg;
		struct kdsm_sig sig;
	};
	struct kdsm_act acts[KDSM_MAX_ACTS];
	struct {
		u8 from;
		struct kdsm_msg m;
	} self[KDSM_EV_SELF];
};

/*
 * A kernel lock at this node.  @owner: the open file (region descriptor)
 * whose task took it, compared and never followed; cleared when the lock
 * leaves or the file is released (kdsm_region_release()), so in a ready
 * cluster no freed file's address stays here.  (After a failure, which
 * is final, releases stop clearing it: nothing compares it again.)
 */
struct kdsm_lockwait {
	bool waiting;		/* a task of ours waits for the grant */
	bool held;		/* granted to this node */
	bool abandoned;		/* its waiter died: release on grant */
	bool dead;		/* granted KDSM_LOCK_DEAD, not yet reported */
	bool orphaned;		/* file released: marked release due */
	const struct file *owner;
};

/* A lock's manager state (at node id % nnodes + 1) */
struct kdsm_lockmgr {
	u8 holder;		/* 0: free */
	u8 nq;
	bool dead;		/* a holder died since the last grant */
	u8 q[KDSM_MAX_NODES];
};

/*
 * The queue lock at this node (qlock.c).  @q: this node's place in lock
 * @id's queue.  As the helper of node @id % nnodes + 1 (the lock's
 * manager), @px_*: the one CAS on its word that it asked us for: POST it,
 * BUSY in flight, REPLY the tail it held (@px_old, or @px_code).
 */
struct kdsm_ql {
	struct kdsm_cluster *kd;
	struct kdsm_qlock q;
	const struct file *owner;	/* as kdsm_lockwait's; under kd->lock */
	int err;		/* for the waiting task: -EOPNOTSUPP */
	u8 px_state;
	u8 px_cmp;
	u8 px_swap;
	u8 px_old;
	u8 px_code;
};

/* CAS results, one u64 per lock for our own CAS and one as helper */
#define KDSM_QL_RES_PAGES	DIV_ROUND_UP(KDSM_MAX_LOCKS * 16, PAGE_SIZE)

struct kdsm_stats {
	u64 v[__KDSM_STAT_MAX];
};

struct kdsm_cluster {
	struct kdsm_geo geo;
	u32 options;
	u16 port;
	u32 join_ms;
	unsigned long join_deadline;	/* jiffies: formed by then */
	u8 state;		/* enum kdsm_state, under @lock */
	char error[KDSM_ERROR_LEN];	/* why FAILED, under @lock */
	spinlock_t lock;
	struct kdsm_peer peers[KDSM_MAX_NODES + 1];

	struct kverbs_domain *dom;
	struct kverbs_listener *listener;
	struct kvmem_region *vr;
	struct kverbs_region *kr;
	bool sent_ready;	/* this node sent READY to all */

	/* protocol state, per page, under @lock */
	struct kdsm_page *pg;
	struct kdsm_home *home;		/* meaningful at the page's home */
	u8 (*homeq)[KDSM_MAX_NODES];	/* queued requests: node | type << 4 */
	u8 *homeq_len;
	u16 *defer;			/* events of the page in @deferred */
	u64 *fault_t0;			/* ns, while a fault is pending */

	struct list_head deferred;
	/*
	 * The deferral worker: @defer_work on kdsm_wq or kdsm_normal_wq, or
	 * @defer_kwork on @defer_kw (KDSM_OPT_DEFER_*).  It is queued only
	 * when @defer_idle (it found @deferred empty, under @lock), so one
	 * wake-up serves a batch; @defer_kick_ns is when, for
	 * KDSM_STAT_DEFER_WAKE_NS.
	 */
	struct work_struct defer_work;
	struct kthread_worker *defer_kw;
	struct kthread_work defer_kwork;
	bool defer_idle;
	u64 defer_kick_ns;
	struct kdsm_ev *spare;		/* one event kept for softirq */

	struct work_struct form_work;
	struct work_struct greet_work;	/* peers connected, not greeted */
	struct work_struct grant_work;	/* accepted peers whose HELLO matched */
	struct work_struct dial_work;	/* peers to dial again */
	struct work_struct fail_work;
	u8 lost;			/* the peer whose loss failed us */
	struct delayed_work ping_work;

	/* locks and barriers, under @lock */
	wait_queue_head_t sync_wq;
	struct kdsm_lockwait *lockwait;	/* KDSM_MAX_LOCKS */
	struct kdsm_lockmgr *lockmgr;	/* KDSM_MAX_LOCKS */
	u32 bar_gen;			/* barriers this node entered */
	u32 bar_passed;			/* barriers this node passed */
	bool bar_busy;
	u32 sync_defer;			/* KDSM_EV_SYNC in @deferred */
	u32 mgr_gen;			/* node 1: barriers completed */
	u8 mgr_entered;			/* node 1: bitmap of the current one */

	/* the queue lock (qlock.c), under @lock */
	struct kdsm_ql *ql;			/* KDSM_MAX_LOCKS */
	struct page *ql_word_page;		/* words of the locks we manage */
	struct page *ql_res_pages[KDSM_QL_RES_PAGES];
	struct kverbs_region *ql_words;		/* granted: remote atomic */
	struct kverbs_region *ql_res;		/* CAS results; never granted */
	unsigned long *ql_todo;			/* locks whose action waits */
	unsigned long *ql_px_todo;		/* helper CASes whose action waits */
	struct work_struct ql_work;
	/* kernel locks' releases of dead holders; queued only while live */
	struct work_struct orphan_work;

	wait_queue_head_t state_wq;	/* READY or FAILED */
	struct kdsm_stats __percpu *stats;
	struct dentry *debugfs;
};

/* Forming or ready: protocol messages are handled. */
static inline bool kdsm_live(const struct kdsm_cluster *kd)
{
	return kd->state == KDSM_STATE_READY ||
	       kd->state == KDSM_STATE_FORMING;
}

/* main.c */
extern struct mutex kdsm_ctl_mutex;
extern struct kdsm_cluster *kdsm_cl;
extern unsigned int kdsm_max_pages;
extern struct workqueue_struct *kdsm_wq;
extern struct workqueue_struct *kdsm_normal_wq;
extern struct dentry *kdsm_debugfs_root;

/* cluster.c */
struct kdsm_cluster *kdsm_cluster_create(const struct kdsm_geo *geo,
					 u32 options, u16 port, u32 join_ms,
					 const struct sockaddr_storage *addrs,
					 const char *key);
void kdsm_cluster_destroy(struct kdsm_cluster *kd);
__printf(2, 3) void kdsm_fail(struct kdsm_cluster *kd, const char *fmt, ...);
__printf(2, 3) void kdsm_fail_locked(struct kdsm_cluster *kd,
				     const char *fmt, ...);
struct kvmsg_buf *kdsm_reserve_locked(struct kdsm_cluster *kd, u8 to);
void kdsm_post(struct kdsm_cluster *kd, struct kvmsg_buf *b, const void *msg);
int kdsm_xmit_locked(struct kdsm_cluster *kd, u8 to, const void *msg);
int kdsm_xmit(struct kdsm_cluster *kd, u8 to, const void *msg);
long kdsm_wait_ready(struct kdsm_cluster *kd);

/* engine.c */
int kdsm_engine_recv(struct kdsm_cluster *kd, struct kdsm_peer *p,
		     const struct kdsm_msg *m, enum kvmsg_ctx ctx);
void kdsm_engine_fault(struct kvmem_region *r, u32 page, bool write,
		       void *priv);
void kdsm_defer_work(struct work_struct *w);
void kdsm_defer_kwork(struct kthread_work *w);
void kdsm_engine_drain(struct kdsm_cluster *kd);
void kdsm_defer(struct kdsm_cluster *kd, struct kdsm_ev *ev);
int kdsm_rdma_data(struct kdsm_cluster *kd, u8 to, u32 page);
int kdsm_rdma_fetch(struct kdsm_cluster *kd, u8 from, u32 page);

/* sync.c */
int kdsm_sync_recv(struct kdsm_cluster *kd, u8 from, const struct kdsm_sig *s,
		   enum kvmsg_ctx ctx);
int kdsm_sync_run(struct kdsm_cluster *kd, struct kdsm_ev *ev);
long kdsm_region_ioctl(struct kvmem_region *r, struct file *f,
		       unsigned int cmd, unsigned long arg, void *priv);
void kdsm_region_release(struct kvmem_region *r, struct file *f, void *priv);
void kdsm_orphan_work(struct work_struct *w);

/* qlock.c */
int kdsm_qlock_init(struct kdsm_cluster *kd);
void kdsm_qlock_free(struct kdsm_cluster *kd);
struct kverbs_grant *kdsm_qlock_grant(struct kdsm_cluster *kd,
				      struct kverbs_ep *ep);
int kdsm_qlock_key(struct kdsm_cluster *kd, struct kverbs_grant *g, u32 *rkey);
bool kdsm_qlock_busy(struct kdsm_cluster *kd, u32 id);
int kdsm_qlock_recv(struct kdsm_cluster *kd, u8 from, const struct kdsm_sig *s);
long kdsm_qlock_lock(struct kdsm_cluster *kd, u32 id, const struct file *f);
long kdsm_qlock_unlock(struct kdsm_cluster *kd, u32 id, const struct file *f);
void kdsm_qlock_release_file(struct kdsm_cluster *kd, const struct file *f);

/* stats.c */
static inline void kdsm_count(struct kdsm_cluster *kd, unsigned int stat,
			      u64 v)
{
	this_cpu_add(kd->stats->v[stat], v);
}

void kdsm_stats_sum(struct kdsm_cluster *kd, u64 *out);
void kdsm_count_fault_done(struct kdsm_cluster *kd, u64 ns);
void kdsm_count_msg(struct kdsm_cluster *kd, u8 type, bool tx);
int kdsm_debugfs_add(struct kdsm_cluster *kd);

/* netlink.c */
int kdsm_genl_init(void);
void kdsm_genl_exit(void);
/*
 * The control layer's hook: @kd's state changed.  Called under kd->lock,
 * in any context; it may read kd->state, kd->geo and kd->error.
 */
typedef void (*kdsm_notify_fn)(struct kdsm_cluster *kd);
extern kdsm_notify_fn kdsm_state_notify;

#endif /* _KDSM_PRI_H */
