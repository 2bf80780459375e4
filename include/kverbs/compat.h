/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The one place where kverbs adapts to kernel API differences.  Public
 * because users of the API need KVERBS_IMPORT_NS().
 *
 * Every difference is decided by a compile-time probe (one file in compat/probes/,
 * run by scripts/conftest.sh through Kbuild) that defines KVERBS_HAVE_<NAME>
 * in compat/generated/probes.h.  Never test LINUX_VERSION_CODE: distro
 * kernels backport APIs, and a probe sees what the headers really offer.
 */
#ifndef _KVERBS_COMPAT_H_
#define _KVERBS_COMPAT_H_

#include <linux/module.h>

/*
 * Symbol namespace.  Up to 6.12 the namespace argument is an identifier
 * (stringified after macro expansion); 6.13 turned it into a string literal.
 * Exports are written EXPORT_SYMBOL_NS_GPL(sym, KVERBS_NS), which is right
 * on both sides of 6.13.
 */
/*
 * What a client module says to import the namespace: the modinfo entry
 * that MODULE_IMPORT_NS() makes, written out, so that it is right on any
 * kernel without the probe results kverbs' own build has (a client module
 * has none: MODULE_IMPORT_NS(KVERBS_NS) there would import "\"KVERBS\"").
 */
#define KVERBS_IMPORT_NS()	MODULE_INFO(import_ns, "KVERBS")

#ifdef KVERBS_HAVE_NS_IDENT
#define KVERBS_NS		KVERBS
#define KVERBS_KUNIT_NS		EXPORTED_FOR_KUNIT_TESTING
#else
#define KVERBS_NS		"KVERBS"
#define KVERBS_KUNIT_NS		"EXPORTED_FOR_KUNIT_TESTING"
#endif

/*
 * Internals that KUnit suites reach: static unless CONFIG_KUNIT, then
 * exported into the EXPORTED_FOR_KUNIT_TESTING namespace.
 * <kunit/visibility.h> is 6.3 and backported to later 6.1.y; without it a
 * kernel can still build kverbs, just not its tests.
 */
#ifdef KVERBS_HAVE_KUNIT_VISIBILITY
#include <kunit/visibility.h>
#elif IS_ENABLED(CONFIG_KUNIT)
#error "KUnit kernels need <kunit/visibility.h> (Linux 6.3 or 6.1.y with the backport)"
#else
#define KVERBS_KUNIT_NOEXPORT(sym) static_assert(1, #sym)
#define VISIBLE_IF_KUNIT static
#define EXPORT_SYMBOL_IF_KUNIT KVERBS_KUNIT_NOEXPORT
#endif

/*
 * VMA flags: 6.3 made vm_flags read-only and added vm_flags_set(); before,
 * drivers or-ed the field directly under the mmap lock.
 */
#ifdef KVERBS_HAVE_VM_FLAGS_SET
#define kverbs_vm_flags_set(vma, flags)	vm_flags_set(vma, flags)
#else
#define kverbs_vm_flags_set(vma, flags)	((vma)->vm_flags |= (flags))
#endif

/*
 * A fault that waits drops its lock first and returns VM_FAULT_RETRY.
 * 6.4 added per-VMA fault locks and release_fault_lock() to drop either.
 */
#ifdef KVERBS_HAVE_RELEASE_FAULT_LOCK
#define kverbs_release_fault_lock(vmf)	release_fault_lock(vmf)
#else
#define kverbs_release_fault_lock(vmf)	mmap_read_unlock((vmf)->vma->vm_mm)
#endif

/*
 * A descriptor for a file on an anonymous inode of its own, so that the
 * file has its own address_space (unmap_mapping_pages() then reaches the
 * mappings of that file only).  6.7 renamed anon_inode_getfd_secure() and
 * exports only the file form, anon_inode_create_getfile().  @flags:
 * O_RDWR and friends, and O_CLOEXEC.
 */
#include <linux/anon_inodes.h>
#include <linux/err.h>
#include <linux/file.h>

#ifdef KVERBS_HAVE_ANON_INODE_CREATE_GETFILE
static inline int kverbs_anon_inode_getfd_own(const char *name,
					      const struct file_operations *fops,
					      void *priv, int flags)
{
	struct file *file;
	int fd;

	fd = get_unused_fd_flags(flags);
	if (fd < 0)
		return fd;
	file = anon_inode_create_getfile(name, fops, priv, flags, NULL);
	if (IS_ERR(file)) {
		put_unused_fd(fd);
		return PTR_ERR(file);
	}
	fd_install(fd, file);
	return fd;
}
#else
#define kverbs_anon_inode_getfd_own(name, fops, priv, flags) \
	anon_inode_getfd_secure(name, fops, priv, flags, NULL)
#endif

/*
 * Inode timestamps behind accessors (6.7+, probe inode_get_mtime); the
 * ctime accessors are in both kernels.
 */
#ifdef KVERBS_HAVE_INODE_GET_MTIME
#define kverbs_inode_get_mtime(inode)		inode_get_mtime(inode)
#define kverbs_inode_set_mtime(inode, ts)	inode_set_mtime_to_ts(inode, ts)
#define kverbs_inode_set_atime(inode, ts)	inode_set_atime_to_ts(inode, ts)
#else
#define kverbs_inode_get_mtime(inode)		((inode)->i_mtime)
#define kverbs_inode_set_mtime(inode, ts)	((inode)->i_mtime = (ts))
#define kverbs_inode_set_atime(inode, ts)	((inode)->i_atime = (ts))
#endif

/* A page-cache file's ->splice_read (probe filemap_splice_read, 6.5+). */
#ifdef KVERBS_HAVE_FILEMAP_SPLICE_READ
#define kverbs_filemap_splice_read		filemap_splice_read
#else
#define kverbs_filemap_splice_read		generic_file_splice_read
#endif

#endif /* _KVERBS_COMPAT_H_ */
