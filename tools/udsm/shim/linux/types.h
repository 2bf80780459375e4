/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The kernel's fixed-width types for samples/kdsm/proto.c and the uapi
 * header it includes, in user space.  Only translation units that see no
 * system <linux/...> header use this directory (the guard is the real
 * header's, so the two never mix); __u64 is unsigned long long as in
 * the uapi's int-ll64, so struct layouts agree with the system's.
 */
#ifndef _LINUX_TYPES_H
#define _LINUX_TYPES_H

#ifndef __cplusplus
#include <stdbool.h>
#endif

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;

/* big-endian on the wire; only asm/byteorder.h converts them */
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u64 __be64;

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;

#endif /* _LINUX_TYPES_H */
