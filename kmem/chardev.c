// SPDX-License-Identifier: GPL-2.0-only
/*
 * /dev/kverbs_kmem: the user-space test and benchmark path
 * (uapi/kverbs/kmem.h).  The driver is the region's kernel client: its
 * fault callback either grants the access the fault needs (GRANT) or lets
 * the task wait for a KMEM_IOC_PROTECT from another thread (WAIT).
 */
#include <linux/file.h>
#include <linux/ktime.h>
#include <linux/miscdevice.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "kmem-pri.h"

static void kmem_ioctl_fault(struct kmem_region *r, u32 idx, bool write,
			     void *priv)
{
	struct kmem_range one = { idx, 1 };
	unsigned long policy = (unsigned long)priv;

	if (policy == KMEM_POLICY_GRANT)
		kmem_protect_nowait(r, &one, 1,
				    write ? KMEM_PROT_RW : KMEM_PROT_READ);
}

static const struct kmem_ops kmem_ioctl_ops = {
	.fault = kmem_ioctl_fault,
};

static long kmem_ioc_create(void __user *arg)
{
	struct kmem_region *r;
	struct kmem_create c;
	int fd;

	if (copy_from_user(&c, arg, sizeof(c)))
		return -EFAULT;
	if (c.reserved || c.policy > KMEM_POLICY_WAIT)
		return -EINVAL;
	r = kmem_region_create(c.npages, c.prot, &kmem_ioctl_ops,
			       (void *)(unsigned long)c.policy);
	if (IS_ERR(r))
		return PTR_ERR(r);
	fd = kmem_region_fd(r);
	kmem_region_put(r);	/* the file owns the region now */
	return fd;
}

/* Copy in a batch; the caller kvfree()s *@out. */
static int kmem_ioc_batch(void __user *arg, struct kmem_protect *p,
			  struct kmem_range **out)
{
	struct kmem_range *ranges;

	if (copy_from_user(p, arg, sizeof(*p)))
		return -EFAULT;
	if (p->reserved || (p->flags & ~KMEM_PROTECT_NOWAIT) || !p->nr ||
	    p->nr > KMEM_MAX_RANGES)
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

static long kmem_ioc_protect(struct kmem_region *r, void __user *arg,
			     bool bench)
{
	struct kmem_range *ranges;
	struct kmem_protect p;
	u64 t0, t1;
	int ret;

	ret = kmem_ioc_batch(arg, &p, &ranges);
	if (ret)
		return ret;
	if (!bench) {
		ret = p.reps ? -EINVAL :
		      (p.flags & KMEM_PROTECT_NOWAIT) ?
		      kmem_protect_nowait(r, ranges, p.nr, p.prot) :
		      kmem_protect(r, ranges, p.nr, p.prot);
		kvfree(ranges);
		return ret;
	}
	/* One revoke to @prot and one grant back to RW, timed in here. */
	if (p.reps != 1 || p.prot == KMEM_PROT_RW) {
		kvfree(ranges);
		return -EINVAL;
	}
	t0 = ktime_get_ns();
	ret = kmem_protect(r, ranges, p.nr, p.prot);
	t1 = ktime_get_ns();
	if (!ret)
		ret = kmem_protect(r, ranges, p.nr, KMEM_PROT_RW);
	p.ns = t1 - t0;
	p.ns_grant = ktime_get_ns() - t1;
	kvfree(ranges);
	if (!ret && copy_to_user(arg, &p, sizeof(p)))
		ret = -EFAULT;
	return ret;
}

static long kmem_ioc_stats(struct kmem_region *r, void __user *arg)
{
	struct kmem_stats s = {
		.read_faults = atomic64_read(&r->read_faults),
		.write_faults = atomic64_read(&r->write_faults),
		.callbacks = atomic64_read(&r->callbacks),
		.zaps = atomic64_read(&r->zaps),
		.protects = atomic64_read(&r->protects),
		.nowait_busy = atomic64_read(&r->nowait_busy),
	};

	return copy_to_user(arg, &s, sizeof(s)) ? -EFAULT : 0;
}

/* ioctls on a region's file descriptor. */
long kmem_region_ioctl(struct file *f, unsigned int cmd, unsigned long arg)
{
	struct kmem_region *r = f->private_data;
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case KMEM_IOC_PROTECT:
		return kmem_ioc_protect(r, uarg, false);
	case KMEM_IOC_BENCH:
		return kmem_ioc_protect(r, uarg, true);
	case KMEM_IOC_STATS:
		return kmem_ioc_stats(r, uarg);
	case KMEM_IOC_DESTROY:
		return kmem_protect_locked_zap(r, NULL, 0, KMEM_PROT_NONE,
					       true);
	default:
		return -ENOTTY;
	}
}

static long kmem_dev_ioctl(struct file *f, unsigned int cmd,
			   unsigned long arg)
{
	if (cmd != KMEM_IOC_CREATE)
		return -ENOTTY;
	return kmem_ioc_create((void __user *)arg);
}

static const struct file_operations kmem_dev_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = kmem_dev_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice kmem_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kverbs_kmem",
	.fops = &kmem_dev_fops,
	.mode = 0600,
};

int kmem_chardev_init(void)
{
	return misc_register(&kmem_misc);
}

void kmem_chardev_exit(void)
{
	misc_deregister(&kmem_misc);
}
