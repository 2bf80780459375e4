// SPDX-License-Identifier: GPL-2.0-only
/*
 * Waiting for a reply with selective polling (Liss et al., section 4): a
 * task that expects its answer soon busy-polls the domain's CQ for a
 * bounded time (kverbs_domain_poll()) before it sleeps.
 */
#include <linux/sched/signal.h>

#include "kvmsg-pri.h"

/**
 * kvmsg_wait_poll_us - wait for a completion, busy-polling the CQ first
 * @dom: domain whose handler will complete @done
 * @done: what to wait for
 * @poll_us: microseconds to poll before sleeping; 0 sleeps at once
 * @timeout_us: microseconds the whole wait may take
 *
 * Polling trades a CPU for the wake-up latency of the softirq path; the
 * caller chooses per call.  The task yields whenever the scheduler asks,
 * so on a single CPU it does not starve the provider's own work.
 *
 * Context: process; sleeps (killable).
 * Return: 0 when @done completed, -ETIMEDOUT, or -EINTR on a fatal signal.
 */
int kvmsg_wait_poll_us(struct kverbs_domain *dom, struct completion *done,
		       unsigned int poll_us, unsigned int timeout_us)
{
	u64 start = ktime_get_ns();
	u64 end = start + (u64)min(poll_us, timeout_us) * NSEC_PER_USEC;
	u64 spent_us;
	long left;

	might_sleep();
	while (poll_us && !completion_done(done)) {
		if (kverbs_domain_poll(dom) < 0 ||
		    ktime_get_ns() > end || fatal_signal_pending(current))
			break;
		cond_resched();
	}
	/* The sleep gets what the poll left of @timeout_us. */
	spent_us = div_u64(ktime_get_ns() - start, NSEC_PER_USEC);
	spent_us = min_t(u64, spent_us, timeout_us);
	left = wait_for_completion_killable_timeout(done,
						    usecs_to_jiffies(timeout_us -
								     spent_us));
	if (left > 0)
		return 0;
	return left ? -EINTR : -ETIMEDOUT;
}
EXPORT_SYMBOL_NS_GPL(kvmsg_wait_poll_us, KVERBS_NS);
