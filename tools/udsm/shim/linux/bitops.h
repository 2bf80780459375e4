/* SPDX-License-Identifier: GPL-2.0-only */
/* BIT() and the population count of a node set. */
#ifndef _UDSM_SHIM_BITOPS_H
#define _UDSM_SHIM_BITOPS_H

#define BIT(nr) (1UL << (nr))

static inline unsigned int hweight8(unsigned int w)
{
	return (unsigned int)__builtin_popcount(w & 0xffu);
}

#endif
