// SPDX-License-Identifier: GPL-2.0-only
/*
 * kfcache server: the request handlers.
 *
 * GETATTR and READ complete in softirq when they can: READ when every
 * page it asks for is in the page cache and up to date.  Anything that
 * may sleep (a page to read from disk, a lookup, a directory read, an
 * open, freeing a handle) returns -EAGAIN there and runs again on the
 * domain's workqueue, in order (kvmsg).
 *
 * Data: the server is the initiator of every transfer.  Its page-cache
 * pages are DMA-mapped for the one RDMA write that carries them and
 * unmapped when it completes (kverbs_rdma_write_pages()); they are never
 * registered for remote access.  The only remotely accessible memory is
 * the client's, for one request (fs_read.c).
 */
#include <linux/cred.h>
#include <linux/dcache.h>
#include <linux/fs.h>
#include <linux/namei.h>
#include <linux/pagemap.h>
#include <linux/slab.h>
#include <linux/iversion.h>
#include <linux/shmem_fs.h>
#include <uapi/linux/magic.h>

#include "srv-pri.h"
#include "check.h"

/* The folios behind one RDMA write, released when it completes. */
struct kfc_srv_chunk {
	unsigned int n;
	struct folio *folio[];
};

static void kfc_srv_write_done(void *ctx, int status)
{
	struct kfc_srv_chunk *ch = ctx;
	unsigned int i;

	for (i = 0; i < ch->n; i++)
		folio_put(ch->folio[i]);
	kfree(ch);
}

/**
 * kfc_srv_fill_attr - @inode's attributes as the wire carries them
 * @a: out
 * @handle: the handle naming @inode on this connection
 * @inode: object
 *
 * Context: any.
 */
static void kfc_srv_fill_attr(struct kfc_attr *a, u64 handle,
			      struct inode *inode)
{
	struct timespec64 mt = kverbs_inode_get_mtime(inode);
	struct timespec64 ct = inode_get_ctime(inode);

	memset(a, 0, sizeof(*a));
	a->handle = cpu_to_be64(handle);
	a->ino = cpu_to_be64(inode->i_ino);
	a->size = cpu_to_be64(i_size_read(inode));
	a->blocks = cpu_to_be64(inode->i_blocks);
	a->mtime_ns = cpu_to_be64(timespec64_to_ns(&mt));
	a->ctime_ns = cpu_to_be64(timespec64_to_ns(&ct));
	if (IS_I_VERSION(inode))
		a->change = cpu_to_be64(inode_query_iversion(inode));
	a->generation = cpu_to_be32(inode->i_generation);
	a->mode = cpu_to_be32(inode->i_mode);
	a->nlink = cpu_to_be32(inode->i_nlink);
	a->uid = cpu_to_be32(from_kuid(&init_user_ns, inode->i_uid));
	a->gid = cpu_to_be32(from_kgid(&init_user_ns, inode->i_gid));
}

static void kfc_srv_hdr(struct kfc_hdr *h, const struct kfc_hdr *rq,
			int status)
{
	/* kernel-internal errnos (-ERESTARTSYS, -EOPENSTALE...) never leave */
	if (status < -(ERESTARTSYS - 1) || status > 0)
		status = -EIO;
	memset(h, 0, sizeof(*h));
	h->op = rq->op | KFC_REPLY;
	h->version = KFC_PROTO_VERSION;
	h->status = cpu_to_be32(status);
	h->tag = rq->tag;
	if (status)
		kfc_srv_count(KFC_S_ERRORS, 1);
}

/*
 * A reply buffer.  In softirq and in the deferred handler a reserve does
 * not wait (for the peer's credits, kvmsg.rst): the handler hands the
 * -EAGAIN back and is called again for the same request, so a handler
 * with effects (a handle made) reserves before it acts.  Any other error
 * means the connection is going: no reply, nothing to retry.
 *
 * Return: the buffer, or NULL with *@ret set to -EAGAIN or 0.
 */
