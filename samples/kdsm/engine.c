// SPDX-License-Identifier: GPL-2.0-only
/*
 * kdsm's effector: it feeds events (a peer's protocol message, a fault of
 * this node's task, a message this node addressed to itself, the
 * completion of its RDMA read of a page) to the transitions of proto.c
 * and carries out the actions they return: sends, page data by RDMA
 * write or read, protection changes through kvmem, the home's request
 * queue.  A read's completion is an event of its page like a message, so
 * it keeps the page's order (below).
 *
 * Softirq first.  An event runs in the context it arrives in (the kvmsg
 * handler in softirq, or the faulting task) under kd->lock, every call
 * KVERBS_NOWAIT.  An action that cannot complete there stops the event:
 * a revoke of a page the process has mapped needs a TLB shootdown (ZAP),
 * or no send buffer or RDMA slot is free (NOBUF).  The event, holding the
 * rest of its actions, then goes to the deferred queue, and so does every
 * later event of the same page (ORDER) until it is done; kdsm's worker
 * runs the queue in process context, in arrival order, waiting where the
 * handler could not.  Events of other pages are not held up.
 *
 * Per-page order is all the protocol needs: the home runs one transaction
 * per page, so the events a node sees for one page are ordered by the
 * transaction they belong to, and a transaction's later messages depend
 * on the earlier ones' actions.  Across pages nothing is ordered, as
 * between the kvmsg endpoints that carry the messages.
 *
 * An event's messages to this node itself (a request to its own home, a
 * forward to itself as the owner, the home's next queued request) run in
 * the same event, after its actions, from a small queue in the event:
 * every transition sends at most one message to its own node, so the
 * queue never holds more than one.
 */
#include <linux/delay.h>
#include <linux/ktime.h>
#include <linux/slab.h>

#include "kdsm-pri.h"
#include "kdsm_trace.h"

static struct kdsm_ev *kdsm_ev_get(struct kdsm_cluster *kd, gfp_t gfp)
{
	struct kdsm_ev *ev = xchg(&kd->spare, NULL);

	if (!ev)
		ev = kmalloc(sizeof(*ev), gfp);
	if (ev)
		memset(ev, 0, sizeof(*ev));
	return ev;
}

static void kdsm_ev_put(struct kdsm_cluster *kd, struct kdsm_ev *ev)
{
	if (cmpxchg(&kd->spare, NULL, ev))
		kfree(ev);
}

static void kdsm_wire(struct kdsm_msg *m, u8 type, u32 page, u8 node,
		      u8 acks, u8 flags)
{
	*m = (struct kdsm_msg){ .type = type, .page = cpu_to_be32(page),
				.node = node, .acks = acks, .flags = flags };
}

static int kdsm_self_push(struct kdsm_ev *ev, u8 from,
			  const struct kdsm_msg *m)
{
	if (WARN_ON_ONCE(ev->nself - ev->iself >= KDSM_EV_SELF))
		return -EPROTO;
	if (ev->iself == ev->nself) {
		ev->iself = 0;
		ev->nself = 0;
	}
	ev->self[ev->nself].from = from;
	ev->self[ev->nself].m = *m;
	ev->nself++;
	return 0;
}

/* Apply @m from @from to the page's state; the actions land in @ev. */
static int kdsm_transition(struct kdsm_cluster *kd, struct kdsm_ev *ev,
			   u8 from, const struct kdsm_msg *m)
{
	u32 page = be32_to_cpu(m->page);
	int n;

	switch (m->type) {
	case KDSM_READ_REQ:
	case KDSM_WRITE_REQ:
		trace_kdsm_request(kd->geo.self, page, from, m->type);
		n = kdsm_home_request(&kd->geo, &kd->home[page], from,
				      m->type == KDSM_WRITE_REQ, ev->acts);
		break;
	case KDSM_DONE:
		n = kdsm_home_done(&kd->geo, &kd->home[page], from, ev->acts);
		break;
	default:
		n = kdsm_page_event(&kd->geo, &kd->pg[page], page, from, m,
				    ev->acts);
		if (n < 0 || m->type != KDSM_INV)
			break;
		kdsm_count(kd, KDSM_STAT_INVALIDATIONS, 1);
		trace_kdsm_invalidate(kd->geo.self, page, from, m->node);
		/* test-only weakening: the odd page's copy stays readable */
		if ((kd->options & KDSM_OPT_WEAK) && (page & 1) &&
		    n && ev->acts[0].kind == KDSM_ACT_REVOKE) {
			memmove(ev->acts, ev->acts + 1,
				--n * sizeof(ev->acts[0]));
		}
	}
	if (n < 0)
		return n;
	ev->nacts = n;
	ev->iact = 0;
	return 0;
}

