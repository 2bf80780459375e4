// SPDX-License-Identifier: GPL-2.0-only
/*
 * Selective polling (Liss et al., section 4): a task that waits for a
 * reply may process the domain's CQ itself for a bounded time instead of
 * sleeping until the softirq poller wakes it.
 *
 * The CQ stays an IB_POLL_SOFTIRQ CQ; a polling task runs
 * ib_process_cq_direct() on it with bottom halves off and
 * kverbs_domain.poll_lock held.  Every kverbs CQ callback takes that lock
 * too (kmsg_cq_enter()), unless it runs inside the polling task itself, so
 * callbacks of a domain stay serialised whoever polls.
 */
#include <linux/delay.h>
#include <linux/sched.h>

#include "../kverbs/kverbs-pri.h"

/**
 * kmsg_cq_enter - serialise a CQ callback against polling tasks
 * @dom: domain
 *
 * Context: CQ callback (softirq or a polling task, bottom halves off).
 * Return: true if the callback runs inside kverbs_domain_poll().
 */
bool kmsg_cq_enter(struct kverbs_domain *dom)
{
	if (READ_ONCE(dom->poll_owner) == raw_smp_processor_id() + 1)
		return true;
	spin_lock(&dom->poll_lock);
	return false;
}

/**
 * kmsg_cq_exit - end of a CQ callback
 * @dom: domain
 * @polled: what kmsg_cq_enter() returned
 *
 * Context: CQ callback.
 */
void kmsg_cq_exit(struct kverbs_domain *dom, bool polled)
{
	if (!polled)
		spin_unlock(&dom->poll_lock);
}

/**
 * kverbs_domain_poll - process the domain's completions in the caller
 * @dom: domain
 * @budget: most completions to process, 1..256
 *
 * Handlers called from here see KMSG_CTX_POLL: bottom halves are off and
 * they must not sleep, as in softirq.
 *
 * Context: process; not from a domain callback.  Does not sleep.
 * Return: completions processed, -ENOTCONN if the domain is not bound to
 * a device, -EINVAL for a bad @budget.
 */
int kverbs_domain_poll(struct kverbs_domain *dom, int budget)
{
	int n = -ENOTCONN;

	if (budget < 1 || budget > 256)
		return -EINVAL;
	spin_lock_bh(&dom->poll_lock);
	if (dom->poll_cq) {
		WRITE_ONCE(dom->poll_owner, raw_smp_processor_id() + 1);
		n = ib_process_cq_direct(dom->poll_cq, budget);
		WRITE_ONCE(dom->poll_owner, 0);
	}
	spin_unlock_bh(&dom->poll_lock);
	return n;
}
EXPORT_SYMBOL_NS_GPL(kverbs_domain_poll, KVERBS_NS);

/**
 * kmsg_wait_poll - wait for a completion, busy-polling the CQ first
 * @dom: domain whose handler will complete @done
 * @done: what to wait for
 * @poll_us: how long to poll before sleeping; 0 sleeps at once
 * @timeout: bound on the whole wait, in jiffies
 *
 * Polling trades a CPU for the wake-up latency of the softirq path; the
 * caller chooses per call.  The task yields whenever the scheduler asks,
 * so on a single CPU it does not starve the provider's own work.
 *
 * Context: process; sleeps (killable).
 * Return: as wait_for_completion_killable_timeout(): > 0 when @done
 * completed, 0 on timeout, -ERESTARTSYS on a fatal signal.
 */
long kmsg_wait_poll(struct kverbs_domain *dom, struct completion *done,
		    unsigned int poll_us, unsigned long timeout)
{
	u64 end = ktime_get_ns() + (u64)poll_us * NSEC_PER_USEC;

	might_sleep();
	while (poll_us && !completion_done(done)) {
		if (kverbs_domain_poll(dom, 16) < 0 ||
		    ktime_get_ns() > end || fatal_signal_pending(current))
			break;
		cond_resched();
	}
	return wait_for_completion_killable_timeout(done, timeout);
}
EXPORT_SYMBOL_NS_GPL(kmsg_wait_poll, KVERBS_NS);
