/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What the kernel build puts in front of every file (-include): the
 * attributes the protocol code uses without including anything.  Given
 * with -include to the protocol's C files only.
 */
#ifndef _UDSM_SHIM_PRELUDE_H
#define _UDSM_SHIM_PRELUDE_H

#define fallthrough __attribute__((__fallthrough__))

#endif
