/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * static_assert(expr) with the message optional, as the kernel's; C++17
 * has that already.
 */
#ifndef _UDSM_SHIM_BUILD_BUG_H
#define _UDSM_SHIM_BUILD_BUG_H

#ifndef __cplusplus
#undef static_assert
#define static_assert(expr, ...) __static_assert(expr, ##__VA_ARGS__, #expr)
#define __static_assert(expr, msg, ...) _Static_assert(expr, msg)
#endif

#endif
