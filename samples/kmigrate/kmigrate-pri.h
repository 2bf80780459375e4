/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kmigrate internals.
 *
 * main.c     the module, /dev/kmigrate sessions, arenas' life
 * netlink.c  the "kmigrate" generic netlink family
 * node.c     the domain and listener, message dispatch, disconnects
 * out.c      the source: prepare, freeze, wait, resume or free
 * in.c       the destination: incoming, spawner, attach, resume
 * pull.c     the destination's pages: faults and the prefetcher
 *
 * An arena is the pages of one process (a kvmem region) plus the state
 * of its migrations: in (this node is the destination) and then out (the
 * source of the next hop).  Each migration has one connection, whose
 * endpoint's priv names the arena; @ep is the current one.  An arena
 * leaving again may still have its arrival's connection, which DONE has
 * released: that one is stale and its callbacks change nothing.
 *
 * References on an arena (@ref): the session that owns it, each
 * connection, every RDMA read in flight and every queued work (prep, end,
 * pull, arrive, lose, ready, done).  kvmem's fault callback runs without
 * one (kvmem's SRCU keeps @a until kvmem_region_destroy()); it takes one
 * for a read only while a current endpoint (which holds one) exists.  The
 * last reference may go in softirq; the free runs on a workqueue.
 *
 * Locking: kmig.lock (mutex) orders start/stop and guards kmig.arenas,
 * kmig.incoming and the ids; kmig.dom_sem (rwsem) keeps kmig.dom alive
 * for a caller that creates a region on it (whose reference then keeps
 * the domain for the endpoint's connect).  @lock (a
 * spinlock, taken in softirq) guards an arena's migration state; @wait
 * is woken on every change of it.  A page's pull state (@pstate) changes
 * by cmpxchg only.
 */
#ifndef _KMIGRATE_PRI_H
#define _KMIGRATE_PRI_H

#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/rwsem.h>
#include <linux/socket.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include <kverbs/kverbs.h>
#include <kverbs/kvmem.h>
#include <kverbs/kvmsg.h>

#include "proto.h"

/*
 * Queue budget of a migration's endpoint (depth 32):
 * 1. receives: a destination gets PREPARE, the KEYS (KMIG_KEYS_PER_MSG
 *    keys each: a 1 GiB arena in 256-page extents has 1024 keys, 2
 *    messages), FROZEN; a source READY, RESUMED, DONE.
 * 2. RDMA operations in flight (the destination's reads): at most
 *    KMIG_PULL_WINDOW prefetch reads plus one read per faulting task
 *    (4 x 16 pages: a fault's read waits behind at most 256 KiB);
 *    more wait for a slot in kverbs_rdma_read_pages() (sleeping: faults
 *    and the prefetcher run in process context).
 */
#define KMIG_DEPTH		32
#define KMIG_PULL_WINDOW	4
#define KMIG_MAX_EPS		64
/*
 * Arenas a node holds for processes not yet attached: each is allocated
 * whole at PREPARE, on an unauthenticated peer's word; more are refused.
 */
#define KMIG_MAX_ARRIVING	8
/*
 * Accepted connections, in all and from one host: the rest of
 * KMIG_MAX_EPS stays for this node's own migrations out, and one source
 * host can move many processes at once.
 */
#define KMIG_MAX_ACCEPTED	48
#define KMIG_PER_HOST		16
/*
 * A destination's deadlines, from ->connected: PREPARE within
 * KMIG_HELLO_MS (a source sends it at once), and the process frozen and
 * handed over (FROZEN) within KMIG_ARRIVE_MS of it: the source's own bound
 * on starting the destination, at most KMIGRATE_TIMEOUT_MAX_MS, and as
 * long again for its process to take KMIGRATE_SIGNAL and freeze.  Else
 * the connection is closed and the arrival fails (its arena goes).
 */
#define KMIG_HELLO_MS		10000
#define KMIG_ARRIVE_MS		(2 * KMIGRATE_TIMEOUT_MAX_MS)
/* Default bound on connecting, starting and attaching the destination */
#define KMIG_PREPARE_MS		30000
/* Of which connecting, at most */
#define KMIG_CONNECT_MS		10000

/* A source's outgoing migration, @out_phase */
enum {
	KMIG_OUT_NONE,
	KMIG_OUT_PREPARING,
	KMIG_OUT_PREPARED,
	KMIG_OUT_FROZEN,
};

/* Pull state of a destination's page */
enum {
	KMIG_PG_ABSENT,		/* at the source; the process may not touch it */
	KMIG_PG_FETCHING,	/* a read is in flight */
	KMIG_PG_HERE,		/* granted to the process */
	KMIG_PG_LOST,		/* failed, kvmem not yet told */
	KMIG_PG_FAILED,		/* SIGBUS when touched */
};

/* What a destination got from PREPARE, for the spawner (freed on attach) */
struct kmig_exec {
	struct sockaddr_storage peer;	/* the source's address */
	u8 token[KMIGRATE_TOKEN_LEN];	/* made at ACCEPT, for ATTACH */
	u32 path_len;
	u32 args_len;
	u32 fp_len;
	char path[KMIGRATE_PATH_MAX];
	char args[KMIGRATE_ARGS_MAX];
	u8 fp[KMIGRATE_FP_MAX];
};

/*
 * An endpoint's priv: its migration's arena (one reference while the
 * connection lives) and who made it.  A dialed one belongs to its source
 * until kverbs_ep_close(); an accepted one is made at ->connected, gets
 * its arena from PREPARE (@a NULL until then, written once by that
 * handler) and is freed with its endpoint.  @deadline (accepted only)
 * closes the connection at the destination's deadlines (KMIG_HELLO_MS,
 * KMIG_ARRIVE_MS); ->disconnected cancels it before @ep goes.
 */
struct kmig_conn {
	struct kmig_arena *a;
	struct kverbs_ep *ep;		/* accepted only */
	struct delayed_work deadline;	/* accepted only */
	bool dialed;
	bool down;			/* disconnected; under @a->lock */
};

struct kmig_arena {
	struct kref ref;
	struct work_struct free_work;
	struct list_head node;		/* kmig.arenas */
	struct kvmem_region *vr;
	struct page **pages;		/* @vr's, @npages of them */
	u32 npages;
	u64 va;
	struct pid *owner;		/* the session's process; kmig.lock */
	pid_t tgid;			/* its number, for logs */
	/*
	 * An accepted endpoint is freed when its disconnect callback
	 * returns: a task that posts on @ep outside kverbs' callbacks holds
	 * @ep_sem for reading; the disconnect clears @ep holding it for
	 * writing.
	 */
	struct rw_semaphore ep_sem;

	spinlock_t lock;		/* the fields below, up to @ctx */
	wait_queue_head_t wait;
	int state;			/* KMIGRATE_ST_* */
	struct kverbs_ep *ep;		/* the migration's, or NULL; see @ep_sem */
	bool out;			/* @ep is dialed: this is the source */
	struct kmig_conn *conn;		/* @ep's priv */
	struct sockaddr_storage peer;
	u32 mode;			/* KMIGRATE_MODE_* */
	u32 flags;			/* KMIGRATE_F_* */
	bool down;			/* @ep is gone */
	bool move_pending;		/* MOVE asked, MOVE_TARGET not yet */
	struct sockaddr_storage move_dest;
	u32 move_mode;
	u32 move_flags;

	/* source */
	int out_phase;			/* KMIG_OUT_*, see out.c */
	struct work_struct prep_work;
	bool prep_done;			/* @prep_work ended, with @prep_err */
	int prep_err;
	bool cancel;			/* the session is going */
	struct kmig_prepare *prep_msg;	/* until @prep_work sent it */
	u32 prep_msg_len;
	u32 prep_timeout_ms;
	struct kverbs_region *kr;	/* the arena's pages, registered */
	struct kverbs_grant *grant;	/* REMOTE_READ to the destination */
	bool ready;			/* READY arrived, @ready_status */
	int ready_status;
	bool frozen;			/* FROZEN sent: @end_work tears down */
	bool done;			/* DONE arrived */
	bool ending;			/* @end_work queued */
	bool ended;			/* @end_work finished */
	bool moved;			/* the destination took it all */
	struct work_struct end_work;
	u64 t_freeze;
	u64 t_resumed;

	/* destination */
	u32 id;				/* KMIGRATE_INCOMING */
	struct list_head in_node;	/* kmig.incoming, until accepted */
	struct kmig_exec *exec;		/* until attached */
	bool accepted;			/* a spawner took it */
	bool arriving;			/* counted in kmig.arriving */
	bool released;			/* its session is gone */
	bool ready_sent;		/* READY went (or a refusal) */
	bool aborted;			/* FROZEN came after the release */
	bool got_frozen;		/* FROZEN arrived: @ctx, @ranges */
	bool resumed;			/* RESUMED sent */
	bool arrived;			/* every page here */
	bool done_sent;			/* DONE queued (see in.c) */
	bool ready_told;		/* READY queued */
	u32 done_status;
	u32 ready_status_out;
	struct kmig_conn *tell_conn;	/* the arrival's; compared, never used */
	struct work_struct ready_work;
	struct work_struct done_work;
	u32 *keys;			/* the source's grant */
	u32 nkeys;
	u32 have_keys;
	u32 extent_shift;
	u8 *pstate;			/* KMIG_PG_*, one per page */
	atomic_t todo;			/* pages not yet here */
	atomic_t inflight;		/* prefetch reads in flight */
	atomic_t faulting;		/* fault reads in flight */
	bool prefetch;			/* the prefetcher runs (a->lock to set) */
	struct work_struct pull_work;
	struct work_struct arrive_work;
	struct work_struct lose_work;
	u32 nranges;
	struct kmigrate_range ranges[KMIGRATE_MAX_RANGES];
	u32 cursor_range;		/* the prefetcher's, in @ranges */
	u32 cursor_page;
	u32 ctx_len;
	u8 ctx[KMIGRATE_CTX_MAX];
	u64 t_frozen;			/* FROZEN arrived here */

	/* counters (both sides), for GET */
	atomic64_t fault_pages;
	atomic64_t prefetch_pages;
	atomic64_t fault_ns;
	u64 downtime_ns;
	u64 total_ns;
};

/* The module's state */
struct kmig {
	struct mutex lock;		/* see the top of this file */
	struct rw_semaphore dom_sem;
	struct kverbs_domain *dom;	/* while started */
	struct kverbs_listener *listener;
	struct sockaddr_storage addr;
	u32 node_id;
	struct list_head arenas;
	struct list_head incoming;	/* not yet accepted by a spawner */
	wait_queue_head_t incoming_wait;
	atomic_t spawners;		/* sessions that called ACCEPT */
	atomic_t arriving;		/* arenas not yet attached */
	u32 next_id;
	struct workqueue_struct *wq;
	atomic64_t stats[KMIGRATE_S_MAX + 1];
};

extern struct kmig kmig;

static inline void kmig_count(int counter, s64 n)
{
	atomic64_add(n, &kmig.stats[counter]);
}

/* main.c */
struct kmig_arena *kmig_arena_new(u32 npages, u64 va, u32 prot);
void kmig_arena_get(struct kmig_arena *a);
void kmig_arena_put(struct kmig_arena *a);
void kmig_arena_publish(struct kmig_arena *a);
int kmig_send(struct kverbs_ep *ep, const void *msg, u32 len,
	      unsigned int flags);
void kmig_hdr_init(struct kmig_hdr *h, int type, u32 len);

/* node.c */
extern const struct kverbs_domain_ops kmig_dom_ops;
extern const struct kvmsg_ops kmig_msg_ops;
int kmig_node_start(const struct sockaddr_storage *addr, u32 node_id,
		    const char *key);
int kmig_node_stop(void);
void kmig_conn_arrived(struct kmig_conn *c, struct kmig_arena *a);

/* out.c */
long kmig_out_prepare(struct kmig_arena *a,
		      const struct kmigrate_prepare __user *uarg);
long kmig_out_freeze(struct kmig_arena *a,
		     const struct kmigrate_freeze __user *uarg);
void kmig_out_cancel(struct kmig_arena *a);
void kmig_out_prep_work(struct work_struct *w);
int kmig_out_recv(struct kmig_arena *a, int type, const void *msg, u32 len,
		  enum kvmsg_ctx ctx);
void kmig_out_down(struct kmig_arena *a);
void kmig_out_end_work(struct work_struct *w);

/* in.c */
int kmig_in_prepare(struct kverbs_ep *ep, const struct kmig_prepare *p,
		    u32 len);
int kmig_in_recv(struct kmig_arena *a, int type, const void *msg, u32 len,
		 enum kvmsg_ctx ctx);
void kmig_in_down(struct kmig_arena *a);
long kmig_in_accept(struct kmigrate_incoming __user *uarg);
int kmig_in_spawn_refused(const struct kmigrate_refuse *arg);
struct kmig_arena *kmig_in_attach(struct kmigrate_attach *arg,
				  const u8 *fp);
long kmig_in_resume(struct kmig_arena *a, struct kmigrate_resume __user *u);
void kmig_in_release(struct kmig_arena *a);
void kmig_in_arrive_work(struct work_struct *w);
void kmig_in_send_done(struct kmig_arena *a, u32 status);
void kmig_in_ready_work(struct work_struct *w);
void kmig_in_unqueue(struct kmig_arena *a);
void kmig_in_done_work(struct work_struct *w);

/* pull.c */
void kmig_pull_fault(struct kvmem_region *vr, u32 index, bool write,
		     void *priv);
void kmig_pull_work(struct work_struct *w);
void kmig_pull_arrived(struct kmig_arena *a);
void kmig_pull_kick(struct kmig_arena *a);
void kmig_pull_lose(struct kmig_arena *a);
void kmig_pull_lose_work(struct work_struct *w);

/* netlink.c */
int kmig_genl_init(void);
void kmig_genl_exit(void);

#endif /* _KMIGRATE_PRI_H */
