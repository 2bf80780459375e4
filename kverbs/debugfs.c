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

static int kverbs_endpoints_show(struct seq_file *m, void *v)
{
	struct kverbs_domain *dom = m->private;
	struct kverbs_ep *ep;

	mutex_lock(&dom->lock);
	seq_printf(m, "domain %s node %u device %s cq %u/%u\n", dom->name,
		   dom->node_id,
		   dom->kdev ? dev_name(&dom->kdev->ibdev->dev) : "-",
		   dom->cq_used, dom->cq_size);
	list_for_each_entry(ep, &dom->eps, dom_node)
		seq_printf(m, "ep peer_node %u peer %pISpc state %s tx %lld rx %lld errors %lld\n",
			   ep->peer_node, &ep->peer_addr,
			   kverbs_ep_state_names[READ_ONCE(ep->state)],
			   atomic64_read(&ep->stat_tx),
			   atomic64_read(&ep->stat_rx),
			   atomic64_read(&ep->stat_errors));
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
