// SPDX-License-Identifier: GPL-2.0-only
/*
 * The send-queue ledger of an endpoint: work-request slots, selective
 * signaling and reclaim, for every WR posted on the send queue, a message
 * of kvmsg or an RDMA operation of rdma.c and region.c.
 *
 * One ledger per QP decides signaling for all of them, and it never holds
 * more WRs than the queue has entries (kverbs_ep_budget()).  A WR is
 * reclaimed by its own completion or by the completion of any later WR
 * (RC send queues complete in order); the unsignaled tail that completed
 * silently is reclaimed after the drain at teardown.  The owner of each WR
 * learns of its reclaim through its struct kverbs_wr_ops.
 *
 * Locking: kverbs_ep.lock (bh) protects the ledger, the ring and the
 * operation slots.
 */
#include <linux/percpu.h>
#include <linux/slab.h>

#include "kverbs-pri.h"

/**
 * kverbs_ledger_init - empty ledger
 * @l: ledger
 * @size: entries: every WR that may be outstanding
 * @interval: signal at least every this many WRs (1..@size)
 *
 * Context: any.
 */
void kverbs_ledger_init(struct kverbs_ledger *l, u32 size, u32 interval)
{
	l->size = size;
	l->slots = roundup_pow_of_two(size);
	l->head = 0;
	l->tail = 0;
	l->interval = clamp(interval, 1U, size);
	l->unsignaled = 0;
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_ledger_init);

/**
 * kverbs_ledger_used - posted WRs not yet reclaimed
 * @l: ledger
 *
 * Context: any.
 * Return: entries in use.
 */
u32 kverbs_ledger_used(const struct kverbs_ledger *l)
{
	return l->head - l->tail;
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_ledger_used);

/**
 * kverbs_ledger_slot - ring slot of a position
 * @l: ledger
 * @pos: position from kverbs_ledger_post()
 *
 * Context: any.
 * Return: index into a ring of @l->slots entries; distinct for any
 * @l->size consecutive positions, across the u32 wrap too.
 */
u32 kverbs_ledger_slot(const struct kverbs_ledger *l, u32 pos)
{
	return pos & (l->slots - 1);
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_ledger_slot);

/**
 * kverbs_ledger_post - account for one WR about to be posted
 * @l: ledger; must not be full
 * @want_signal: the poster needs this WR's completion, or the WR takes
 *	the last free buffer or slot of its pool
 * @pos: set to the WR's position
 *
 * Context: any.
 * Return: true if the WR must be posted signaled.
 */
bool kverbs_ledger_post(struct kverbs_ledger *l, bool want_signal, u32 *pos)
{
	bool sig;

	*pos = l->head++;
	sig = want_signal || kverbs_ledger_used(l) == l->size ||
	      ++l->unsignaled >= l->interval;
	if (sig)
		l->unsignaled = 0;
	return sig;
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_ledger_post);

/**
 * kverbs_ledger_unpost - undo the last kverbs_ledger_post() after a failed post
 * @l: ledger
 * @unsignaled: @l->unsignaled before that call
 *
 * Context: any, under the same lock as the kverbs_ledger_post().
 */
void kverbs_ledger_unpost(struct kverbs_ledger *l, u32 unsignaled)
{
	l->head--;
	l->unsignaled = unsignaled;
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_ledger_unpost);

/**
 * kverbs_ledger_reclaim - the WR at @pos completed or was flushed
 * @l: ledger
 * @pos: its position
 *
 * Context: any.
 * Return: how many entries, from the old tail on, are now reclaimed; 0 if
 * @pos was reclaimed already or was never posted.
 */
u32 kverbs_ledger_reclaim(struct kverbs_ledger *l, u32 pos)
{
	u32 n = pos - l->tail + 1;

	if (n > kverbs_ledger_used(l))
		return 0;
	l->tail += n;
	return n;
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_ledger_reclaim);

