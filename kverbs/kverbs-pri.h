/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kverbs internals shared by the files of kverbs.ko.  Not for users: the
 * public API is include/kverbs/kverbs.h.
 */
#ifndef _KVERBS_PRI_H
#define _KVERBS_PRI_H

#include <linux/completion.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include <kverbs/kverbs.h>
#include <uapi/kverbs/cm.h>

#include "../kvmsg/kvmsg-pri.h"

#undef pr_fmt
#define pr_fmt(fmt) "kverbs: " fmt

#define KVERBS_VERSION		"0.1.0"	/* keep in step with dkms.conf */
#define KVERBS_NAME_LEN		32
#define KVERBS_CM_TIMEOUT_MS	5000

#ifdef KVERBS_TESTING
#include <linux/delay.h>
extern unsigned int kverbs_test_unbind_delay_ms;
/* Test builds: sleep where a race window is, so tests hit it every time. */
#define kverbs_test_delay(name) msleep(READ_ONCE(kverbs_test_##name##_delay_ms))
#else
#define kverbs_test_delay(name) do { } while (0)
#endif

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
 * Queue budget of one endpoint of a domain of depth D; computed only by
 * kverbs_ep_budget(), once per domain (kverbs_domain.budget).
 *
 * Send queue, every WR that can be outstanding at once:
 *   1. D data buffers (kvmsg), each posted at most once until reclaimed;
 *   2. 1 credit-message buffer (kvmsg);
 *   3. D operation slots: RDMA read/write/atomics, REG_MR, LOCAL_INV;
 *   4. 1 drain WR (ib_drain_qp).
 * Receive queue:
 *   5. D receive buffers;
 *   6. 1 drain WR.
 * Completion queue: every WR of 1-6 may complete, unsignaled ones too
 * when they are flushed, so one CQE per WR of both queues.
 *
 * Nothing is posted without holding a buffer or slot of 1-3 or 5, so
 * neither queue can overflow and the drain WRs always fit.
 */
struct kverbs_ep_budget {
	u32 send_wr;
	u32 recv_wr;
	u32 cqes;
	u16 ntx;	/* 1 + 2 */
	u16 nops;	/* 3 */
	u16 nrx;	/* 5 */
};

void kverbs_ep_budget(u16 depth, struct kverbs_ep_budget *b);

/*
 * Locking: @lock (mutex) protects binding (@kdev, @pd, @cq, @cq_used,
 * @unbinding), @eps and @listeners, and @dying.  Callbacks of @ops run
 * without it.  @unbind_lock serialises kverbs_domain_unbind() calls; it
 * is taken before @lock and never by the domain's work items.
 *
 * CQ sizing: each endpoint needs the cqes of @budget; the
 * CQ holds max_eps of those (fewer if the device's max_cqe says so) and an
 * endpoint beyond them is refused with -ENOSPC instead of risking a CQ
 * overrun.
 *
 * Deferred receives: @defer_work (on @wq; a work item never runs twice at
 * once) dispatches the backlog of every endpoint on @defer_list, so
 * deferred handlers of one domain run one at a time.  @defer_lock (bh)
 * protects @defer_list.
 *
 * Polling (kvmsg/poll.c): @poll_lock (bh) keeps @poll_cq, the CQ while
 * bound, from being freed while a task schedules its poller; @poll_owner
 * is the CPU (+1) of a task in kverbs_domain_poll().
 */
struct kverbs_domain {
	struct kref ref;
	struct mutex lock;		/* see above */
	struct mutex unbind_lock;	/* see above */
	bool unbinding;
	struct kverbs_device *kdev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct kverbs_ep_budget budget;	/* of each endpoint, from @depth */
	unsigned int cq_size;		/* asked for: max_eps budgets */
	unsigned int cq_bound;		/* the bound CQ's, within max_cqe */
	unsigned int cq_used;
	struct list_head eps;
	struct list_head listeners;
	struct list_head regions;
	struct list_head dev_node;
	bool dying;
	struct workqueue_struct *wq;
	struct dentry *debugfs;
	const struct kverbs_domain_ops *ops;
	void *priv;
	char name[KVERBS_NAME_LEN];
	u32 node_id;
	u16 depth;
	u32 max_msg;
	u8 rnr_retry;
	u16 signal_interval;

