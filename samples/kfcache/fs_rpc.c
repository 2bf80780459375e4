// SPDX-License-Identifier: GPL-2.0-only
/*
 * kfcache client: requests and replies on a mount's endpoint.
 *
 * A request is one kvmsg message with a tag from the mount's @calls
 * array.  The receive handler (softirq) checks the reply against what
 * its call asked, every field, copies it to the caller and completes it.
 * A reply that fails a check, or names no outstanding tag, is counted and
 * closes the connection; so does the server going away.  Either way every
 * outstanding call completes with -EIO and the mount turns dead: nothing
 * waits forever, and a page is never marked up to date from a bad reply.
 */
#include <linux/slab.h>

#include "fs.h"
#include "check.h"

/* Complete @call with @status (0: @call->reply holds @len valid bytes). */
static void kfc_call_complete(struct kfc_call *call, int status, u32 len)
{
	call->len = len;
	call->status = status;
	complete(&call->done);
}

static void kfc_fail_calls(struct kfc_sb *s)
{
	struct kfc_call *call;
	unsigned long tag;

	WRITE_ONCE(s->dead, true);
	xa_lock_bh(&s->calls);
	xa_for_each(&s->calls, tag, call) {
		__xa_erase(&s->calls, tag);
		if (!xa_is_value(call))
			kfc_call_complete(call, -EIO, 0);
	}
	xa_unlock_bh(&s->calls);
}

static int kfc_fs_recv(struct kverbs_ep *ep, struct kvmsg_rx *rx,
		       enum kvmsg_ctx ctx)
{
	struct kfc_sb *s = kverbs_ep_priv(ep);
	const struct kfc_hdr *h = kvmsg_rx_data(rx);
	u32 len = kvmsg_rx_len(rx);
	struct kfc_call *call;
	int ret;

	if (len < sizeof(*h) || h->version != KFC_PROTO_VERSION ||
	    h->reserved || h->reserved2 || h->handle)
		goto malformed;
	call = xa_erase_bh(&s->calls, be32_to_cpu(h->tag));
	if (!call)
		goto malformed;
	/*
	 * The answer to a request its caller gave up on: dropped, but a
	 * handle it names is the server's lookup to give back.
	 */
	if (xa_is_value(call)) {
		const struct kfc_attr_reply *r = (const void *)h;
		u8 op = xa_to_value(call);

		atomic64_inc(&s->late);
		if (kfc_check_late_reply(op, h, len))
			goto malformed;
		if ((op == KFC_LOOKUP || op == KFC_MOUNT) && !h->status)
			kfc_forget(s, be64_to_cpu(r->attr.handle), 1);
		return 0;
	}
	ret = kfc_check_reply(call->op, call->max, h, len);
	if (ret) {
		kfc_call_complete(call, -EIO, 0);
		goto malformed;
	}
	memcpy(call->reply, h, len);
	kfc_call_complete(call, 0, len);
	return 0;

malformed:
	atomic64_inc(&s->malformed);
	pr_warn_ratelimited("kfcache: malformed reply from %pISp: connection closed\n",
			    &s->addr);
	return -EPROTO;
}

static void kfc_fs_send_done(struct kverbs_ep *ep, void *cookie, int status)
{
}

const struct kvmsg_ops kfc_fs_msg_ops = {
	.recv = kfc_fs_recv,
	.send_done = kfc_fs_send_done,
};

static void kfc_fs_disconnected(struct kverbs_ep *ep, int err)
{
	struct kfc_sb *s = kverbs_ep_priv(ep);

	if (!s)
		return;
	if (!READ_ONCE(s->closing))
		pr_warn("kfcache: connection to %pISp lost (%d): requests fail with -EIO until unmount\n",
			&s->addr, err);
	kfc_fail_calls(s);
}

const struct kverbs_domain_ops kfc_fs_dom_ops = {
	.disconnected = kfc_fs_disconnected,
};

/**
 * kfc_call_start - send a request
 * @s: mount
 * @call: its state, the caller's until kfc_call_wait() returns
 * @op: enum kfc_op
 * @handle: object the request is about (0 for MOUNT)
 * @req: the whole message; its header is filled in here
 * @len: bytes of @req
 * @reply: room for the answer
 * @max: bytes of @reply
 *
 * Context: process; sleeps for a send buffer.
 * Return: 0, then kfc_call_wait() must follow; or -EIO (no connection),
 * -ENOMEM, -EINTR.
 */
