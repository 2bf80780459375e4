/* SPDX-License-Identifier: GPL-2.0-only */
/* Wire byte order: the protocol's fields are big endian. */
#ifndef _UDSM_SHIM_BYTEORDER_H
#define _UDSM_SHIM_BYTEORDER_H

#include <linux/types.h>

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define cpu_to_be16(x) ((__be16)__builtin_bswap16((u16)(x)))
#define cpu_to_be32(x) ((__be32)__builtin_bswap32((u32)(x)))
#define cpu_to_be64(x) ((__be64)__builtin_bswap64((u64)(x)))
#else
#define cpu_to_be16(x) ((__be16)(x))
#define cpu_to_be32(x) ((__be32)(x))
#define cpu_to_be64(x) ((__be64)(x))
#endif
#define be16_to_cpu(x) ((u16)cpu_to_be16(x))
#define be32_to_cpu(x) ((u32)cpu_to_be32(x))
#define be64_to_cpu(x) ((u64)cpu_to_be64(x))

#endif
