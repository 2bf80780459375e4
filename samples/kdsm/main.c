// SPDX-License-Identifier: GPL-2.0-only
/*
 * kdsm: a sequential-consistency distributed shared memory over kverbs,
 * the system of Liss, Birk and Schuster (HOTI'03, TPDS'05) as a client of
 * the headers in include/kverbs/.  This file: the module, /dev/kdsm and the one
 * cluster of this node.  Documentation/kdsm.rst is the user's guide,
 * Documentation/kdsm-design.rst the design.
 */
#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/uaccess.h>
#include <net/genetlink.h>

#include "kdsm-pri.h"

unsigned int kdsm_max_pages = 16384;
module_param_named(max_pages, kdsm_max_pages, uint, 0444);
MODULE_PARM_DESC(max_pages, "largest region a cluster may ask for, in pages (default 16384)");

/* Serialises create, delete and attach; guards kdsm_cl. */
DEFINE_MUTEX(kdsm_ctl_mutex);
struct kdsm_cluster *kdsm_cl;
struct workqueue_struct *kdsm_wq;
struct workqueue_struct *kdsm_normal_wq;
struct dentry *kdsm_debugfs_root;

static long kdsm_dev_info(void __user *arg)
{
	struct kdsm_info info = { .page_size = PAGE_SIZE };
	struct kdsm_cluster *kd;

	mutex_lock(&kdsm_ctl_mutex);
	kd = kdsm_cl;
	if (kd) {
		info.node = kd->geo.self;
		info.nnodes = kd->geo.nnodes;
		info.state = READ_ONCE(kd->state);
		info.placement = kd->geo.block ? KDSM_PLACE_BLOCK :
						 KDSM_PLACE_CYCLIC;
		info.options = kd->options;
		info.npages = kd->geo.npages;
	}
	mutex_unlock(&kdsm_ctl_mutex);
	return copy_to_user(arg, &info, sizeof(info)) ? -EFAULT : 0;
}

/* The region's descriptor for this process, once the cluster is ready. */
static long kdsm_dev_attach(void)
{
	long ret;

	mutex_lock(&kdsm_ctl_mutex);
	if (!kdsm_cl)
		ret = -ENOENT;
	else if (READ_ONCE(kdsm_cl->state) == KDSM_STATE_FORMING)
		ret = -EAGAIN;
	else if (READ_ONCE(kdsm_cl->state) != KDSM_STATE_READY)
		ret = -EHOSTDOWN;
	else
		ret = kvmem_region_fd(kdsm_cl->vr);
	mutex_unlock(&kdsm_ctl_mutex);
	return ret;
}

/*
 * Return: KDSM_IOC_ATTACH: a descriptor, or -ENOENT (no cluster), -EAGAIN
 * (still forming), -EHOSTDOWN (failed); KDSM_IOC_INFO: 0 or -EFAULT.
 */
static long kdsm_dev_ioctl(struct file *f, unsigned int cmd,
			   unsigned long arg)
{
	switch (cmd) {
	case KDSM_IOC_ATTACH:
		return kdsm_dev_attach();
	case KDSM_IOC_INFO:
		return kdsm_dev_info((void __user *)arg);
	}
	return -ENOTTY;
}

static const struct file_operations kdsm_dev_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = kdsm_dev_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice kdsm_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kdsm",
	.fops = &kdsm_dev_fops,
	.mode = 0600,	/* a udev rule may open it to a group */
};

static int __init kdsm_init(void)
{
	int ret;

	if (!kdsm_max_pages || kdsm_max_pages > KVMEM_MAX_PAGES) {
		pr_err("max_pages must be 1..%u\n", KVMEM_MAX_PAGES);
		return -EINVAL;
	}
	kdsm_wq = alloc_workqueue("kdsm", WQ_HIGHPRI | WQ_MEM_RECLAIM, 0);
	if (!kdsm_wq)
		return -ENOMEM;
	/* KDSM_OPT_DEFER_NORMAL: the same but for priority */
	kdsm_normal_wq = alloc_workqueue("kdsm-normal", WQ_MEM_RECLAIM, 0);
	if (!kdsm_normal_wq) {
		destroy_workqueue(kdsm_wq);
		return -ENOMEM;
	}
	kdsm_debugfs_root = debugfs_create_dir("kdsm", NULL);
	ret = misc_register(&kdsm_dev);
	if (ret)
		goto out_wq;
	ret = kdsm_genl_init();
	if (ret)
		goto out_dev;
	return 0;

out_dev:
	misc_deregister(&kdsm_dev);
out_wq:
	debugfs_remove_recursive(kdsm_debugfs_root);
	destroy_workqueue(kdsm_normal_wq);
	destroy_workqueue(kdsm_wq);
	return ret;
}

static void __exit kdsm_exit(void)
{
	kdsm_genl_exit();
	misc_deregister(&kdsm_dev);
	mutex_lock(&kdsm_ctl_mutex);
	if (kdsm_cl)
		kdsm_cluster_destroy(kdsm_cl);
	kdsm_cl = NULL;
	mutex_unlock(&kdsm_ctl_mutex);
	debugfs_remove_recursive(kdsm_debugfs_root);
	destroy_workqueue(kdsm_normal_wq);
	destroy_workqueue(kdsm_wq);
}

module_init(kdsm_init);
module_exit(kdsm_exit);
MODULE_DESCRIPTION("kdsm: sequentially consistent distributed shared memory over kverbs");
MODULE_LICENSE("GPL");
/* kdsmctl loads it: the kernel asks modprobe for an unknown family */
MODULE_ALIAS_GENL_FAMILY(KDSM_GENL_NAME);
MODULE_VERSION(KVERBS_VERSION);
KVERBS_IMPORT_NS();
