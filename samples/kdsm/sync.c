// SPDX-License-Identifier: GPL-2.0-only
/*
 * Locks and barriers of the kernel protocol, and the region descriptor's
 * ioctls that reach them.
 *
 * Lock @id's manager is node id % nnodes + 1; it grants in request order,
 * one holder at a time.  A node asks once per lock at a time: libkdsm
 * serialises its own threads on a lock first, and a second task asking
 * for a lock its node waits for or holds gets -EBUSY.  A task killed
 * while waiting leaves its request queued; the grant, when it comes, is
 * handed straight back.  This is the default kind of lock;
 * KDSM_LOCK_ATOMIC asks for the queue lock of qlock.c instead.  A node
 * uses an id as one kind at a time: asking for the other kind meanwhile
 * is -EBUSY too.
 *
 * Robust: a lock belongs to the open file (region descriptor) its task
 * took it through, and only that file unlocks it (its threads race as
 * before: one gives it back, the others get -EPERM).  When the file is
 * released holding locks (its process died, say), they go with
 * KDSM_LOCK_DEAD in the UNLOCK, at once or from orphan_work: the release
 * never waits for a peer.  The manager keeps the mark until its next
 * grant, which carries it, and that holder's lock call returns
 * -EOWNERDEAD holding the lock when it asked with KDSM_LOCK_ROBUST, as
 * pthread_mutex_lock() does for a robust mutex.  A grant nobody took (its
 * waiter died) goes back with the mark, so the next holder that returns
 * to a task learns it.  Unlike a pthread mutex the lock stays usable: no
 * "consistent" call, no ENOTRECOVERABLE; repairing the data it guards is
 * the new holder's.  A queue lock (qlock.c) is released when its file is
 * but tells nobody.
 *
 * A barrier is a generation: node 1 collects BAR_ENTER of generation g
 * from every node (itself included) and sends BAR_GO g to all.  One task
 * per node enters at a time (-EBUSY otherwise), again after libkdsm's
 * local barrier.
 *
 * Sequential consistency: every access of a task either is allowed by
 * the page's protection or waits for the page's transaction to complete,
 * so the memory operations before an unlock or a barrier are performed
 * when the message leaves, and those after a grant or BAR_GO start after
 * it arrived.
 *
 * Every state change that sends a message takes the send buffer first
 * (under kd->lock, KVERBS_NOWAIT): without one it changes nothing and
 * the caller retries: a task after a short sleep; a peer's message goes
 * to kdsm's deferred queue (KDSM_EV_SYNC), and every later peer sync
 * message behind it, so they apply in arrival order.  kvmsg's own
 * deferral is not used for this: it is one work item per domain, and a
 * sleep there would stall every endpoint's messages.
 *
 * Peer messages apply while the cluster is forming too: a peer is READY
 * as soon as it has every READY, and may enter a barrier or ask for a
 * lock before this node has seen the last READY.
 */
#include <linux/delay.h>
#include <linux/ktime.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "kdsm-pri.h"

static u8 kdsm_lock_mgr(const struct kdsm_cluster *kd, u32 id)
{
	return id % kd->geo.nnodes + 1;
}

/* Locks and barriers work only in a ready cluster. */
static bool kdsm_ready(const struct kdsm_cluster *kd)
{
	return kd->state == KDSM_STATE_READY;
}

static void kdsm_post_locked(struct kdsm_cluster *kd, struct kvmsg_buf *b,
			     u8 type, u32 id, u32 gen, u8 code)
{
	struct kdsm_sig s = { .type = type, .code = code,
			      .id = cpu_to_be32(id), .gen = cpu_to_be32(gen) };

	if (!IS_ERR_OR_NULL(b))		/* a lost peer fails the cluster */
		kdsm_post(kd, b, &s);
}

/* -EAGAIN for a missing buffer; any other error: the peer is gone. */
static int kdsm_buf_err(struct kvmsg_buf *b)
{
	return PTR_ERR(b) == -EAGAIN ? -EAGAIN : 0;
}

/* @dead: the grant says a holder died since the last one */
static void kdsm_lock_granted(struct kdsm_cluster *kd, u32 id, bool dead)
{
	kd->lockwait[id].held = true;
	kd->lockwait[id].waiting = false;
	kd->lockwait[id].dead = dead;
	kdsm_count(kd, KDSM_STAT_LOCKS, 1);
	wake_up_all(&kd->sync_wq);
}

