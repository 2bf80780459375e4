// SPDX-License-Identifier: GPL-2.0-only
/*
 * The queue lock (KDSM_LOCK_ATOMIC): a distributed queue of nodes on one
 * 64-bit word per lock, after Devulapalli and Wyckoff, "Distributed
 * queue-based locking using advanced network features" (ICPP'05).  The
 * transitions are in qproto.c; this file carries out their actions.
 * Documentation/kdsm-design.rst, "The queue lock", counts the messages.
 *
 * Lock @id's word is word @id / nnodes of one page at its manager, node
 * @id % nnodes + 1 (the kernel lock's manager): a node manages at most
 * KDSM_MAX_LOCKS / 2 locks, so one page of words is enough (checked
 * below).  The page is a kverbs region granted to every peer with remote
 * atomic access only; its key follows the region's keys in the greeting
 * (HELLO says whether it comes).  The word holds the queue's tail: a node
 * swaps itself in by compare-and-swap, tells the node it displaced
 * (KDSM_QL_NEXT), and waits for it to pass the lock on (KDSM_QL_PASS);
 * a release swaps the word back to 0 if it still names us, else passes
 * the lock to the successor whose NEXT is, or will be, here.
 *
 * Only RDMA atomics touch a word: they are atomic with respect to each
 * other at the responder's HCA, not to the CPU's atomics.  An endpoint
 * does not reach its own node, so the manager's own CAS goes through its
 * helper, the next node (kdsm_q_helper()), which issues it on its
 * endpoint to the manager and answers with the tail it found
 * (KDSM_QL_CAS, KDSM_QL_CAS_DONE).  CAS results land in a second region,
 * never granted: one u64 per lock for our own CAS, one for the CAS we run
 * as a helper; each has at most one CAS in flight (the transitions' and
 * @px_state's rule), so a slot is never written twice before it is read.
 *
 * Contexts: a task starts an acquire or a release; a message or a CAS
 * completion (softirq) moves the lock on.  Each transition runs under
 * kd->lock and is followed by its action, tried at once without waiting
 * (KVERBS_NOWAIT); one that finds no send buffer or operation slot is
 * left to ql_work, which retries it in process context in lock order.
 * Nothing waits for a peer while holding anything: a release returns
 * before its CAS or PASS completes, and a task's next acquire of the same
 * lock waits until this node has left the queue.
 *
 * Sequential consistency: kdsm keeps every page sequentially consistent
 * by itself (an access is allowed by the page's protection or waits for
 * its transaction), so the memory operations of a critical section are
 * performed before the task calls unlock; the PASS (or the CAS that
 * frees the word) is issued after that call, and the successor's
 * acquire returns only after it arrived.  Mutual exclusion plus that
 * order is all a lock must add; no fence is needed for the data.
 *
 * Failure: a lost peer fails the cluster, which wakes every waiter with
 * -EHOSTDOWN; nothing here resumes.  A task killed while it waits leaves
 * this node in the queue, flagged: the lock is passed on as it arrives.
 * A held lock belongs to the descriptor it was taken through (@owner);
 * when that closes, the lock is released as by an unlock, and nobody is
 * told (the kernel lock's KDSM_LOCK_DEAD has no counterpart here).
 * ql_work is queued only while the cluster is live, so cancelling it
 * after kdsm_fail() is final; CAS completions run until the endpoints are
 * gone, before the regions and kd->ql are freed.
 */
#include <linux/bitmap.h>
#include <linux/delay.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include "kdsm-pri.h"

static_assert(DIV_ROUND_UP(KDSM_MAX_LOCKS, 2) * sizeof(u64) <= PAGE_SIZE);

/* kdsm_ql.px_state */
enum kdsm_px_state {
	KDSM_PX_IDLE,
	KDSM_PX_POST,
	KDSM_PX_BUSY,
	KDSM_PX_REPLY,
};

static bool kdsm_ql_ready(const struct kdsm_cluster *kd)
{
	return kd->state == KDSM_STATE_READY;
}

/* Offset of a lock's CAS result: its own, or as the helper (@px). */
static u64 kdsm_ql_res_off(u32 id, bool px)
{
	return (u64)id * 16 + (px ? 8 : 0);
}

static u64 kdsm_ql_res_read(struct kdsm_cluster *kd, u32 id, bool px)
{
	u64 off = kdsm_ql_res_off(id, px);
	u64 *w = page_address(kd->ql_res_pages[off >> PAGE_SHIFT]) +
		 offset_in_page(off);

	return READ_ONCE(*w);
}

