// SPDX-License-Identifier: GPL-2.0-only
/*
 * kmigrate destination: pulling the pages, after FROZEN.
 *
 * Every moving page starts ABSENT (kvmem protection NONE).  Whoever moves
 * it to FETCHING by cmpxchg owns its read: a faulting task (one page, at
 * once, then optionally polling the CQ: fault_poll_us) or the prefetcher
 * (runs of up to kverbs_ep_max_read_pages() pages within one of the
 * source's extents, KMIG_PULL_WINDOW reads in flight, one while a task
 * waits for a fault's read, the last range
 * first: the stack).  The read's completion grants the pages to the
 * process and marks them HERE; kvmem wakes the tasks waiting for them.
 * A failed read, or the source's loss, makes every page not yet here
 * LOST, then FAILED once kvmem fails it (SIGBUS when touched).
 *
 * The source's CPU takes no part: RDMA reads of its registered pages by
 * offset and extent key.
 */
#include <linux/moduleparam.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include "kmigrate-pri.h"

static unsigned int fault_poll_us;
module_param(fault_poll_us, uint, 0644);
MODULE_PARM_DESC(fault_poll_us,
		 "microseconds a faulting task polls the CQ for its page before it sleeps (0: sleep at once)");

/* One read in flight; holds a reference on its arena. */
struct kmig_read {
	struct kmig_arena *a;
	u32 first;
	u32 n;
	bool fault;
	u64 t0;
};

/* Queue the prefetcher, which holds a reference while queued. */
void kmig_pull_kick(struct kmig_arena *a)
{
	kmig_arena_get(a);
	if (!queue_work(kmig.wq, &a->pull_work))
		kmig_arena_put(a);
}

/* Queue @arrive_work once every page is here. */
void kmig_pull_arrived(struct kmig_arena *a)
{
	kmig_arena_get(a);
	if (!queue_work(kmig.wq, &a->arrive_work))
		kmig_arena_put(a);
}

void kmig_in_arrive_work(struct work_struct *w)
{
	struct kmig_arena *a = container_of(w, struct kmig_arena, arrive_work);
	bool arrived = false, resumed;

	/* DONE after RESUMED: see kmig_in_resume(). */
	spin_lock_bh(&a->lock);
	if (a->state == KMIGRATE_ST_PULLING) {
		a->state = KMIGRATE_ST_ARRIVED;
		a->arrived = true;
		arrived = true;
		a->total_ns = ktime_get_ns() - a->t_frozen;
	}
	resumed = a->resumed;
	spin_unlock_bh(&a->lock);
	wake_up_all(&a->wait);
	if (arrived) {
		kmig_count(KMIGRATE_S_IN_DONE, 1);
		/* Pre-copy: KMIGRATE_IOC_RESUME sends it after RESUMED. */
		if (resumed)
			kmig_in_send_done(a, KMIG_DONE_ARRIVED);
	}
	kmig_arena_put(a);
}

/* Fail every LOST page in kvmem, in batches of ranges. */
static void kmig_pull_fail_lost(struct kmig_arena *a)
{
	struct kvmem_range r[64];
	u32 p = 0, n = 0;

	while (p < a->npages) {
		u32 first;

		if (READ_ONCE(a->pstate[p]) != KMIG_PG_LOST) {
			p++;
			continue;
		}
		first = p;
		while (p < a->npages &&
		       cmpxchg(&a->pstate[p], KMIG_PG_LOST,
			       KMIG_PG_FAILED) == KMIG_PG_LOST)
			p++;
		r[n].first = first;
		r[n].count = p - first;
		if (++n == ARRAY_SIZE(r)) {
			kvmem_fail(a->vr, r, n);
			n = 0;
		}
	}
	if (n)
		kvmem_fail(a->vr, r, n);
}

void kmig_pull_lose_work(struct work_struct *w)
{
	struct kmig_arena *a = container_of(w, struct kmig_arena, lose_work);

	kmig_pull_fail_lost(a);
	kmig_arena_put(a);
}

/**
 * kmig_pull_lose - the source is gone: no page still away will come
 * @a: the arena, LOST
 *
 * Pages being read fail when their reads are flushed.
 *
 * Context: process.
 */