static void kdsm_home_queue(struct kdsm_cluster *kd, u32 page,
			    const struct kdsm_act *a, int *ret)
{
	u8 i, len = kd->homeq_len[page];

	/* a node has one request per page outstanding */
	for (i = 0; i < len; i++)
		if ((kd->homeq[page][i] & 0xf) == a->node)
			goto bad;
	if (len >= kd->geo.nnodes)
		goto bad;
	kd->homeq[page][len] = a->node | (a->type << 4);
	kd->homeq_len[page] = len + 1;
	*ret = 0;
	return;
bad:
	*ret = -EPROTO;
}

/* The home's next queued request becomes a message to itself. */
static int kdsm_home_next(struct kdsm_cluster *kd, struct kdsm_ev *ev)
{
	u32 page = ev->page;
	struct kdsm_msg m;
	u8 q;

	if (!kd->homeq_len[page])
		return 0;
	q = kd->homeq[page][0];
	memmove(kd->homeq[page], kd->homeq[page] + 1,
		--kd->homeq_len[page]);
	kdsm_wire(&m, q >> 4, page, 0, 0, 0);
	return kdsm_self_push(ev, q & 0xf, &m);
}

/*
 * Carry out one action.  Return 0 when done, -EAGAIN when it cannot be
 * done without waiting (@ev->reason says why), -EPROTO when a peer's
 * request does not fit the home's queue.
 */
static int kdsm_act(struct kdsm_cluster *kd, struct kdsm_ev *ev,
		    const struct kdsm_act *a)
{
	struct kvmem_range range = { .first = ev->page, .count = 1 };
	struct kdsm_geo *g = &kd->geo;
	struct kdsm_msg m;
	int ret;

	/* mode S: what would be a system call at user level costs 1 us */
	if ((kd->options & KDSM_OPT_MODE_SIM) && a->kind != KDSM_ACT_QUEUE &&
	    a->kind != KDSM_ACT_NEXT &&
	    !(a->kind == KDSM_ACT_SEND && a->to == kd->geo.self))
		udelay(1);
	switch (a->kind) {
	case KDSM_ACT_SEND:
		kdsm_wire(&m, a->type, ev->page, a->node, a->acks, a->flags);
		if (a->to == g->self)
			return kdsm_self_push(ev, g->self, &m);
		ret = kdsm_xmit_locked(kd, a->to, &m);
		if (ret == -EAGAIN)
			ev->reason = KDSM_DEFER_NOBUF;
		else if (!ret && (a->type == KDSM_READ_REPLY ||
				  a->type == KDSM_WRITE_REPLY) &&
			 !(a->flags & KDSM_F_FETCH))
			trace_kdsm_serve(g->self, ev->page, a->to, a->type);
		/* a lost peer fails the cluster from ->disconnected() */
		return ret == -EAGAIN ? ret : 0;
	case KDSM_ACT_DATA:
		ret = kdsm_rdma_data(kd, a->to, ev->page);
		if (ret == -EAGAIN)
			ev->reason = KDSM_DEFER_NOBUF;
		if (!ret || ret == -EAGAIN)
			return ret;
		/* never the reply that says the data is there */
		kdsm_fail_locked(kd, "node %u: page %u to node %u: RDMA write failed: %d",
				 g->self, ev->page, a->to, ret);
		return -ESHUTDOWN;
	case KDSM_ACT_FETCH:
		ret = kdsm_rdma_fetch(kd, a->to, ev->page);
		if (ret == -EAGAIN)
			ev->reason = KDSM_DEFER_NOBUF;
		if (!ret || ret == -EAGAIN)
			return ret;
		kdsm_fail_locked(kd, "node %u: page %u from node %u: RDMA read failed: %d",
				 g->self, ev->page, a->to, ret);
		return -ESHUTDOWN;
	case KDSM_ACT_REVOKE:
	case KDSM_ACT_GRANT:
		ret = kvmem_protect(kd->vr, &range, 1, a->prot, KVERBS_NOWAIT);
		if (ret == -EAGAIN) {
			ev->reason = KDSM_DEFER_ZAP;
			return ret;
		}
		if (ret) {
			kdsm_fail_locked(kd, "node %u: page %u: protection change failed: %d",
					 g->self, ev->page, ret);
			return -ESHUTDOWN;
		}
		if (a->kind == KDSM_ACT_GRANT && kd->fault_t0[ev->page]) {
			u64 ns = ktime_get_ns() - kd->fault_t0[ev->page];

			kd->fault_t0[ev->page] = 0;
			kdsm_count_fault_done(kd, ns);
			trace_kdsm_fault_done(g->self, ev->page, a->prot, ns);
		}
		return 0;
	case KDSM_ACT_QUEUE:
		kdsm_home_queue(kd, ev->page, a, &ret);
		return ret;
	case KDSM_ACT_NEXT:
		return kdsm_home_next(kd, ev);
	}
	WARN_ON_ONCE(1);
	return -EPROTO;
}

