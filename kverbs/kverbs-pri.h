/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kverbs internals shared by the files of kverbs.ko.  Not for users: the
 * public API is include/kverbs/kverbs.h.
 */
#ifndef _KVERBS_PRI_H
#define _KVERBS_PRI_H

#include <linux/completion.h>
#include <linux/error-injection.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <linux/seq_file.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include <kverbs/kverbs.h>
#include <uapi/kverbs/cm.h>

#undef pr_fmt
#define pr_fmt(fmt) "kverbs: " fmt

#define KVERBS_NAME_LEN		32
#define KVERBS_CM_TIMEOUT_MS	5000
/*
 * An accepted endpoint of a keyed domain waits this long for its peer's
 * proof (auth.c): above the RC retry bound of a vanished peer (about
 * 4 s, connect.c), well below the time a client would wait for connect.
 */
#define KVERBS_AUTH_TIMEOUT_MS	10000
/* A pre-shared key's length in bytes: 128 bits at least. */
#define KVERBS_AUTH_KEY_MIN	16
#define KVERBS_AUTH_KEY_MAX	64
/*
 * Accepted connections of a keyed domain still waiting for their peer's
 * proof hold an endpoint (its QP, rings and CQ entries) for up to
 * KVERBS_AUTH_TIMEOUT_MS plus its teardown, and cost whoever opened them
 * nothing.  Half the domain's endpoints at most, a quarter (at most this
 * many) per host: a real peer has one in flight, for milliseconds
 * (kverbs_admit_locked()).
 */
#define KVERBS_AUTH_PENDING_PER_ADDR	4

/* main.c: frees domains whose last reference went in atomic context */
extern struct workqueue_struct *kverbs_wq;

/* Tuning for tests, module parameters of kverbs.ko (main.c). */
extern unsigned int kverbs_rnr_retry;
extern unsigned int kverbs_ack_timeout;
extern unsigned int kverbs_signal_interval;

#ifdef KVERBS_TESTING
#include <linux/delay.h>
extern unsigned int kverbs_test_unbind_delay_ms;
extern unsigned int kverbs_test_connect_delay_ms;
extern unsigned int kverbs_test_listen_delay_ms;
extern unsigned int kverbs_test_undo_mask;
extern unsigned int kverbs_test_auth_mask;
/* Test builds: sleep where a race window is, so tests hit it every time. */
#define kverbs_test_delay(name) msleep(READ_ONCE(kverbs_test_##name##_delay_ms))
/* Test builds: is fix @bit (KVERBS_UNDO_*) undone for a regression proof? */
static inline bool kverbs_test_undo(unsigned int bit)
{
	return READ_ONCE(kverbs_test_undo_mask) & bit;
}

/* Test builds: does our proof go out broken (KVERBS_TEST_AUTH_*)? */
static inline bool kverbs_test_auth(unsigned int bit)
{
	return READ_ONCE(kverbs_test_auth_mask) & bit;
}
#else
/* No delay; @name is still one of the test_*_delay_ms above. */
#define kverbs_test_delay(name) ((void)sizeof(#name))

static inline bool kverbs_test_undo(unsigned int bit)
{
	return false;
}

static inline bool kverbs_test_auth(unsigned int bit)
{
	return false;
}
#endif
#define KVERBS_TEST_AUTH_CORRUPT	1	/* one bit of our proof flipped */
#define KVERBS_TEST_AUTH_REPLAY		2	/* the previous connection's proof */
#define KVERBS_UNDO_NODONE	1	/* reads and atomics without a callback */
#define KVERBS_UNDO_DOWN_WQ	2	/* teardown on the deferral workqueue */
#define KVERBS_UNDO_DEPTH_CLAMP	4	/* accept answers its own READ depths */
#define KVERBS_UNDO_PEER_WAIT	8	/* deferred handlers wait for a peer */
#define KVERBS_UNDO_DEADLINE	16	/* connect deadline outside ep->lock */
#define KVERBS_UNDO_REMOVED_ID	32	/* removal work acts on state, not id */
#define KVERBS_UNDO_NUDGE	64	/* no nudge for a late invalidation */
#define KVERBS_UNDO_IWARP_FENCE	128	/* iWARP: WRs after a read unfenced */