/*
 * Set while a softirq completion runs a user callback (a kvmsg handler,
 * ->send_done, an RDMA @done) on this CPU: calls made from inside it must
 * not sleep, whatever their flags say.  Only touched with bottom halves
 * off, so the CPU cannot change under it.
 */
static DEFINE_PER_CPU(unsigned int, kverbs_atomic_upcall);

/**
 * kverbs_upcall_begin - a user callback starts in atomic context
 *
 * Context: softirq (CQ callback).
 */
void kverbs_upcall_begin(void)
{
	__this_cpu_inc(kverbs_atomic_upcall);
}

/**
 * kverbs_upcall_end - the user callback returned
 *
 * Context: softirq (CQ callback).
 */
void kverbs_upcall_end(void)
{
	__this_cpu_dec(kverbs_atomic_upcall);
}

/**
 * kverbs_may_wait - may a call with @flags sleep for a resource
 * @flags: the caller's flags
 *
 * Context: any.
 * Return: false with KVERBS_NOWAIT or inside an atomic user callback.
 */
bool kverbs_may_wait(unsigned int flags)
{
	return !(flags & KVERBS_NOWAIT) && !this_cpu_read(kverbs_atomic_upcall);
}

/**
 * kverbs_may_wait_peer - may a call sleep for what a peer gives back
 * @dom: the endpoint's domain
 * @flags: the caller's flags
 *
 * A send-queue slot or a send buffer comes back only when the peer acks
 * (posting receives) and returns credits.  The task that runs a domain's
 * deferred handlers serves every peer of it: one that waited there for a
 * peer that withholds them would stall the others' messages and
 * teardowns.  There the call fails with -EAGAIN instead, and kvmsg calls
 * the handler again when the endpoint has room (kmsg/recv.c).
 *
 * Context: any.
 * Return: kverbs_may_wait(@flags), and false in @dom's deferred handlers.
 */
bool kverbs_may_wait_peer(const struct kverbs_domain *dom, unsigned int flags)
{
	return kverbs_may_wait(flags) &&
	       (READ_ONCE(dom->upcall_task) != current ||
		kverbs_test_undo(KVERBS_UNDO_PEER_WAIT));
}

/**
 * kverbs_in_deferred - is this @dom's deferred handler's task?
 * @dom: domain
 *
 * Not in an interrupt that came on top of it.
 *
 * Context: any.
 * Return: true in the task running @dom's deferred handlers.
 */
bool kverbs_in_deferred(const struct kverbs_domain *dom)
{
	return in_task() && READ_ONCE(dom->upcall_task) == current;
}

static bool kverbs_op_reclaim(struct kverbs_wr *w, void **arg)
{
	*arg = container_of(w, struct kverbs_op, wr);
	return true;
}

static void kverbs_op_reclaimed(struct kverbs_ep *ep, void *arg, int status)
{
	struct kverbs_op *op = arg;
	kverbs_rdma_done_t done = op->done;
	void *ctx = op->ctx;

	/* What the slot holds goes back first (rdma_rw.c: the MR) */
	if (op->release)
		op->release(ctx, status);
	/* The slot is free before @done runs: @done may post again. */
	kverbs_op_put(ep, op);
	kverbs_upper->op_space(ep);
	if (done)
		done(ctx, status);
}

static const struct kverbs_wr_ops kverbs_op_wr_ops = {
	.reclaim = kverbs_op_reclaim,
	.done = kverbs_op_reclaimed,
};

/**
 * kverbs_sq_alloc - the ledger and operation slots of a new endpoint
 * @ep: endpoint whose domain has its budget
 *
 * Context: process; may sleep.
 * Return: 0 or -ENOMEM; kverbs_sq_free() undoes a partial allocation.
 */
