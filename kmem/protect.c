// SPDX-License-Identifier: GPL-2.0-only
/*
 * Batch protection changes.
 *
 * Only page tables change, never the VMA: no split, no mprotect path.  A
 * grant only records the new protection (the next fault installs an entry
 * that allows it), so it needs no lock but @lock and is legal in softirq.
 * A revoke of a page that may have an entry (@mapped) removes entries with
 * unmap_mapping_pages() on the mapped file's address_space over the one
 * span from the first to the last such page: one call, one VMA, one TLB
 * flush, whatever the number of pages.  Pages inside the span that keep
 * their access lose their entry too and refault lazily at their recorded
 * protection; that trades a few minor faults for a single flush.  Zapping
 * may sleep (i_mmap_rwsem, mmu notifiers), so a revoke that needs it is
 * refused with -EAGAIN by the non-blocking variant.
 */
#include <linux/mm.h>

#include "kvmem-pri.h"

/*
 * Record @prot for the batch (@all: every page) under r->lock.  Sets
 * *@lo..*@hi to the pages whose entries must go (empty if *@lo > *@hi);
 * returns whether anything was granted.
 */
static bool kvmem_apply_locked(struct kvmem_region *r,
			       const struct kvmem_range *ranges, u32 nr,
			      u32 prot, bool all, u32 *lo, u32 *hi)
{
	struct kvmem_range every = { 0, r->npages };
	bool granted = false;
	u32 i, p;

	*lo = U32_MAX;
	*hi = 0;
	if (all) {
		ranges = &every;
		nr = 1;
	}
	for (i = 0; i < nr; i++) {
		for (p = ranges[i].first;
		     p < ranges[i].first + ranges[i].count; p++) {
			switch (kvmem_prot_change(r->prot[p], prot)) {
			case KVMEM_GRANT:
				clear_bit(p, r->pending);
				if (prot == KVMEM_PROT_RW)
					clear_bit(p, r->want_write);
				granted = true;
				break;
			case KVMEM_REVOKE:
				if (test_bit(p, r->mapped)) {
					*lo = min(*lo, p);
					*hi = max(*hi, p);
				}
				break;
			case KVMEM_SAME:
				break;
			}
			r->prot[p] = prot;
		}
	}
	return granted;
}

/* Would the batch need a zap?  Under r->lock; changes nothing. */
static bool kvmem_needs_zap_locked(struct kvmem_region *r,
				   const struct kvmem_range *ranges, u32 nr,
				  u32 prot)
{
	u32 i, p;

	for (i = 0; i < nr; i++)
		for (p = ranges[i].first;
		     p < ranges[i].first + ranges[i].count; p++)
			if (test_bit(p, r->mapped) &&
			    kvmem_prot_change(r->prot[p], prot) == KVMEM_REVOKE)
				return true;
	return false;
}

static int kvmem_try(struct kvmem_region *r, const struct kvmem_range *ranges,
		     u32 nr, u32 prot);

static int kvmem_check(struct kvmem_region *r, const struct kvmem_range *ranges,
		       u32 nr, u32 prot)
{
	if (prot > KVMEM_PROT_RW)
		return -EINVAL;
	return kvmem_ranges_check(ranges, nr, r->npages);
}

/* The non-blocking attempt every change starts with. */
static int kvmem_try(struct kvmem_region *r, const struct kvmem_range *ranges,
		     u32 nr, u32 prot)
{
	bool granted = false;
	int ret = kvmem_check(r, ranges, nr, prot);
	u32 lo, hi;

	if (ret)
		return ret;
	spin_lock_bh(&r->lock);
	if (r->dead) {
		ret = -ENODEV;
	} else if (kvmem_needs_zap_locked(r, ranges, nr, prot)) {
		ret = -EAGAIN;
	} else {
		granted = kvmem_apply_locked(r, ranges, nr, prot, false, &lo,
					     &hi);
		atomic64_inc(&r->protects);
	}
	spin_unlock_bh(&r->lock);
	if (granted)
		wake_up_all(&r->wait);
	return ret;
}

/**
 * kvmem_protect_locked_zap - record a change and zap, under the region mutex
 * @r: region
 * @ranges: validated batch (ignored with @all)
 * @nr: entries
 * @prot: new protection
 * @all: the whole region, and mark it dead
 *
 * The new protection, the pages to zap (@mapped) and the mapping to zap
 * them in are all read under @pt_lock, which every entry installation and
 * every change of the mapping also holds: an entry either exists when the
 * decision is made, and is zapped, or is installed afterwards from the new
 * protection.  The zap goes through the file's address_space, never a
 * cached VMA, and needs no mmap_lock.
 *
 * Context: process; sleeps (the region mutex, i_mmap_rwsem, mmu
 * notifiers).
 * Return: 0 or -ENODEV (already dead).
 */
int kvmem_protect_locked_zap(struct kvmem_region *r,
			     const struct kvmem_range *ranges, u32 nr,
			    u32 prot, bool all)
{
	struct address_space *mapping;
	bool granted;
	u32 lo, hi;

	might_sleep();
	mutex_lock(&r->pt_lock);
	spin_lock_bh(&r->lock);
	if (r->dead) {
		spin_unlock_bh(&r->lock);
		mutex_unlock(&r->pt_lock);
		return -ENODEV;
	}
	granted = kvmem_apply_locked(r, ranges, nr, prot, all, &lo, &hi);
	if (all)
		r->dead = true;
	/* @mapped bits are only ever set while @mapping is */
	mapping = r->mapping;
	if (lo <= hi)
		bitmap_clear(r->mapped, lo, hi - lo + 1);
	atomic64_inc(&r->protects);
	spin_unlock_bh(&r->lock);
	if (mapping && lo <= hi) {
		unmap_mapping_pages(mapping, lo, hi - lo + 1, false);
		atomic64_inc(&r->zaps);
	}
	mutex_unlock(&r->pt_lock);
	if (granted || all)
		wake_up_all(&r->wait);
	return 0;
}

