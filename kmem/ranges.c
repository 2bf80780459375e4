// SPDX-License-Identifier: GPL-2.0-only
/*
 * Pure helpers of kmem: batch validation, bitmap coalescing and
 * protection transitions.  No locks, no state; KUnit drives them.
 */
#include <linux/bitmap.h>
#include <linux/kernel.h>

#include "kmem-pri.h"

/**
 * kmem_ranges_check - validate a batch before anything changes
 * @ranges: the batch
 * @nr: entries
 * @npages: region size
 *
 * Context: any.
 * Return: 0, or -EINVAL for an empty batch, an empty range, a range past
 * the region, or ranges out of order or overlapping.
 */
int kmem_ranges_check(const struct kmem_range *ranges, u32 nr, u32 npages)
{
	u32 i, next = 0;

	if (!nr || nr > KMEM_MAX_RANGES)
		return -EINVAL;
	for (i = 0; i < nr; i++) {
		const struct kmem_range *g = &ranges[i];

		if (!g->count || g->first >= npages ||
		    g->count > npages - g->first || (i && g->first < next))
			return -EINVAL;
		next = g->first + g->count;
	}
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(kmem_ranges_check);

/**
 * kmem_bitmap_to_ranges - coalesce set bits into ranges
 * @bitmap: one bit per page
 * @npages: bits
 * @ranges: output
 * @max: room in @ranges
 *
 * Context: any.
 * Return: ranges written; 0 for an empty bitmap; @max + 1 if more were
 * needed.
 */
u32 kmem_bitmap_to_ranges(const unsigned long *bitmap, u32 npages,
			  struct kmem_range *ranges, u32 max)
{
	unsigned int start = 0, end;
	u32 n = 0;

	for (;;) {
		start = find_next_bit(bitmap, npages, start);
		if (start >= npages)
			return n;
		end = find_next_zero_bit(bitmap, npages, start);
		if (n == max)
			return max + 1;
		ranges[n].first = start;
		ranges[n].count = end - start;
		n++;
		start = end;
	}
}
EXPORT_SYMBOL_IF_KUNIT(kmem_bitmap_to_ranges);

/**
 * kmem_prot_change - what changing @from to @to does to page tables
 * @from: current protection
 * @to: new protection
 *
 * Context: any.
 * Return: KMEM_GRANT (recorded, applied at the next fault), KMEM_REVOKE
 * (an existing entry must go) or KMEM_SAME.
 */
enum kmem_change kmem_prot_change(u32 from, u32 to)
{
	if (to == from)
		return KMEM_SAME;
	return to > from ? KMEM_GRANT : KMEM_REVOKE;
}
EXPORT_SYMBOL_IF_KUNIT(kmem_prot_change);

/**
 * kmem_prot_allows - may an access proceed under @prot
 * @prot: page protection
 * @write: the access writes
 *
 * Context: any.
 * Return: true if allowed.
 */
bool kmem_prot_allows(u32 prot, bool write)
{
	return prot >= (write ? KMEM_PROT_RW : KMEM_PROT_READ);
}
EXPORT_SYMBOL_IF_KUNIT(kmem_prot_allows);
