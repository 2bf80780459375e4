// SPDX-License-Identifier: GPL-2.0-only
/*
 * kfcache client: file pages, straight from the server's page cache into
 * ours.
 *
 * Registration (Dalessandro & Wyckoff's trade-off): the client registers
 * the page-cache pages a READ fills, for that READ only, and grants the
 * server's endpoint, and no other, write access to them: a kverbs region
 * over the locked folios and a grant on this mount's connection.  The
 * server writes them and then replies; the reply, or its absence, ends
 * the grant (kverbs_region_destroy() invalidates the key and waits), and
 * only then are the pages marked up to date and unlocked.  So no page is
 * remotely writable once its data has landed, the server's pages are never
 * remotely accessible at all (it is the initiator), and nothing is copied.
 * The price is a registration and an invalidation per request: batching
 * up to KFC_READ_MAX_PAGES pages per READ, and several READs of one
 * readahead in flight at once, spreads it.
 */
#include <linux/pagemap.h>
#include <linux/slab.h>

#include "fs.h"

/* One READ: up to KFC_READ_MAX_PAGES consecutive locked folios. */
struct kfc_read {
	struct kfc_call call;
	struct kfc_read_req rq;
	struct kfc_read_reply reply;
	struct kverbs_region *region;
	struct kverbs_grant *grant;
	pgoff_t index;
	unsigned int n;
	int ret;
	bool budget;		/* holds n pages of the mount's budget */
	u64 t_sent;
	struct folio *folio[KFC_READ_MAX_PAGES];
};

/*
 * Flow control: the pages of READs in flight on a mount are bounded
 * (mount option inflight, in pages).  RoCE assumes a lossless link and
 * has no congestion control: on a lossy one (rxe over an emulated NIC, a
 * switch without PFC) a burst larger than the receiver's queues is
 * dropped, go-back-N resends all of it, and the connection dies of
 * retries.  A READ may always go alone, so one larger than the budget
 * still makes progress.
 */
static bool kfc_inflight_tryget(struct kfc_sb *s, unsigned int n)
{
	int cur = atomic_read(&s->inflight);

	do {
		if (cur && cur + n > s->inflight_max)
			return false;
	} while (!atomic_try_cmpxchg(&s->inflight, &cur, cur + n));
	return true;
}

static void kfc_inflight_put(struct kfc_sb *s, unsigned int n)
{
	atomic_sub(n, &s->inflight);
	wake_up(&s->inflight_wait);
}

/* Register @rd's pages for the server and send the READ. */
static int kfc_read_start(struct inode *inode, struct kfc_read *rd)
{
	struct kfc_sb *s = KFC_SB(inode->i_sb);
	struct page *pages[KFC_READ_MAX_PAGES];
	struct kverbs_remote rem;
	u64 t0 = ktime_get_ns();
	unsigned int i;
	int ret;

	for (i = 0; i < rd->n; i++)
		pages[i] = folio_page(rd->folio[i], 0);
	rd->region = kverbs_region_create(s->dom, pages, rd->n);
	if (IS_ERR(rd->region)) {
		ret = PTR_ERR(rd->region);
		rd->region = NULL;
		return ret == -ESHUTDOWN || ret == -ENODEV ? -EIO : ret;
	}
	rd->grant = kverbs_region_grant(rd->region, s->ep,
					KVERBS_ACCESS_REMOTE_WRITE);
	if (IS_ERR(rd->grant)) {
		ret = PTR_ERR(rd->grant);
		rd->grant = NULL;
		return ret == -ENOTCONN || ret == -ENODEV ? -EIO : ret;
	}
	ret = kverbs_grant_remote(rd->grant, 0, (u64)rd->n << PAGE_SHIFT,
				  &rem);
	if (ret)
		return ret;
	memset(&rd->rq, 0, sizeof(rd->rq));
	rd->rq.index = cpu_to_be64(rd->index);
	rd->rq.npages = cpu_to_be32(rd->n);
	rd->rq.rkey = cpu_to_be32(rem.rkey);
	rd->rq.offset = cpu_to_be64(rem.offset);
	rd->rq.len = cpu_to_be64(rem.len);
	rd->t_sent = ktime_get_ns();
	atomic64_add(rd->t_sent - t0, &s->ns_register);
	return kfc_call_start(s, &rd->call, KFC_READ, KFC_I(inode)->handle,
			      &rd->rq, sizeof(rd->rq), &rd->reply,
			      sizeof(rd->reply));
}

/*
 * The answer: revoke the grant first, then trust the pages.  Pages the
 * server did not write lie wholly past its end of file: they are zeroed
 * and the size shrinks to the server's, so no reader gets them as data.
 */