/*
 * One per RDMA device, created by the ib_client add callback.
 *
 * Lifetime: the device table holds one reference until the ib_client
 * remove callback, which then waits for @released, so no kverbs object
 * outlives its ib_device.  Each bound domain holds one reference.
 * Locking: @lock protects @dead and @domains; it nests inside
 * kverbs_domain.lock.
 */
struct kverbs_device {
	struct ib_device *ibdev;
	struct kref ref;
	struct completion released;
	struct mutex lock;		/* see above */
	bool dead;
	struct list_head domains;
};

struct kverbs_device *kverbs_device_get(struct ib_device *ibdev);
void kverbs_device_put(struct kverbs_device *kdev);
int kverbs_device_attach_domain(struct kverbs_device *kdev,
				struct kverbs_domain *dom);
void kverbs_device_detach_domain(struct kverbs_device *kdev,
				 struct kverbs_domain *dom);
int kverbs_device_init(void);
void kverbs_device_exit(void);

/*
 * The send-queue ledger (sq.c).  Every WR posted on an endpoint's send
 * queue, a message of the layer above or an RDMA operation, owns an entry
 * until reclaimed.  Positions are free-running u32 counters; entry p lives
 * in slot p & (@slots - 1) of a ring of @slots, the power of two at or
 * above @size: 2^32 is a multiple of @slots, so positions that wrap past
 * U32_MAX keep distinct slots (p % @size would not for an @size that is
 * not a power of two).  RC send queues complete in order, so the completion
 * of the WR at position p (signaled, or flushed) means every WR up to p is
 * done: kverbs_ledger_reclaim() moves @tail past p.
 *
 * Signal rule: a WR is signaled when the poster asks (it needs the
 * completion, or it takes the last free buffer of its pool), when
 * @interval WRs went unsignaled, or when it fills the queue.  So whenever
 * a pool is exhausted its newest WR is signaled and its completion frees
 * the whole pool.
 */
struct kverbs_ledger {
	u32 size;		/* entries that may be in use */
	u32 slots;		/* ring entries, roundup_pow_of_two(@size) */
	u32 head;		/* next position to post */
	u32 tail;		/* oldest position not reclaimed */
	u32 interval;
	u32 unsignaled;		/* posted since the last signaled WR */
};

void kverbs_ledger_init(struct kverbs_ledger *l, u32 size, u32 interval);
u32 kverbs_ledger_used(const struct kverbs_ledger *l);
u32 kverbs_ledger_slot(const struct kverbs_ledger *l, u32 pos);
bool kverbs_ledger_post(struct kverbs_ledger *l, bool want_signal, u32 *pos);
void kverbs_ledger_unpost(struct kverbs_ledger *l, u32 unsignaled);
u32 kverbs_ledger_reclaim(struct kverbs_ledger *l, u32 pos);

struct kverbs_wr;

/*
 * What the owner of a WR does when the ledger reclaims it.  @reclaim runs
 * under ep->lock for every reclaimed WR and returns true if @done is owed
 * (with *@arg for it); @done then runs after the lock is dropped, with the
 * WR's status (0, or -ECONNRESET when flushed, or the completion's error).
 * Context of both: softirq (the CQ's poller), or process in teardown.
 */
struct kverbs_wr_ops {
	bool (*reclaim)(struct kverbs_wr *w, void **arg);
	void (*done)(struct kverbs_ep *ep, void *arg, int status);
};

struct kverbs_wr {
	struct ib_cqe cqe;		/* .done = the ledger's completion */
	struct kverbs_ep *ep;
	const struct kverbs_wr_ops *ops;
	u32 pos;
};

/*
 * An RDMA operation, a memory registration or an invalidation.  @done runs
 * once, after the WR completed (signaled) or was flushed, with 0 or a
 * negative errno; NULL for operations nobody waits for.
 */
struct kverbs_op {
	struct kverbs_wr wr;
	kverbs_rdma_done_t release;	/* before the slot is free; or NULL */
	kverbs_rdma_done_t done;
	void *ctx;
	struct list_head node;
};

/*
 * The send queue of one endpoint: the ledger, the WR of each position, and
 * the operation slots.  Locking: kverbs_ep.lock.  @wait: tasks waiting for
 * an operation slot, or for the endpoint to leave CONNECTED.
 */
