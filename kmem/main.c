// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmem: managed memory regions with batch page protection
 * (Liss, Birk & Schuster, section 3.3), on unpatched kernels.
 */
#include <linux/module.h>

#include "kvmem-pri.h"

static int __init kvmem_init(void)
{
	return kvmem_chardev_init();
}

static void __exit kvmem_exit(void)
{
	kvmem_chardev_exit();
}

module_init(kvmem_init);
module_exit(kvmem_exit);

MODULE_DESCRIPTION("kverbs managed memory regions and batch page protection");
MODULE_LICENSE("GPL");
MODULE_VERSION(KVERBS_VERSION);