static void kfc_read_finish(struct inode *inode, struct kfc_read *rd,
			    bool started)
{
	u64 t1 = 0;
	struct kfc_sb *s = KFC_SB(inode->i_sb);
	struct kfc_inode *ki = KFC_I(inode);
	unsigned int i, pages = 0;
	loff_t size = 0;

	if (started) {
		rd->ret = kfc_call_wait(s, &rd->call, false);
		t1 = ktime_get_ns();
		atomic64_add(t1 - rd->t_sent, &s->ns_answer);
		atomic64_inc(&s->reads);
		atomic64_add(rd->n, &s->read_pages);
	}
	if (rd->region)
		kverbs_region_destroy(rd->region);
	if (started)
		atomic64_add(ktime_get_ns() - t1, &s->ns_revoke);
	if (rd->budget)
		kfc_inflight_put(s, rd->n);
	if (!rd->ret) {
		pages = be32_to_cpu(rd->reply.pages);
		size = be64_to_cpu(rd->reply.attr.size);
		/*
		 * another object, more pages than asked, or fewer than its
		 * size implies
		 */
		if (be64_to_cpu(rd->reply.attr.handle) != ki->handle ||
		    !kfc_attr_same_object(&rd->reply.attr, inode->i_ino,
					  ki->generation) || pages > rd->n ||
		    (pages < rd->n && size > ((loff_t)(rd->index + pages) <<
					      PAGE_SHIFT))) {
			rd->ret = -EIO;
			atomic64_inc(&s->malformed);
		} else {
			if (kfc_attr_changed(inode, &rd->reply.attr))
				WRITE_ONCE(ki->stale, true);
			spin_lock(&inode->i_lock);
			if (size < i_size_read(inode))
				i_size_write(inode, size);
			spin_unlock(&inode->i_lock);
		}
	}
	for (i = 0; i < rd->n; i++) {
		struct folio *f = rd->folio[i];

		if (!rd->ret) {
			loff_t start = folio_pos(f);

			/* past the end of file: zeros, whatever the server had */
			if (i >= pages || size <= start)
				folio_zero_range(f, 0, folio_size(f));
			else if (size < start + folio_size(f))
				folio_zero_segment(f, size - start,
						   folio_size(f));
			folio_mark_uptodate(f);
		}
		folio_unlock(f);
	}
}

static int kfc_read_folio(struct file *file, struct folio *folio)
{
	struct inode *inode = folio->mapping->host;
	struct kfc_read *rd;
	int ret;

	rd = kzalloc(sizeof(*rd), GFP_KERNEL);
	if (!rd) {
		folio_unlock(folio);
		return -ENOMEM;
	}
	rd->index = folio->index;
	rd->n = 1;
	rd->folio[0] = folio;
	if (wait_event_killable(KFC_SB(inode->i_sb)->inflight_wait,
				kfc_inflight_tryget(KFC_SB(inode->i_sb), 1))) {
		folio_unlock(folio);
		kfree(rd);
		return -EINTR;
	}
	rd->budget = true;
	rd->ret = kfc_read_start(inode, rd);
	kfc_read_finish(inode, rd, !rd->ret);
	ret = rd->ret;
	kfree(rd);
	return ret;
}

/* At most this many READs of one readahead in flight (fs.h's budget first) */
#define KFC_READ_INFLIGHT	8

/* Finish @rd[0], the oldest READ in flight, and shift the rest down. */
static void kfc_readahead_retire(struct inode *inode, struct kfc_read **rd,
				 unsigned int *nr)
{
	kfc_read_finish(inode, rd[0], true);
	kfree(rd[0]);
	memmove(rd, rd + 1, --*nr * sizeof(*rd));
}

/*
 * A sliding window of READs: each new one waits for budget by retiring
 * the oldest of ours, so a readahead never waits on pages it holds.
 */
static void kfc_readahead(struct readahead_control *ractl)
{
	struct inode *inode = ractl->mapping->host;
	struct kfc_sb *s = KFC_SB(inode->i_sb);
	struct kfc_read *rd[KFC_READ_INFLIGHT];
	struct folio *folio;
	unsigned int nr = 0;

	for (;;) {
		struct kfc_read *r = kzalloc(sizeof(*r), GFP_KERNEL);

		/* without memory, read_folio fetches the rest one by one */
		if (!r)
			break;
		/* a readahead's folios are consecutive */
		while (r->n < KFC_READ_MAX_PAGES &&
		       (folio = readahead_folio(ractl))) {
			if (!r->n)
				r->index = folio->index;
			r->folio[r->n++] = folio;
		}
		if (!r->n) {
			kfree(r);
			break;
		}
		while (nr == KFC_READ_INFLIGHT ||
		       (nr && !kfc_inflight_tryget(s, r->n)))
			kfc_readahead_retire(inode, rd, &nr);
		/* killed: the rest is left to read_folio, or to no one */
		if (!nr && wait_event_killable(s->inflight_wait,
					       kfc_inflight_tryget(s, r->n))) {
			r->ret = -EINTR;
			kfc_read_finish(inode, r, false);
			kfree(r);
			break;
		}
		r->budget = true;
		r->ret = kfc_read_start(inode, r);
		if (r->ret) {
			kfc_read_finish(inode, r, false);
			kfree(r);
			continue;
		}
		rd[nr++] = r;
	}
	while (nr)
		kfc_readahead_retire(inode, rd, &nr);
}

const struct address_space_operations kfc_aops = {
	.read_folio = kfc_read_folio,
	.readahead = kfc_readahead,
};