/* Manager: drop this node from the head of @id's queue if its waiter died. */
static void kdsm_mgr_skip_abandoned(struct kdsm_cluster *kd, u32 id)
{
	struct kdsm_lockmgr *m = &kd->lockmgr[id];
	struct kdsm_lockwait *lw = &kd->lockwait[id];

	if (!m->nq || m->q[0] != kd->geo.self || !lw->abandoned)
		return;
	memmove(m->q, m->q + 1, --m->nq);
	lw->waiting = false;
	lw->abandoned = false;
}

/* Manager: @from asks for lock @id. */
static int kdsm_mgr_request(struct kdsm_cluster *kd, u32 id, u8 from)
{
	struct kdsm_lockmgr *m = &kd->lockmgr[id];
	struct kvmsg_buf *b = NULL;
	u8 i;

	if (m->holder == from)
		return -EPROTO;
	for (i = 0; i < m->nq; i++)
		if (m->q[i] == from)
			return -EPROTO;
	if (m->holder) {
		if (m->nq >= kd->geo.nnodes)
			return -EPROTO;
		m->q[m->nq++] = from;
		return 0;
	}
	if (from != kd->geo.self) {
		b = kdsm_reserve_locked(kd, from);
		if (kdsm_buf_err(b))
			return -EAGAIN;
	}
	m->holder = from;
	if (from == kd->geo.self)
		kdsm_lock_granted(kd, id, m->dead);
	else
		kdsm_post_locked(kd, b, KDSM_LOCK_GRANT, id, 0,
				 m->dead ? KDSM_LOCK_DEAD : 0);
	m->dead = false;
	return 0;
}

/*
 * Manager: @from releases lock @id (@dead: its holder died); the next in
 * line gets it.
 */
static int kdsm_mgr_release(struct kdsm_cluster *kd, u32 id, u8 from,
			    bool dead)
{
	struct kdsm_lockmgr *m = &kd->lockmgr[id];
	struct kvmsg_buf *b = NULL;
	u8 next;

	if (m->holder != from)
		return -EPROTO;
	m->dead |= dead;	/* kept by a retry after -EAGAIN too */
	/* at most one entry is ours: a node asks once per lock */
	kdsm_mgr_skip_abandoned(kd, id);
	next = m->nq ? m->q[0] : 0;
	if (next && next != kd->geo.self) {
		b = kdsm_reserve_locked(kd, next);
		if (kdsm_buf_err(b))
			return -EAGAIN;
	}
	m->holder = next;
	if (next) {
		memmove(m->q, m->q + 1, --m->nq);
		if (next == kd->geo.self)
			kdsm_lock_granted(kd, id, m->dead);
		else
			kdsm_post_locked(kd, b, KDSM_LOCK_GRANT, id, 0,
					 m->dead ? KDSM_LOCK_DEAD : 0);
		m->dead = false;
	}
	return 0;
}

/*
 * This node gives lock @id back: to itself as manager, or by UNLOCK.
 * @died: its holder died; a death no task of ours was told of yet
 * (@lw->dead) goes on too.
 */
static int kdsm_release_locked(struct kdsm_cluster *kd, u32 id, bool died)
{
	struct kdsm_lockwait *lw = &kd->lockwait[id];
	u8 mgr = kdsm_lock_mgr(kd, id);
	bool dead = died || lw->dead;
	struct kvmsg_buf *b;
	int ret;

	if (mgr == kd->geo.self) {
		ret = kdsm_mgr_release(kd, id, mgr, dead);
	} else {
		b = kdsm_reserve_locked(kd, mgr);
		ret = kdsm_buf_err(b);
		if (!ret)
			kdsm_post_locked(kd, b, KDSM_UNLOCK, id, 0,
					 dead ? KDSM_LOCK_DEAD : 0);
	}
	if (!ret) {
		lw->held = false;
		lw->abandoned = false;
		lw->dead = false;
		lw->orphaned = false;
		lw->owner = NULL;
	}
	return ret;
}

