/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kmem: managed memory regions with batch page protection.
 *
 * A kernel client creates a region of pages that belong to the module,
 * hands a process a file descriptor to mmap() it (MAP_SHARED, whole region,
 * offset 0, one mapping at a time), and changes the protection of any set
 * of its pages in one call.  Only page tables change: a grant is recorded
 * and applied lazily by the next fault, a revoke removes the affected page
 * table entries with one zap (one TLB flush) per call.  An access the
 * protection forbids calls the client's fault callback in the faulting
 * task, which then waits (killable) until a grant allows the access.
 *
 * The pages can be registered for RDMA (kmem_region_pages() with
 * kverbs_region_register()), so remote data lands in the page the process
 * sees.  See Documentation/kmem.rst for contexts and edge cases.
 */
#ifndef _KVERBS_KMEM_H
#define _KVERBS_KMEM_H

#include <linux/types.h>
#include <kverbs/compat.h>
#include <uapi/kverbs/kmem.h>

struct kmem_region;
struct page;

/**
 * struct kmem_ops - client callbacks of a region
 * @fault: page @index was accessed (@write: for writing) beyond its
 *	protection.  Called in the faulting task, without kmem locks (it may
 *	hold mmap_lock), with at most one callback outstanding per page:
 *	tasks faulting the page meanwhile wait for the grant that answers
 *	it.  A grant answers the page's callback; a waiter it does not
 *	satisfy (a writer behind a read callback answered with READ) gets a
 *	callback of its own for what it still needs.  The client resolves it
 *	(fetch the page, then kmem_protect() or kmem_protect_nowait() a
 *	grant); the task waits killably and retries.  May sleep.
 */
struct kmem_ops {
	void (*fault)(struct kmem_region *r, u32 index, bool write, void *priv);
};

struct kmem_region *kmem_region_create(u32 npages, u32 prot,
				       const struct kmem_ops *ops, void *priv);
void kmem_region_destroy(struct kmem_region *r);
int kmem_region_fd(struct kmem_region *r);
struct page **kmem_region_pages(struct kmem_region *r, u32 *npages);
void *kmem_region_priv(const struct kmem_region *r);

int kmem_protect(struct kmem_region *r, const struct kmem_range *ranges,
		 u32 nr, u32 prot);
int kmem_protect_nowait(struct kmem_region *r,
			const struct kmem_range *ranges, u32 nr, u32 prot);
int kmem_protect_bitmap(struct kmem_region *r, const unsigned long *bitmap,
			u32 prot);

#endif /* _KVERBS_KMEM_H */
