// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvleak: a module that leaks on purpose, so the test harness can show its
 * kmemleak check reports a real leak (a check that cannot fail proves
 * nothing).  Built only with KVERBS_KUNIT=m, never shipped.
 *
 * Module init allocates one 1 KiB object per @count, fills it with a
 * marker and drops the only pointer; the objects stay allocated after
 * rmmod.  kmemleak reports an object only when it is older than its
 * minimum age and its contents were stable across two scans, so the
 * harness scans twice with a delay between.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

static uint count = 1;
module_param(count, uint, 0444);
MODULE_PARM_DESC(count, "objects to leak, 1..16");

/* Not inlined: the leak's backtrace names this function. */
static noinline void *kvleak_alloc(void)
{
	void *p = kmalloc(1024, GFP_KERNEL);

	if (p)
		memset(p, 0x6b, 1024);
	return p;
}

static int __init kvleak_init(void)
{
	uint i;

	if (!count || count > 16)
		return -EINVAL;
	for (i = 0; i < count; i++)
		if (!kvleak_alloc())
			return -ENOMEM;
	pr_info("leaked %u objects of 1 KiB\n", count);
	return 0;
}

static void __exit kvleak_exit(void)
{
}

module_init(kvleak_init);
module_exit(kvleak_exit);
MODULE_DESCRIPTION("kverbs test: a deliberate memory leak for the kmemleak check");
MODULE_LICENSE("GPL");
