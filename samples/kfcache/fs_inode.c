// SPDX-License-Identifier: GPL-2.0-only
/*
 * kfcache client: inodes, names, directories, and close-to-open coherence.
 *
 * Coherence: every open of a file asks the server for its attributes
 * (GETATTR) and compares them with those its cached pages were read
 * against: the change attribute where the server's file system keeps
 * one (i_version), and always ctime, mtime and size.  Any difference
 * drops the cached pages before the open returns, so data written on the
 * server before an open is what that open reads, as NFS promises.  The
 * open's last path component is looked up again too (d_revalidate with
 * LOOKUP_OPEN), so a name that now leads to another object (a file
 * replaced by rename) gets a fresh inode.  A reader who keeps a file open
 * keeps reading the object it opened; pages past a server-side truncation
 * are never handed out, as the size shrinks with the first reply that
 * shows it.  Path walks without an open trust attributes for
 * KFC_ATTR_TIMEOUT.
 */
#include <linux/namei.h>
#include <linux/pagemap.h>
#include <linux/slab.h>

#include "fs.h"

static const struct inode_operations kfc_dir_iops;
static const struct file_operations kfc_dir_fops;
static const struct inode_operations kfc_file_iops;
static const struct file_operations kfc_file_fops;
static const struct inode_operations kfc_symlink_iops;

/* Has the object changed since its cached pages were read? */
bool kfc_attr_changed(struct inode *inode, const struct kfc_attr *a)
{
	struct kfc_inode *ki = KFC_I(inode);

	return ki->stale || be64_to_cpu(a->change) != ki->change ||
	       be64_to_cpu(a->mtime_ns) != ki->mtime_ns ||
	       be64_to_cpu(a->ctime_ns) != ki->ctime_ns ||
	       be64_to_cpu(a->size) != i_size_read(inode);
}

/* Take the server's attributes as the inode's. */
static void kfc_attr_set(struct inode *inode, const struct kfc_attr *a)
{
	struct kfc_inode *ki = KFC_I(inode);
	struct timespec64 mt = ns_to_timespec64(be64_to_cpu(a->mtime_ns));
	struct timespec64 ct = ns_to_timespec64(be64_to_cpu(a->ctime_ns));
	umode_t mode;

	ki->change = be64_to_cpu(a->change);
	ki->mtime_ns = be64_to_cpu(a->mtime_ns);
	ki->ctime_ns = be64_to_cpu(a->ctime_ns);
	ki->attr_time = jiffies;
	ki->stale = false;
	spin_lock(&inode->i_lock);
	i_size_write(inode, be64_to_cpu(a->size));
	spin_unlock(&inode->i_lock);
	/*
	 * read-only: no permission on the client widens the server's; the
	 * set-ID bits of an unauthenticated server only if the mount said so
	 */
	mode = be32_to_cpu(a->mode) & ~0222;
	if (!KFC_SB(inode->i_sb)->server_setid)
		mode &= ~(S_ISUID | S_ISGID);
	/* one store: a concurrent exec of a live inode never sees the bits */
	WRITE_ONCE(inode->i_mode, mode);
	set_nlink(inode, be32_to_cpu(a->nlink));
	i_uid_write(inode, be32_to_cpu(a->uid));
	i_gid_write(inode, be32_to_cpu(a->gid));
	inode->i_blocks = be64_to_cpu(a->blocks);
	kverbs_inode_set_mtime(inode, mt);
	kverbs_inode_set_atime(inode, mt);
	inode_set_ctime_to_ts(inode, ct);
}

/*
 * Bring @inode up to @a: if the object changed, its cached pages go
 * first.  Returns -ESTALE if @a is another object.
 */
static int kfc_refresh(struct inode *inode, const struct kfc_attr *a)
{
	struct address_space *mapping = inode->i_mapping;
	struct kfc_inode *ki = KFC_I(inode);
	int ret = 0;

	if (!kfc_attr_same_object(a, inode->i_ino, ki->generation) ||
	    inode_wrong_type(inode, be32_to_cpu(a->mode)))
		return -ESTALE;
	/*
	 * Exclusive against reads filling the cache (readahead and
	 * read_folio run under it shared): no page read against the old
	 * attributes lands after the invalidation.  Pages that would not go
	 * keep the inode stale and its old attributes, so the next look
	 * tries again.
	 */
	filemap_invalidate_lock(mapping);
	if (kfc_attr_changed(inode, a)) {
		if (S_ISREG(inode->i_mode))
			ret = invalidate_inode_pages2(mapping);
		if (!ret)
			kfc_attr_set(inode, a);
		else
			WRITE_ONCE(ki->stale, true);
	} else {
		ki->attr_time = jiffies;
	}
	filemap_invalidate_unlock(mapping);
	return ret;
}