static struct kvmsg_buf *kfc_srv_reply_buf(struct kfc_conn *c, u32 len,
					   int *ret)
{
	struct kvmsg_buf *buf = kvmsg_reserve(c->ep, len, 0);

	if (!IS_ERR(buf))
		return buf;
	*ret = PTR_ERR(buf) == -EAGAIN ? -EAGAIN : 0;
	return NULL;
}

/* Send a header carrying @status in @buf. */
static void kfc_srv_send_status(struct kvmsg_buf *buf,
				const struct kfc_hdr *rq, int status)
{
	kfc_srv_hdr(kvmsg_buf_data(buf), rq, status);
	kvmsg_send(buf, sizeof(struct kfc_hdr), 0, NULL);
}

/* Answer @rq with only a header carrying @status. */
static int kfc_srv_status(struct kfc_conn *c, const struct kfc_hdr *rq,
			  int status)
{
	struct kvmsg_buf *buf;
	int ret;

	buf = kfc_srv_reply_buf(c, sizeof(struct kfc_hdr), &ret);
	if (!buf)
		return ret;
	kfc_srv_send_status(buf, rq, status);
	return 0;
}

/* Send @h's attributes in @buf, of at least sizeof(kfc_attr_reply). */
static void kfc_srv_send_attr(struct kfc_conn *c, struct kvmsg_buf *buf,
			      const struct kfc_hdr *rq, struct kfc_handle *h)
{
	struct kfc_attr_reply *r = kvmsg_buf_data(buf);

	kfc_srv_hdr(&r->hdr, rq, 0);
	kfc_srv_fill_attr(&r->attr, kfc_handle_wire(c, h),
			  d_inode(h->path.dentry));
	if (h->file)
		r->attr.access = cpu_to_be32(KFC_ACCESS_READ);
	kvmsg_send(buf, sizeof(*r), 0, NULL);
}

static int kfc_srv_attr_reply(struct kfc_conn *c, const struct kfc_hdr *rq,
			      struct kfc_handle *h)
{
	struct kvmsg_buf *buf;
	int ret;

	buf = kfc_srv_reply_buf(c, sizeof(struct kfc_attr_reply), &ret);
	if (!buf)
		return ret;
	kfc_srv_send_attr(c, buf, rq, h);
	return 0;
}

static int kfc_srv_mount(struct kfc_conn *c, const struct kfc_name_req *rq,
			 u32 len)
{
	struct sockaddr_storage peer;
	struct kfc_handle *h = NULL;
	struct kvmsg_buf *buf;
	struct kfc_export *e;
	const char *name;
	u16 n;
	int ret;

	ret = kfc_check_name(rq, len, KFC_NAME_MAX - 1, &name, &n);
	if (ret == -EPROTO)
		return ret;
	if (ret)
		return kfc_srv_status(c, &rq->hdr, ret);
	/* The reply's buffer first: a handle is made once. */
	buf = kfc_srv_reply_buf(c, sizeof(struct kfc_attr_reply), &ret);
	if (!buf)
		return ret;
	ret = -ENOENT;
	kverbs_ep_peer_addr(c->ep, &peer);
	mutex_lock(&kfc_srv.lock);
	list_for_each_entry(e, &kfc_srv.exports, node) {
		if (strlen(e->name) != n || memcmp(e->name, name, n))
			continue;
		if (kfc_export_allows(e, &peer)) {
			ret = kfc_handle_make(c, &e->root, &h);
			break;
		}
		ret = -EACCES;
		kfc_srv_count(KFC_S_REFUSED, 1);
		pr_info_ratelimited("kfcache_srv: %pISc may not mount %s: not in its clients\n",
				    &peer, e->name);
		break;
	}
	mutex_unlock(&kfc_srv.lock);
	if (ret) {
		kfc_srv_send_status(buf, &rq->hdr, ret);
		return 0;
	}
	WRITE_ONCE(c->mounted, true);
	kfc_srv_send_attr(c, buf, &rq->hdr, h);
	return 0;
}

