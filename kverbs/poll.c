// SPDX-License-Identifier: GPL-2.0-only
/*
 * Selective polling (Liss et al., section 4): a task that waits for a
 * reply may run the domain's completion processing itself for a bounded
 * time instead of sleeping until the softirq poller wakes it.
 *
 * One poller per CQ, always: the CQ stays an IB_POLL_SOFTIRQ CQ and a
 * polling task never polls it directly (ib_process_cq_direct() on such a
 * CQ would run concurrently with ib_core's softirq poller and lose the
 * order of completions).  Instead it schedules the CQ's own irq_poll
 * instance on its CPU with bottom halves off and runs it when it enables
 * them again: irq_poll runs one instance on one CPU at a time, so
 * completions are handled in CQ order, by the same code, whoever asked.
 * What the task saves is its own sleep and wake-up; the CQ is re-armed
 * after every pass, so completions still raise interrupts, and one that
 * lands on another CPU is processed there.
 *
 * Handlers run in softirq context either way; those run for a polling
 * task see KVMSG_CTX_POLL (kverbs_domain.poll_owner is its CPU + 1;
 * kvmsg asks kverbs_domain_polled()).
 *
 * @poll_lock keeps the CQ from being freed while a task schedules its
 * poller: unbind clears @poll_cq under it before ib_free_cq(), which
 * waits for a scheduled instance to finish.
 */
#include "kverbs-pri.h"
#include <linux/irq_poll.h>

/**
 * kverbs_domain_polled - does this CQ callback run for a polling task
 * @dom: domain
 *
 * Context: CQ callback (softirq).
 * Return: true if a task in kverbs_domain_poll() on this CPU runs it.
 */
bool kverbs_domain_polled(const struct kverbs_domain *dom)
{
	return READ_ONCE(dom->poll_owner) == raw_smp_processor_id() + 1;
}

/**
 * kverbs_domain_poll - process the domain's completions on this CPU now
 * @dom: domain
 *
 * Runs the CQ's softirq poller in the caller, with bottom halves off:
 * handlers called from here see KVMSG_CTX_POLL and must not sleep.  If
 * another CPU is processing the CQ right now, that CPU does the work.
 *
 * Context: process; not from a domain callback.  Does not sleep.
 * Return: 0, or -ENOTCONN if the domain is not bound to a device.
 */
int kverbs_domain_poll(struct kverbs_domain *dom)
{
	int ret = -ENOTCONN;

	spin_lock_bh(&dom->poll_lock);
	if (dom->poll_cq) {
		WRITE_ONCE(dom->poll_owner, raw_smp_processor_id() + 1);
		irq_poll_sched(&dom->poll_cq->iop);
		ret = 0;
	}
	spin_unlock(&dom->poll_lock);
	/* Runs the scheduled poller here, bottom halves still off for it. */
	local_bh_enable();
	WRITE_ONCE(dom->poll_owner, 0);
	return ret;
}
EXPORT_SYMBOL_NS_GPL(kverbs_domain_poll, KVERBS_NS);