/* A queue-lock message to node @to, under kd->lock. */
static int kdsm_ql_send(struct kdsm_cluster *kd, u8 to, u8 type, u32 id,
			u8 code, u8 node)
{
	struct kdsm_sig s = { .type = type, .code = code, .node = node,
			      .id = cpu_to_be32(id) };

	return kdsm_xmit_locked(kd, to, &s);
}

/*
 * CAS lock @id's word at node @mgr (its manager) from @cmp to @swap,
 * under kd->lock; the result lands in slot @px and @done gets it.
 */
static int kdsm_ql_cas(struct kdsm_cluster *kd, u8 mgr, u32 id, bool px,
		       u8 cmp, u8 swap, kverbs_rdma_done_t done)
{
	struct kdsm_peer *p = &kd->peers[mgr];
	struct kverbs_rdma_op op = {
		.local = kd->ql_res,
		.local_off = kdsm_ql_res_off(id, px),
		.remote = {
			.offset = (u64)(id / kd->geo.nnodes) * sizeof(u64),
			.len = sizeof(u64),
			.rkey = p->lock_rkey,
		},
		.len = sizeof(u64),
		.done = done,
		.ctx = &kd->ql[id],
	};
	int ret;

	lockdep_assert_held(&kd->lock);
	if (!p->ep)
		return -ENOTCONN;
	if (!p->lock_keyed)
		return -EOPNOTSUPP;
	ret = kverbs_atomic_cmp_swap(p->ep, &op, cmp, swap, KVERBS_NOWAIT);
	if (!ret)
		kdsm_count(kd, KDSM_STAT_ATOMIC_OPS, 1);
	return ret;
}

static void kdsm_ql_cas_done(void *ctx, int status);
static void kdsm_ql_px_done(void *ctx, int status);

/*
 * Carry out lock @id's next action, if any, under kd->lock.
 * Return: 0, -EAGAIN (no buffer or slot now: ask again), or another error,
 * which failed the cluster.
 */
static int kdsm_ql_act(struct kdsm_cluster *kd, u32 id)
{
	struct kdsm_ql *ql = &kd->ql[id];
	u8 self = kd->geo.self, mgr = kdsm_lock_mgr_of(&kd->geo, id);
	struct kdsm_qact_arg a;
	int act, ret;

	if (!kdsm_live(kd))
		return 0;
	act = kdsm_q_action(&kd->geo, &ql->q, &a);
	switch (act) {
	case KDSM_QA_NONE:
		return 0;
	case KDSM_QA_CAS:
		if (mgr == self)
			ret = kdsm_ql_send(kd, kdsm_q_helper(&kd->geo, self),
					   KDSM_QL_CAS, id, a.cmp, a.swap);
		else
			ret = kdsm_ql_cas(kd, mgr, id, false, a.cmp, a.swap,
					  kdsm_ql_cas_done);
		break;
	case KDSM_QA_NEXT:
		ret = kdsm_ql_send(kd, a.to, KDSM_QL_NEXT, id, 0, 0);
		break;
	default:
		ret = kdsm_ql_send(kd, a.to, KDSM_QL_PASS, id, 0, 0);
		break;
	}
	if (!ret) {
		kdsm_q_performed(&ql->q, act);
		return 0;
	}
	if (ret == -EAGAIN)
		return ret;
	/* before this node is in the queue, the task may hear why */
	if (ret == -EOPNOTSUPP && !kdsm_q_unsupported(&ql->q)) {
		ql->err = ret;
		return 0;
	}
	kdsm_fail_locked(kd, "node %u: lock %u: cannot reach node %u (%d)",
			 self, id, act == KDSM_QA_CAS ? mgr : a.to, ret);
	return ret;
}

/* As the helper: carry out the manager's CAS on lock @id's word. */
static int kdsm_ql_px_act(struct kdsm_cluster *kd, u32 id)
{
	struct kdsm_ql *ql = &kd->ql[id];
	u8 mgr = kdsm_lock_mgr_of(&kd->geo, id);
	int ret;

	if (!kdsm_live(kd))
		return 0;
	switch (ql->px_state) {
	case KDSM_PX_POST:
		ret = kdsm_ql_cas(kd, mgr, id, true, ql->px_cmp, ql->px_swap,
				  kdsm_ql_px_done);
		if (!ret) {
			ql->px_state = KDSM_PX_BUSY;
		} else if (ret == -EOPNOTSUPP) {
			ql->px_code = KDSM_QL_NO_ATOMICS;
			ql->px_old = 0;
			ql->px_state = KDSM_PX_REPLY;
			return kdsm_ql_px_act(kd, id);
		}
		break;
	case KDSM_PX_REPLY:
		ret = kdsm_ql_send(kd, mgr, KDSM_QL_CAS_DONE, id, ql->px_code,
				   ql->px_old);
		if (!ret)
			ql->px_state = KDSM_PX_IDLE;
		break;
	default:
		return 0;
	}
	if (ret && ret != -EAGAIN)
		kdsm_fail_locked(kd, "node %u: lock %u: cannot reach node %u as its helper (%d)",
				 kd->geo.self, id, mgr, ret);
	return ret;
}