struct kverbs_sq {
	struct kverbs_ledger ledger;
	struct kverbs_wr **ring;
	struct kverbs_op *ops;
	u16 nops;
	struct list_head op_free;
	u32 op_nfree;
	wait_queue_head_t wait;
	u64 signaled;			/* counters, under ep->lock */
	u64 ops_posted;
	u64 reads;			/* ops_posted by opcode */
	u64 writes;
	u64 atomics;
	u64 regs;
	u64 invs;
	u64 nudges;			/* kverbs_sq_nudge()'s writes */
};

/*
 * Queue budget of one endpoint of a domain; computed only by
 * kverbs_ep_budget(), once per domain (kverbs_domain.budget).
 *
 * Send queue, every WR that can be outstanding at once:
 *   1. @upper_send: the layer above's WRs (kvmsg: depth data buffers and
 *      one credit-message buffer, each posted at most once until
 *      reclaimed);
 *   2. @nops = depth operation slots: RDMA read/write/atomics, REG_MR,
 *      LOCAL_INV;
 *   3. 1 drain WR (ib_drain_qp).
 * Receive queue:
 *   4. @upper_recv: the layer above's receive buffers (kvmsg: depth);
 *   5. 1 drain WR.
 * Completion queue: every WR of 1-5 may complete, unsignaled ones too
 * when they are flushed, so one CQE per WR of both queues.
 *
 * Nothing is posted without holding an entry of 1, 2 or 4, so neither
 * queue can overflow and the drain WRs always fit.
 *
 * On iWARP an RDMA read goes through rdma_rw (rdma_rw.c), which puts a
 * LOCAL_INV and a REG_MR before the read, unsignaled, under the read's
 * operation slot (2): the QP gets @nops rdma_rw contexts, for which
 * ib_create_qp() adds their WRs to the send queue itself, and the CQ
 *   6. @rw_cqes = 2 * @nops more CQEs, for those WRs flushed.
 */
struct kverbs_ep_budget {
	u32 send_wr;
	u32 recv_wr;
	u32 cqes;
	u32 rw_cqes;	/* 6 */
	u16 upper_send;	/* 1 */
	u16 nops;	/* 2 */
	u16 upper_recv;	/* 4 */
};

void kverbs_ep_budget(u16 depth, u16 upper_send, u16 upper_recv,
		      struct kverbs_ep_budget *b);

/*
 * The hooks through which kverbs calls the layer above (kvmsg), the only
 * calls that go up besides completions.
 *
 * @domain_init: check and take the domain attributes the upper layer
 *	owns; fill @budget's @upper_send and @upper_recv.  Process.
 * @setup: allocate and map an endpoint's buffers; the domain is bound.
 *	Process, dom->lock held.
 * @start: post the receive ring; the QP exists.  Process, dom->lock held.
 * @connected: the endpoint becomes CONNECTED in the same critical section.
 *	ep->lock held (bh).
 * @opened: the user's ->connected() returned.  Process.
 * @send_auth: queue our proof as the first message (KVMSG_TYPE_AUTH)
 *	and post it.  Called in @connected's critical section (ep->lock
 *	held, bh) on an authenticated active endpoint only.
 * @stop: the QP is drained and the ledger reclaimed; nothing of the
 *	endpoint's may still be posted.  Process, may sleep.
 * @release: end the device's access to the buffers.  Process, dom->lock
 *	held, domain bound.
 * @free: free an endpoint's upper state; nobody uses it any more.  Any.
 * @show_domain, @show_ep: debugfs text, appended to kverbs' own line.
 */
struct kverbs_upper_ops {
	int (*domain_init)(struct kverbs_domain *dom,
			   const struct kverbs_domain_attr *attr,
			   struct kverbs_ep_budget *budget);
	int (*setup)(struct kverbs_ep *ep);
	int (*start)(struct kverbs_ep *ep);
	void (*connected)(struct kverbs_ep *ep);
	void (*opened)(struct kverbs_ep *ep);
	int (*send_auth)(struct kverbs_ep *ep, const void *proof, u32 len);
	void (*stop)(struct kverbs_ep *ep);
	void (*op_space)(struct kverbs_ep *ep);
	void (*release)(struct kverbs_ep *ep);
	void (*free)(struct kverbs_ep *ep);
	void (*show_domain)(struct seq_file *m, struct kverbs_domain *dom);
	void (*show_ep)(struct seq_file *m, struct kverbs_ep *ep);
};