/* Manager of barriers (node 1): @from entered generation @gen. */
static int kdsm_bar_enter(struct kdsm_cluster *kd, u8 from, u32 gen)
{
	struct kvmsg_buf *b[KDSM_MAX_NODES + 1] = {};
	u8 entered, n, self = kd->geo.self;

	if (self != 1 || gen != kd->mgr_gen + 1 ||
	    kd->mgr_entered & BIT(from - 1))
		return -EPROTO;
	entered = kd->mgr_entered | BIT(from - 1);
	if (hweight8(entered) < kd->geo.nnodes) {
		kd->mgr_entered = entered;
		return 0;
	}
	for (n = 2; n <= kd->geo.nnodes; n++) {
		b[n] = kdsm_reserve_locked(kd, n);
		if (kdsm_buf_err(b[n])) {
			while (--n >= 2)
				if (!IS_ERR(b[n]))
					kvmsg_unreserve(b[n]);
			return -EAGAIN;
		}
	}
	kd->mgr_entered = 0;
	kd->mgr_gen = gen;
	for (n = 2; n <= kd->geo.nnodes; n++)
		kdsm_post_locked(kd, b[n], KDSM_BAR_GO, 0, gen, 0);
	kd->bar_passed = gen;
	wake_up_all(&kd->sync_wq);
	return 0;
}

static int kdsm_sync_apply(struct kdsm_cluster *kd, u8 from,
			   const struct kdsm_sig *s)
{
	u32 id = be32_to_cpu(s->id), gen = be32_to_cpu(s->gen);
	struct kdsm_lockwait *lw;
	int ret;

	switch (s->type) {
	case KDSM_LOCK_REQ:
		if (id >= KDSM_MAX_LOCKS || gen || s->code || s->node)
			return -EPROTO;
		break;
	case KDSM_LOCK_GRANT:
	case KDSM_UNLOCK:
		if (id >= KDSM_MAX_LOCKS || gen || s->code > KDSM_LOCK_DEAD ||
		    s->node)
			return -EPROTO;
		break;
	case KDSM_BAR_ENTER:
	case KDSM_BAR_GO:
		if (id || s->code || s->node)
			return -EPROTO;
		break;
	default:
		return -EPROTO;
	}
	switch (s->type) {
	case KDSM_LOCK_REQ:
		if (kdsm_lock_mgr(kd, id) != kd->geo.self)
			return -EPROTO;
		return kdsm_mgr_request(kd, id, from);
	case KDSM_UNLOCK:
		if (kdsm_lock_mgr(kd, id) != kd->geo.self)
			return -EPROTO;
		return kdsm_mgr_release(kd, id, from, s->code);
	case KDSM_LOCK_GRANT:
		lw = &kd->lockwait[id];
		if (from != kdsm_lock_mgr(kd, id) || !lw->waiting)
			return -EPROTO;
		if (!lw->abandoned) {
			kdsm_lock_granted(kd, id, s->code);
			return 0;
		}
		/* its task died: back it goes, a death it brings too */
		ret = kdsm_release_locked(kd, id, s->code);
		if (!ret)
			lw->waiting = false;
		return ret;
	case KDSM_BAR_ENTER:
		return kdsm_bar_enter(kd, from, gen);
	default: /* KDSM_BAR_GO */
		if (from != 1 || gen != kd->bar_passed + 1 || gen > kd->bar_gen)
			return -EPROTO;
		kd->bar_passed = gen;
		wake_up_all(&kd->sync_wq);
		return 0;
	}
}

/**
 * kdsm_sync_recv - a lock or barrier message from node @from
 * @kd: cluster
 * @from: sender
 * @s: the message
 * @ctx: where kvmsg runs us
 *
 * Context: the kvmsg handler.
 * Return: 0 (applied, queued behind a shortage, or dropped because the
 * cluster failed), -EAGAIN (no memory in softirq: kvmsg calls again in
 * process context), -ENOMEM, or -EPROTO (malformed or out of turn).
 */
int kdsm_sync_recv(struct kdsm_cluster *kd, u8 from, const struct kdsm_sig *s,
		   enum kvmsg_ctx ctx)
{
	struct kdsm_ev *ev;
	int ret;

	spin_lock_bh(&kd->lock);
	if (!kdsm_live(kd)) {
		spin_unlock_bh(&kd->lock);
		return 0;
	}
	ret = kd->sync_defer || (kd->options & KDSM_OPT_MODES) ? -EAGAIN :
	      kdsm_sync_apply(kd, from, s);
	spin_unlock_bh(&kd->lock);
	if (ret != -EAGAIN)
		return ret;