/*
 * Run lock @id's action (@px: the helper's) now, or leave it to ql_work;
 * wake the tasks, whose lock may have changed.  Under kd->lock.
 */
static void kdsm_ql_kick(struct kdsm_cluster *kd, u32 id, bool px)
{
	int ret = px ? kdsm_ql_px_act(kd, id) : kdsm_ql_act(kd, id);

	if (ret == -EAGAIN && kdsm_live(kd)) {
		__set_bit(id, px ? kd->ql_px_todo : kd->ql_todo);
		queue_work(kdsm_wq, &kd->ql_work);
	}
	wake_up_all(&kd->sync_wq);
}

static void kdsm_ql_work(struct work_struct *w)
{
	struct kdsm_cluster *kd = container_of(w, struct kdsm_cluster,
					       ql_work);
	unsigned int wait_us = 20;
	bool again;
	u32 id;

	for (;;) {
		again = false;
		spin_lock_bh(&kd->lock);
		for_each_set_bit(id, kd->ql_todo, KDSM_MAX_LOCKS) {
			__clear_bit(id, kd->ql_todo);
			kdsm_ql_kick(kd, id, false);
		}
		for_each_set_bit(id, kd->ql_px_todo, KDSM_MAX_LOCKS) {
			__clear_bit(id, kd->ql_px_todo);
			kdsm_ql_kick(kd, id, true);
		}
		again = !bitmap_empty(kd->ql_todo, KDSM_MAX_LOCKS) ||
			!bitmap_empty(kd->ql_px_todo, KDSM_MAX_LOCKS);
		spin_unlock_bh(&kd->lock);
		if (!again)
			return;
		/*
		 * Completions free buffers; a peer that returns no credits
		 * costs a wake-up per 5-10 ms until the heartbeat fails it.
		 */
		usleep_range(wait_us, 2 * wait_us);
		wait_us = min(2 * wait_us, 5000U);
	}
}

/* Our CAS on lock @id's word returned tail @old (or -EPROTO). */
static int kdsm_ql_result(struct kdsm_cluster *kd, u32 id, int old)
{
	struct kdsm_ql *ql = &kd->ql[id];
	int ret;

	ret = old < 0 ? old : kdsm_q_cas_result(&kd->geo, &ql->q, old);
	if (ret < 0)
		return ret;
	if (ret & KDSM_Q_RETRY)
		kdsm_count(kd, KDSM_STAT_CAS_RETRIES, 1);
	if (ret & KDSM_Q_GRANTED)
		kdsm_count(kd, KDSM_STAT_ATOMIC_LOCKS, 1);
	kdsm_ql_kick(kd, id, false);
	return 0;
}

static void kdsm_ql_cas_done(void *ctx, int status)
{
	struct kdsm_ql *ql = ctx;
	struct kdsm_cluster *kd = ql->kd;
	u32 id = ql - kd->ql;
	int ret = status;

	spin_lock_bh(&kd->lock);
	if (kdsm_live(kd)) {
		if (!ret)
			ret = kdsm_ql_result(kd, id,
					     kdsm_q_word(&kd->geo,
							 kdsm_ql_res_read(kd, id, false)));
		if (ret)
			kdsm_fail_locked(kd, "node %u: lock %u: CAS on node %u's word: %d",
					 kd->geo.self, id,
					 kdsm_lock_mgr_of(&kd->geo, id), ret);
	}
	spin_unlock_bh(&kd->lock);
}

