// SPDX-License-Identifier: GPL-2.0-only
/*
 * inode_get_mtime() and inode_set_mtime_to_ts() (6.7+): the timestamps
 * behind accessors.  Before, i_mtime and i_atime are plain fields.
 */
#include <linux/fs.h>

struct timespec64 kverbs_probe(struct inode *inode);
struct timespec64 kverbs_probe(struct inode *inode)
{
	inode_set_atime_to_ts(inode, inode_get_mtime(inode));
	return inode_set_mtime_to_ts(inode, inode_get_atime(inode));
}