int kverbs_sq_alloc(struct kverbs_ep *ep)
{
	const struct kverbs_ep_budget *b = &ep->dom->budget;
	struct kverbs_sq *sq = &ep->sq;
	u32 size = b->upper_send + b->nops;
	u32 interval;
	int i;

	interval = READ_ONCE(kverbs_signal_interval) ?:
		   max(1, ep->dom->depth / 4);
	kverbs_ledger_init(&sq->ledger, size, min_t(u32, interval,
						    ep->dom->depth));
	sq->ring = kcalloc(sq->ledger.slots, sizeof(*sq->ring), GFP_KERNEL);
	sq->ops = kcalloc(b->nops, sizeof(*sq->ops), GFP_KERNEL);
	if (!sq->ring || !sq->ops)
		return -ENOMEM;
	sq->nops = b->nops;
	for (i = 0; i < sq->nops; i++) {
		struct kverbs_op *op = &sq->ops[i];

		op->wr.ep = ep;
		op->wr.ops = &kverbs_op_wr_ops;
		op->wr.cqe.done = kverbs_sq_done;
		list_add_tail(&op->node, &sq->op_free);
		sq->op_nfree++;
	}
	return 0;
}
ALLOW_ERROR_INJECTION(kverbs_sq_alloc, ERRNO);

/**
 * kverbs_sq_free - free the ledger of an endpoint being released
 * @ep: endpoint
 *
 * Context: any.
 */
void kverbs_sq_free(struct kverbs_ep *ep)
{
	kfree(ep->sq.ring);
	kfree(ep->sq.ops);
	ep->sq.ring = NULL;
	ep->sq.ops = NULL;
}

/*
 * Account for one ledger entry and post the chain @first..@last: @last is
 * the entry's WR (its completion reclaims the entry), the WRs before it
 * are unsignaled and covered by @last's (RC send queues complete in
 * order).  ep->lock held.
 */
static int kverbs_sq_post_chain_locked(struct kverbs_ep *ep,
				       struct kverbs_wr *w,
				       struct ib_send_wr *first,
				       struct ib_send_wr *last,
				       bool want_signal, bool *signaled)
{
	u32 pos, unsignaled = ep->sq.ledger.unsignaled;
	const struct ib_send_wr *bad;
	struct kverbs_sq *sq = &ep->sq;
	bool sig;
	int ret;

	lockdep_assert_held(&ep->lock);
	if (WARN_ON_ONCE(kverbs_ledger_used(&sq->ledger) == sq->ledger.size))
		return -ENOSPC;
	sig = kverbs_ledger_post(&sq->ledger, want_signal, &pos);
	sq->ring[kverbs_ledger_slot(&sq->ledger, pos)] = w;
	w->pos = pos;
	last->wr_cqe = &w->cqe;
	last->next = NULL;
	if (sig)
		last->send_flags |= IB_SEND_SIGNALED;
	/*
	 * The ledger reclaims by position: a completion retires every
	 * earlier WR.  siw completes a SEND, WRITE or local WR once it is
	 * handed to TCP, while an earlier READ still waits for its
	 * response; fenced, such a WR waits for the READs before it, so
	 * completions stay in posting order.  A READ needs no fence (the
	 * responses come in order), nor does a WR with none outstanding.
	 */
	if (ep->iwarp && last->opcode != IB_WR_RDMA_READ &&
	    last->opcode != IB_WR_RDMA_READ_WITH_INV &&
	    !kverbs_test_undo(KVERBS_UNDO_IWARP_FENCE))
		first->send_flags |= IB_SEND_FENCE;
	ret = ib_post_send(ep->qp, first, &bad);
	if (ret && bad != first) {
		/*
		 * Part of the chain went (an rdma_rw registration before its
		 * read): the entry stays on the books, reclaimed after the
		 * drain, and the endpoint goes down; the poster learns it
		 * from -EINPROGRESS.
		 */
		if (sig)
			sq->signaled++;
		*signaled = sig;
		return -EINPROGRESS;
	}
	if (ret) {
		kverbs_ledger_unpost(&sq->ledger, unsignaled);
		return ret;
	}
	if (sig)
		sq->signaled++;
	*signaled = sig;
	return 0;
}

