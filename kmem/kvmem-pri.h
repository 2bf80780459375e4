/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kvmem internals.  Public API: include/kverbs/kvmem.h.
 */
#ifndef _KVMEM_PRI_H
#define _KVMEM_PRI_H

#include <linux/atomic.h>
#include <linux/error-injection.h>
#include <linux/kref.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/srcu.h>
#include <linux/spinlock.h>
#include <linux/wait.h>

#include <kverbs/kvmem.h>

#undef pr_fmt
#define pr_fmt(fmt) "kvmem: " fmt

/*
 * A managed region.
 *
 * Locking:
 * - @lock (spinlock, bottom halves off) protects @prot, @mapped,
 *   @pending, @failed, @want_write, @vma, @mapping and @dead.  It is the one lock a
 *   non-blocking protection change takes, and it is almost always free.
 * - @pt_lock (mutex) orders page-table changes: a fault reads the
 *   protection and installs the entry under it, a revoke records the new
 *   protection, decides what to zap and zaps under it, and mmap and the
 *   last unmap (->close) set and clear @vma and @mapping under it.  So no
 *   entry installed from an old protection survives a revoke, and a revoke
 *   never misses a mapping that appears meanwhile.  Order:
 *   mmap_lock (or the fault's VMA lock) -> @pt_lock -> @lock, and
 *   @pt_lock -> i_mmap_rwsem (unmap_mapping_pages()).  A revoke takes no
 *   mmap_lock.
 * - @client_srcu: a client callback (->fault, ->ioctl) runs inside a read
 *   section, entered only while @client_gone is clear;
 *   kvmem_region_destroy() sets @client_gone, then waits for the sections
 *   in progress.  So no callback runs after destroy returns, and the
 *   client may free @priv and @ops then.  SRCU, not a lock: a callback may
 *   block for long (a barrier) and take mmap_lock (copy_to_user()) without
 *   ordering against the faults that enter with mmap_lock held.
 *
 * @vma: the one mapping, only as an identity for ->close and the EBUSY
 * rule; never dereferenced (a VMA is detached before its ->close, so a
 * cached pointer may outlive its page tables).  @mapping: the
 * address_space of the mapped file (every region file has an inode of its
 * own), through which a revoke zaps; valid while @vma is set, because the
 * VMA holds its file until after ->close, which clears both under
 * @pt_lock.
 *
 * @mapped: page may have a page-table entry (set by the fault that
 * installs it, cleared by the zap that removes it).  A revoke of pages
 * without it needs no zap, which is what makes the non-blocking variant
 * possible.  @pending: a fault callback for the page is outstanding (one
 * at a time per page, cleared by the grant that answers it); a waiter
 * whose need the grant did not meet calls the client again.  @failed:
 * the client failed the page (kvmem_fail()); every access to it raises
 * SIGBUS, for good, as every access to a dead region does.  @want_write:
 * a write found a read-only entry the protection does not let it upgrade,
 * and ->pfn_mkwrite removed the entry; until the page allows writes, a
 * read fault of it that finds no callback outstanding also asks the
 * client for write access (without waiting for it: the reader may be
 * another task).  An instruction that reads and writes one operand may
 * restart with its read (TCG emulates x86's read-modify-write as a load
 * then a store), which a read-only entry satisfies again; without this
 * the client would never hear of the write, and the access would spin
 * between the read fault and ->pfn_mkwrite for ever.  With it, it spins
 * only until the write grant.
 *
 * Lifetime (@ref): the creator's reference (kvmem_region_destroy()), one
 * per file (kvmem_region_fd()), and a mapping keeps its file.
 */
struct kvmem_region {
	struct kref ref;
	u32 npages;
	struct page **pages;
	u8 *prot;
	unsigned long *mapped;
	unsigned long *pending;
	unsigned long *failed;
	unsigned long *want_write;
	spinlock_t lock;		/* see above */
	struct mutex pt_lock;		/* see above */
	struct vm_area_struct *vma;
	struct address_space *mapping;
	bool dead;
	wait_queue_head_t wait;		/* faults waiting for a grant */
	const struct kvmem_ops *ops;
	void *priv;
	struct srcu_struct client_srcu;	/* see above */
	bool client_gone;

	atomic64_t read_faults;
	atomic64_t write_faults;
	atomic64_t callbacks;
	atomic64_t zaps;
	atomic64_t protects;
	atomic64_t nowait_busy;
};

/* Page @idx can never be accessed again (dead region, failed page). */
static inline bool kvmem_gone(struct kvmem_region *r, u32 idx)
{
	return READ_ONCE(r->dead) || test_bit(idx, r->failed);
}

int kvmem_client_enter(struct kvmem_region *r);
void kvmem_client_exit(struct kvmem_region *r, int idx);

/* ranges.c: pure helpers, reached by KUnit */
int kvmem_ranges_check(const struct kvmem_range *ranges, u32 nr, u32 npages);
u32 kvmem_bitmap_to_ranges(const unsigned long *bitmap, u32 npages,
			   struct kvmem_range *ranges, u32 max);

enum kvmem_change {
	KVMEM_SAME,
	KVMEM_GRANT,
	KVMEM_REVOKE,
};

enum kvmem_change kvmem_prot_change(u32 from, u32 to);
bool kvmem_prot_allows(u32 prot, bool write);

/* region.c */
void kvmem_region_put(struct kvmem_region *r);
void kvmem_region_get(struct kvmem_region *r);

/* protect.c */
int kvmem_protect_locked_zap(struct kvmem_region *r,
			     const struct kvmem_range *ranges, u32 nr,
			    u32 prot, bool all);

/* chardev.c */
int kvmem_chardev_init(void);
void kvmem_chardev_exit(void);
long kvmem_region_ioctl(struct file *f, unsigned int cmd, unsigned long arg);

#endif /* _KVMEM_PRI_H */