static void kdsm_ql_px_done(void *ctx, int status)
{
	struct kdsm_ql *ql = ctx;
	struct kdsm_cluster *kd = ql->kd;
	u32 id = ql - kd->ql;
	int old;

	spin_lock_bh(&kd->lock);
	if (kdsm_live(kd)) {
		old = status ?: kdsm_q_word(&kd->geo,
					    kdsm_ql_res_read(kd, id, true));
		if (old < 0 || ql->px_state != KDSM_PX_BUSY) {
			kdsm_fail_locked(kd, "node %u: lock %u: CAS for node %u: %d",
					 kd->geo.self, id,
					 kdsm_lock_mgr_of(&kd->geo, id), old);
		} else {
			ql->px_old = old;
			ql->px_code = 0;
			ql->px_state = KDSM_PX_REPLY;
			kdsm_ql_kick(kd, id, true);
		}
	}
	spin_unlock_bh(&kd->lock);
}

/**
 * kdsm_qlock_recv - a queue-lock message from node @from
 * @kd: cluster
 * @from: sender
 * @s: KDSM_QL_*
 *
 * Applied at once, never deferred: an action that cannot leave now waits
 * in ql_work instead.
 *
 * Context: the kvmsg handler.
 * Return: 0 (applied, or dropped because the cluster failed) or -EPROTO.
 */
int kdsm_qlock_recv(struct kdsm_cluster *kd, u8 from, const struct kdsm_sig *s)
{
	u32 id = be32_to_cpu(s->id);
	struct kdsm_ql *ql;
	int ret;

	ret = kdsm_q_check(&kd->geo, s, from);
	if (ret)
		return ret;
	ql = &kd->ql[id];
	spin_lock_bh(&kd->lock);
	if (!kdsm_live(kd)) {
		spin_unlock_bh(&kd->lock);
		return 0;
	}
	switch (s->type) {
	case KDSM_QL_NEXT:
		ret = kdsm_q_next(&kd->geo, &ql->q, from);
		if (!ret)
			kdsm_ql_kick(kd, id, false);
		break;
	case KDSM_QL_PASS:
		ret = kdsm_q_pass(&ql->q, from);
		if (ret > 0)
			kdsm_count(kd, KDSM_STAT_ATOMIC_LOCKS, 1);
		if (ret >= 0) {
			kdsm_ql_kick(kd, id, false);
			ret = 0;
		}
		break;
	case KDSM_QL_CAS:
		if (ql->px_state != KDSM_PX_IDLE) {
			ret = -EPROTO;
			break;
		}
		ql->px_cmp = s->code;
		ql->px_swap = s->node;
		ql->px_state = KDSM_PX_POST;
		kdsm_ql_kick(kd, id, true);
		break;
	default:	/* KDSM_QL_CAS_DONE */
		if (!ql->q.cas_busy) {
			ret = -EPROTO;
		} else if (s->code) {	/* only the first CAS can meet this */
			ret = kdsm_q_unsupported(&ql->q);
			if (!ret) {
				ql->err = -EOPNOTSUPP;
				wake_up_all(&kd->sync_wq);
			}
		} else {
			ret = kdsm_ql_result(kd, id, s->node);
		}
		break;
	}
	spin_unlock_bh(&kd->lock);
	return ret;
}

/* Whether this node can reach lock @id's word, under kd->lock. */
static bool kdsm_ql_reachable(struct kdsm_cluster *kd, u32 id)
{
	u8 self = kd->geo.self, mgr = kdsm_lock_mgr_of(&kd->geo, id);

	if (mgr == self)
		return !!kd->peers[kdsm_q_helper(&kd->geo, self)].lock_grant;
	return kd->peers[mgr].lock_keyed;
}

/**
 * kdsm_qlock_busy - this node uses lock @id as a queue lock
 * @kd: cluster
 * @id: lock
 *
 * Context: under kd->lock.
 * Return: true while it is in the lock's queue.
 */
bool kdsm_qlock_busy(struct kdsm_cluster *kd, u32 id)
{
	lockdep_assert_held(&kd->lock);
	return kd->ql[id].q.state != KDSM_Q_IDLE || kd->ql[id].q.waiter;
}

