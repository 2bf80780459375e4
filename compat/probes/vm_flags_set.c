// SPDX-License-Identifier: GPL-2.0-only
/* vm_flags_set() (6.3+): vm_flags became read-only outside its helpers. */
#include <linux/mm.h>

void kverbs_probe(struct vm_area_struct *vma);
void kverbs_probe(struct vm_area_struct *vma)
{
	vm_flags_set(vma, VM_DONTCOPY);
}
