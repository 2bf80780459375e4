// SPDX-License-Identifier: GPL-2.0-only
/*
 * release_fault_lock() (6.4+) drops whichever lock a fault holds: the
 * per-VMA lock or mmap_lock.  Before, faults held only mmap_lock.
 */
#include <linux/mm.h>

void kverbs_probe(struct vm_fault *vmf);
void kverbs_probe(struct vm_fault *vmf)
{
	release_fault_lock(vmf);
}