/*
 * In the worker: wait for what the handler could not.  Drops kd->lock;
 * the page's events stay behind @ev meanwhile (kd->defer).
 */
static int kdsm_act_wait(struct kdsm_cluster *kd, struct kdsm_ev *ev,
			 const struct kdsm_act *a)
{
	struct kvmem_range range = { .first = ev->page, .count = 1 };

	int ret = -EAGAIN;

	spin_unlock_bh(&kd->lock);
	if (ev->reason == KDSM_DEFER_ZAP)
		ret = kvmem_protect(kd->vr, &range, 1, a->prot, 0);
	else
		usleep_range(20, 100);	/* completions free buffers */
	spin_lock_bh(&kd->lock);
	if (ret && ret != -EAGAIN)
		kdsm_fail_locked(kd, "node %u: page %u: protection change failed: %d",
				 kd->geo.self, ev->page, ret);
	if (!kdsm_live(kd))
		return -ESHUTDOWN;
	return ret;
}

/*
 * Run @ev's actions, then its messages to itself, to the end.  Called
 * with kd->lock held.  @worker: process context, waits instead of
 * stopping.  Return 0 when done, 1 when stopped (@ev queued), or a
 * negative errno: a message does not fit the state.
 */
static int kdsm_run(struct kdsm_cluster *kd, struct kdsm_ev *ev, bool worker)
{
	const struct kdsm_act *a;
	u8 from;
	int ret;

	for (;;) {
		while (ev->iact < ev->nacts) {
			a = &ev->acts[ev->iact];
			ret = kdsm_act(kd, ev, a);
			/* NOBUF: sleep, then try the action again */
			while (ret == -EAGAIN && worker) {
				ret = kdsm_act_wait(kd, ev, a);
				if (ret == -EAGAIN)
					ret = kdsm_act(kd, ev, a);
			}
			if (ret == -EAGAIN) {
				kdsm_defer(kd, ev);
				return 1;
			}
			if (ret)
				return ret;
			ev->iact++;
		}
		if (ev->iself == ev->nself)
			return 0;
		from = ev->self[ev->iself].from;
		ret = kdsm_transition(kd, ev, from, &ev->self[ev->iself++].m);
		if (WARN_ON_ONCE(ret))	/* our own message */
			return ret;
	}
}