/*
 * GETATTR of @inode, then kfc_refresh().  @access: the access bits the
 * server reported, or NULL.
 */
static int kfc_revalidate(struct inode *inode, u32 *access)
{
	struct kfc_attr_reply *r;
	struct kfc_hdr rq;
	int ret;

	r = kmalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	ret = kfc_call(KFC_SB(inode->i_sb), KFC_GETATTR, KFC_I(inode)->handle,
		       &rq, sizeof(rq), r, sizeof(*r));
	if (!ret)
		ret = kfc_refresh(inode, &r->attr);
	if (!ret && access)
		*access = be32_to_cpu(r->attr.access);
	kfree(r);
	return ret;
}

/*
 * Opening asks the server: what it will not let us read (nobody's view,
 * srv_conn.c) fails here with -EACCES, not at the first read.
 */
static int kfc_open_check(struct inode *inode)
{
	u32 access = 0;
	int ret = kfc_revalidate(inode, &access);

	if (!ret && !(access & KFC_ACCESS_READ))
		ret = -EACCES;
	return ret;
}

static int kfc_iget_test(struct inode *inode, void *data)
{
	const struct kfc_attr *a = data;

	return kfc_attr_same_object(a, inode->i_ino,
				    KFC_I(inode)->generation);
}

static int kfc_iget_set(struct inode *inode, void *data)
{
	const struct kfc_attr *a = data;

	inode->i_ino = be64_to_cpu(a->ino);
	KFC_I(inode)->generation = be32_to_cpu(a->generation);
	return 0;
}

/*
 * A LOOKUP reply named @handle for @inode: one more lookup to give back,
 * or, for another handle of the same object (a hard link's other name),
 * given back at once.  @nlookup under i_lock: lookups and revalidations
 * of one inode run concurrently.
 */
static void kfc_count_lookup(struct inode *inode, u64 handle)
{
	struct kfc_inode *ki = KFC_I(inode);
	bool same;

	spin_lock(&inode->i_lock);
	same = handle == ki->handle;
	if (same)
		ki->nlookup++;
	spin_unlock(&inode->i_lock);
	if (!same)
		kfc_forget(KFC_SB(inode->i_sb), handle, 1);
}

/**
 * kfc_iget - the inode of the object @a describes, counting one lookup
 * @sb: mount
 * @a: attributes from a MOUNT or LOOKUP reply
 *
 * An inode we have already keeps its handle (hard links get one handle
 * per name on the server): the one in @a is forgotten again.
 *
 * Context: process; sleeps.
 * Return: the inode, or ERR_PTR(-ENOMEM, -ESTALE).
 */
struct inode *kfc_iget(struct super_block *sb, const struct kfc_attr *a)
{
	struct inode *inode;
	struct kfc_inode *ki;
	u64 handle = be64_to_cpu(a->handle);
	int ret;

	inode = iget5_locked(sb, (unsigned long)be64_to_cpu(a->ino),
			     kfc_iget_test, kfc_iget_set, (void *)a);
	if (!inode) {
		kfc_forget(KFC_SB(sb), handle, 1);
		return ERR_PTR(-ENOMEM);
	}
	ki = KFC_I(inode);
	if (!(inode->i_state & I_NEW)) {
		kfc_count_lookup(inode, handle);
		ret = kfc_refresh(inode, a);
		if (ret == -ESTALE) {
			iput(inode);
			return ERR_PTR(ret);
		}
		return inode;
	}
	ki->handle = handle;
	ki->nlookup = 1;
	kfc_attr_set(inode, a);
	switch (inode->i_mode & S_IFMT) {
	case S_IFREG:
		inode->i_op = &kfc_file_iops;
		inode->i_fop = &kfc_file_fops;
		inode->i_data.a_ops = &kfc_aops;
		break;
	case S_IFDIR:
		inode->i_op = &kfc_dir_iops;
		inode->i_fop = &kfc_dir_fops;
		break;
	case S_IFLNK:
		inode->i_op = &kfc_symlink_iops;
		inode_nohighmem(inode);
		break;
	default:
		/* served as what they are, never opened through the server */
		init_special_inode(inode, inode->i_mode, 0);
		break;
	}
	unlock_new_inode(inode);
	return inode;
}