/* Start an acquire once this node is out of the queue; 0 or -errno. */
static long kdsm_ql_start(struct kdsm_cluster *kd, u32 id)
{
	struct kdsm_ql *ql = &kd->ql[id];
	long ret;

	spin_lock_bh(&kd->lock);
	for (;;) {
		if (!kdsm_ql_ready(kd))
			ret = -EHOSTDOWN;
		else if (kd->lockwait[id].waiting || kd->lockwait[id].held ||
			 kdsm_q_busy(&ql->q))
			ret = -EBUSY;
		else if (!kdsm_ql_reachable(kd, id))
			ret = -EOPNOTSUPP;
		else if (ql->q.state != KDSM_Q_IDLE)
			ret = 1;	/* our last turn is ending */
		else
			break;
		spin_unlock_bh(&kd->lock);
		if (ret <= 0)
			return ret;
		if (wait_event_killable(kd->sync_wq, !kdsm_ql_ready(kd) ||
					READ_ONCE(ql->q.state) == KDSM_Q_IDLE))
			return -EINTR;
		spin_lock_bh(&kd->lock);
	}
	kdsm_q_acquire(&ql->q);
	ql->err = 0;
	kdsm_ql_kick(kd, id, false);
	spin_unlock_bh(&kd->lock);
	return 0;
}

static bool kdsm_ql_settled(struct kdsm_cluster *kd, u32 id)
{
	bool settled;

	spin_lock_bh(&kd->lock);
	settled = !kdsm_ql_ready(kd) || kdsm_q_settled(&kd->ql[id].q);
	spin_unlock_bh(&kd->lock);
	return settled;
}

/**
 * kdsm_qlock_lock - KDSM_IOC_LOCK with KDSM_LOCK_ATOMIC
 * @kd: cluster
 * @id: lock, checked
 * @f: the calling descriptor, which the lock will belong to
 *
 * Context: the calling task; sleeps (killable).
 * Return: 0 (the lock came to this task and is @f's); -EBUSY (another
 * task of this node waits for or holds lock @id, of either kind),
 * -EOPNOTSUPP (no atomics on the way to the word), -EHOSTDOWN (the
 * cluster failed), -EINTR.
 */
long kdsm_qlock_lock(struct kdsm_cluster *kd, u32 id, const struct file *f)
{
	struct kdsm_ql *ql = &kd->ql[id];
	bool granted;
	long ret;

	ret = kdsm_ql_start(kd, id);
	if (ret)
		return ret;
	ret = wait_event_killable(kd->sync_wq, kdsm_ql_settled(kd, id));
	spin_lock_bh(&kd->lock);
	if (!kdsm_ql_ready(kd)) {
		ret = -EHOSTDOWN;
	} else if (ret) {
		/* passed on when it comes, or now if it came as we died */
		kdsm_q_abandon(&ql->q);
		kdsm_ql_kick(kd, id, false);
	}
	granted = kdsm_q_collect(&ql->q);
	if (!ret && !granted)			/* never got in */
		ret = ql->err ?: -EIO;
	if (!ret)
		ql->owner = f;
	spin_unlock_bh(&kd->lock);
	return ret;
}

/**
 * kdsm_qlock_unlock - KDSM_IOC_UNLOCK with KDSM_LOCK_ATOMIC
 * @kd: cluster
 * @id: lock, checked
 * @f: the calling descriptor
 *
 * Returns before the lock has left: the CAS or PASS goes now or from
 * ql_work.  Two tasks racing to unlock: one gives it back.
 *
 * Context: the calling task.
 * Return: 0, -EPERM (@f does not hold it as a queue lock), -EHOSTDOWN.
 */
long kdsm_qlock_unlock(struct kdsm_cluster *kd, u32 id, const struct file *f)
{
	struct kdsm_ql *ql = &kd->ql[id];
	long ret;

	spin_lock_bh(&kd->lock);
	if (!kdsm_ql_ready(kd))
		ret = -EHOSTDOWN;
	else if (ql->owner != f)
		ret = -EPERM;
	else
		ret = kdsm_q_release(&ql->q);
	if (!ret) {
		ql->owner = NULL;
		kdsm_ql_kick(kd, id, false);
	}
	spin_unlock_bh(&kd->lock);
	return ret;
}

/**
 * kdsm_qlock_release_file - open file @f was released: the queue locks it
 *	held go
 * @kd: cluster
 * @f: the file
 *
 * Released as by kdsm_qlock_unlock(), without waiting (ql_work sends what
 * cannot go at once).  Nothing in a cluster that is not ready: kd->ql may
 * be gone (kdsm_qlock_free() follows the failure), and no lock is used
 * again.
 *
 * Context: process (kdsm_region_release()).
 */
void kdsm_qlock_release_file(struct kdsm_cluster *kd, const struct file *f)
{
	struct kdsm_ql *ql;
	u32 id;

	spin_lock_bh(&kd->lock);
	for (id = 0; kdsm_ql_ready(kd) && id < KDSM_MAX_LOCKS; id++) {
		ql = &kd->ql[id];
		if (ql->owner != f)
			continue;
		ql->owner = NULL;
		if (!kdsm_q_release(&ql->q))
			kdsm_ql_kick(kd, id, false);
	}
	spin_unlock_bh(&kd->lock);
}