	struct work_struct defer_work;
	spinlock_t defer_lock;		/* see above */
	struct list_head defer_list;
	spinlock_t poll_lock;		/* see above */
	int poll_owner;
	struct ib_cq *poll_cq;

	/* counters of endpoints already gone, for debugfs */
	atomic64_t closed_sent;
	atomic64_t closed_reclaimed;
};

int kverbs_domain_bind(struct kverbs_domain *dom, struct ib_device *ibdev);
void kverbs_domain_get(struct kverbs_domain *dom);
void kverbs_domain_put(struct kverbs_domain *dom);
void kverbs_domain_unbind(struct kverbs_domain *dom);

enum kverbs_ep_state {
	KVERBS_EP_IDLE,
	KVERBS_EP_CONNECTING,
	KVERBS_EP_CONNECTED,
	KVERBS_EP_CLOSING,
	KVERBS_EP_CLOSED,
};

/* ep->flags bits */
enum {
	KVERBS_EP_F_TORN,	/* teardown started; it runs once */
	KVERBS_EP_F_ACCEPTED,	/* passive side: the domain owns the ep */
	KVERBS_EP_F_NOTIFIED,	/* ops->connected was called */
	KVERBS_EP_F_ACCEPT_SENT,	/* passive: rdma_accept() sent the REP */
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
 * Locking: @lock (bh: taken in softirq, never in hard interrupt) protects @state and the
 * send side of @msg (see struct kvmsg_ep); teardown moves @state to CLOSING
 * under it, so nothing is posted once draining starts.
 */
struct kverbs_ep {
	struct kref ref;
	struct kverbs_domain *dom;
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

	struct kvmsg_ep msg;
	bool cq_reserved;

	u32 peer_node;
	u16 peer_depth;
	u32 peer_max_msg;
	struct sockaddr_storage peer_addr;
	void *priv;

	atomic64_t stat_errors;
};

enum kverbs_listener_state {
	KVERBS_LISTENER_LISTENING,
	KVERBS_LISTENER_DORMANT,	/* its device is gone; see listen.c */
	KVERBS_LISTENER_CLOSED,
};

/*
 * Locking: @lock protects @cm_id, @state and @dormant_node (with
 * kverbs_listeners_lock, taken first); @dom_node is under dom->lock.
 */
struct kverbs_listener {
	struct kverbs_domain *dom;
	struct mutex lock;		/* see above */
	struct rdma_cm_id *cm_id;
	enum kverbs_listener_state state;
	struct sockaddr_storage addr;
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
const char *kverbs_cm_reason_str(enum kverbs_cm_reason r);
enum kverbs_cm_reason kverbs_cm_rej_parse(const void *data, unsigned int len);

/* ep.c */
int kverbs_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev);
struct kverbs_ep *kverbs_ep_alloc(struct kverbs_domain *dom);
int kverbs_ep_setup_qp(struct kverbs_ep *ep);
void kverbs_ep_accept(struct kverbs_ep *ep);
void kverbs_ep_schedule_teardown(struct kverbs_ep *ep, int err);
void kverbs_ep_put(struct kverbs_ep *ep);

/* listen.c */
void kverbs_listener_free(struct kverbs_listener *l);
const char *kverbs_listener_state_str(struct kverbs_listener *l);
void kverbs_listeners_device_added(void);
void kverbs_listeners_exit(void);

/* region.c */
void kverbs_domain_drop_regions(struct kverbs_domain *dom);
int kverbs_region_local(const struct kverbs_region *r, u64 off, u32 len,
			struct ib_sge *sge);

/* debugfs.c */
void kverbs_debugfs_init(void);
void kverbs_debugfs_exit(void);
void kverbs_debugfs_add_domain(struct kverbs_domain *dom);
void kverbs_debugfs_remove_domain(struct kverbs_domain *dom);

#endif /* _KVERBS_PRI_H */
