/* SPDX-License-Identifier: GPL-2.0-only */
/* The kernel's string helpers the queue lock's checks use. */
#ifndef _UDSM_SHIM_STRING_H
#define _UDSM_SHIM_STRING_H

#include <stddef.h>

/* The first byte of @n at @s that is not @c, or NULL. */
static inline void *memchr_inv(const void *s, int c, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;

	for (; n; n--, p++)
		if (*p != (unsigned char)c)
			return (void *)p;
	return NULL;
}

#endif