	ev = kzalloc(sizeof(*ev), ctx == KVMSG_CTX_PROCESS ? GFP_KERNEL :
		     GFP_ATOMIC);
	if (!ev) {
		kdsm_count(kd, KDSM_STAT_EV_DEFER_NOMEM, 1);
		return ctx == KVMSG_CTX_PROCESS ? -ENOMEM : -EAGAIN;
	}
	ev->kind = KDSM_EV_SYNC;
	ev->from = from;
	ev->sig = *s;
	ev->t0 = ktime_get_ns();
	spin_lock_bh(&kd->lock);
	if (!kdsm_live(kd)) {
		spin_unlock_bh(&kd->lock);
		kfree(ev);
		return 0;
	}
	/* it may fit now; if not, keep arrival order behind the others */
	ret = kd->sync_defer || (kd->options & KDSM_OPT_MODES) ? -EAGAIN :
	      kdsm_sync_apply(kd, from, s);
	if (ret == -EAGAIN) {
		ev->reason = kd->sync_defer ? KDSM_DEFER_ORDER :
			     (kd->options & KDSM_OPT_MODES) ? KDSM_DEFER_MODE :
			     KDSM_DEFER_NOBUF;
		kdsm_defer(kd, ev);
		ev = NULL;
		ret = 0;
	}
	spin_unlock_bh(&kd->lock);
	kfree(ev);
	return ret;
}

/**
 * kdsm_sync_run - apply a deferred lock or barrier message, waiting for
 *	its send buffers
 * @kd: cluster, live
 * @ev: the KDSM_EV_SYNC event
 *
 * Context: kdsm's deferral worker, under kd->lock, which it drops to wait.
 * Return: 0, -ESHUTDOWN (the cluster failed meanwhile), -EPROTO.
 */
int kdsm_sync_run(struct kdsm_cluster *kd, struct kdsm_ev *ev)
{
	int ret;

	lockdep_assert_held(&kd->lock);
	for (;;) {
		ret = kdsm_sync_apply(kd, ev->from, &ev->sig);
		if (ret != -EAGAIN)
			return ret;
		spin_unlock_bh(&kd->lock);
		usleep_range(20, 100);	/* completions free buffers */
		spin_lock_bh(&kd->lock);
		if (!kdsm_live(kd))
			return -ESHUTDOWN;
	}
}

/*
 * Run @fn under kd->lock until it has its send buffers; @killable: give
 * up on a fatal signal (a request may; a release must not).  @f: the
 * calling descriptor, for the functions that check a lock's owner.
 */
static int kdsm_sync_retry(struct kdsm_cluster *kd,
			   int (*fn)(struct kdsm_cluster *kd, u32 arg,
				     const struct file *f),
			   u32 arg, const struct file *f, bool killable)
{
	int ret;

	for (;;) {
		spin_lock_bh(&kd->lock);
		ret = kdsm_ready(kd) ? fn(kd, arg, f) : -EHOSTDOWN;
		spin_unlock_bh(&kd->lock);
		if (ret != -EAGAIN)
			return ret;
		if (killable && fatal_signal_pending(current))
			return -EINTR;
		usleep_range(20, 100);
	}
}

/*
 * Under kd->lock: descriptor @f's task unlocks.  Two tasks may race to
 * unlock; one gives it back.
 */
static int kdsm_unlock_locked(struct kdsm_cluster *kd, u32 id,
			      const struct file *f)
{
	struct kdsm_lockwait *lw = &kd->lockwait[id];

	if (!lw->held || lw->owner != f)
		return -EPERM;
	return kdsm_release_locked(kd, id, false);
}

/* Under kd->lock: a grant that came as its task was killed goes back. */
static int kdsm_giveback_locked(struct kdsm_cluster *kd, u32 id,
				const struct file *f)
{
	return kd->lockwait[id].held ? kdsm_release_locked(kd, id, false) : 0;
}

/* Under kd->lock: the marked release of a dead holder's lock, if due. */
static int kdsm_orphan_release_locked(struct kdsm_cluster *kd, u32 id,
				      const struct file *f)
{
	return kd->lockwait[id].orphaned ? kdsm_release_locked(kd, id, true) :
					   0;
}

static int kdsm_lock_ask(struct kdsm_cluster *kd, u32 id,
			 const struct file *f)
{
	struct kdsm_lockwait *lw = &kd->lockwait[id];
	u8 mgr = kdsm_lock_mgr(kd, id);
	struct kvmsg_buf *b;
	int ret;

	if (lw->waiting || lw->held || kdsm_qlock_busy(kd, id))
		return -EBUSY;
	lw->waiting = true;
	if (mgr == kd->geo.self) {
		ret = kdsm_mgr_request(kd, id, mgr);
	} else {
		b = kdsm_reserve_locked(kd, mgr);
		ret = kdsm_buf_err(b);
		if (!ret)
			kdsm_post_locked(kd, b, KDSM_LOCK_REQ, id, 0, 0);
	}
	if (ret)
		lw->waiting = false;
	return ret;
}