void kmig_pull_lose(struct kmig_arena *a)
{
	u32 p;

	for (p = 0; p < a->npages; p++)
		cmpxchg(&a->pstate[p], KMIG_PG_ABSENT, KMIG_PG_LOST);
	kmig_pull_fail_lost(a);
}

static void kmig_read_done(void *ctx, int status)
{
	struct kmig_read *r = ctx;
	struct kmig_arena *a = r->a;
	struct kvmem_range range = { .first = r->first, .count = r->n };
	u32 i;

	if (!status) {
		/* A grant never waits, whatever the context. */
		kvmem_protect(a->vr, &range, 1, KVMEM_PROT_RW, KVERBS_NOWAIT);
		for (i = 0; i < r->n; i++)
			WRITE_ONCE(a->pstate[r->first + i], KMIG_PG_HERE);
		if (r->fault) {
			atomic64_add(r->n, &a->fault_pages);
			atomic64_add(ktime_get_ns() - r->t0, &a->fault_ns);
			kmig_count(KMIGRATE_S_FAULT_PAGES, r->n);
		} else {
			atomic64_add(r->n, &a->prefetch_pages);
			kmig_count(KMIGRATE_S_PREFETCH_PAGES, r->n);
		}
		if (atomic_sub_and_test(r->n, &a->todo))
			kmig_pull_arrived(a);
	} else {
		for (i = 0; i < r->n; i++)
			WRITE_ONCE(a->pstate[r->first + i], KMIG_PG_LOST);
		kmig_arena_get(a);
		if (!queue_work(kmig.wq, &a->lose_work))
			kmig_arena_put(a);
	}
	if (r->fault) {
		/* the prefetcher, if on, went slow while a task waited */
		if (atomic_dec_and_test(&a->faulting) && !status &&
		    READ_ONCE(a->prefetch))
			kmig_pull_kick(a);
	} else if (atomic_dec_return(&a->inflight) < KMIG_PULL_WINDOW &&
		   !status) {
		kmig_pull_kick(a);
	}
	kfree(r);
	kmig_arena_put(a);
}

/*
 * Read pages [@first, @first + @n) of the source's arena into ours; they
 * are FETCHING and ours.  On failure they are LOST (the caller fails
 * them).
 */
static int kmig_read_post(struct kmig_arena *a, u32 first, u32 n, bool fault)
{
	u64 off = (u64)first << PAGE_SHIFT;
	struct kverbs_remote remote = {
		.offset = off,
		.len = (u64)n << PAGE_SHIFT,
		.rkey = a->keys[off >> a->extent_shift],
	};
	struct kmig_read *r;
	int ret = -ENOTCONN;
	u32 i;

	r = kmalloc(sizeof(*r), GFP_KERNEL);
	if (!r) {
		ret = -ENOMEM;
		goto lost;
	}
	r->a = a;
	r->first = first;
	r->n = n;
	r->fault = fault;
	r->t0 = ktime_get_ns();
	/*
	 * A current endpoint holds the connection's reference, so the
	 * arena is live while one is; a fault callback itself holds none.
	 */
	down_read(&a->ep_sem);
	if (a->ep && !a->out && !READ_ONCE(a->down)) {
		kmig_arena_get(a);
		ret = kverbs_rdma_read_pages(a->ep, &a->pages[first], n,
					     &remote, kmig_read_done, r, 0);
		if (ret)
			kmig_arena_put(a);
	}
	up_read(&a->ep_sem);
	if (!ret) {
		kmig_count(KMIGRATE_S_READS, 1);
		return 0;
	}
	kfree(r);
lost:
	for (i = 0; i < n; i++)
		WRITE_ONCE(a->pstate[first + i], KMIG_PG_LOST);
	return ret;
}

/* Poll the CQ while page @index is being read, for fault_poll_us at most. */
static void kmig_pull_poll(struct kmig_arena *a, u32 index)
{
	u64 end = ktime_get_ns() + (u64)READ_ONCE(fault_poll_us) * NSEC_PER_USEC;

	while (READ_ONCE(a->pstate[index]) == KMIG_PG_FETCHING &&
	       ktime_get_ns() < end && !fatal_signal_pending(current)) {
		int ret = -ENOTCONN;

		down_read(&a->ep_sem);
		if (a->ep && !a->out)
			ret = kverbs_domain_poll(kverbs_ep_domain(a->ep));
		up_read(&a->ep_sem);
		if (ret < 0)
			break;
		cond_resched();
	}
}

