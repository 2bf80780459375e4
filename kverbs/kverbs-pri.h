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

#include "../kmsg/kmsg-pri.h"

#undef pr_fmt
#define pr_fmt(fmt) "kverbs: " fmt

#define KVERBS_VERSION		"0.1.0"	/* keep in step with dkms.conf */
#define KVERBS_NAME_LEN		32
#define KVERBS_CM_TIMEOUT_MS	5000

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
 * Locking: @lock (mutex) protects binding (@kdev, @pd, @cq, @cq_used),
 * @eps and @listeners, and @dying.  Callbacks of @ops run without it.
 *
 * CQ sizing: each endpoint needs KVERBS_EP_CQES(depth) entries: a send
 * queue of depth + 1 buffers (data and the credit message) and depth RDMA
 * operations, a receive ring of depth, plus one drain WR on each queue.  The CQ holds max_eps of
 * those and an endpoint beyond max_eps is refused with -ENOSPC instead of
 * risking a CQ overrun.
 *
 * Deferred receives: @defer_work (on @wq; a work item never runs twice at
 * once) dispatches the backlog of every endpoint on @defer_list, so
 * deferred handlers of one domain run one at a time.  @defer_lock (bh)
 * protects @defer_list.
 *
 * Polling: @poll_lock (bh) serialises CQ callbacks between the softirq
 * poller of ib_core and tasks in kverbs_domain_poll(); @poll_owner is the
 * CPU (+1) of a task polling with it held, whose own callbacks must not
 * take it again.  @poll_cq is the CQ while bound, under @poll_lock.
 */
struct kverbs_domain {
	struct kref ref;
	struct mutex lock;		/* see above */
	struct kverbs_device *kdev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	unsigned int cq_size;
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

/* send: depth + 1 buffers, depth operations, drain; receive: depth, drain */
#define KVERBS_EP_CQES(depth)	(3 * (depth) + 3)

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
 * send side of @msg (see struct kmsg_ep); teardown moves @state to CLOSING
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
	struct list_head dom_node;
	struct work_struct teardown_work;

	struct kmsg_ep msg;
	bool cq_reserved;

	u32 peer_node;
	u16 peer_depth;
	u32 peer_max_msg;
	struct sockaddr_storage peer_addr;
	void *priv;

	atomic64_t stat_errors;
};

struct kverbs_listener {
	struct kverbs_domain *dom;
	struct rdma_cm_id *cm_id;
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
void kverbs_ep_schedule_teardown(struct kverbs_ep *ep, int err);
void kverbs_ep_put(struct kverbs_ep *ep);

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