int kfc_call_start(struct kfc_sb *s, struct kfc_call *call, u8 op,
		   u64 handle, void *req, u32 len, void *reply, u32 max)
{
	struct kfc_hdr *h = req;
	struct kvmsg_buf *buf;
	int ret;

	init_completion(&call->done);
	call->op = op;
	call->reply = reply;
	call->max = max;
	call->status = -EIO;
	if (READ_ONCE(s->dead))
		return -EIO;
	buf = kvmsg_reserve(s->ep, len, 0);
	if (IS_ERR(buf))
		return PTR_ERR(buf) == -EINTR ? -EINTR : -EIO;
	ret = xa_alloc_cyclic_bh(&s->calls, &call->tag, call, xa_limit_31b,
				 &s->next_tag, GFP_KERNEL);
	if (ret < 0) {
		kvmsg_unreserve(buf);
		return ret;
	}
	memset(h, 0, sizeof(*h));
	h->op = op;
	h->version = KFC_PROTO_VERSION;
	h->tag = cpu_to_be32(call->tag);
	h->handle = cpu_to_be64(handle);
	memcpy(kvmsg_buf_data(buf), req, len);
	if (kvmsg_send(buf, len, 0, NULL) || READ_ONCE(s->dead)) {
		/* the disconnect may complete it first: then wait for that */
		if (xa_erase_bh(&s->calls, call->tag))
			return -EIO;
		wait_for_completion(&call->done);
		return -EIO;
	}
	return 0;
}

/**
 * kfc_call_wait - wait for the answer to a started request
 * @s: mount
 * @call: as kfc_call_start() left it
 * @killable: a fatal signal ends the wait
 *
 * Bounded by the mount's timeout, and with @killable by a fatal signal
 * too; a server gone meanwhile is found by a probe (kverbs_ep_probe())
 * each KFC_PROBE_MS.  A request given up on leaves a tombstone under its tag until its
 * answer comes (dropped then) or the connection goes, so the tag is not
 * reused meanwhile.  A READ waits unkillably: giving it up revokes the
 * grant under the server's write, which costs the connection.
 *
 * Context: process; sleeps.
 * Return: the server's status (0 or -errno, the reply in @call->reply),
 * -EIO (no valid answer, or none in time), or -EINTR.
 */
int kfc_call_wait(struct kfc_sb *s, struct kfc_call *call, bool killable)
{
	unsigned long end = jiffies + msecs_to_jiffies(s->timeout_ms);
	long left;

	/*
	 * Each KFC_PROBE_MS without the answer, probe the connection: a
	 * server that died after acknowledging the request leaves nothing
	 * for RC to retry, so without a probe only the timeout would end
	 * the wait.  The probe's retries fail the endpoint in about 4 s,
	 * and the disconnect fails every call.
	 */
	for (;;) {
		long t = min_t(long, (long)(end - jiffies),
			       msecs_to_jiffies(KFC_PROBE_MS));

		if (t < 0)
			t = 0;
		left = killable ?
		       wait_for_completion_killable_timeout(&call->done, t) :
		       (long)wait_for_completion_timeout(&call->done, t);
		if (left || time_after_eq(jiffies, end))
			break;
		kverbs_ep_probe(s->ep);
	}
	if (left <= 0) {
		void *old = xa_cmpxchg_bh(&s->calls, call->tag, call,
					  xa_mk_value(call->op), GFP_KERNEL);

		if (old == call) {
			if (left)
				return -EINTR;
			/*
			 * Silent past the timeout, longer than the transport's
			 * own failure detection: the server is taken to be
			 * gone, as if disconnected (no request after this one
			 * waits for it again).
			 */
			pr_warn("kfcache: %pISp did not answer in %u ms: requests fail with -EIO until unmount\n",
				&s->addr, s->timeout_ms);
			kfc_fail_calls(s);
			return -EIO;
		}
		/* answered or failed meanwhile: its completion is on its way */
		wait_for_completion(&call->done);
	}
	if (call->status)
		return call->status;
	return (s32)be32_to_cpu(((struct kfc_hdr *)call->reply)->status);
}

/**
 * kfc_call - send a request and wait for its answer
 * @s: mount
 * @op: enum kfc_op
 * @handle: object
 * @req: the whole message, header filled in here
 * @len: bytes of @req
 * @reply: room for the answer
 * @max: bytes of @reply
 *
 * Context: process; sleeps.
 * Return: as kfc_call_wait(), or kfc_call_start()'s error.
 */
int kfc_call(struct kfc_sb *s, u8 op, u64 handle, void *req, u32 len,
	     void *reply, u32 max)
{
	struct kfc_call call;
	int ret;

	ret = kfc_call_start(s, &call, op, handle, req, len, reply, max);
	return ret ?: kfc_call_wait(s, &call, true);
}

/**
 * kfc_name_call - MOUNT or LOOKUP of one name
 * @s: mount
 * @op: KFC_MOUNT or KFC_LOOKUP
 * @handle: the directory (0 for MOUNT)
 * @name: the name, not NUL-terminated
 * @len: its bytes, 1..NAME_MAX
 * @reply: the attributes of what it names
 *
 * Context: process; sleeps.
 * Return: as kfc_call(), or -ENOMEM, -ENAMETOOLONG.
 */