static struct dentry *kfc_lookup(struct inode *dir, struct dentry *dentry,
				 unsigned int flags)
{
	struct kfc_sb *s = KFC_SB(dir->i_sb);
	struct kfc_attr_reply *r;
	struct inode *inode = NULL;
	int ret;

	if (dentry->d_name.len > NAME_MAX)
		return ERR_PTR(-ENAMETOOLONG);
	r = kmalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return ERR_PTR(-ENOMEM);
	ret = kfc_name_call(s, KFC_LOOKUP, KFC_I(dir)->handle,
			    dentry->d_name.name, dentry->d_name.len, r);
	if (!ret)
		inode = kfc_iget(dir->i_sb, &r->attr);
	kfree(r);
	if (ret && ret != -ENOENT)
		return ERR_PTR(ret);
	return d_splice_alias(inode, dentry);
}

/*
 * Is @dentry's name still @dentry's object?  Asked on every open, and on
 * other walks once its attributes are older than KFC_ATTR_TIMEOUT.
 */
static int kfc_d_revalidate(struct dentry *dentry, unsigned int flags)
{
	struct name_snapshot name;
	struct kfc_attr_reply *r;
	struct dentry *parent;
	struct inode *inode;
	struct kfc_sb *s;
	int ret;

	if (flags & LOOKUP_RCU)
		return -ECHILD;
	inode = d_inode(dentry);
	/* negative: the name may exist by now */
	if (!inode)
		return 0;
	if (!(flags & LOOKUP_OPEN) &&
	    time_before(jiffies, KFC_I(inode)->attr_time + KFC_ATTR_TIMEOUT))
		return 1;
	s = KFC_SB(inode->i_sb);
	r = kmalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	parent = dget_parent(dentry);
	take_dentry_name_snapshot(&name, dentry);
	ret = kfc_name_call(s, KFC_LOOKUP, KFC_I(d_inode(parent))->handle,
			    name.name.name, name.name.len, r);
	release_dentry_name_snapshot(&name);
	dput(parent);
	if (ret == -ENOENT || ret == -ESTALE) {
		ret = 0;
	} else if (!ret) {
		kfc_count_lookup(inode, be64_to_cpu(r->attr.handle));
		/* pages that would not go leave the inode stale, still valid */
		ret = kfc_refresh(inode, &r->attr) == -ESTALE ? 0 : 1;
	}
	kfree(r);
	return ret;
}

const struct dentry_operations kfc_dentry_ops = {
	.d_revalidate = kfc_d_revalidate,
};

/* Close-to-open: the open sees what the server had when it began. */
static int kfc_file_open(struct inode *inode, struct file *file)
{
	return kfc_open_check(inode) ?: generic_file_open(inode, file);
}

/*
 * A read reply showed the object changed under an open file: its pages
 * go before the next read, which then reads one version, the newest.
 */
static ssize_t kfc_file_read_iter(struct kiocb *iocb, struct iov_iter *to)
{
	struct inode *inode = file_inode(iocb->ki_filp);

	if (READ_ONCE(KFC_I(inode)->stale)) {
		int ret;

		if (iocb->ki_flags & IOCB_NOWAIT)
			return -EAGAIN;
		ret = kfc_revalidate(inode, NULL);

		if (ret)
			return ret;
	}
	return generic_file_read_iter(iocb, to);
}

/*
 * Directory reading: positions 0 and 1 are "." and ".."; entry i of the
 * server's listing is position i + 2.  An open directory remembers the
 * server's cookie for its position, so a sequential reader costs one
 * READDIR per reply's worth of entries; a seek elsewhere starts over.
 */
struct kfc_dir_pos {
	loff_t pos;
	u64 cookie;
	bool eof;
};