/**
 * kverbs_sq_post_locked - account for a WR in the ledger and post it
 * @ep: endpoint
 * @w: the WR's ledger entry; @w->ops says what happens at reclaim
 * @wr: the work request; signaled here if the ledger says so
 * @want_signal: see kverbs_ledger_post()
 * @signaled: set to whether @wr went signaled
 *
 * The caller holds a buffer or slot that bounds what it posts, so the
 * ledger cannot be full.
 *
 * Context: any, ep->lock held, endpoint CONNECTED.
 * Return: 0 or the provider's post error (nothing was accounted then).
 */
noinline int kverbs_sq_post_locked(struct kverbs_ep *ep, struct kverbs_wr *w,
				   struct ib_send_wr *wr, bool want_signal,
				   bool *signaled)
{
	return kverbs_sq_post_chain_locked(ep, w, wr, wr, want_signal,
					   signaled);
}
ALLOW_ERROR_INJECTION(kverbs_sq_post_locked, ERRNO);

/**
 * kverbs_sq_used - WRs on the books
 * @ep: endpoint
 *
 * Context: any; takes ep->lock.
 * Return: posted WRs not reclaimed yet.
 */
u32 kverbs_sq_used(struct kverbs_ep *ep)
{
	u32 used;

	spin_lock_bh(&ep->lock);
	used = kverbs_ledger_used(&ep->sq.ledger);
	spin_unlock_bh(&ep->lock);
	return used;
}

/* Callbacks owed for reclaimed WRs, run after ep->lock is dropped. */
struct kverbs_sq_owed {
	struct {
		struct kverbs_wr *w;
		void *arg;
	} c[8];
	unsigned int n;
};

static void kverbs_sq_pay(struct kverbs_ep *ep, struct kverbs_sq_owed *o,
			  int status)
{
	unsigned int i;

	for (i = 0; i < o->n; i++)
		o->c[i].w->ops->done(ep, o->c[i].arg, status);
	o->n = 0;
}

/*
 * Reclaim every WR up to position @pos, which completed with @status, and
 * run the callbacks owed, in posting order.
 */
static void kverbs_sq_reclaim_through(struct kverbs_ep *ep, u32 pos,
				      int status)
{
	struct kverbs_sq *sq = &ep->sq;
	struct kverbs_sq_owed o = { .n = 0 };
	u32 n;

	spin_lock_bh(&ep->lock);
	n = kverbs_ledger_reclaim(&sq->ledger, pos);
	while (n--) {
		u32 slot = kverbs_ledger_slot(&sq->ledger,
					      sq->ledger.tail - n - 1);
		struct kverbs_wr *w = sq->ring[slot];
		void *arg;

		if (!w->ops->reclaim(w, &arg))
			continue;
		if (o.n == ARRAY_SIZE(o.c)) {
			spin_unlock_bh(&ep->lock);
			kverbs_sq_pay(ep, &o, status);
			spin_lock_bh(&ep->lock);
		}
		o.c[o.n].w = w;
		o.c[o.n++].arg = arg;
	}
	spin_unlock_bh(&ep->lock);
	kverbs_sq_pay(ep, &o, status);
}

static int kverbs_wc_errno(enum ib_wc_status st)
{
	switch (st) {
	case IB_WC_SUCCESS:
		return 0;
	case IB_WC_WR_FLUSH_ERR:
		return -ECONNRESET;
	case IB_WC_REM_ACCESS_ERR:
	case IB_WC_REM_INV_REQ_ERR:
	case IB_WC_REM_OP_ERR:
		return -EREMOTEIO;
	default:
		return -EIO;
	}
}

/**
 * kverbs_sq_done - completion of a send-queue WR, signaled or flushed
 * @cq: the domain's CQ
 * @wc: work completion
 *
 * Reclaims the WR and every earlier one still outstanding; an error other
 * than a flush fails the endpoint.
 *
 * Context: softirq (CQ callback), serialised per domain by the CQ's poller.
 */
