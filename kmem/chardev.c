// SPDX-License-Identifier: GPL-2.0-only
/*
 * /dev/kvmem: the user-space test and benchmark path
 * (uapi/kverbs/kvmem.h).  The driver is the region's kernel client: its
 * fault callback either grants the access the fault needs (GRANT) or lets
 * the task wait for a KVMEM_IOC_PROTECT from another thread (WAIT).
 */
#include <linux/file.h>
#include <linux/ktime.h>
#include <linux/miscdevice.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "kvmem-pri.h"

static void kvmem_ioctl_fault(struct kvmem_region *r, u32 idx, bool write,
			      void *priv)
{
	struct kvmem_range one = { idx, 1 };
	unsigned long policy = (unsigned long)priv;

	if (policy == KVMEM_POLICY_GRANT)
		kvmem_protect(r, &one, 1,
			      write ? KVMEM_PROT_RW : KVMEM_PROT_READ,
			      KVERBS_NOWAIT);
}

static const struct kvmem_ops kvmem_ioctl_ops = {
	.fault = kvmem_ioctl_fault,
};

static long kvmem_ioc_create(void __user *arg)
{
	struct kvmem_region *r;
	struct kvmem_create c;
	int fd;

	if (copy_from_user(&c, arg, sizeof(c)))
		return -EFAULT;
	if (c.reserved || c.policy > KVMEM_POLICY_WAIT)
		return -EINVAL;
	r = kvmem_region_create(c.npages, c.prot, &kvmem_ioctl_ops,
				(void *)(unsigned long)c.policy);
	if (IS_ERR(r))
		return PTR_ERR(r);
	fd = kvmem_region_fd(r);
	kvmem_region_put(r);	/* the file owns the region now */
	return fd;
}

/* Copy in a batch; the caller kvfree()s *@out. */
static int kvmem_ioc_batch(void __user *arg, struct kvmem_protect *p,
			   struct kvmem_range **out)
{
	struct kvmem_range *ranges;

	if (copy_from_user(p, arg, sizeof(*p)))
		return -EFAULT;
	if (p->reserved || (p->flags & ~KVMEM_PROTECT_NOWAIT) || !p->nr ||
	    p->nr > KVMEM_MAX_RANGES)
		return -EINVAL;
	ranges = kvmalloc_array(p->nr, sizeof(*ranges), GFP_KERNEL);
	if (!ranges)
		return -ENOMEM;
	if (copy_from_user(ranges, u64_to_user_ptr(p->ranges),
			   p->nr * sizeof(*ranges))) {
		kvfree(ranges);
		return -EFAULT;
	}
	*out = ranges;
	return 0;
}

static long kvmem_ioc_protect(struct kvmem_region *r, void __user *arg,
			      bool bench)
{
	struct kvmem_range *ranges;
	struct kvmem_protect p;
	u64 t0, t1;
	int ret;

	ret = kvmem_ioc_batch(arg, &p, &ranges);
	if (ret)
		return ret;
	if (!bench) {
		ret = p.reps ? -EINVAL :
		      kvmem_protect(r, ranges, p.nr, p.prot,
				    (p.flags & KVMEM_PROTECT_NOWAIT) ?
				    KVERBS_NOWAIT : 0);
		kvfree(ranges);
		return ret;
	}
	/* One revoke to @prot and one grant back to RW, timed in here. */
	if (p.reps != 1 || p.prot == KVMEM_PROT_RW) {
		kvfree(ranges);
		return -EINVAL;
	}
	t0 = ktime_get_ns();
	ret = kvmem_protect(r, ranges, p.nr, p.prot, 0);
	t1 = ktime_get_ns();
	if (!ret)
		ret = kvmem_protect(r, ranges, p.nr, KVMEM_PROT_RW, 0);
	p.ns = t1 - t0;
	p.ns_grant = ktime_get_ns() - t1;
	kvfree(ranges);
	if (!ret && copy_to_user(arg, &p, sizeof(p)))
		ret = -EFAULT;
	return ret;
}

static long kvmem_ioc_stats(struct kvmem_region *r, void __user *arg)
{
	struct kvmem_stats s = {
		.read_faults = atomic64_read(&r->read_faults),
		.write_faults = atomic64_read(&r->write_faults),
		.callbacks = atomic64_read(&r->callbacks),
		.zaps = atomic64_read(&r->zaps),
		.protects = atomic64_read(&r->protects),
		.nowait_busy = atomic64_read(&r->nowait_busy),
	};

	return copy_to_user(arg, &s, sizeof(s)) ? -EFAULT : 0;
}

/*
 * A command for a client's region: none of kvmem's own that change
 * protections or destroy it; the others go to the client, until it
 * destroyed the region (-ENODEV; its module may be gone with @ops).
 */
static long kvmem_client_ioctl(struct kvmem_region *r, struct file *f,
			       unsigned int cmd, unsigned long arg)
{
	long ret;
	int idx;

	switch (cmd) {
	case KVMEM_IOC_PROTECT:
	case KVMEM_IOC_BENCH:
	case KVMEM_IOC_DESTROY:
		return -ENOTTY;
	}
	idx = kvmem_client_enter(r);
	if (idx < 0)
		return idx;
	ret = r->ops->ioctl ? r->ops->ioctl(r, f, cmd, arg, r->priv) : -ENOTTY;
	kvmem_client_exit(r, idx);
	return ret;
}

/*
 * ioctls on a region's file descriptor.  Protection and destruction belong
 * to the region's client: kvmem's own ioctls that change them answer only
 * regions of /dev/kvmem, whose client is this file; any other client gets
 * the commands kvmem does not know, through kvmem_ops.ioctl.
 */
long kvmem_region_ioctl(struct file *f, unsigned int cmd, unsigned long arg)
{
	struct kvmem_region *r = f->private_data;
	void __user *uarg = (void __user *)arg;

	if (cmd == KVMEM_IOC_STATS)
		return kvmem_ioc_stats(r, uarg);
	if (r->ops != &kvmem_ioctl_ops)
		return kvmem_client_ioctl(r, f, cmd, arg);
	switch (cmd) {
	case KVMEM_IOC_PROTECT:
		return kvmem_ioc_protect(r, uarg, false);
	case KVMEM_IOC_BENCH:
		return kvmem_ioc_protect(r, uarg, true);
	case KVMEM_IOC_DESTROY:
		return kvmem_protect_locked_zap(r, NULL, 0, KVMEM_PROT_NONE,
					       true);
	default:
		return -ENOTTY;
	}
}

static long kvmem_dev_ioctl(struct file *f, unsigned int cmd,
			    unsigned long arg)
{
	if (cmd != KVMEM_IOC_CREATE)
		return -ENOTTY;
	return kvmem_ioc_create((void __user *)arg);
}

static const struct file_operations kvmem_dev_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = kvmem_dev_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice kvmem_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kvmem",
	.fops = &kvmem_dev_fops,
	.mode = 0600,
};

int kvmem_chardev_init(void)
{
	return misc_register(&kvmem_misc);
}

void kvmem_chardev_exit(void)
{
	misc_deregister(&kvmem_misc);
}