/**
 * kvmem_protect - change the protection of any set of pages in one call
 * @r: region
 * @ranges: sorted, non-overlapping, non-empty page ranges
 * @nr: number of ranges, 1..KVMEM_MAX_RANGES
 * @prot: KVMEM_PROT_NONE, KVMEM_PROT_READ or KVMEM_PROT_RW
 * @flags: KVERBS_NOWAIT to fail instead of sleeping
 *
 * Grants are recorded and take effect at the next access; revokes have
 * removed every affected page-table entry, with one TLB flush, when this
 * returns, so no thread can still write through a stale entry.
 *
 * With KVERBS_NOWAIT, grants still always succeed; a revoke succeeds when
 * none of its pages can have a page-table entry (never touched, or zapped
 * since), otherwise the whole batch is refused, unchanged, with -EAGAIN,
 * and the caller retries from process context (a kvmsg handler returns
 * the -EAGAIN to be deferred).  kvmem cannot tell a kverbs callback from
 * process context, so a softirq handler passes KVERBS_NOWAIT.
 *
 * Context: process; may sleep (the region mutex, i_mmap_rwsem, mmu
 * notifiers); with KVERBS_NOWAIT process or softirq, not hard interrupt,
 * taking only a spinlock that is almost always free.  Never mmap_lock.
 * Return: 0, -EINVAL for a bad batch (nothing changes), -EAGAIN (only
 * with KVERBS_NOWAIT) when a revoke needs a page-table zap, or -ENODEV
 * for a destroyed region.
 */
int kvmem_protect(struct kvmem_region *r, const struct kvmem_range *ranges,
		  u32 nr, u32 prot, unsigned int flags)
{
	int ret;

	ret = kvmem_try(r, ranges, nr, prot);
	if (ret != -EAGAIN)
		return ret;
	if (flags & KVERBS_NOWAIT) {
		atomic64_inc(&r->nowait_busy);
		return ret;
	}
	might_sleep();
	return kvmem_protect_locked_zap(r, ranges, nr, prot, false);
}
EXPORT_SYMBOL_NS_GPL(kvmem_protect, KVERBS_NS);

/**
 * kvmem_fail - make pages fail every access with SIGBUS
 * @r: region
 * @ranges: sorted, non-overlapping, non-empty page ranges
 * @nr: number of ranges, 1..KVMEM_MAX_RANGES
 *
 * For pages whose content is lost (a DSM page whose only copy died with
 * its node): their entries go, tasks waiting for them and every later
 * access get SIGBUS, and grants no longer reach them.  The other pages of
 * the region are untouched.  A failed page stays failed for the life of
 * the region.
 *
 * Context: process; sleeps (as a revoke).
 * Return: 0, -EINVAL for a bad batch (nothing changes), -ENODEV for a
 * destroyed region.
 */
int kvmem_fail(struct kvmem_region *r, const struct kvmem_range *ranges,
	       u32 nr)
{
	u32 i;
	int ret;

	might_sleep();
	ret = kvmem_ranges_check(ranges, nr, r->npages);
	if (ret)
		return ret;
	spin_lock_bh(&r->lock);
	ret = r->dead ? -ENODEV : 0;
	for (i = 0; !ret && i < nr; i++) {
		bitmap_set(r->failed, ranges[i].first, ranges[i].count);
		bitmap_clear(r->want_write, ranges[i].first, ranges[i].count);
	}
	spin_unlock_bh(&r->lock);
	/* Faults see @failed from now on; old entries go with the zap. */
	if (!ret)
		ret = kvmem_protect_locked_zap(r, ranges, nr, KVMEM_PROT_NONE,
					       false);
	wake_up_all(&r->wait);
	return ret;
}
EXPORT_SYMBOL_NS_GPL(kvmem_fail, KVERBS_NS);

/**
 * kvmem_protect_bitmap - kvmem_protect() for the pages set in a bitmap
 * @r: region
 * @bitmap: one bit per page of @r
 * @prot: new protection
 *
 * Context: process; may sleep.
 * Return: as kvmem_protect(); -EINVAL for an empty bitmap or one that
 * needs more than KVMEM_MAX_RANGES ranges.
 */
int kvmem_protect_bitmap(struct kvmem_region *r, const unsigned long *bitmap,
			 u32 prot)
{
	struct kvmem_range *ranges;
	u32 n;
	int ret;

	ranges = kvmalloc_array(KVMEM_MAX_RANGES, sizeof(*ranges), GFP_KERNEL);
	if (!ranges)
		return -ENOMEM;
	n = kvmem_bitmap_to_ranges(bitmap, r->npages, ranges, KVMEM_MAX_RANGES);
	ret = n && n <= KVMEM_MAX_RANGES ? kvmem_protect(r, ranges, n, prot, 0) :
		-EINVAL;
	kvfree(ranges);
	return ret;
}
EXPORT_SYMBOL_NS_GPL(kvmem_protect_bitmap, KVERBS_NS);