/* Set once by the module's init (main.c), before any domain exists. */
extern const struct kverbs_upper_ops *kverbs_upper;

/* The message layer's state, embedded in the domain and the endpoint. */
#include "../kmsg/kvmsg-state.h"

/*
 * Locking: @lock (mutex) protects binding (@kdev, @cq, @cq_used,
 * @unbinding), @eps and @listeners, and @dying.  Callbacks of @ops run
 * without it.  @unbind_lock serialises kverbs_domain_unbind() calls; it
 * is taken before @lock and never by the domain's work items.
 *
 * CQ sizing: each endpoint needs the cqes of @budget; the
 * CQ holds max_eps of those (fewer if the device's max_cqe says so) and an
 * endpoint beyond them is refused with -ENOSPC instead of risking a CQ
 * overrun.
 *
 * Polling (poll.c): @poll_lock (bh) keeps @poll_cq, the CQ while bound,
 * from being freed while a task schedules its poller; @poll_owner is the
 * CPU (+1) of a task in kverbs_domain_poll().
 *
 * @auth_tfm: HMAC-SHA256 keyed with the domain's pre-shared key, or NULL
 *	for a domain without authentication; set before any endpoint exists
 *	and read-only after (auth.c).  @auth_serial: the key's serial, for
 *	debugfs.  @auth_failures: peers that failed it.
 * @msg: the message layer's state, touched only by kmsg/.
 */
struct kverbs_domain {
	struct kref ref;
	struct mutex lock;		/* see above */
	struct mutex unbind_lock;	/* see above */
	bool unbinding;
	struct kverbs_device *kdev;
	struct ib_cq *cq;
	struct kverbs_ep_budget budget;	/* of each endpoint */
	unsigned int ep_cqes;		/* an endpoint's, on the bound device */
	unsigned int cq_bound;		/* the bound CQ's, within max_cqe */
	unsigned int cq_used;
	struct list_head eps;
	struct list_head listeners;
	struct list_head regions;
	struct list_head dev_node;
	bool dying;
	/*
	 * Two workqueues, so that a teardown may wait for the endpoint's
	 * deferred handling: @wq runs kvmsg's deferral (the message path),
	 * @down_wq the endpoints' teardowns, which flush it.  A flush of a
	 * work on the workqueue the flusher runs on could wait behind itself
	 * in the rescuer under memory pressure.
	 */
	struct workqueue_struct *wq;
	struct workqueue_struct *down_wq;
	struct dentry *debugfs;
	const struct kverbs_domain_ops *ops;
	void *priv;
	char name[KVERBS_NAME_LEN];
	u32 node_id;
	u16 depth;
	u32 max_msg;
	u8 write_pages;			/* kverbs_domain_attr.write_pages */
	u8 read_pages;			/* kverbs_domain_attr.read_pages */
	u32 next_ep_id;			/* under @lock */
	struct work_struct free_work;	/* the final free, on kverbs_wq */

	spinlock_t poll_lock;		/* see above */
	int poll_owner;
	struct ib_cq *poll_cq;

	struct crypto_shash *auth_tfm;
	s32 auth_serial;
	atomic64_t auth_failures;
	atomic64_t auth_busy;		/* refused: unproven peers' caps */
	atomic64_t accept_busy;		/* refused: accepted endpoints' caps */
	unsigned int max_eps;
	unsigned int max_accepted;	/* admit.c; set once at creation */
	unsigned int max_per_host;

	/*
	 * The task running the domain's deferred handlers (kvmsg's defer
	 * work) while it runs one, else NULL; written only by that work.
	 * It serves every peer of the domain, so nothing it calls sleeps for
	 * what one peer controls (kverbs_may_wait_peer()).
	 */
	struct task_struct *upcall_task;

	struct kvmsg_domain msg;
};

int kverbs_domain_bind(struct kverbs_domain *dom, struct ib_device *ibdev);
void kverbs_domain_get(struct kverbs_domain *dom);
void kverbs_domain_put(struct kverbs_domain *dom);
void kverbs_domain_unbind(struct kverbs_domain *dom);
bool kverbs_domain_polled(const struct kverbs_domain *dom);

/* Logging keyed by the domain's name and the endpoint's id. */
#define kverbs_dom_log(lvl, dom, fmt, ...) \
	pr_##lvl##_ratelimited("%s: " fmt, (dom)->name, ##__VA_ARGS__)
