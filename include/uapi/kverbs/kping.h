/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * kping message format, shared by samples/kping (kernel) and tools/kvping
 * (user space).  The server echoes every KPING_MAGIC message back verbatim;
 * KPING_BURST_MAGIC messages (a one-way burst, numbered from 0 on their
 * own) are verified and counted but not echoed.
 *
 * Payload byte i of message seq is (__u8)(seq * 31 + i * 7 + 1), so a
 * receiver can verify a payload without keeping a copy.  @check is the
 * 32-bit FNV-1a hash (offset basis 2166136261, prime 16777619) of the
 * payload bytes.  All header fields are big endian.
 */
#ifndef _UAPI_KVERBS_KPING_H
#define _UAPI_KVERBS_KPING_H

#include <linux/types.h>

#define KPING_MAGIC		0x4b504e47U	/* "KPNG": echoed */
#define KPING_BURST_MAGIC	0x4b505342U	/* "KPSB": checked, not echoed */
#define KPING_FNV_BASIS		2166136261U
#define KPING_FNV_PRIME		16777619U

/**
 * struct kping_msg - one ping
 * @magic: KPING_MAGIC or KPING_BURST_MAGIC
 * @seq: sequence number, from 0
 * @len: payload bytes following the header
 * @check: FNV-1a of the payload
 * @payload: the pattern described above
 */
struct kping_msg {
	__be32 magic;
	__be32 seq;
	__be32 len;
	__be32 check;
	__u8 payload[];
};

#endif /* _UAPI_KVERBS_KPING_H */