/**
 * kdsm_defer - queue @ev for the deferral worker
 * @kd: cluster
 * @ev: the event, @ev->reason set; a KDSM_EV_SYNC event holds up later
 *	sync messages, any other later events of its page
 *
 * Context: any; under kd->lock.
 */
void kdsm_defer(struct kdsm_cluster *kd, struct kdsm_ev *ev)
{
	static const unsigned int stat[] = {
		[KDSM_DEFER_ZAP] = KDSM_STAT_EV_DEFER_ZAP,
		[KDSM_DEFER_NOBUF] = KDSM_STAT_EV_DEFER_NOBUF,
		[KDSM_DEFER_ORDER] = KDSM_STAT_EV_DEFER_ORDER,
		[KDSM_DEFER_MODE] = KDSM_STAT_EV_DEFER_MODE,
	};

	lockdep_assert_held(&kd->lock);
	kdsm_count(kd, stat[ev->reason], 1);
	trace_kdsm_defer(kd->geo.self, ev->page, ev->reason);
	if (ev->kind == KDSM_EV_SYNC)
		kd->sync_defer++;
	else
		kd->defer[ev->page]++;
	list_add_tail(&ev->link, &kd->deferred);
	if (!kd->defer_idle)	/* the worker will find it */
		return;
	kd->defer_idle = false;
	kd->defer_kick_ns = ktime_get_ns();
	if (kd->defer_kw)
		kthread_queue_work(kd->defer_kw, &kd->defer_kwork);
	else
		queue_work(kd->options & KDSM_OPT_DEFER_NORMAL ?
			   kdsm_normal_wq : kdsm_wq, &kd->defer_work);
}

/*
 * Run message event @ev where it arrived, or queue it behind its page's
 * deferred events.  Return 0, or -EPROTO: it does not fit the page's
 * state.  @ev is consumed.
 */
static int kdsm_engine_event(struct kdsm_cluster *kd, struct kdsm_ev *ev)
{
	const struct kdsm_msg *m = &ev->msg;
	u64 t0 = ev->t0;
	int ret;

	spin_lock_bh(&kd->lock);
	if (!kdsm_live(kd)) {
		spin_unlock_bh(&kd->lock);
		kdsm_ev_put(kd, ev);	/* dropped: the cluster failed */
		return 0;
	}
	if (kd->defer[ev->page] || (kd->options & KDSM_OPT_MODES)) {
		ev->reason = kd->defer[ev->page] ? KDSM_DEFER_ORDER :
			     KDSM_DEFER_MODE;
		kdsm_defer(kd, ev);
		spin_unlock_bh(&kd->lock);
		return 0;
	}
	ret = kdsm_transition(kd, ev, ev->from, m);
	if (!ret) {
		ev->kind = KDSM_EV_ACTS;	/* if deferred: the rest only */
		ret = kdsm_run(kd, ev, false);
	}
	if (ret == 1) {
		spin_unlock_bh(&kd->lock);
		return 0;
	}
	spin_unlock_bh(&kd->lock);
	if (ret == -ESHUTDOWN)
		ret = 0;	/* an action failed the cluster */
	if (!ret) {
		kdsm_count(kd, KDSM_STAT_EV_SOFTIRQ, 1);
		kdsm_count(kd, KDSM_STAT_SOFTIRQ_NS, ktime_get_ns() - t0);
	}
	kdsm_ev_put(kd, ev);
	return ret;
}

/**
 * kdsm_engine_recv - a peer's protocol message, checked by kdsm_msg_check()
 * @kd: cluster
 * @p: the peer, whose keys this node holds
 * @m: the message
 * @ctx: where kvmsg runs us
 *
 * Context: the kvmsg handler.
 * Return: 0; -EAGAIN (no memory in softirq: kvmsg calls again in process
 * context); -EPROTO (does not fit the page's state: kvmsg drops it and
 * closes the endpoint).
 */