#define kverbs_ep_log(lvl, ep, fmt, ...) do {				\
	const struct kverbs_ep *__ep = (ep);				\
									\
	pr_##lvl##_ratelimited("%s ep%u: " fmt, __ep->dom->name, __ep->id, \
			       ##__VA_ARGS__);				\
} while (0)

/*
 * Endpoint states; every change goes through kverbs_ep_change_state(),
 * which allows only these transitions (ep.c has the table):
 *
 *   CONNECTING -> CONNECTED -> CLOSING -> CLOSED
 *   CONNECTING -----------------^
 */
enum kverbs_ep_state {
	KVERBS_EP_CONNECTING,
	KVERBS_EP_CONNECTED,
	KVERBS_EP_CLOSING,
	KVERBS_EP_CLOSED,
	KVERBS_EP_NR_STATES,
};

/* ep->flags bits */
enum {
	KVERBS_EP_F_TORN,	/* teardown started; it runs once */
	KVERBS_EP_F_ACCEPTED,	/* passive side: the domain owns the ep */
	KVERBS_EP_F_NOTIFIED,	/* ops->connected was called */
	KVERBS_EP_F_ACCEPT_SENT,	/* passive: rdma_accept() sent the REP */
	KVERBS_EP_F_CLOSED_BY_OWNER,	/* kverbs_ep_close() was called */
	KVERBS_EP_F_AUTH_WAIT,	/* passive, keyed: ->connected waits for a proof */
	KVERBS_EP_F_AUTH_PASSED,	/* passive: the peer's proof was good */
	KVERBS_EP_F_AUTH_SEND,	/* active, keyed: our proof goes first */
	KVERBS_EP_F_AUTH_FAILED,	/* counted in dom->auth_failures once */
	KVERBS_EP_F_OP_STARVED,	/* a deferred handler found no op slot */
	KVERBS_EP_F_NUDGING,	/* a kverbs_sq_nudge() write is posted */
};

/* An address in a proof: IPv6 (IPv4 v4-mapped), then the port. */
#define KVERBS_AUTH_ADDR_LEN	18

/*
 * What a proof covers (auth.c, uapi/kverbs/cm.h): the connection as each
 * side sees it.  Both views of one connection are byte for byte equal; a
 * relay that splices two connections changes an address, a nonce or an
 * announcement on one side and fails the other's check.
 */
struct kverbs_auth_input {
	u8 nc[KVERBS_CM_NONCE_LEN];
	u8 ns[KVERBS_CM_NONCE_LEN];
	struct kverbs_cm_priv client;	/* announcements as sent */
	struct kverbs_cm_priv server;
	u8 client_addr[KVERBS_AUTH_ADDR_LEN];
	u8 server_addr[KVERBS_AUTH_ADDR_LEN];
} __packed;

/*
 * Authentication state of an endpoint (auth.c): @in is filled by the CM
 * handler before the endpoint can receive its peer's proof, and read-only
 * after; @proof is ours, computed by an active endpoint once it checked
 * the accept, for kvmsg to send.
 */
struct kverbs_ep_auth {
	struct kverbs_auth_input in;
	u8 proof[KVERBS_CM_PROOF_LEN];
};

/*
 * An RC endpoint.
 *
 * Lifetime (@ref): one reference for the domain's @eps list, dropped at the
 * end of teardown; one for the kverbs_ep_connect() caller, dropped by
 * kverbs_ep_close(); one per queued teardown work.  The CQ callbacks use
 * the endpoint without a reference: ib_drain_qp() in teardown guarantees
 * that none runs after the QP is gone.
 *
 * Locking: @lock (bh: taken in softirq, never in hard interrupt) protects
 * @state, @sq and the send side of @msg; teardown moves @state to CLOSING
 * under it, so nothing is posted once draining starts.
 *
 * @id: small number unique in the domain, for logs, traces and debugfs.
 * @pd: the endpoint's own protection domain, from setup to release with
 *	the QP, so that a grant's keys work on this connection only
 *	(grant.c); @lkey, @max_sge and @iwarp are set with it and never
 *	change after.  @grants is under dom->lock.
 * @msg: the message layer's state, touched only by kmsg/.
 */
