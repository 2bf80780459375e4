// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvleak: a module that leaks on purpose, so the test harness can show its
 * kmemleak check reports a real leak (a check that cannot fail proves
 * nothing).  Built only with KVERBS_KUNIT=m, never shipped.
 *
 * @fault plants another kind of report instead, for the console scanner:
 * "warn" a WARN_ON(), "uaf" a one-byte read of a freed object (KASAN's
 * "slab-use-after-free"), after which the module loads normally.
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

static char *fault = "";
module_param(fault, charp, 0444);
MODULE_PARM_DESC(fault, "plant a report instead of leaking: warn or uaf");

/* Not inlined: the report's stack names this function. */
static noinline int kvleak_plant(void)
{
	char *p;
	char c;

	if (!strcmp(fault, "warn")) {
		WARN_ON(1);
		return 0;
	}
	if (strcmp(fault, "uaf"))
		return -EINVAL;
	p = kmalloc(64, GFP_KERNEL);
	if (!p)
		return -ENOMEM;
	kfree(p);
	OPTIMIZER_HIDE_VAR(p);	/* the compiler must not see the use */
	c = READ_ONCE(p[8]);	/* KASAN reports this read */
	pr_info("read %d from a freed object\n", c);
	return 0;
}

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

	if (*fault) {
		int ret = kvleak_plant();

		if (!ret)
			pr_info("planted: %s\n", fault);
		return ret;
	}
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