int kdsm_engine_recv(struct kdsm_cluster *kd, struct kdsm_peer *p,
		     const struct kdsm_msg *m, enum kvmsg_ctx ctx)
{
	struct kdsm_ev *ev;
	u64 t0 = ktime_get_ns();

	ev = kdsm_ev_get(kd, ctx == KVMSG_CTX_PROCESS ? GFP_KERNEL :
			 GFP_ATOMIC);
	if (!ev) {
		kdsm_count(kd, KDSM_STAT_EV_DEFER_NOMEM, 1);
		return ctx == KVMSG_CTX_PROCESS ? -ENOMEM : -EAGAIN;
	}
	ev->kind = KDSM_EV_MSG;
	ev->from = p->node;
	ev->page = be32_to_cpu(m->page);
	ev->msg = *m;
	ev->t0 = t0;
	return kdsm_engine_event(kd, ev);
}

/*
 * Fail one page for the faulting task (SIGBUS): the cluster is gone, or
 * no memory to run the fault.
 */
static void kdsm_fail_page(struct kdsm_cluster *kd, u32 page)
{
	struct kvmem_range range = { .first = page, .count = 1 };

	kvmem_fail(kd->vr, &range, 1);
}

/**
 * kdsm_engine_fault - kvmem's fault callback: this node's task needs a page
 * @r: the region
 * @page: page index
 * @write: for writing
 * @priv: the cluster
 *
 * Sends the request (or runs it, at its own home) and returns; the task
 * waits in kvmem for the grant.  Without a live cluster the page fails.
 *
 * Context: the faulting task; may sleep.
 */
void kdsm_engine_fault(struct kvmem_region *r, u32 page, bool write,
		       void *priv)
{
	struct kdsm_cluster *kd = priv;
	struct kdsm_page *pg;
	struct kdsm_ev *ev;
	int ret;

	ev = kdsm_ev_get(kd, GFP_KERNEL);
	if (!ev) {
		kdsm_fail_page(kd, page);
		return;
	}
	ev->kind = KDSM_EV_FAULT;
	ev->page = page;
	ev->write = write;
	ev->t0 = ktime_get_ns();

	spin_lock_bh(&kd->lock);
	if (kd->state != KDSM_STATE_READY) {
		spin_unlock_bh(&kd->lock);
		kdsm_ev_put(kd, ev);
		kdsm_fail_page(kd, page);
		return;
	}
	pg = &kd->pg[page];
	kdsm_count(kd, write ? KDSM_STAT_WRITE_FAULTS : KDSM_STAT_READ_FAULTS,
		   1);
	if (write && pg->prot == KDSM_READ)
		kdsm_count(kd, KDSM_STAT_UPGRADES, 1);
	trace_kdsm_fault(kd->geo.self, page, write);
	kd->fault_t0[page] = ev->t0;
	if (kd->defer[page]) {
		ev->reason = KDSM_DEFER_ORDER;
		kdsm_defer(kd, ev);
		spin_unlock_bh(&kd->lock);
		return;
	}
	ret = kdsm_fault(&kd->geo, pg, page, write, ev->acts);
	if (ret >= 0) {
		ev->nacts = ret;
		ev->kind = KDSM_EV_ACTS;
		ret = kdsm_run(kd, ev, false);
	} else {
		/* pending already, or a grant is on its way: just wait */
		ret = 0;
	}
	spin_unlock_bh(&kd->lock);
	if (ret == 1)
		return;		/* queued */
	kdsm_ev_put(kd, ev);
	if (ret < 0)
		kdsm_fail(kd, "node %u: fault on page %u: protocol error %d",
			  kd->geo.self, page, ret);
}

/* A deferred event from the start: a fault or a message behind others. */
static int kdsm_run_first(struct kdsm_cluster *kd, struct kdsm_ev *ev)
{
	int ret;

	if (ev->kind == KDSM_EV_FAULT) {
		ret = kdsm_fault(&kd->geo, &kd->pg[ev->page], ev->page,
				 ev->write, ev->acts);
		if (ret < 0)
			return 0;
		ev->nacts = ret;
		ev->iact = 0;
	} else {
		ret = kdsm_transition(kd, ev, ev->from, &ev->msg);
		if (ret)
			return ret;
	}
	ev->kind = KDSM_EV_ACTS;
	return kdsm_run(kd, ev, true);
}