void kverbs_sq_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kverbs_wr *w = container_of(wc->wr_cqe, struct kverbs_wr, cqe);
	struct kverbs_ep *ep = w->ep;
	int status = kverbs_wc_errno(wc->status);

	kverbs_upcall_begin();
	kverbs_sq_reclaim_through(ep, w->pos, status);
	kverbs_upcall_end();
	if (status && status != -ECONNRESET) {
		atomic64_inc(&ep->stat_errors);
		kverbs_ep_log(err, ep, "%s completion failed: %s (%d), peer node %u\n",
			      w->ops == &kverbs_op_wr_ops ? "operation" : "send",
			      ib_wc_status_msg(wc->status), wc->status,
			      ep->peer_node);
		kverbs_ep_fail(ep, status);
	}
}

/**
 * kverbs_sq_reclaim_tail - reclaim the unsignaled tail of a drained QP
 * @ep: endpoint in teardown
 *
 * Unsignaled WRs that completed successfully produce no completion, and
 * the drain WR's completion belongs to ib_drain_qp(), so WRs posted after
 * the last signaled one are still on the books: they are all done once the
 * drain returned.  Without this they would leak across a reconnect.
 *
 * Context: process, after ib_drain_qp().
 */
void kverbs_sq_reclaim_tail(struct kverbs_ep *ep)
{
	struct kverbs_ledger *l = &ep->sq.ledger;
	u32 used, last;

	if (!ep->sq.ring)
		return;
	spin_lock_bh(&ep->lock);
	used = kverbs_ledger_used(l);
	last = l->head - 1;
	spin_unlock_bh(&ep->lock);
	if (used)
		kverbs_sq_reclaim_through(ep, last, 0);
	used = kverbs_sq_used(ep);
	WARN_ONCE(used, "kverbs: %u WRs not reclaimed\n", used);
}

/* A free slot off @sq's list, or NULL; ep->lock held. */
static struct kverbs_op *kverbs_op_pop_locked(struct kverbs_sq *sq)
{
	struct kverbs_op *op = list_first_entry_or_null(&sq->op_free,
							struct kverbs_op, node);

	if (op) {
		list_del_init(&op->node);
		sq->op_nfree--;
	}
	return op;
}

/*
 * @wait: sleep for a slot, killable, for at most @timeout jiffies
 * (MAX_SCHEDULE_TIMEOUT: unbounded); -ETIMEDOUT after that.
 */
static struct kverbs_op *kverbs_op_take(struct kverbs_ep *ep, bool wait,
					long timeout)
{
	struct kverbs_sq *sq = &ep->sq;
	struct kverbs_op *op;
	long left;
	int err;

	if (wait)
		might_sleep();
	for (;;) {
		err = 0;
		op = NULL;
		spin_lock_bh(&ep->lock);
		if (ep->state != KVERBS_EP_CONNECTED) {
			err = ep->error ?: -ENOTCONN;
		} else {
			op = kverbs_op_pop_locked(sq);
			if (!op)
				err = -EAGAIN;
		}
		/* Tell kvmsg why a deferred handler failed (op_space). */
		if (err == -EAGAIN && !wait && kverbs_in_deferred(ep->dom))
			set_bit(KVERBS_EP_F_OP_STARVED, &ep->flags);
		spin_unlock_bh(&ep->lock);
		if (err != -EAGAIN || !wait)
			break;
		left = wait_event_killable_timeout(sq->wait,
						   READ_ONCE(sq->op_nfree) ||
						   READ_ONCE(ep->state) !=
						   KVERBS_EP_CONNECTED, timeout);
		if (left < 0)
			return ERR_PTR(-EINTR);
		if (!left)
			return ERR_PTR(-ETIMEDOUT);
		timeout = left;
	}
	return op ?: ERR_PTR(err);
}

/**
 * kverbs_op_get - take an operation slot of the send queue
 * @ep: connected endpoint
 * @flags: KVERBS_NOWAIT to fail instead of sleeping
 *
 * Context: process, may sleep (killable); atomic with KVERBS_NOWAIT, inside
 * an atomic callback, or in a deferred handler (kverbs_may_wait_peer()).
 * Return: the slot, or ERR_PTR: -EAGAIN, -EINTR, -ENOTCONN or the
 * endpoint's error.
 */