static int kfc_srv_lookup(struct kfc_conn *c, struct kfc_handle *dir,
			  const struct kfc_name_req *rq, u32 len)
{
	struct kvmsg_buf *buf;
	struct kfc_handle *h;
	struct dentry *d;
	struct path p;
	const char *name;
	u16 n;
	int ret;

	ret = kfc_check_name(rq, len, NAME_MAX, &name, &n);
	if (ret == -EPROTO)
		return ret;
	if (!ret && !d_is_dir(dir->path.dentry))
		ret = -ENOTDIR;
	if (ret)
		return kfc_srv_status(c, &rq->hdr, ret);
	/* The reply's buffer first: a handle is made (counted) once. */
	buf = kfc_srv_reply_buf(c, sizeof(struct kfc_attr_reply), &ret);
	if (!buf)
		return ret;
	/* One component below a directory of the export: never a walk. */
	d = lookup_one_len_unlocked(name, dir->path.dentry, n);
	if (IS_ERR(d)) {
		ret = PTR_ERR(d);
	} else if (d_really_is_negative(d)) {
		ret = -ENOENT;
	} else {
		p.mnt = dir->path.mnt;
		p.dentry = d;
		ret = kfc_handle_make(c, &p, &h);
	}
	if (!IS_ERR(d))
		dput(d);
	if (ret)
		kfc_srv_send_status(buf, &rq->hdr, ret);
	else
		kfc_srv_send_attr(c, buf, &rq->hdr, h);
	return 0;
}

/* Entries of one READDIR reply, filled by iterate_dir(). */
struct kfc_srv_dirctx {
	struct dir_context ctx;
	char *buf;
	u32 used;
	u32 room;
	u16 count;
	bool full;
	loff_t next;		/* cookie of the first entry not sent */
};

static bool kfc_srv_filldir(struct dir_context *ctx, const char *name,
			    int len, loff_t pos, u64 ino, unsigned int type)
{
	struct kfc_srv_dirctx *d = container_of(ctx, struct kfc_srv_dirctx,
						 ctx);
	struct kfc_dirent *e;
	u32 sz = KFC_DIRENT_SIZE(len);

	d->next = pos;
	if (kfc_name_is_dots(name, len))
		return true;
	/* a name the wire cannot carry is left out, not the rest with it */
	if (len > NAME_MAX)
		return true;
	if (d->used + sz > d->room) {
		d->full = true;
		return false;
	}
	e = (struct kfc_dirent *)(d->buf + d->used);
	memset(e, 0, sz);
	e->ino = cpu_to_be64(ino);
	e->type = type;
	e->len = len;
	memcpy(e + 1, name, len);
	d->used += sz;
	d->count++;
	return true;
}

static int kfc_srv_readdir(struct kfc_conn *c, struct kfc_handle *dir,
			   const struct kfc_readdir_req *rq)
{
	struct kfc_srv_dirctx d = { .ctx.actor = kfc_srv_filldir };
	u32 max = min_t(u32, kverbs_ep_max_send(c->ep), KFC_MAX_MSG);
	struct kfc_readdir_reply *r;
	struct kvmsg_buf *buf;
	loff_t pos = be64_to_cpu(rq->cookie);
	loff_t ret;
	int err;

	if (!d_is_dir(dir->path.dentry))
		return kfc_srv_status(c, &rq->hdr, -ENOTDIR);
	if (!dir->file)
		return kfc_srv_status(c, &rq->hdr, dir->open_err);
	if (pos < 0)
		return kfc_srv_status(c, &rq->hdr, -EINVAL);
	buf = kfc_srv_reply_buf(c, max, &err);
	if (!buf)
		return err;
	r = kvmsg_buf_data(buf);
	d.buf = (char *)(r + 1);
	d.room = max - sizeof(*r);
	/* The handle's one open directory: its position is ours alone. */
	ret = vfs_llseek(dir->file, pos, SEEK_SET);
	if (ret >= 0) {
		d.ctx.pos = pos;
		ret = iterate_dir(dir->file, &d.ctx);
	}
	/* a reply that could not carry even one entry would never advance */
	if (!ret && d.full && !d.count)
		ret = -ENAMETOOLONG;
	if (ret < 0) {
		kfc_srv_hdr(&r->hdr, &rq->hdr, ret);
		kvmsg_send(buf, sizeof(r->hdr), 0, NULL);
		return 0;
	}
	kfc_srv_hdr(&r->hdr, &rq->hdr, 0);
	r->next = cpu_to_be64(d.full ? d.next : d.ctx.pos);
	r->count = cpu_to_be16(d.count);
	r->eof = !d.full;
	memset(r->reserved, 0, sizeof(r->reserved));
	kvmsg_send(buf, sizeof(*r) + d.used, 0, NULL);
	return 0;
}