int kfc_name_call(struct kfc_sb *s, u8 op, u64 handle, const char *name,
		  u16 len, struct kfc_attr_reply *reply)
{
	struct kfc_name_req *rq;
	int ret;

	if (len > NAME_MAX)
		return -ENAMETOOLONG;
	rq = kzalloc(sizeof(*rq) + len, GFP_KERNEL);
	if (!rq)
		return -ENOMEM;
	rq->len = cpu_to_be16(len);
	memcpy(rq->name, name, len);
	ret = kfc_call(s, op, handle, rq, sizeof(*rq) + len, reply,
		       sizeof(*reply));
	kfree(rq);
	return ret;
}

/* Send one FORGET now, without sleeping: false if no send buffer. */
static bool kfc_forget_send(struct kfc_sb *s, u64 handle, u64 count)
{
	struct kfc_forget_req *rq;
	struct kvmsg_buf *buf;

	buf = kvmsg_reserve(s->ep, sizeof(*rq), KVERBS_NOWAIT);
	if (IS_ERR(buf))
		return PTR_ERR(buf) != -EAGAIN;	/* gone: nothing to owe */
	rq = kvmsg_buf_data(buf);
	memset(rq, 0, sizeof(*rq));
	rq->hdr.op = KFC_FORGET;
	rq->hdr.version = KFC_PROTO_VERSION;
	rq->hdr.handle = cpu_to_be64(handle);
	rq->count = cpu_to_be64(count);
	kvmsg_send(buf, sizeof(*rq), 0, NULL);
	return true;
}

/* FORGETs that found no send buffer, sent by kfc_forget_work(). */
struct kfc_forget_entry {
	struct list_head node;
	u64 handle;
	u64 count;
};

/**
 * kfc_forget - give the server back @count lookups of @handle
 * @s: mount
 * @handle: object
 * @count: lookups, at least 1
 *
 * No answer is awaited, and no send buffer either: eviction may run in
 * reclaim, and a late LOOKUP answer in softirq.  Without a buffer the
 * FORGET waits in a backlog that a worker sends; without memory even
 * for that it is dropped and counted (the server frees the handle with
 * the connection).  On a dead or closing mount nothing is sent.
 *
 * Context: any but hard interrupt; does not sleep.
 */
void kfc_forget(struct kfc_sb *s, u64 handle, u64 count)
{
	struct kfc_forget_entry *e;

	if (READ_ONCE(s->dead) || READ_ONCE(s->closing) || !count)
		return;
	if (list_empty_careful(&s->forgets) &&
	    kfc_forget_send(s, handle, count))
		return;
	e = kmalloc(sizeof(*e), GFP_ATOMIC | __GFP_NOWARN);
	if (!e) {
		atomic64_inc(&s->forget_dropped);
		return;
	}
	e->handle = handle;
	e->count = count;
	spin_lock_bh(&s->forget_lock);
	list_add_tail(&e->node, &s->forgets);
	spin_unlock_bh(&s->forget_lock);
	mod_delayed_work(system_wq, &s->forget_work, 0);
}

/**
 * kfc_forget_work - send the FORGET backlog, in order, as buffers free
 * @work: the mount's
 *
 * Context: process (system workqueue); sleeps.
 */
void kfc_forget_work(struct work_struct *work)
{
	struct kfc_sb *s = container_of(to_delayed_work(work), struct kfc_sb,
					forget_work);
	struct kfc_forget_entry *e;

	for (;;) {
		spin_lock_bh(&s->forget_lock);
		e = list_first_entry_or_null(&s->forgets,
					     struct kfc_forget_entry, node);
		if (e)
			list_del(&e->node);
		spin_unlock_bh(&s->forget_lock);
		if (!e)
			return;
		if (!READ_ONCE(s->dead) && !READ_ONCE(s->closing) &&
		    !kfc_forget_send(s, e->handle, e->count)) {
			/* no buffer yet: back at the head, try again soon */
			spin_lock_bh(&s->forget_lock);
			list_add(&e->node, &s->forgets);
			spin_unlock_bh(&s->forget_lock);
			schedule_delayed_work(&s->forget_work, 1);
			return;
		}
		kfree(e);
	}
}

/**
 * kfc_forget_drain - drop the FORGET backlog (unmount)
 * @s: mount, closing
 *
 * Context: process; sleeps.
 */
void kfc_forget_drain(struct kfc_sb *s)
{
	struct kfc_forget_entry *e, *tmp;

	cancel_delayed_work_sync(&s->forget_work);
	list_for_each_entry_safe(e, tmp, &s->forgets, node)
		kfree(e);
	INIT_LIST_HEAD(&s->forgets);
}
