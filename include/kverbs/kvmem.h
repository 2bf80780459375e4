/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kvmem: managed memory regions with batch page protection.
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
 * The pages can be made a kverbs region and granted to a peer
 * (kvmem_region_pages(), kverbs_region_create(), kverbs_region_grant()),
 * so remote data lands in the page the process sees.  kvmem's protection
 * changes page tables only: a peer's access ends with kverbs_grant_revoke().
 * The kverbs region must be destroyed before kvmem_region_destroy().  See
 * Documentation/kvmem.rst for contexts and edge cases.
 */
#ifndef _KVERBS_KVMEM_H
#define _KVERBS_KVMEM_H

#include <linux/types.h>
#include <kverbs/compat.h>
#include <kverbs/kverbs.h>	/* KVERBS_NOWAIT */
#include <uapi/kverbs/kvmem.h>

struct file;
struct kvmem_region;
struct page;

/**
 * struct kvmem_ops - client callbacks of a region
 * @fault: page @index was accessed (@write: for writing) beyond its
 *	protection.  Called in the faulting task, without kvmem locks (it may
 *	hold mmap_lock), with at most one callback outstanding per page:
 *	tasks faulting the page meanwhile wait for the grant that answers
 *	it.  A grant answers the page's callback; a waiter it does not
 *	satisfy (a writer behind a read callback answered with READ) gets a
 *	callback of its own for what it still needs.  The client resolves it
 *	(fetch the page, then kvmem_protect() a grant, with KVERBS_NOWAIT
 *	from atomic context); the task waits killably and retries.  May sleep.
 * @ioctl: optional; an ioctl() on descriptor @f of kvmem_region_fd(), in
 *	the calling task, may sleep.  kvmem's commands that change
 *	protections or destroy the region fail -ENOTTY on a client's region
 *	and KVMEM_IOC_STATS answers on every region; any other command comes
 *	here (-ENOTTY without @ioctl).  Returns what ioctl() returns.  @f
 *	names the open file for what the client ties to it (a lock its
 *	process holds, say); it stays valid until @release for it returns,
 *	or kvmem_region_destroy() does.
 * @release: optional; the open file @f of kvmem_region_fd() lost its last
 *	reference (every descriptor closed, dup() and fork() copies
 *	included, and the mapping gone), in process context; no @ioctl on @f
 *	runs or follows.  The client lets go of what the file held and must
 *	not keep @f.  It must not wait for a peer: a process's exit, or the
 *	kernel's delayed fput work, waits for it.
 *
 * No callback runs once kvmem_region_destroy() returned, and a client
 * wakes its own callbacks blocked in it before calling destroy: a
 * descriptor closed after that gets no @release.
 */
struct kvmem_ops {
	void (*fault)(struct kvmem_region *r, u32 index, bool write, void *priv);
	long (*ioctl)(struct kvmem_region *r, struct file *f, unsigned int cmd,
		      unsigned long arg, void *priv);
	void (*release)(struct kvmem_region *r, struct file *f, void *priv);
};

struct kvmem_region *kvmem_region_create(u32 npages, u32 prot,
					 const struct kvmem_ops *ops, void *priv);
void kvmem_region_destroy(struct kvmem_region *r);
int kvmem_region_fd(struct kvmem_region *r);
struct page **kvmem_region_pages(struct kvmem_region *r, u32 *npages);
void *kvmem_region_priv(const struct kvmem_region *r);

int kvmem_protect(struct kvmem_region *r, const struct kvmem_range *ranges,
		  u32 nr, u32 prot, unsigned int flags);
int kvmem_protect_bitmap(struct kvmem_region *r, const unsigned long *bitmap,
			 u32 prot);
int kvmem_fail(struct kvmem_region *r, const struct kvmem_range *ranges,
	       u32 nr);

#endif /* _KVERBS_KVMEM_H */