static int kfc_srv_readlink(struct kfc_conn *c, struct kfc_handle *h,
			    const struct kfc_hdr *rq)
{
	struct kfc_readlink_reply *r;
	DEFINE_DELAYED_CALL(done);
	struct kvmsg_buf *buf;
	struct inode *inode = d_inode(h->path.dentry);
	const char *target;
	size_t n;
	int ret;

	if (!S_ISLNK(inode->i_mode))
		return kfc_srv_status(c, rq, -EINVAL);
	target = vfs_get_link(h->path.dentry, &done);
	if (IS_ERR(target))
		return kfc_srv_status(c, rq, PTR_ERR(target));
	n = strnlen(target, PATH_MAX);
	if (!n || n >= PATH_MAX || sizeof(*r) + n >
	    min_t(u32, kverbs_ep_max_send(c->ep), KFC_MAX_MSG)) {
		do_delayed_call(&done);
		return kfc_srv_status(c, rq, -ENAMETOOLONG);
	}
	buf = kfc_srv_reply_buf(c, sizeof(*r) + n, &ret);
	if (!buf) {
		do_delayed_call(&done);
		return ret;
	}
	r = kvmsg_buf_data(buf);
	kfc_srv_hdr(&r->hdr, rq, 0);
	r->len = cpu_to_be16(n);
	memset(r->reserved, 0, sizeof(r->reserved));
	memcpy(r->target, target, n);
	do_delayed_call(&done);
	kvmsg_send(buf, sizeof(*r) + n, 0, NULL);
	return 0;
}

/* The folio of @index, up to date, with a reference; NULL to defer. */
static struct folio *kfc_srv_folio(struct file *file, pgoff_t index,
				   bool may_sleep)
{
	struct folio *folio = filemap_get_folio(file->f_mapping, index);

	/* NULL before 6.3, ERR_PTR(-ENOENT) after, for a miss */
	if (IS_ERR_OR_NULL(folio))
		folio = NULL;
	if (folio && !folio_test_uptodate(folio)) {
		folio_put(folio);
		folio = NULL;
	}
	if (folio || !may_sleep)
		return folio;
	if (file->f_mapping->a_ops->read_folio) {
		/*
		 * As filemap_read() and filemap_fault() do: a folio added to
		 * the page cache under the shared invalidate_lock cannot
		 * land in a range that a hole punch or truncate (holding it
		 * exclusive) has emptied but not yet unmapped on disk, which
		 * would leave stale data cached (issue 25, finding 7).
		 */
		filemap_invalidate_lock_shared(file->f_mapping);
		folio = read_mapping_folio(file->f_mapping, index, file);
		filemap_invalidate_unlock_shared(file->f_mapping);
		return folio;
	}
	/* tmpfs reads through shmem, a hole included; nothing else can */
	if (file_inode(file)->i_sb->s_magic == TMPFS_MAGIC) {
		struct page *page = shmem_read_mapping_page_gfp(file->f_mapping,
								index,
								GFP_KERNEL);

		return IS_ERR(page) ? ERR_CAST(page) : page_folio(page);
	}
	return ERR_PTR(-EOPNOTSUPP);
}