/* Run the deferred events, in arrival order.  Process context. */
static void kdsm_defer_run(struct kdsm_cluster *kd)
{
	struct kdsm_ev *ev;
	int ret;

	spin_lock_bh(&kd->lock);
	kdsm_count(kd, KDSM_STAT_DEFER_WAKES, 1);
	kdsm_count(kd, KDSM_STAT_DEFER_WAKE_NS,
		   ktime_get_ns() - kd->defer_kick_ns);
	while ((ev = list_first_entry_or_null(&kd->deferred, struct kdsm_ev,
					      link))) {
		list_del(&ev->link);
		ret = 0;
		if (ev->kind == KDSM_EV_SYNC) {
			if (kdsm_live(kd))
				ret = kdsm_sync_run(kd, ev);
			kd->sync_defer--;
		} else {
			if (kdsm_live(kd))
				ret = ev->kind == KDSM_EV_ACTS ?
				      kdsm_run(kd, ev, true) :
				      kdsm_run_first(kd, ev);
			kd->defer[ev->page]--;
		}
		if (ret < 0 && ret != -ESHUTDOWN)
			kdsm_fail_locked(kd, "node %u: page %u: node %u's event does not fit (%d)",
					 kd->geo.self, ev->page, ev->from, ret);
		kdsm_count(kd, KDSM_STAT_DEFER_NS, ktime_get_ns() - ev->t0);
		spin_unlock_bh(&kd->lock);
		kfree(ev);
		cond_resched();
		spin_lock_bh(&kd->lock);
	}
	kd->defer_idle = true;
	spin_unlock_bh(&kd->lock);
}

/**
 * kdsm_defer_work - the deferral worker on a workqueue
 * @w: kd->defer_work
 *
 * Context: process (kdsm_wq, or kdsm_normal_wq with KDSM_OPT_DEFER_NORMAL).
 */
void kdsm_defer_work(struct work_struct *w)
{
	kdsm_defer_run(container_of(w, struct kdsm_cluster, defer_work));
}

/**
 * kdsm_defer_kwork - the deferral worker at SCHED_FIFO
 * @w: kd->defer_kwork
 *
 * Context: process (kd->defer_kw, KDSM_OPT_DEFER_FIFO).
 */
void kdsm_defer_kwork(struct kthread_work *w)
{
	kdsm_defer_run(container_of(w, struct kdsm_cluster, defer_kwork));
}

/**
 * kdsm_engine_drain - drop the deferred events of a dying cluster
 * @kd: cluster, no longer live
 *
 * Context: process; after the endpoints are gone.
 */
void kdsm_engine_drain(struct kdsm_cluster *kd)
{
	struct kdsm_ev *ev, *tmp;

	if (kd->defer_kw)
		kthread_cancel_work_sync(&kd->defer_kwork);
	else
		cancel_work_sync(&kd->defer_work);
	list_for_each_entry_safe(ev, tmp, &kd->deferred, link) {
		list_del(&ev->link);
		kfree(ev);
	}
	/* a fault may still take or park it, until kvmem_region_destroy() */
	kfree(xchg(&kd->spare, NULL));
}

/*
 * @page of this node's region and the same page of peer @node's, in @op;
 * its endpoint, or NULL before the peer's keys are here.
 */
static struct kverbs_ep *kdsm_rdma_page(struct kdsm_cluster *kd, u8 node,
					u32 page, struct kverbs_rdma_op *op)
{
	struct kdsm_peer *p = &kd->peers[node];

	lockdep_assert_held(&kd->lock);
	if (!p->ep || !kdsm_peer_keyed(p))
		return NULL;
	*op = (struct kverbs_rdma_op){
		.local = kd->kr,
		.local_off = (u64)page << PAGE_SHIFT,
		.remote = {
			.rkey = p->rkeys[page >> (p->rkey_shift - PAGE_SHIFT)],
			.offset = (u64)page << PAGE_SHIFT,
			.len = PAGE_SIZE,
		},
		.len = PAGE_SIZE,
	};
	return p->ep;
}