/*
 * 0, or with @robust -EOWNERDEAD: the lock is @f's; see the top of the
 * file.
 */
static int kdsm_lock(struct kdsm_cluster *kd, u32 id, const struct file *f,
		     bool robust)
{
	struct kdsm_lockwait *lw = &kd->lockwait[id];
	bool held;
	int ret;

	ret = kdsm_sync_retry(kd, kdsm_lock_ask, id, f, true);
	if (ret)
		return ret;
	ret = wait_event_killable(kd->sync_wq,
				  READ_ONCE(lw->held) || !kdsm_ready(kd));
	spin_lock_bh(&kd->lock);
	held = lw->held;
	if (!kdsm_ready(kd)) {
		ret = -EHOSTDOWN;
	} else if (ret && !held) {
		lw->abandoned = true;	/* the grant goes straight back */
	} else if (!ret) {
		lw->owner = f;
		if (lw->dead && robust)
			ret = -EOWNERDEAD;
		lw->dead = false;
	}
	spin_unlock_bh(&kd->lock);
	if (ret == -ERESTARTSYS && held)	/* killed as it came */
		kdsm_sync_retry(kd, kdsm_giveback_locked, id, f, false);
	return ret;
}

static int kdsm_unlock(struct kdsm_cluster *kd, u32 id, const struct file *f)
{
	return kdsm_sync_retry(kd, kdsm_unlock_locked, id, f, false);
}

static int kdsm_bar_ask(struct kdsm_cluster *kd, u32 gen,
			const struct file *f)
{
	struct kvmsg_buf *b;
	int ret;

	if (kd->bar_busy)
		return -EBUSY;
	if (kd->geo.self == 1) {
		ret = kdsm_bar_enter(kd, 1, gen);
	} else {
		b = kdsm_reserve_locked(kd, 1);
		ret = kdsm_buf_err(b);
		if (!ret)
			kdsm_post_locked(kd, b, KDSM_BAR_ENTER, 0, gen, 0);
	}
	if (!ret) {
		kd->bar_gen = gen;
		kd->bar_busy = true;
	}
	return ret;
}

static int kdsm_barrier(struct kdsm_cluster *kd)
{
	u32 gen;
	int ret;

	/* a killed task's barrier completes before the next one starts */
	ret = wait_event_killable(kd->sync_wq, !kdsm_ready(kd) ||
				  READ_ONCE(kd->bar_passed) ==
				  READ_ONCE(kd->bar_gen));
	if (ret)
		return ret;
	gen = READ_ONCE(kd->bar_gen) + 1;
	ret = kdsm_sync_retry(kd, kdsm_bar_ask, gen, NULL, true);
	if (ret)
		return ret;
	ret = wait_event_killable(kd->sync_wq, !kdsm_ready(kd) ||
				  READ_ONCE(kd->bar_passed) >= gen);
	spin_lock_bh(&kd->lock);
	kd->bar_busy = false;
	if (!kdsm_ready(kd))
		ret = -EHOSTDOWN;
	else if (!ret)
		kdsm_count(kd, KDSM_STAT_BARRIERS, 1);
	spin_unlock_bh(&kd->lock);
	return ret;
}

/*
 * KDSM_IOC_STATE: the state and, once FAILED, the reason.  Never sleeps
 * on the cluster, so a task that got SIGBUS on a lost page can ask.
 */
static long kdsm_state_ioctl(struct kdsm_cluster *kd, void __user *arg)
{
	struct kdsm_state_arg st = {};

	spin_lock_bh(&kd->lock);
	st.state = kd->state;
	if (kd->state == KDSM_STATE_FAILED)
		strscpy(st.error, kd->error, sizeof(st.error));
	spin_unlock_bh(&kd->lock);
	return copy_to_user(arg, &st, sizeof(st)) ? -EFAULT : 0;
}