/**
 * kdsm_qlock_grant - let the peer of @ep reach our lock words, atomically
 * @kd: cluster
 * @ep: its endpoint
 *
 * Context: process (->connected()).
 * Return: the grant, or NULL: the peer then cannot use the queue locks we
 * manage (-EOPNOTSUPP there), and everything else works.
 */
struct kverbs_grant *kdsm_qlock_grant(struct kdsm_cluster *kd,
				      struct kverbs_ep *ep)
{
	struct kverbs_grant *g;

	g = kverbs_region_grant(kd->ql_words, ep, KVERBS_ACCESS_REMOTE_ATOMIC);
	if (!IS_ERR(g))
		return g;
	pr_warn("node %u: no queue locks of ours for node %u: %pe\n",
		kd->geo.self, kverbs_ep_peer_node(ep), g);
	return NULL;
}

/**
 * kdsm_qlock_key - the key of our lock words in grant @g, for the greeting
 * @kd: cluster
 * @g: from kdsm_qlock_grant()
 * @rkey: filled
 *
 * Context: any.
 * Return: 0 or as kverbs_grant_remote().
 */
int kdsm_qlock_key(struct kdsm_cluster *kd, struct kverbs_grant *g, u32 *rkey)
{
	struct kverbs_remote rem;
	int ret;

	ret = kverbs_grant_remote(g, 0, kverbs_region_len(kd->ql_words), &rem);
	if (!ret)
		*rkey = rem.rkey;
	return ret;
}

/**
 * kdsm_qlock_init - the queue locks' state, words and result slots
 * @kd: cluster, with its domain
 *
 * Context: process.
 * Return: 0 or -errno; kdsm_qlock_free() undoes either.
 */
int kdsm_qlock_init(struct kdsm_cluster *kd)
{
	int ret;
	u32 i;

	INIT_WORK(&kd->ql_work, kdsm_ql_work);
	kd->ql = kcalloc(KDSM_MAX_LOCKS, sizeof(*kd->ql), GFP_KERNEL);
	kd->ql_todo = bitmap_zalloc(KDSM_MAX_LOCKS, GFP_KERNEL);
	kd->ql_px_todo = bitmap_zalloc(KDSM_MAX_LOCKS, GFP_KERNEL);
	kd->ql_word_page = alloc_page(GFP_KERNEL | __GFP_ZERO);
	for (i = 0; i < KDSM_QL_RES_PAGES; i++)
		kd->ql_res_pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
	if (!kd->ql || !kd->ql_todo || !kd->ql_px_todo || !kd->ql_word_page)
		return -ENOMEM;
	for (i = 0; i < KDSM_QL_RES_PAGES; i++)
		if (!kd->ql_res_pages[i])
			return -ENOMEM;
	for (i = 0; i < KDSM_MAX_LOCKS; i++)
		kd->ql[i].kd = kd;
	kd->ql_words = kverbs_region_create(kd->dom, &kd->ql_word_page, 1);
	ret = PTR_ERR_OR_ZERO(kd->ql_words);
	if (ret) {
		kd->ql_words = NULL;
		return ret;
	}
	kd->ql_res = kverbs_region_create(kd->dom, kd->ql_res_pages,
					  KDSM_QL_RES_PAGES);
	ret = PTR_ERR_OR_ZERO(kd->ql_res);
	if (ret)
		kd->ql_res = NULL;
	return ret;
}

/**
 * kdsm_qlock_free - undo kdsm_qlock_init()
 * @kd: cluster whose endpoints are gone (no CAS in flight)
 *
 * Context: process.
 */
void kdsm_qlock_free(struct kdsm_cluster *kd)
{
	u32 i;

	if (kd->ql_res)
		kverbs_region_destroy(kd->ql_res);
	if (kd->ql_words)
		kverbs_region_destroy(kd->ql_words);
	kd->ql_res = NULL;
	kd->ql_words = NULL;
	for (i = 0; i < KDSM_QL_RES_PAGES; i++)
		if (kd->ql_res_pages[i])
			__free_page(kd->ql_res_pages[i]);
	if (kd->ql_word_page)
		__free_page(kd->ql_word_page);
	bitmap_free(kd->ql_todo);
	bitmap_free(kd->ql_px_todo);
	kfree(kd->ql);
	kd->ql = NULL;
}
