/* SPDX-License-Identifier: GPL-2.0-only */
/* Byte swaps, and U8_MAX, which the kernel's headers carry everywhere. */
#ifndef _UDSM_SHIM_SWAB_H
#define _UDSM_SHIM_SWAB_H

#include <linux/types.h>

#define swab64(x) ((u64)__builtin_bswap64((u64)(x)))
#ifndef U8_MAX
#define U8_MAX ((u8)~0U)
#endif

#endif
