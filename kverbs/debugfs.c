// SPDX-License-Identifier: GPL-2.0-only
/*
 * debugfs: /sys/kernel/debug/kverbs/<domain>.<n>/endpoints lists every
 * endpoint of a domain with its peer, state and counters.
 */
#include <linux/debugfs.h>
#include <linux/seq_file.h>

#include "kverbs-pri.h"

static struct dentry *kverbs_debugfs_root;
static atomic_t kverbs_debugfs_seq = ATOMIC_INIT(0);

static const char * const kverbs_ep_state_names[] = {
	[KVERBS_EP_IDLE] = "idle",
	[KVERBS_EP_CONNECTING] = "connecting",
	[KVERBS_EP_CONNECTED] = "connected",
	[KVERBS_EP_CLOSING] = "closing",
	[KVERBS_EP_CLOSED] = "closed",
};

/* One line per endpoint; counters are read without the lock. */
static void kverbs_debugfs_ep(struct seq_file *m, struct kverbs_ep *ep)
{
	struct kvmsg_stats *st = &ep->msg.stats;
	u32 avail, ungranted, inflight, kept;

	spin_lock_bh(&ep->lock);
	avail = ep->msg.credit.avail;
	ungranted = ep->msg.credit.ungranted;
	inflight = kvmsg_sq_used(&ep->msg.sq);
	kept = ep->msg.kept;
	spin_unlock_bh(&ep->lock);

	seq_printf(m, "ep peer_node %u peer %pISpc state %s", ep->peer_node,
		   &ep->peer_addr, kverbs_ep_state_names[READ_ONCE(ep->state)]);
	seq_printf(m, " sent %lld received %lld signaled %lld reclaimed %lld inflight %u",
		   atomic64_read(&st->sent), atomic64_read(&st->received),
		   atomic64_read(&st->signaled), atomic64_read(&st->reclaimed),
		   inflight);
	seq_printf(m, " credits %u ungranted %u granted %lld credit_msgs %lld stalls %lld",
		   avail, ungranted, atomic64_read(&st->credits_granted),
		   atomic64_read(&st->credit_msgs), atomic64_read(&st->stalls));
	seq_printf(m, " deferrals %lld polled %lld kept %u proto_errors %lld errors %lld dropped %lld mem=%zu\n",
		   atomic64_read(&st->deferrals), atomic64_read(&st->polled),
		   kept, atomic64_read(&st->proto_errors),
		   atomic64_read(&ep->stat_errors),
		   atomic64_read(&st->dropped), kvmsg_ep_mem(ep));
}

static int kverbs_endpoints_show(struct seq_file *m, void *v)
{
	struct kverbs_domain *dom = m->private;
	struct kverbs_listener *l;
	struct kverbs_ep *ep;

	mutex_lock(&dom->lock);
	seq_printf(m, "domain %s node %u device %s cq %u/%u closed_sent %lld closed_reclaimed %lld\n",
		   dom->name, dom->node_id,
		   dom->kdev ? dev_name(&dom->kdev->ibdev->dev) : "-",
		   dom->cq_used, dom->cq_bound,
		   atomic64_read(&dom->closed_sent),
		   atomic64_read(&dom->closed_reclaimed));
	list_for_each_entry(l, &dom->listeners, dom_node)
		seq_printf(m, "listener %pISpc %s\n", &l->addr,
			   kverbs_listener_state_str(l));
	list_for_each_entry(ep, &dom->eps, dom_node)
		kverbs_debugfs_ep(m, ep);
	mutex_unlock(&dom->lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(kverbs_endpoints);

void kverbs_debugfs_add_domain(struct kverbs_domain *dom)
{
	char name[KVERBS_NAME_LEN + 12];

	snprintf(name, sizeof(name), "%s.%d", dom->name,
		 atomic_inc_return(&kverbs_debugfs_seq));
	dom->debugfs = debugfs_create_dir(name, kverbs_debugfs_root);
	debugfs_create_file("endpoints", 0400, dom->debugfs, dom,
			    &kverbs_endpoints_fops);
}

void kverbs_debugfs_remove_domain(struct kverbs_domain *dom)
{
	debugfs_remove_recursive(dom->debugfs);
	dom->debugfs = NULL;
}

void kverbs_debugfs_init(void)
{
	kverbs_debugfs_root = debugfs_create_dir("kverbs", NULL);
}

void kverbs_debugfs_exit(void)
{
	debugfs_remove_recursive(kverbs_debugfs_root);
}
