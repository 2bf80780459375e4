/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kvmemclient: the ioctls of the test-only kvmem client (kunit/kvmemclient.c),
 * shared with tools/kvmem/kvmem_test.cpp.
 */
#ifndef _KVERBS_KVMEMCLIENT_H
#define _KVERBS_KVMEMCLIENT_H

#include <linux/ioctl.h>

#define KVMEMCLIENT_IOC_MAGIC	'k'
/* /dev/kvmemclient: a region of @arg pages, answer a new fd of it. */
#define KVMEMCLIENT_IOC_REGION	_IO(KVMEMCLIENT_IOC_MAGIC, 0x01)
/*
 * the region's fd: a client ioctl, answers KVMEMCLIENT_HELLO; unless @arg
 * is 0 it also sleeps 1-2 ms, then writes it to the __u32 at @arg.
 */
#define KVMEMCLIENT_IOC_HELLO	_IO(KVMEMCLIENT_IOC_MAGIC, 0x02)
#define KVMEMCLIENT_HELLO	0x6b76
/* the region's fd: fail page @arg (kvmem_fail()). */
#define KVMEMCLIENT_IOC_FAIL	_IO(KVMEMCLIENT_IOC_MAGIC, 0x03)
/* the region's fd: grant page @arg (< 64) no more, so its faults wait. */
#define KVMEMCLIENT_IOC_HOLD	_IO(KVMEMCLIENT_IOC_MAGIC, 0x04)
/* the region's fd: grant page @arg RW (kvmem_protect()). */
#define KVMEMCLIENT_IOC_GRANT	_IO(KVMEMCLIENT_IOC_MAGIC, 0x05)

#endif /* _KVERBS_KVMEMCLIENT_H */
