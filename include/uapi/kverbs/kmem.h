/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * kmem test and benchmark interface: /dev/kverbs_kmem.
 *
 * Kernel clients use include/kverbs/kmem.h directly; this ioctl path exists
 * so that user-space tests and benchmarks can create a managed region, map
 * it and change protections in batches.
 *
 * KMEM_IOC_CREATE on the device returns a new file descriptor for the
 * region; every other ioctl and mmap() go to that descriptor.  The region
 * lives until the descriptor and every mapping of it are gone, or until
 * KMEM_IOC_DESTROY, after which its pages fault with SIGBUS.
 *
 * All structures have explicit padding; reserved fields must be zero.
 */
#ifndef _UAPI_KVERBS_KMEM_H
#define _UAPI_KVERBS_KMEM_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define KMEM_MAX_PAGES		(1U << 16)
#define KMEM_MAX_RANGES		4096

/* Page protections, in increasing order of access. */
#define KMEM_PROT_NONE		0
#define KMEM_PROT_READ		1
#define KMEM_PROT_RW		2

/*
 * What the region's fault handler does for an access the protection
 * forbids (the kernel client of an ioctl region is the driver itself):
 * GRANT gives the page exactly the access the fault needs and counts the
 * fault; WAIT counts it and leaves the faulting task waiting (killable)
 * until a KMEM_IOC_PROTECT grants the access.
 */
#define KMEM_POLICY_GRANT	0
#define KMEM_POLICY_WAIT	1

/**
 * struct kmem_create - KMEM_IOC_CREATE
 * @npages: region size in pages, 1..KMEM_MAX_PAGES
 * @policy: KMEM_POLICY_*
 * @prot: initial protection of every page
 * @reserved: zero
 */
struct kmem_create {
	__u32 npages;
	__u32 policy;
	__u32 prot;
	__u32 reserved;
};

/** struct kmem_range - pages [@first, @first + @count) */
struct kmem_range {
	__u32 first;
	__u32 count;
};

/* kmem_protect.flags */
#define KMEM_PROTECT_NOWAIT	0x1	/* the non-blocking variant */

/**
 * struct kmem_protect - KMEM_IOC_PROTECT and KMEM_IOC_BENCH
 * @ranges: user pointer to @nr struct kmem_range, sorted, not overlapping,
 *	not empty
 * @nr: 1..KMEM_MAX_RANGES
 * @prot: KMEM_PROT_*
 * @flags: KMEM_PROTECT_*
 * @reps: KMEM_IOC_BENCH only: revoke (to @prot) and grant (back to RW)
 *	this many times in the kernel; zero for PROTECT
 * @reserved: zero
 * @ns: KMEM_IOC_BENCH output: nanoseconds of each revoke, then each grant,
 *	summed
 * @ns_grant: KMEM_IOC_BENCH output: nanoseconds of the grants, summed
 */
struct kmem_protect {
	__u64 ranges;
	__u32 nr;
	__u32 prot;
	__u32 flags;
	__u32 reps;
	__u64 reserved;
	__u64 ns;
	__u64 ns_grant;
};

/**
 * struct kmem_stats - KMEM_IOC_STATS
 * @read_faults: faults that needed read access (a retried fault counts
 *	once)
 * @write_faults: faults that needed write access (likewise)
 * @callbacks: fault callbacks (one outstanding per page: concurrent faults
 *	on one page share one, and a waiter whose need the answering grant
 *	did not meet gets another)
 * @zaps: page-table invalidations (one TLB flush each)
 * @protects: protection changes applied
 * @nowait_busy: non-blocking changes refused with -EAGAIN
 */
struct kmem_stats {
	__u64 read_faults;
	__u64 write_faults;
	__u64 callbacks;
	__u64 zaps;
	__u64 protects;
	__u64 nowait_busy;
};

#define KMEM_IOC_MAGIC		'K'
#define KMEM_IOC_CREATE		_IOW(KMEM_IOC_MAGIC, 0x40, struct kmem_create)
#define KMEM_IOC_PROTECT	_IOW(KMEM_IOC_MAGIC, 0x41, struct kmem_protect)
#define KMEM_IOC_STATS		_IOR(KMEM_IOC_MAGIC, 0x42, struct kmem_stats)
#define KMEM_IOC_DESTROY	_IO(KMEM_IOC_MAGIC, 0x43)
#define KMEM_IOC_BENCH		_IOWR(KMEM_IOC_MAGIC, 0x44, struct kmem_protect)

#endif /* _UAPI_KVERBS_KMEM_H */
