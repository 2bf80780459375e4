// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmemclient: a kernel client of kvmem for the kvmem tests.  Built only
 * with KVERBS_KUNIT=m or KVERBS_TESTS=m, never shipped; uses only
 * include/kverbs/.
 *
 * Each open file of /dev/kvmemclient may create one region
 * (KVMEMCLIENT_IOC_REGION, @arg pages, all PROT_NONE) and receives a
 * descriptor of it, as a client such as a DSM hands its process one.  A
 * fault is granted what it asked for, from the faulting task, unless the
 * page is held.  The region's descriptor answers the client ioctls
 * KVMEMCLIENT_IOC_HELLO, _HOLD (grant a page no more), _GRANT (grant it
 * RW) and _FAIL (kvmem_fail() it); kvmem's own ioctls that change protections or
 * destroy the region must not reach the client.  Closing the
 * /dev/kvmemclient file destroys the region and frees the client state
 * the region's callbacks use.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/uaccess.h>

#include <kverbs/kvmem.h>

#include "kvmemclient.h"

KVERBS_IMPORT_NS();

/* One per open file of /dev/kvmemclient. */
struct kvmemclient {
	struct mutex lock;		/* @r */
	struct kvmem_region *r;
	unsigned long hold;		/* pages 0..63 whose faults wait */
};

static void kvmemclient_fault(struct kvmem_region *r, u32 index, bool write,
			      void *priv)
{
	struct kvmemclient *c = priv;
	struct kvmem_range range = { index, 1 };
	int ret;

	if (index < BITS_PER_LONG && test_bit(index, &c->hold))
		return;

	ret = kvmem_protect(r, &range, 1,
			    write ? KVMEM_PROT_RW : KVMEM_PROT_READ, 0);
	if (ret)
		pr_err("grant of page %u failed: %d\n", index, ret);
}

/*
 * Reads @priv (after the region's destruction KASAN would see it freed)
 * and writes user memory, as a real client's ioctl does: that takes
 * mmap_lock inside the callback, which lockdep then checks against the
 * faults that call ->fault with mmap_lock held.
 */
static long kvmemclient_region_ioctl(struct kvmem_region *r, struct file *f,
				     unsigned int cmd, unsigned long arg,
				     void *priv)
{
	struct kvmemclient *c = priv;
	struct kvmem_range range = { arg, 1 };

	switch (cmd) {
	case KVMEMCLIENT_IOC_FAIL:
		return arg > U32_MAX ? -EINVAL : kvmem_fail(r, &range, 1);
	case KVMEMCLIENT_IOC_GRANT:
		return arg > U32_MAX ? -EINVAL :
		       kvmem_protect(r, &range, 1, KVMEM_PROT_RW, 0);
	case KVMEMCLIENT_IOC_HOLD:
		if (arg >= BITS_PER_LONG)
			return -EINVAL;
		set_bit(arg, &c->hold);
		return 0;
	case KVMEMCLIENT_IOC_HELLO:
		break;
	default:
		return -ENOTTY;
	}
	if (READ_ONCE(c->r) != r)
		return -EIO;
	if (!arg)
		return KVMEMCLIENT_HELLO;
	/* a slow callback: the region's destruction meets it in progress */
	usleep_range(1000, 2000);
	if (put_user(KVMEMCLIENT_HELLO, (u32 __user *)arg))
		return -EFAULT;
	return KVMEMCLIENT_HELLO;
}

static const struct kvmem_ops kvmemclient_ops = {
	.fault = kvmemclient_fault,
	.ioctl = kvmemclient_region_ioctl,
};

static int kvmemclient_open(struct inode *inode, struct file *f)
{
	struct kvmemclient *c = kzalloc(sizeof(*c), GFP_KERNEL);

	if (!c)
		return -ENOMEM;
	mutex_init(&c->lock);
	f->private_data = c;
	return 0;
}

static int kvmemclient_release(struct inode *inode, struct file *f)
{
	struct kvmemclient *c = f->private_data;

	if (c->r)
		kvmem_region_destroy(c->r);
	mutex_destroy(&c->lock);
	kfree(c);
	return 0;
}

static long kvmemclient_ioctl(struct file *f, unsigned int cmd,
			      unsigned long arg)
{
	struct kvmemclient *c = f->private_data;
	struct kvmem_region *r;
	long ret;

	if (cmd != KVMEMCLIENT_IOC_REGION)
		return -ENOTTY;
	if (!arg || arg > KVMEM_MAX_PAGES)
		return -EINVAL;
	mutex_lock(&c->lock);
	if (c->r) {
		ret = -EBUSY;
		goto out;
	}
	r = kvmem_region_create(arg, KVMEM_PROT_NONE, &kvmemclient_ops, c);
	if (IS_ERR(r)) {
		ret = PTR_ERR(r);
		goto out;
	}
	WRITE_ONCE(c->r, r);	/* before the fd exists: HELLO checks it */
	ret = kvmem_region_fd(r);
	if (ret < 0) {
		WRITE_ONCE(c->r, NULL);
		kvmem_region_destroy(r);
	}
out:
	mutex_unlock(&c->lock);
	return ret;
}

static const struct file_operations kvmemclient_fops = {
	.owner = THIS_MODULE,
	.open = kvmemclient_open,
	.release = kvmemclient_release,
	.unlocked_ioctl = kvmemclient_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice kvmemclient_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kvmemclient",
	.fops = &kvmemclient_fops,
	.mode = 0600,
};

module_misc_device(kvmemclient_dev);

MODULE_DESCRIPTION("kverbs test: a kernel client of kvmem");
MODULE_LICENSE("GPL");