/*
 * READ: gather the folios, write them in chunks the device takes in one
 * work request, then the reply.  In softirq a miss, a full send queue or
 * no reply buffer defers the whole request, and in the deferred handler a
 * full send queue or no reply buffer has it called again when there is
 * room: chunks already posted are written again, with the same bytes.
 */
static int kfc_srv_read(struct kfc_conn *c, struct kfc_handle *h,
			const struct kfc_read_req *rq, enum kvmsg_ctx ctx)
{
	bool may_sleep = ctx == KVMSG_CTX_PROCESS;
	unsigned int maxw = kverbs_ep_max_write_pages(c->ep);
	u32 npages = be32_to_cpu(rq->npages);
	u64 index = be64_to_cpu(rq->index);
	struct page *pages[KFC_READ_MAX_PAGES];
	struct kfc_srv_chunk *ch = NULL;
	struct kverbs_remote rem, slice;
	struct kfc_read_reply *r;
	struct kvmsg_buf *buf;
	struct inode *inode;
	unsigned int i, k, n;
	loff_t size;
	int ret;

	if (!npages || npages > KFC_READ_MAX_PAGES ||
	    be64_to_cpu(rq->len) < (u64)npages << PAGE_SHIFT)
		return -EPROTO;
	if (!d_is_reg(h->path.dentry))
		return kfc_srv_status(c, &rq->hdr, d_is_dir(h->path.dentry) ?
				      -EISDIR : -EINVAL);
	if (!h->file)
		return kfc_srv_status(c, &rq->hdr, h->open_err);
	if (!maxw)
		return kfc_srv_status(c, &rq->hdr, -EOPNOTSUPP);
	if (index > (MAX_LFS_FILESIZE >> PAGE_SHIFT) - npages)
		return kfc_srv_status(c, &rq->hdr, -EFBIG);
	inode = file_inode(h->file);
	buf = kfc_srv_reply_buf(c, sizeof(*r), &ret);
	if (!buf)
		return ret;
	r = kvmsg_buf_data(buf);
	/*
	 * The attributes before the pages: a change after this point makes
	 * the client's next look differ from what it cached, never the
	 * other way round (old bytes under a new version).
	 */
	kfc_srv_fill_attr(&r->attr, be64_to_cpu(rq->hdr.handle), inode);
	r->attr.access = cpu_to_be32(KFC_ACCESS_READ);
	size = be64_to_cpu(r->attr.size);
	n = 0;
	if (index < DIV_ROUND_UP_ULL(size, PAGE_SIZE))
		n = min_t(u64, npages,
			  DIV_ROUND_UP_ULL(size, PAGE_SIZE) - index);

	rem.offset = be64_to_cpu(rq->offset);
	rem.len = be64_to_cpu(rq->len);
	rem.rkey = be32_to_cpu(rq->rkey);
	rem.reserved = 0;
	ret = 0;
	for (i = 0; i < n; i += k) {
		k = min(n - i, maxw);
		ch = kmalloc(struct_size(ch, folio, k),
			     may_sleep ? GFP_KERNEL : GFP_ATOMIC);
		if (!ch) {
			ret = may_sleep ? -ENOMEM : -EAGAIN;
			break;
		}
		for (ch->n = 0; ch->n < k; ch->n++) {
			struct folio *f = kfc_srv_folio(h->file,
							index + i + ch->n,
							may_sleep);

			if (IS_ERR_OR_NULL(f)) {
				ret = f ? PTR_ERR(f) : -EAGAIN;
				break;
			}
			ch->folio[ch->n] = f;
			pages[ch->n] = folio_file_page(f, index + i + ch->n);
		}
		if (!ret) {
			kverbs_remote_slice(&rem, (u64)i << PAGE_SHIFT,
					    (u64)k << PAGE_SHIFT, &slice);
			ret = kverbs_rdma_write_pages(c->ep, pages, k, &slice,
						      kfc_srv_write_done, ch,
						      0);
		}
		if (ret) {
			kfc_srv_write_done(ch, ret);
			break;
		}
		kfc_srv_count(KFC_S_PAGES, k);
	}
	/* Softirq, or no send-queue slot in the deferred handler: again. */
	if (ret == -EAGAIN) {
		kvmsg_unreserve(buf);
		return -EAGAIN;
	}
	kfc_srv_hdr(&r->hdr, &rq->hdr, ret);
	r->pages = cpu_to_be32(ret ? 0 : n);
	r->reserved = 0;
	kvmsg_send(buf, sizeof(*r), 0, NULL);
	kfc_srv_count(KFC_S_READS, 1);
	return 0;
}

