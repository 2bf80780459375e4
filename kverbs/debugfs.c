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

/*
 * One line per endpoint: kverbs' part, then the upper layer's.  Counters
 * are plain values under ep->lock, read under it.
 */
static void kverbs_debugfs_ep(struct seq_file *m, struct kverbs_ep *ep)
{
	u64 signaled, ops, reads, writes, atomics, regs, invs, nudges;
	u32 inflight, nfree;

	spin_lock_bh(&ep->lock);
	inflight = kverbs_ledger_used(&ep->sq.ledger);
	nfree = ep->sq.op_nfree;
	signaled = ep->sq.signaled;
	ops = ep->sq.ops_posted;
	reads = ep->sq.reads;
	writes = ep->sq.writes;
	atomics = ep->sq.atomics;
	regs = ep->sq.regs;
	invs = ep->sq.invs;
	nudges = ep->sq.nudges;
	spin_unlock_bh(&ep->lock);

	seq_printf(m, "ep %u qpn %u peer_node %u peer %pISpc state %s inflight %u signaled %llu ops %llu ops_free %u errors %lld",
		   ep->id, kverbs_ep_qpn(ep), ep->peer_node, &ep->peer_addr,
		   kverbs_ep_state_str(READ_ONCE(ep->state)), inflight,
		   signaled, ops, nfree, atomic64_read(&ep->stat_errors));
	seq_printf(m, " reads %llu writes %llu atomics %llu regs %llu invs %llu nudges %llu",
		   reads, writes, atomics, regs, invs, nudges);
	kverbs_upper->show_ep(m, ep);
	seq_putc(m, '\n');
}

static int kverbs_endpoints_show(struct seq_file *m, void *v)
{
	struct kverbs_domain *dom = m->private;
	struct kverbs_listener *l;
	struct kverbs_ep *ep;

	mutex_lock(&dom->lock);
	seq_printf(m, "domain %s node %u device %s cq %u/%u",
		   dom->name, dom->node_id,
		   dom->kdev ? dev_name(&dom->kdev->ibdev->dev) : "-",
		   dom->cq_used, dom->cq_bound);
	if (dom->auth_tfm)
		seq_printf(m, " auth key %d", dom->auth_serial);
	else
		seq_puts(m, " auth none");
	seq_printf(m, " auth_failures %lld",
		   atomic64_read(&dom->auth_failures));
	if (dom->auth_tfm)
		seq_printf(m, " auth_busy %lld",
			   atomic64_read(&dom->auth_busy));
	seq_printf(m, " accepted_max %u per_host %u accept_busy %lld",
		   dom->max_accepted, dom->max_per_host,
		   atomic64_read(&dom->accept_busy));
	kverbs_upper->show_domain(m, dom);
	seq_putc(m, '\n');
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