struct kverbs_op *kverbs_op_get(struct kverbs_ep *ep, unsigned int flags)
{
	return kverbs_op_take(ep, kverbs_may_wait_peer(ep->dom, flags),
			      MAX_SCHEDULE_TIMEOUT);
}

/**
 * kverbs_op_get_local - an operation slot for a local work request
 * @ep: connected endpoint
 * @timeout: jiffies to wait for one at most
 *
 * For a grant's REG_MR and LOCAL_INV, whose caller then waits, bounded,
 * for their completion anyway (grant.c).  A deferred handler's grant may
 * wait for a slot too, but no longer than @timeout: a slot that does not
 * come back (a peer whose RNR NAKs hold the send queue) fails the
 * endpoint instead of holding the domain's deferral work.
 *
 * Context: process, may sleep (killable).
 * Return: as kverbs_op_get(), or -ETIMEDOUT (the endpoint then fails).
 */
struct kverbs_op *kverbs_op_get_local(struct kverbs_ep *ep, long timeout)
{
	struct kverbs_op *op = kverbs_op_take(ep, true, timeout);

	if (op == ERR_PTR(-ETIMEDOUT)) {
		kverbs_ep_log(err, ep,
			      "no send-queue slot for a local work request in %ld s; closing the connection\n",
			      timeout / HZ);
		atomic64_inc(&ep->stat_errors);
		kverbs_ep_fail(ep, -ETIMEDOUT);
	}
	return op;
}

static void kverbs_sq_nudge_done(void *ctx, int status)
{
	struct kverbs_ep *ep = ctx;

	clear_bit(KVERBS_EP_F_NUDGING, &ep->flags);
}

/**
 * kverbs_sq_nudge - make rxe look at the send queue again
 * @ep: endpoint
 *
 * rxe before 6.4 (its requester and completer in tasklets, on different
 * CPUs) can lose the wake-up of a LOCAL_INV, which it fences behind every
 * earlier work request: the completer retires the last of those just
 * before the requester records that it waits, and nothing runs the
 * requester again until another work request is posted.  This posts one:
 * a zero-length RDMA WRITE, the one request that needs nothing at the
 * peer (no receive; IBA C9-88: a zero-length RDMA operation's R_Key is
 * not checked), which queues behind the invalidation and completes after
 * it.  One at a time: a second could complete no sooner.  It takes an
 * operation slot like any other request (``writes`` in debugfs counts it
 * too); with none free, the 10 s bound of kverbs_grant_post_all() ends a
 * lost invalidation.  A deferred handler's call does not mark @ep as
 * starved (kverbs_op_take()): its handler asked for nothing.  The same
 * write is a liveness probe (kverbs_ep_probe()): the peer must
 * acknowledge it.
 *
 * Context: process or softirq; not under @ep->lock.
 * Return: 0 when posted, -EBUSY (one is posted already), -EAGAIN (no free
 * slot), -ENOTCONN or the endpoint's error, or the provider's post error.
 */
int kverbs_sq_nudge(struct kverbs_ep *ep)
{
	struct ib_rdma_wr wr = { .wr.opcode = IB_WR_RDMA_WRITE };
	struct kverbs_sq *sq = &ep->sq;
	struct kverbs_op *op = NULL;
	int ret = 0;

	spin_lock_bh(&ep->lock);
	if (ep->state != KVERBS_EP_CONNECTED)
		ret = ep->error ?: -ENOTCONN;
	else if (test_bit(KVERBS_EP_F_NUDGING, &ep->flags))
		ret = -EBUSY;
	else
		op = kverbs_op_pop_locked(sq);
	if (op)
		set_bit(KVERBS_EP_F_NUDGING, &ep->flags);
	else if (!ret)
		ret = -EAGAIN;
	spin_unlock_bh(&ep->lock);
	if (ret)
		return ret;
	op->done = kverbs_sq_nudge_done;
	op->ctx = ep;
	ret = kverbs_op_post(ep, op, &wr.wr);
	if (ret) {
		clear_bit(KVERBS_EP_F_NUDGING, &ep->flags);
		kverbs_op_put(ep, op);
		return ret;
	}
	spin_lock_bh(&ep->lock);
	sq->nudges++;
	spin_unlock_bh(&ep->lock);
	return 0;
}

