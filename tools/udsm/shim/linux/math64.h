/* SPDX-License-Identifier: GPL-2.0-only */
/* 64-bit division: a plain division in user space. */
#ifndef _UDSM_SHIM_MATH64_H
#define _UDSM_SHIM_MATH64_H

#include <linux/types.h>

static inline u64 div_u64(u64 dividend, u32 divisor)
{
	return dividend / divisor;
}

#endif