static int kfc_srv_forget(struct kfc_conn *c, struct kfc_handle *h,
			  const struct kfc_forget_req *rq)
{
	u64 n = be64_to_cpu(rq->count);

	if (!n || n > h->nlookup)
		return -EPROTO;
	kfc_handle_forget(c, h, n);
	return 0;
}

static int kfc_srv_dispatch(struct kfc_conn *c, const void *msg, u32 len,
			    enum kvmsg_ctx ctx)
{
	const struct kfc_hdr *rq = msg;
	struct kfc_handle *h = NULL;

	if (kfc_check_request(msg, len))
		return -EPROTO;
	if (ctx != KVMSG_CTX_PROCESS && rq->op != KFC_GETATTR &&
	    rq->op != KFC_READ)
		return -EAGAIN;
	if (rq->op == KFC_MOUNT)
		return kfc_srv_mount(c, msg, len);
	h = kfc_handle_get(c, be64_to_cpu(rq->handle));
	if (!h)
		return rq->op == KFC_FORGET ? -EPROTO :
		       kfc_srv_status(c, rq, -ESTALE);
	switch (rq->op) {
	case KFC_LOOKUP:
		return kfc_srv_lookup(c, h, msg, len);
	case KFC_GETATTR:
		return kfc_srv_attr_reply(c, rq, h);
	case KFC_READDIR:
		return kfc_srv_readdir(c, h, msg);
	case KFC_READ:
		return kfc_srv_read(c, h, msg, ctx);
	case KFC_READLINK:
		return kfc_srv_readlink(c, h, rq);
	default:
		return kfc_srv_forget(c, h, msg);
	}
}

static int kfc_srv_recv(struct kverbs_ep *ep, struct kvmsg_rx *rx,
			enum kvmsg_ctx ctx)
{
	struct kfc_conn *c = kverbs_ep_priv(ep);
	const struct cred *old = NULL;
	int ret;

	if (!c)
		return -ENOMEM;
	/* softirq only reads pages of files opened with these already */
	if (ctx == KVMSG_CTX_PROCESS)
		old = override_creds(kfc_srv.cred);
	ret = kfc_srv_dispatch(c, kvmsg_rx_data(rx), kvmsg_rx_len(rx), ctx);
	if (old)
		revert_creds(old);
	if (ret == -EAGAIN)
		return ret;
	if (ret) {
		kfc_srv_count(KFC_S_MALFORMED, 1);
		pr_warn_ratelimited("kfcache_srv: malformed request from node %u (%d): connection closed\n",
				    kverbs_ep_peer_node(ep), ret);
		return ret;
	}
	kfc_srv_count(KFC_S_REQUESTS, 1);
	kfc_srv_count(ctx == KVMSG_CTX_PROCESS ? KFC_S_DEFERRED :
		      KFC_S_SOFTIRQ, 1);
	return 0;
}

static void kfc_srv_send_done(struct kverbs_ep *ep, void *cookie, int status)
{
}

const struct kvmsg_ops kfc_srv_msg_ops = {
	.recv = kfc_srv_recv,
	.send_done = kfc_srv_send_done,
};