/**
 * kdsm_rdma_data - write this node's copy of @page into node @to's page
 * @kd: cluster
 * @to: requester
 * @page: page index
 *
 * Posted unsignaled: the reply that follows on the same endpoint tells
 * the peer the data is there.
 *
 * Context: any; under kd->lock.
 * Return: 0, -EAGAIN (no free slot), or the endpoint's error.
 */
int kdsm_rdma_data(struct kdsm_cluster *kd, u8 to, u32 page)
{
	struct kverbs_rdma_op op;
	struct kverbs_ep *ep = kdsm_rdma_page(kd, to, page, &op);
	int ret;

	if (!ep)
		return -ENOTCONN;
	ret = kverbs_rdma_write(ep, &op, KVERBS_NOWAIT);
	if (!ret)
		kdsm_count(kd, KDSM_STAT_RDMA_WRITE_BYTES, PAGE_SIZE);
	return ret;
}

/*
 * The read of kdsm_rdma_fetch() completed: its event joins the page's.
 * Context: the domain's completion handler (softirq, or process while
 * the endpoint is torn down), serialised with ->recv() of the domain.
 */
static void kdsm_fetch_done(void *ctx, int status)
{
	struct kdsm_ev *ev = ctx;
	struct kdsm_cluster *kd = ev->kd;

	/* flushed: the endpoint's ->disconnected() names the lost node */
	if (status == -ECONNRESET) {
		kfree(ev);
		return;
	}
	if (status) {
		spin_lock_bh(&kd->lock);
		if (kdsm_live(kd))
			kd->lost = ev->from;
		kdsm_fail_locked(kd, "node %u: page %u from node %u: RDMA read failed: %d",
				 kd->geo.self, ev->page, ev->from, status);
		spin_unlock_bh(&kd->lock);
		kfree(ev);
		return;
	}
	ev->t0 = ktime_get_ns();
	if (kdsm_engine_event(kd, ev))
		kdsm_fail(kd, "node %u: page %u: its read does not fit",
			  kd->geo.self, ev->page);
}

/**
 * kdsm_rdma_fetch - read node @from's copy of @page into this node's page
 * @kd: cluster
 * @from: the owner, holding the page READ until this transaction's DONE
 * @page: page index
 *
 * The owner's CPU takes no part.  The completion becomes a KDSM_FETCHED
 * event of the page (kdsm_fetch_done()); its memory is taken here, so
 * the completion cannot fail for want of it.
 *
 * Context: any; under kd->lock.
 * Return: 0, -EAGAIN (no free slot, or no memory in atomic context), or
 * the endpoint's error.
 */
int kdsm_rdma_fetch(struct kdsm_cluster *kd, u8 from, u32 page)
{
	struct kverbs_rdma_op op;
	struct kverbs_ep *ep = kdsm_rdma_page(kd, from, page, &op);
	struct kdsm_ev *ev;
	int ret;

	if (!ep)
		return -ENOTCONN;
	ev = kdsm_ev_get(kd, GFP_ATOMIC);
	if (!ev)
		return -EAGAIN;
	ev->kd = kd;
	ev->kind = KDSM_EV_MSG;
	ev->from = from;
	ev->page = page;
	kdsm_wire(&ev->msg, KDSM_FETCHED, page, 0, 0, 0);
	op.done = kdsm_fetch_done;
	op.ctx = ev;
	ret = kverbs_rdma_read(ep, &op, KVERBS_NOWAIT);
	if (ret) {
		kdsm_ev_put(kd, ev);
		return ret;
	}
	kdsm_count(kd, KDSM_STAT_RDMA_READ_BYTES, PAGE_SIZE);
	return 0;
}