/**
 * kverbs_op_put - give back an operation slot
 * @ep: endpoint
 * @op: slot from kverbs_op_get(), not posted or reclaimed
 *
 * Context: any (not hard interrupt).
 */
void kverbs_op_put(struct kverbs_ep *ep, struct kverbs_op *op)
{
	op->release = NULL;
	spin_lock_bh(&ep->lock);
	list_add(&op->node, &ep->sq.op_free);
	ep->sq.op_nfree++;
	spin_unlock_bh(&ep->lock);
	wake_up(&ep->sq.wait);
}

/* Count a posted operation by its opcode; ep->lock held. */
static void kverbs_op_count(struct kverbs_sq *sq, enum ib_wr_opcode opcode)
{
	sq->ops_posted++;
	switch (opcode) {
	case IB_WR_RDMA_READ:
	case IB_WR_RDMA_READ_WITH_INV:
		sq->reads++;
		break;
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		sq->writes++;
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
	case IB_WR_MASKED_ATOMIC_CMP_AND_SWP:
	case IB_WR_MASKED_ATOMIC_FETCH_AND_ADD:
		sq->atomics++;
		break;
	case IB_WR_REG_MR:
		sq->regs++;
		break;
	case IB_WR_LOCAL_INV:
		sq->invs++;
		break;
	default:
		break;
	}
}

/**
 * kverbs_op_post_chain - post a chain of work requests for one operation
 * @ep: endpoint
 * @op: slot from kverbs_op_get(), with @done and @ctx set
 * @first: the first WR of the chain
 * @last: its last WR: signaled if @op->done is set
 *
 * The chain takes @op's one ledger entry: the WRs before @last are
 * unsignaled and end with it (an rdma_rw context's registration before
 * its read, on iWARP: the send-queue room is rdma_rw's, the CQ's is
 * @rw_cqes of struct kverbs_ep_budget).
 *
 * Context: any (not hard interrupt).
 * Return: as kverbs_op_post(); or -EINPROGRESS: part of the chain was
 * posted, @op is on the books and is reclaimed after the drain, and the
 * caller must fail the endpoint.
 */
int kverbs_op_post_chain(struct kverbs_ep *ep, struct kverbs_op *op,
			 struct ib_send_wr *first, struct ib_send_wr *last)
{
	bool sig;
	int ret;

	spin_lock_bh(&ep->lock);
	if (ep->state != KVERBS_EP_CONNECTED) {
		ret = ep->error ?: -ENOTCONN;
	} else {
		ret = kverbs_sq_post_chain_locked(ep, &op->wr, first, last,
						  op->done || !ep->sq.op_nfree,
						  &sig);
		if (!ret)
			kverbs_op_count(&ep->sq, last->opcode);
	}
	spin_unlock_bh(&ep->lock);
	return ret;
}

/**
 * kverbs_op_post - post an RDMA operation, a registration or an invalidation
 * @ep: endpoint
 * @op: slot from kverbs_op_get(), with @done and @ctx set
 * @wr: the work request; signaled if @op->done is set
 *
 * Context: any (not hard interrupt).
 * Return: 0, -ENOTCONN or the endpoint's error once it is going down, or
 * the provider's post error; the slot is the caller's again on error.
 */
noinline int kverbs_op_post(struct kverbs_ep *ep, struct kverbs_op *op,
			    struct ib_send_wr *wr)
{
	return kverbs_op_post_chain(ep, op, wr, wr);
}
ALLOW_ERROR_INJECTION(kverbs_op_post, ERRNO);
