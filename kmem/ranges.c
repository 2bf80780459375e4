// SPDX-License-Identifier: GPL-2.0-only
/*
 * Pure helpers of kvmem: batch validation, bitmap coalescing and
 * protection transitions.  No locks, no state; KUnit drives them.
 */
#include <linux/bitmap.h>
#include <linux/kernel.h>

#include "kvmem-pri.h"

/**
 * kvmem_ranges_check - validate a batch before anything changes
 * @ranges: the batch
 * @nr: entries
 * @npages: region size
 *
 * Context: any.
 * Return: 0, or -EINVAL for an empty batch, an empty range, a range past
 * the region, or ranges out of order or overlapping.
 */
int kvmem_ranges_check(const struct kvmem_range *ranges, u32 nr, u32 npages)
{
	u32 i, next = 0;

	if (!nr || nr > KVMEM_MAX_RANGES)
		return -EINVAL;
	for (i = 0; i < nr; i++) {
		const struct kvmem_range *g = &ranges[i];

		if (!g->count || g->first >= npages ||
		    g->count > npages - g->first || (i && g->first < next))
			return -EINVAL;
		next = g->first + g->count;
	}
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(kvmem_ranges_check);

/**
 * kvmem_bitmap_to_ranges - coalesce set bits into ranges
 * @bitmap: one bit per page
 * @npages: bits
 * @ranges: output
 * @max: room in @ranges
 *
 * Context: any.
 * Return: ranges written; 0 for an empty bitmap; @max + 1 if more were
 * needed.
 */
u32 kvmem_bitmap_to_ranges(const unsigned long *bitmap, u32 npages,
			   struct kvmem_range *ranges, u32 max)
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
EXPORT_SYMBOL_IF_KUNIT(kvmem_bitmap_to_ranges);

/**
 * kvmem_prot_change - what changing @from to @to does to page tables
 * @from: current protection
 * @to: new protection
 *
 * Context: any.
 * Return: KVMEM_GRANT (recorded, applied at the next fault), KVMEM_REVOKE
 * (an existing entry must go) or KVMEM_SAME.
 */
enum kvmem_change kvmem_prot_change(u32 from, u32 to)
{
	if (to == from)
		return KVMEM_SAME;
	return to > from ? KVMEM_GRANT : KVMEM_REVOKE;
}
EXPORT_SYMBOL_IF_KUNIT(kvmem_prot_change);

/**
 * kvmem_prot_allows - may an access proceed under @prot
 * @prot: page protection
 * @write: the access writes
 *
 * Context: any.
 * Return: true if allowed.
 */
bool kvmem_prot_allows(u32 prot, bool write)
{
	return prot >= (write ? KVMEM_PROT_RW : KVMEM_PROT_READ);
}
EXPORT_SYMBOL_IF_KUNIT(kvmem_prot_allows);
