/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * kvmem test and benchmark interface: /dev/kvmem.
 *
 * Kernel clients use include/kverbs/kvmem.h directly; this ioctl path exists
 * so that user-space tests and benchmarks can create a managed region, map
 * it and change protections in batches.
 *
 * KVMEM_IOC_CREATE on the device returns a new file descriptor for the
 * region; every other ioctl and mmap() go to that descriptor.  The region
 * lives until the descriptor and every mapping of it are gone, or until
 * KVMEM_IOC_DESTROY, after which its pages fault with SIGBUS.
 *
 * All structures have explicit padding; reserved fields must be zero.
 */
#ifndef _UAPI_KVERBS_KVMEM_H
#define _UAPI_KVERBS_KVMEM_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define KVMEM_MAX_PAGES		(1U << 18)	/* 1 GiB of 4 KiB pages */
#define KVMEM_MAX_RANGES		4096

/* Page protections, in increasing order of access. */
#define KVMEM_PROT_NONE		0
#define KVMEM_PROT_READ		1
#define KVMEM_PROT_RW		2

/*
 * What the region's fault handler does for an access the protection
 * forbids (the kernel client of an ioctl region is the driver itself):
 * GRANT gives the page exactly the access the fault needs and counts the
 * fault; WAIT counts it and leaves the faulting task waiting (killable)
 * until a KVMEM_IOC_PROTECT grants the access.
 */
#define KVMEM_POLICY_GRANT	0
#define KVMEM_POLICY_WAIT	1

/**
 * struct kvmem_create - KVMEM_IOC_CREATE
 * @npages: region size in pages, 1..KVMEM_MAX_PAGES
 * @policy: KVMEM_POLICY_*
 * @prot: initial protection of every page
 * @reserved: zero
 */
struct kvmem_create {
	__u32 npages;
	__u32 policy;
	__u32 prot;
	__u32 reserved;
};

/** struct kvmem_range - pages [@first, @first + @count) */
struct kvmem_range {
	__u32 first;
	__u32 count;
};

/* kvmem_protect.flags */
#define KVMEM_PROTECT_NOWAIT	0x1	/* the non-blocking variant */

/**
 * struct kvmem_protect - KVMEM_IOC_PROTECT and KVMEM_IOC_BENCH
 * @ranges: user pointer to @nr struct kvmem_range, sorted, not overlapping,
 *	not empty
 * @nr: 1..KVMEM_MAX_RANGES
 * @prot: KVMEM_PROT_*
 * @flags: KVMEM_PROTECT_*
 * @reps: KVMEM_IOC_BENCH only: revoke (to @prot) and grant (back to RW)
 *	this many times in the kernel; zero for PROTECT
 * @reserved: zero
 * @ns: KVMEM_IOC_BENCH output: nanoseconds of each revoke, then each grant,
 *	summed
 * @ns_grant: KVMEM_IOC_BENCH output: nanoseconds of the grants, summed
 */
struct kvmem_protect {
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
 * struct kvmem_stats - KVMEM_IOC_STATS
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
struct kvmem_stats {
	__u64 read_faults;
	__u64 write_faults;
	__u64 callbacks;
	__u64 zaps;
	__u64 protects;
	__u64 nowait_busy;
};

#define KVMEM_IOC_MAGIC		'K'
#define KVMEM_IOC_CREATE		_IOW(KVMEM_IOC_MAGIC, 0x40, struct kvmem_create)
#define KVMEM_IOC_PROTECT	_IOW(KVMEM_IOC_MAGIC, 0x41, struct kvmem_protect)
#define KVMEM_IOC_STATS		_IOR(KVMEM_IOC_MAGIC, 0x42, struct kvmem_stats)
#define KVMEM_IOC_DESTROY	_IO(KVMEM_IOC_MAGIC, 0x43)
#define KVMEM_IOC_BENCH		_IOWR(KVMEM_IOC_MAGIC, 0x44, struct kvmem_protect)

#endif /* _UAPI_KVERBS_KVMEM_H */