struct kverbs_ep {
	struct kref ref;
	struct kverbs_domain *dom;
	u32 id;
	struct rdma_cm_id *cm_id;
	struct ib_qp *qp;
	unsigned long flags;
	spinlock_t lock;		/* see above */
	enum kverbs_ep_state state;
	int error;
	struct completion done_connecting;
	struct completion cm_settled;	/* passive: RTU or a CM failure seen */
	struct list_head dom_node;
	struct work_struct teardown_work;
	struct kverbs_sq sq;
	bool cq_reserved;
	bool atomics;			/* the device does atomics; set with @qp */
	bool iwarp;			/* READ sinks need REMOTE_WRITE MRs */
	bool nudge_inv;			/* rxe: late LOCAL_INVs get kverbs_sq_nudge() */
	struct ib_pd *pd;
	u32 lkey;			/* @pd's local DMA key */
	u32 qpn;			/* of @qp once created; stays */
	u8 max_sge;			/* of a send WR, <= KVERBS_RDMA_MAX_SEGS */
	u8 max_sge_rd;			/* of an RDMA READ, <= @max_sge */
	u8 max_sge_pages;		/* of a page write, <= KVERBS_PAGES_MAX_SGE */
	u8 max_sge_read_pages;		/* of a page read, likewise */
	u32 rw_busy;			/* rdma_rw.c: reads on the QP being set
					 * up; ep->lock, teardown waits for 0
					 */
	struct list_head grants;

	u32 peer_node;
	u16 peer_depth;
	u32 peer_max_msg;
	/*
	 * A passive endpoint's RDMA READ/atomic depths as the request offered
	 * them, already from our side (the CM swaps the peer's fields): at
	 * most @req_initiator_depth reads of ours in flight, at most
	 * @req_responder_resources of the peer's.
	 */
	u8 req_initiator_depth;
	u8 req_responder_resources;
	struct sockaddr_storage peer_addr;
	void *priv;
	struct kverbs_ep_auth auth;
	struct delayed_work auth_work;	/* passive, keyed: see auth.c */

	atomic64_t stat_errors;
	struct kvmsg_ep msg;
};

/* An accepted endpoint of a keyed domain still waits for the proof. */
static inline bool kverbs_ep_auth_pending(const struct kverbs_ep *ep)
{
	return test_bit(KVERBS_EP_F_AUTH_WAIT, &ep->flags) &&
	       !test_bit(KVERBS_EP_F_AUTH_PASSED, &ep->flags) &&
	       !test_bit(KVERBS_EP_F_AUTH_FAILED, &ep->flags);
}

/* The endpoint's domain authenticates its peers. */
static inline bool kverbs_ep_keyed(const struct kverbs_ep *ep)
{
	return ep->dom->auth_tfm;
}

/* Safe while teardown destroys the QP: a copy, never ep->qp. */
static inline u32 kverbs_ep_qpn(const struct kverbs_ep *ep)
{
	return READ_ONCE(ep->qpn);
}

/*
 * The key of every endpoint trace event, kverbs' and kvmsg's alike:
 * domain name, endpoint id, cached QP number, in entry fields named dom,
 * ep and qpn.  The name is padded: a ring-buffer entry is not zeroed.
 */
#define KVERBS_TRACE_EP_ASSIGN(e)					\
	do {								\
		const struct kverbs_ep *__e = (e);			\
									\
		strscpy_pad(__entry->dom, __e->dom->name,		\
			    KVERBS_NAME_LEN);				\
		__entry->ep = __e->id;					\
		__entry->qpn = kverbs_ep_qpn(__e);			\
	} while (0)

/*
 * What the layer above may read of a bound endpoint: the device its
 * buffers are mapped for and the key of local DMA addresses.  Valid from
 * the @setup hook until the @release hook.
 */
static inline struct ib_device *kverbs_ep_device(const struct kverbs_ep *ep)
{
	return ep->pd->device;
}

static inline u32 kverbs_ep_lkey(const struct kverbs_ep *ep)
{
	return ep->lkey;
}

enum kverbs_listener_state {
	KVERBS_LISTENER_LISTENING,
	KVERBS_LISTENER_DORMANT,	/* its device is gone; see listen.c */
	KVERBS_LISTENER_CLOSED,
};

/*
 * Locking: @lock protects @cm_id, @state, taking @removed_id and
 * @dormant_node (with kverbs_listeners_lock, taken first); @dom_node is
 * under dom->lock.
 */
