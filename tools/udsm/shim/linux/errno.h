/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The kernel's errno values (-EPROTO ...) are the uapi's, the same as
 * the C library's: the uapi header directly, since the C library's
 * <errno.h> includes <linux/errno.h>, which is this file here.
 */
#ifndef _UDSM_SHIM_ERRNO_H
#define _UDSM_SHIM_ERRNO_H

#include <asm/errno.h>

#endif
