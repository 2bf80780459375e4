// SPDX-License-Identifier: GPL-2.0-only
/*
 * anon_inode_create_getfile() (6.7+, exported): a file on a new anonymous
 * inode of its own.  Before, the exported form was anon_inode_getfd_secure(),
 * which returns a descriptor.
 */
#include <linux/anon_inodes.h>
#include <linux/fcntl.h>
#include <linux/fs.h>

struct file *kverbs_probe(const struct file_operations *fops);
struct file *kverbs_probe(const struct file_operations *fops)
{
	return anon_inode_create_getfile("kverbs_probe", fops, NULL, O_RDWR,
					 NULL);
}