struct kverbs_listener {
	struct kverbs_domain *dom;
	struct mutex lock;		/* see above */
	struct rdma_cm_id *cm_id;
	enum kverbs_listener_state state;
	struct sockaddr_storage addr;
	/*
	 * The id whose device went away: written by the CM handler (no
	 * lock), taken under @lock by whoever owns that id, the removal
	 * work once it is @cm_id, or the creator about to publish it.
	 */
	struct rdma_cm_id *removed_id;
	struct work_struct removal_work;
	struct list_head dormant_node;
	struct list_head dom_node;
};

/* cm.c: connection private data, also reached by KUnit */
void kverbs_cm_priv_fill(struct kverbs_cm_priv *p, u32 node_id, u16 depth,
			 u32 max_msg);
enum kverbs_cm_reason kverbs_cm_priv_parse(const void *data, unsigned int len,
					   u32 *node_id, u16 *depth,
					   u32 *max_msg);
enum kverbs_cm_reason kverbs_cm_auth_parse(const void *data, unsigned int len,
					   bool want,
					   struct kverbs_cm_auth *auth);

/* What a side sends in its private data: the announcement, then auth. */
struct kverbs_cm_wire {
	struct kverbs_cm_priv priv;
	struct kverbs_cm_auth auth;
} __packed;
const char *kverbs_cm_reason_str(enum kverbs_cm_reason r);
enum kverbs_cm_reason kverbs_cm_rej_parse(const void *data, unsigned int len);

/* ep.c: life cycle, state, teardown */
struct kverbs_ep *kverbs_ep_alloc(struct kverbs_domain *dom);
struct kverbs_ep *kverbs_ep_alloc_accepted(struct kverbs_domain *dom,
					   const struct sockaddr *src);
bool kverbs_ep_change_state(struct kverbs_ep *ep, enum kverbs_ep_state to);
const char *kverbs_ep_state_str(enum kverbs_ep_state s);
void kverbs_ep_fail(struct kverbs_ep *ep, int err);
void kverbs_ep_get(struct kverbs_ep *ep);
void kverbs_ep_put(struct kverbs_ep *ep);
void kverbs_ep_release_qp(struct kverbs_ep *ep);
void kverbs_ep_connected(struct kverbs_ep *ep);
void kverbs_ep_notify(struct kverbs_ep *ep);

/* admit.c: caps on accepted endpoints */
bool kverbs_admit_locked(struct kverbs_domain *dom, const struct sockaddr *src);

/* auth.c: pre-shared key authentication */
struct crypto_shash;
struct crypto_shash *kverbs_auth_tfm_new(const u8 *secret, unsigned int len);
void kverbs_auth_addr(const struct sockaddr *sa, u8 *out);
int kverbs_auth_proof(struct crypto_shash *tfm, bool server,
		      const struct kverbs_auth_input *in, u8 *proof);
bool kverbs_auth_verify(struct crypto_shash *tfm, bool server,
			const struct kverbs_auth_input *in, const u8 *got);
int kverbs_auth_init(struct kverbs_domain *dom, const char *desc);
void kverbs_auth_free(struct kverbs_domain *dom);
void kverbs_ep_auth_request(struct kverbs_ep *ep,
			    const struct kverbs_cm_priv *priv,
			    struct kverbs_cm_auth *auth);
void kverbs_ep_auth_peer(struct kverbs_ep *ep, const void *data,
			 const struct kverbs_cm_auth *auth);
int kverbs_ep_auth_accept(struct kverbs_ep *ep,
			  const struct kverbs_cm_priv *priv,
			  struct kverbs_cm_auth *auth);
int kverbs_ep_auth_established(struct kverbs_ep *ep, const void *data,
			       const struct kverbs_cm_auth *auth);
int kverbs_ep_auth_check(struct kverbs_ep *ep, bool is_proof,
			 const void *proof, u32 len);
void kverbs_ep_auth_work(struct work_struct *work);
void kverbs_ep_auth_teardown(struct kverbs_ep *ep);

/* connect.c: the CM side of an endpoint */
int kverbs_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev);
int kverbs_ep_setup_qp(struct kverbs_ep *ep);
void kverbs_ep_accept(struct kverbs_ep *ep);

