// SPDX-License-Identifier: GPL-2.0-only
/*
 * kverbs_kmem: managed memory regions with batch page protection
 * (Liss, Birk & Schuster, section 3.3), on unpatched kernels.
 */
#include <linux/module.h>

#include "kmem-pri.h"

static int __init kmem_init(void)
{
	return kmem_chardev_init();
}

static void __exit kmem_exit(void)
{
	kmem_chardev_exit();
}

module_init(kmem_init);
module_exit(kmem_exit);

MODULE_DESCRIPTION("kverbs managed memory regions and batch page protection");
MODULE_LICENSE("GPL");
MODULE_VERSION("0.1.0");
