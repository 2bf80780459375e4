// SPDX-License-Identifier: GPL-2.0-only
/*
 * kverbs.ko: in-kernel RDMA endpoints for kernel modules.
 */
#include <linux/module.h>

#include "kverbs-pri.h"

#ifdef KVERBS_TESTING
/*
 * Test builds only (KVERBS_KUNIT=m): widen race windows so that the
 * regression tests hit them every time.  Never in the DKMS package.
 */
unsigned int kverbs_test_unbind_delay_ms;
module_param_named(test_unbind_delay_ms, kverbs_test_unbind_delay_ms, uint,
		   0644);
MODULE_PARM_DESC(test_unbind_delay_ms,
		 "test builds: sleep this long inside domain unbind");
#endif

static int __init kverbs_init(void)
{
	int ret;

	kverbs_debugfs_init();
	ret = kverbs_device_init();
	if (ret) {
		pr_err("cannot register ib_client: %d\n", ret);
		kverbs_debugfs_exit();
		return ret;
	}
	return 0;
}

static void __exit kverbs_exit(void)
{
	kverbs_device_exit();
	kverbs_debugfs_exit();
}

module_init(kverbs_init);
module_exit(kverbs_exit);

MODULE_DESCRIPTION("kverbs: in-kernel RDMA endpoints");
MODULE_LICENSE("GPL");
MODULE_VERSION(KVERBS_VERSION);