/* sq.c: the send-queue ledger */
int kverbs_sq_alloc(struct kverbs_ep *ep);
void kverbs_sq_free(struct kverbs_ep *ep);
int kverbs_sq_post_locked(struct kverbs_ep *ep, struct kverbs_wr *w,
			  struct ib_send_wr *wr, bool want_signal,
			  bool *signaled);
void kverbs_sq_done(struct ib_cq *cq, struct ib_wc *wc);
void kverbs_sq_reclaim_tail(struct kverbs_ep *ep);
u32 kverbs_sq_used(struct kverbs_ep *ep);
struct kverbs_op *kverbs_op_get(struct kverbs_ep *ep, unsigned int flags);
struct kverbs_op *kverbs_op_get_local(struct kverbs_ep *ep, long timeout);
int kverbs_sq_nudge(struct kverbs_ep *ep);
void kverbs_op_put(struct kverbs_ep *ep, struct kverbs_op *op);
int kverbs_op_post_chain(struct kverbs_ep *ep, struct kverbs_op *op,
			 struct ib_send_wr *first, struct ib_send_wr *last);
int kverbs_op_post(struct kverbs_ep *ep, struct kverbs_op *op,
		   struct ib_send_wr *wr);
bool kverbs_may_wait(unsigned int flags);
bool kverbs_may_wait_peer(const struct kverbs_domain *dom,
			  unsigned int flags);
bool kverbs_in_deferred(const struct kverbs_domain *dom);
void kverbs_upcall_begin(void);
void kverbs_upcall_end(void);

/* listen.c */
void kverbs_cm_reject(struct kverbs_domain *dom, u32 ep_id,
		      struct rdma_cm_id *id, enum kverbs_cm_reason r);
void kverbs_listener_free(struct kverbs_listener *l);
const char *kverbs_listener_state_str(struct kverbs_listener *l);
void kverbs_listeners_device_added(void);
void kverbs_listeners_exit(void);

/*
 * region.c: pages of a domain, mapped on its device exactly while it is
 * bound.  Locking: @dom_node, @grants, @mapped under dom->lock; see
 * region.c for why @dma may be read without it.
 */
struct kverbs_region {
	struct kverbs_domain *dom;	/* holds a reference */
	struct page **pages;
	dma_addr_t *dma;		/* per page, while @mapped */
	unsigned long npages;
	u64 len;
	bool mapped;
	struct list_head dom_node;
	struct list_head grants;
};

int kverbs_domain_map_regions(struct kverbs_domain *dom,
			      struct ib_device *dev);
void kverbs_domain_unmap_regions(struct kverbs_domain *dom,
				 struct ib_device *dev);
int kverbs_region_range(const struct kverbs_region *r,
			const struct kverbs_ep *ep, u64 off, u32 len);
int kverbs_region_local(const struct kverbs_region *r,
			const struct kverbs_ep *ep, u64 off, u32 len,
			struct ib_sge *sge, int max);

/* rdma_rw.c: RDMA reads on iWARP */
u32 kverbs_rw_max_pages(const struct ib_device *dev);
void kverbs_rw_idle(struct kverbs_ep *ep);
int kverbs_rw_read(struct kverbs_ep *ep, struct page **pages, u32 off,
		   u32 len, const struct kverbs_remote *remote,
		   kverbs_rdma_done_t done, void *ctx, unsigned int flags);

/*
 * grant.c: a region registered on one endpoint's PD, one MR per extent of
 * 1 << @extent_shift bytes.  Locking: see grant.c.
 */
struct kverbs_grant {
	struct kverbs_region *r;
	struct kverbs_ep *ep;		/* holds a reference */
	u32 access;
	unsigned int extent_shift;
	unsigned int nmr;
	bool dead;			/* MRs gone with the endpoint */
	struct list_head region_node;
	struct list_head ep_node;
	struct completion wr_done;
	atomic_t pending;
	int status;
	struct {
		struct ib_mr *mr;
		u32 rkey;
	} ent[];
};

void kverbs_ep_drop_grants(struct kverbs_ep *ep);

/* debugfs.c */
void kverbs_debugfs_init(void);
void kverbs_debugfs_exit(void);
void kverbs_debugfs_add_domain(struct kverbs_domain *dom);
void kverbs_debugfs_remove_domain(struct kverbs_domain *dom);

#endif /* _KVERBS_PRI_H */