static int kfc_dir_open(struct inode *inode, struct file *file)
{
	struct kfc_dir_pos *dp;
	int ret = kfc_open_check(inode);

	if (ret)
		return ret;
	dp = kzalloc(sizeof(*dp), GFP_KERNEL);
	file->private_data = dp;
	return dp ? 0 : -ENOMEM;
}

static int kfc_dir_release(struct inode *inode, struct file *file)
{
	kfree(file->private_data);
	return 0;
}

static int kfc_readdir(struct file *file, struct dir_context *ctx)
{
	struct inode *inode = file_inode(file);
	struct kfc_sb *s = KFC_SB(inode->i_sb);
	struct kfc_dir_pos *dp = file->private_data;
	struct kfc_readdir_reply *r;
	struct kfc_readdir_req rq;
	loff_t pos;
	int ret = 0;

	if (ctx->pos != dp->pos || ctx->pos <= 2) {
		dp->pos = 2;
		dp->cookie = 0;
		dp->eof = false;
	}
	r = kmalloc(KFC_MAX_MSG, GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	pos = dp->pos;
	while (!dp->eof) {
		const u8 *p;
		u16 n;

		rq.cookie = cpu_to_be64(dp->cookie);
		ret = kfc_call(s, KFC_READDIR, KFC_I(inode)->handle, &rq,
			       sizeof(rq), r, KFC_MAX_MSG);
		if (ret)
			break;
		/*
		 * "." and ".." only once the server answered: a directory it
		 * refuses fails before any entry, not after two of them.
		 */
		if (!dir_emit_dots(file, ctx))
			break;
		/* a server that neither lists nor ends would loop us */
		if (!r->count && !r->eof && be64_to_cpu(r->next) == dp->cookie) {
			ret = -EIO;
			break;
		}
		p = (const u8 *)(r + 1);
		for (n = be16_to_cpu(r->count); n; n--) {
			const struct kfc_dirent *e = (const void *)p;

			p += KFC_DIRENT_SIZE(e->len);
			/* a seek backwards or far: skip to ctx->pos */
			if (pos++ < ctx->pos)
				continue;
			if (!dir_emit(ctx, (const char *)(e + 1), e->len,
				      be64_to_cpu(e->ino), e->type)) {
				kfree(r);
				dp->pos = -1;	/* start over next time */
				return 0;
			}
			ctx->pos++;
		}
		dp->cookie = be64_to_cpu(r->next);
		dp->eof = r->eof;
		dp->pos = ctx->pos;
	}
	kfree(r);
	return ret;
}

static const char *kfc_get_link(struct dentry *dentry, struct inode *inode,
				struct delayed_call *done)
{
	struct kfc_readlink_reply *r;
	struct kfc_hdr rq;
	char *target;
	u16 n;
	int ret;

	if (!dentry)
		return ERR_PTR(-ECHILD);
	r = kmalloc(KFC_MAX_MSG, GFP_KERNEL);
	if (!r)
		return ERR_PTR(-ENOMEM);
	ret = kfc_call(KFC_SB(inode->i_sb), KFC_READLINK, KFC_I(inode)->handle,
		       &rq, sizeof(rq), r, KFC_MAX_MSG);
	if (ret) {
		kfree(r);
		return ERR_PTR(ret);
	}
	n = be16_to_cpu(r->len);
	target = kmemdup_nul(r->target, n, GFP_KERNEL);
	kfree(r);
	if (!target)
		return ERR_PTR(-ENOMEM);
	set_delayed_call(done, kfree_link, target);
	return target;
}

static const struct inode_operations kfc_dir_iops = {
	.lookup = kfc_lookup,
};

static const struct file_operations kfc_dir_fops = {
	.open = kfc_dir_open,
	.release = kfc_dir_release,
	.iterate_shared = kfc_readdir,
	.read = generic_read_dir,
	.llseek = generic_file_llseek,
};

static const struct inode_operations kfc_file_iops = {
};

static const struct file_operations kfc_file_fops = {
	.open = kfc_file_open,
	.read_iter = kfc_file_read_iter,
	.mmap = generic_file_readonly_mmap,
	.splice_read = kverbs_filemap_splice_read,
	.llseek = generic_file_llseek,
};

static const struct inode_operations kfc_symlink_iops = {
	.get_link = kfc_get_link,
};