/**
 * kdsm_region_ioctl - the region descriptor's commands: locks, barriers,
 * the cluster's state
 * @r: the region
 * @f: the descriptor the call came through, which a lock it takes
 *	belongs to
 * @cmd: KDSM_IOC_LOCK, KDSM_IOC_UNLOCK, KDSM_IOC_BARRIER or KDSM_IOC_STATE
 * @arg: user pointer to struct kdsm_lock_arg for the locks, to struct
 *	kdsm_state_arg for the state
 * @priv: the cluster
 *
 * Context: the calling task; may sleep (killable).
 * Return: 0; -EOWNERDEAD (KDSM_IOC_LOCK of a kernel lock with
 * KDSM_LOCK_ROBUST: taken, and a holder died holding it since its last
 * grant); -EINVAL (bad id, unknown flag or KDSM_LOCK_ROBUST on an unlock),
 * -EFAULT, -EBUSY (another task of this node waits for the
 * lock or the barrier, or holds the lock, as either kind), -EPERM (unlock
 * of a lock this descriptor does not hold as that kind), -EOPNOTSUPP (a
 * queue lock without atomics on the way), -EHOSTDOWN (the cluster
 * failed), -EINTR, -ENOTTY.
 */
long kdsm_region_ioctl(struct kvmem_region *r, struct file *f,
		       unsigned int cmd, unsigned long arg, void *priv)
{
	struct kdsm_cluster *kd = priv;
	struct kdsm_lock_arg la;

	switch (cmd) {
	case KDSM_IOC_LOCK:
	case KDSM_IOC_UNLOCK:
		if (copy_from_user(&la, (void __user *)arg, sizeof(la)))
			return -EFAULT;
		if ((la.flags & ~KDSM_LOCK_FLAGS) || la.id >= KDSM_MAX_LOCKS ||
		    (cmd == KDSM_IOC_UNLOCK && (la.flags & KDSM_LOCK_ROBUST)))
			return -EINVAL;
		if (la.flags & KDSM_LOCK_ATOMIC)
			return cmd == KDSM_IOC_LOCK ?
			       kdsm_qlock_lock(kd, la.id, f) :
			       kdsm_qlock_unlock(kd, la.id, f);
		if (cmd == KDSM_IOC_LOCK)
			return kdsm_lock(kd, la.id, f,
					 la.flags & KDSM_LOCK_ROBUST);
		return kdsm_unlock(kd, la.id, f);
	case KDSM_IOC_BARRIER:
		return kdsm_barrier(kd);
	case KDSM_IOC_STATE:
		return kdsm_state_ioctl(kd, (void __user *)arg);
	}
	return -ENOTTY;
}

/**
 * kdsm_region_release - a region's open file was released: the locks it
 *	held go
 * @r: the region
 * @f: the file, at its last reference
 * @priv: the cluster
 *
 * Every kernel lock @f held is released marked KDSM_LOCK_DEAD, so its
 * next robust holder's lock call returns -EOWNERDEAD; what finds no send
 * buffer now goes from orphan_work, as does nothing else: this never
 * waits for a peer (a process's exit waits for it).  Every queue lock @f
 * held is released.  In a cluster that is not ready nothing moves.
 *
 * Context: process (the file's last fput()); takes kd->lock, no sleep.
 */
void kdsm_region_release(struct kvmem_region *r, struct file *f, void *priv)
{
	struct kdsm_cluster *kd = priv;
	struct kdsm_lockwait *lw;
	bool due = false;
	u32 id;

	spin_lock_bh(&kd->lock);
	for (id = 0; kdsm_ready(kd) && id < KDSM_MAX_LOCKS; id++) {
		lw = &kd->lockwait[id];
		if (lw->owner != f)
			continue;
		lw->owner = NULL;
		lw->orphaned = true;
		kdsm_count(kd, KDSM_STAT_LOCKS_OWNER_DEAD, 1);
		if (kdsm_release_locked(kd, id, true) == -EAGAIN)
			due = true;
	}
	if (due)
		queue_work(kdsm_wq, &kd->orphan_work);
	spin_unlock_bh(&kd->lock);
	kdsm_qlock_release_file(kd, f);
}

/**
 * kdsm_orphan_work - send the marked releases kdsm_region_release() left
 * @w: kd->orphan_work
 *
 * Queued only while the cluster is ready; a failure ends its waits and
 * kdsm_cluster_destroy() cancels it after that.
 *
 * Context: kdsm_wq; sleeps until each release has its send buffer or the
 * cluster failed.
 */
void kdsm_orphan_work(struct work_struct *w)
{
	struct kdsm_cluster *kd = container_of(w, struct kdsm_cluster,
					       orphan_work);
	u32 id;

	for (id = 0; id < KDSM_MAX_LOCKS; id++)
		if (kdsm_sync_retry(kd, kdsm_orphan_release_locked, id, NULL,
				    false) == -EHOSTDOWN)
			break;
}