/**
 * kmig_pull_fault - kvmem's fault callback: the process touched page @index
 * @vr: the arena's region
 * @index: the page
 * @write: for writing (every page is granted RW)
 * @priv: the arena
 *
 * Context: the faulting task; may sleep.  kvmem waits for the grant.
 */
void kmig_pull_fault(struct kvmem_region *vr, u32 index, bool write,
		     void *priv)
{
	struct kmig_arena *a = priv;
	struct kvmem_range range = { .first = index, .count = 1 };
	u8 st;

	if (!a->pstate || !READ_ONCE(a->got_frozen) || index >= a->npages)
		goto fail;
	st = READ_ONCE(a->pstate[index]);
	if (st == KMIG_PG_ABSENT) {
		st = cmpxchg(&a->pstate[index], KMIG_PG_ABSENT,
			     KMIG_PG_FETCHING);
		if (st == KMIG_PG_ABSENT) {
			atomic_inc(&a->faulting);
			if (kmig_read_post(a, index, 1, true)) {
				atomic_dec(&a->faulting);
				goto fail_lost;
			}
			st = KMIG_PG_FETCHING;
		}
	}
	if (st == KMIG_PG_FETCHING) {
		if (READ_ONCE(fault_poll_us))
			kmig_pull_poll(a, index);
		return;
	}
	if (st == KMIG_PG_HERE)
		return;
	if (st == KMIG_PG_LOST)
		goto fail_lost;
fail:
	kvmem_fail(vr, &range, 1);
	return;
fail_lost:
	kmig_pull_fail_lost(a);
}

/* The next run of ABSENT pages, made FETCHING; 0 pages when none is left. */
static u32 kmig_pull_next(struct kmig_arena *a, u32 max, u32 *first)
{
	u32 per_extent = 1U << (a->extent_shift - PAGE_SHIFT);

	while (a->cursor_range < a->nranges) {
		const struct kmigrate_range *rg = &a->ranges[a->cursor_range];
		u32 end = rg->first + rg->count;
		u32 p = a->cursor_page, n = 0;

		while (p < end && READ_ONCE(a->pstate[p]) != KMIG_PG_ABSENT)
			p++;
		*first = p;
		while (p < end && n < max &&
		       p / per_extent == *first / per_extent &&
		       cmpxchg(&a->pstate[p], KMIG_PG_ABSENT,
			       KMIG_PG_FETCHING) == KMIG_PG_ABSENT) {
			p++;
			n++;
		}
		a->cursor_page = p;
		if (n)
			return n;
		if (p < end)
			continue;	/* a fault took it: go on after it */
		/* The ranges from the last to the first; wraps to ~0U. */
		a->cursor_range--;
		if (a->cursor_range < a->nranges)
			a->cursor_page = a->ranges[a->cursor_range].first;
	}
	return 0;
}

/*
 * The prefetcher: keeps KMIG_PULL_WINDOW reads in flight while pages
 * remain away.  Only this work moves the cursor (a work item never runs
 * concurrently with itself).
 */
void kmig_pull_work(struct work_struct *w)
{
	struct kmig_arena *a = container_of(w, struct kmig_arena, pull_work);
	u32 max = 0, first, n;
	bool lost = false;

	down_read(&a->ep_sem);
	if (a->ep && !a->out)
		max = kverbs_ep_max_read_pages(a->ep);
	up_read(&a->ep_sem);
	/*
	 * A fault's read queues behind the prefetch reads in flight on the
	 * same QP: while a task waits for its page, one prefetch read at
	 * most (the fault's completion kicks this again), so neither starves.
	 */
	while (max && READ_ONCE(a->state) == KMIGRATE_ST_PULLING &&
	       !READ_ONCE(a->released) &&
	       atomic_read(&a->inflight) <
	       (atomic_read(&a->faulting) ? 1 : KMIG_PULL_WINDOW)) {
		n = kmig_pull_next(a, max, &first);
		if (!n)
			break;
		atomic_inc(&a->inflight);
		if (kmig_read_post(a, first, n, false)) {
			atomic_dec(&a->inflight);
			lost = true;
			break;
		}
	}
	if (lost)
		kmig_pull_fail_lost(a);
	kmig_arena_put(a);
}
