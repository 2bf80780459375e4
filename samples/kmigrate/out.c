// SPDX-License-Identifier: GPL-2.0-only
/*
 * kmigrate source: KMIGRATE_IOC_PREPARE and KMIGRATE_IOC_FREEZE.
 *
 * Prepare, in @prep_work while the process keeps running: wait until the
 * arena is wholly here (it may still be arriving), register its pages,
 * connect, grant the destination remote read, send PREPARE and the keys,
 * wait for READY; then signal the process.  A failure undoes everything
 * and FREEZE returns it.
 *
 * Freeze (FREEZE, once prepared): send FROZEN with the context.  From
 * here the destination may run the process and read any page; the
 * source's copy is frozen by the caller's not touching it (the call
 * sleeps; the caller is the only thread).  The migration ends in
 * @end_work: DONE (the destination needs nothing more) frees the copy and
 * FREEZE returns 0; a lost connection before DONE gives the arena back and
 * FREEZE returns -EHOSTDOWN, so the process resumes here from the freeze.
 * A fatal signal ends only the wait: @end_work still runs, and frees the
 * arena with the last reference.
 *
 * @out_phase orders it all (under @a->lock): NONE -> PREPARING ->
 * PREPARED -> FROZEN -> NONE; PREPARING or PREPARED -> NONE when the
 * preparation fails or is cancelled (the session's release).
 */
#include <linux/cred.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/log2.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "kmigrate-pri.h"
#include "check.h"

static bool kmig_dest_ok(const struct __kernel_sockaddr_storage *ss)
{
	const struct sockaddr_in6 *s6 = (const void *)ss;
	const struct sockaddr_in *s4 = (const void *)ss;

	if (ss->ss_family == AF_INET)
		return s4->sin_port;
	return ss->ss_family == AF_INET6 && s6->sin6_port;
}

/* PREPARE for @arg, or ERR_PTR; its length in @len. */
static struct kmig_prepare *kmig_out_build(struct kmig_arena *a,
					   const struct kmigrate_prepare *arg,
					   u32 *len)
{
	struct kmig_prepare *p;
	u8 *data;

	if (arg->mode > KMIGRATE_MODE_PRECOPY ||
	    arg->flags & ~KMIGRATE_F_NO_PREFETCH ||
	    arg->path_len < 2 || arg->path_len > KMIGRATE_PATH_MAX ||
	    !arg->args_len || arg->args_len > KMIGRATE_ARGS_MAX ||
	    !arg->fp_len || arg->fp_len > KMIGRATE_FP_MAX ||
	    !kmig_dest_ok(&arg->dest))
		return ERR_PTR(-EINVAL);
	*len = sizeof(*p) + arg->path_len + arg->args_len + arg->fp_len;
	p = kzalloc(*len, GFP_KERNEL);
	if (!p)
		return ERR_PTR(-ENOMEM);
	data = p->data;
	if (copy_from_user(data, u64_to_user_ptr(arg->path), arg->path_len) ||
	    copy_from_user(data + arg->path_len, u64_to_user_ptr(arg->args),
			   arg->args_len) ||
	    copy_from_user(data + arg->path_len + arg->args_len,
			   u64_to_user_ptr(arg->fp), arg->fp_len)) {
		kfree(p);
		return ERR_PTR(-EFAULT);
	}
	if (!kmig_path_ok(data, arg->path_len) ||
	    !kmig_args_ok(data + arg->path_len, arg->args_len)) {
		kfree(p);
		return ERR_PTR(-EINVAL);
	}
	kmig_hdr_init(&p->hdr, KMIG_PREPARE, *len);
	p->va = cpu_to_be64(a->va);
	p->npages = cpu_to_be32(a->npages);
	p->mode = cpu_to_be32(arg->mode);
	p->flags = cpu_to_be32(arg->flags);
	p->path_len = cpu_to_be16(arg->path_len);
	p->args_len = cpu_to_be16(arg->args_len);
	p->fp_len = cpu_to_be16(arg->fp_len);
	return p;
}

/* FROZEN for the caller's context and ranges, or ERR_PTR. */
static struct kmig_frozen *kmig_out_build_frozen(struct kmig_arena *a,
						 const struct kmigrate_freeze *arg,
						 u32 *len)
{
	struct kmigrate_range *ranges;
	struct kmig_frozen *f;
	int ret = -EINVAL;
	u32 i;

	if (arg->flags & ~KMIGRATE_FREEZE_WAIT || arg->reserved ||
	    !arg->ctx_len || arg->ctx_len > KMIGRATE_CTX_MAX ||
	    !arg->nranges || arg->nranges > KMIGRATE_MAX_RANGES)
		return ERR_PTR(-EINVAL);
	*len = struct_size(f, range, arg->nranges) + arg->ctx_len;
	f = kzalloc(*len, GFP_KERNEL);
	ranges = kcalloc(arg->nranges, sizeof(*ranges), GFP_KERNEL);
	if (!f || !ranges) {
		ret = -ENOMEM;
		goto fail;
	}
	if (copy_from_user(ranges, u64_to_user_ptr(arg->ranges),
			   arg->nranges * sizeof(*ranges)) ||
	    copy_from_user((u8 *)&f->range[arg->nranges],
			   u64_to_user_ptr(arg->ctx), arg->ctx_len)) {
		ret = -EFAULT;
		goto fail;
	}
	if (!kmig_ranges_ok(ranges, arg->nranges, a->npages, false))
		goto fail;
	kmig_hdr_init(&f->hdr, KMIG_FROZEN, *len);
	f->nranges = cpu_to_be16(arg->nranges);
	f->ctx_len = cpu_to_be16(arg->ctx_len);
	for (i = 0; i < arg->nranges; i++) {
		f->range[i].first = cpu_to_be32(ranges[i].first);
		f->range[i].count = cpu_to_be32(ranges[i].count);
	}
	kfree(ranges);
	return f;
fail:
	kfree(ranges);
	kfree(f);
	return ERR_PTR(ret);
}

/* PREPARE, then the grant's keys in order. */
static int kmig_out_send_prepare(struct kmig_arena *a, struct kverbs_ep *ep,
				 struct kmig_prepare *p, u32 len)
{
	u64 extent = kverbs_grant_extent(a->grant);
	u32 nkeys = kmig_nkeys(a->npages, ilog2(extent));
	struct kmig_keys *k;
	u32 first, i;
	int ret;

	p->nkeys = cpu_to_be32(nkeys);
	p->extent_shift = cpu_to_be32(ilog2(extent));
	ret = kmig_send(ep, p, len, 0);
	if (ret)
		return ret;
	k = kmalloc(struct_size(k, key, KMIG_KEYS_PER_MSG), GFP_KERNEL);
	if (!k)
		return -ENOMEM;
	for (first = 0; first < nkeys && !ret; first += i) {
		for (i = 0; i < KMIG_KEYS_PER_MSG && first + i < nkeys; i++) {
			struct kverbs_remote r;

			ret = kverbs_grant_remote(a->grant,
						  (first + i) * extent, 1, &r);
			if (ret)
				break;
			k->key[i] = cpu_to_be32(r.rkey);
		}
		if (ret)
			break;
		kmig_hdr_init(&k->hdr, KMIG_KEYS, struct_size(k, key, i));
		k->first = cpu_to_be32(first);
		k->count = cpu_to_be32(i);
		ret = kmig_send(ep, k, struct_size(k, key, i), 0);
	}
	kfree(k);
	return ret;
}

/*
 * Undo the migration's connection, grant and registration, in process
 * context, once: by the ioctl before the freeze, by @end_work after it.
 */
static void kmig_out_close(struct kmig_arena *a)
{
	struct kverbs_ep *ep = NULL;
	struct kmig_conn *c = NULL;

	if (a->grant)
		kverbs_grant_revoke(a->grant);
	a->grant = NULL;
	/*
	 * Not current any more before it is closed: ep_sem is not held
	 * across kverbs_ep_close(), which waits for the teardown work of
	 * the domain's workqueue, where disconnects take ep_sem.
	 */
	down_write(&a->ep_sem);
	spin_lock_bh(&a->lock);
	if (a->out) {
		ep = a->ep;
		c = a->conn;
		a->ep = NULL;
		a->conn = NULL;
		a->out = false;
	}
	spin_unlock_bh(&a->lock);
	up_write(&a->ep_sem);
	if (ep)
		kverbs_ep_close(ep);
	if (c)
		kmig_arena_put(a);
	kfree(c);
	if (a->kr)
		kverbs_region_destroy(a->kr);
	a->kr = NULL;
}

/* After the freeze: DONE frees the copy, a lost connection resumes it. */
void kmig_out_end_work(struct work_struct *w)
{
	struct kmig_arena *a = container_of(w, struct kmig_arena, end_work);
	bool done;

	kmig_out_close(a);
	spin_lock_bh(&a->lock);
	done = a->done;
	if (done) {
		a->total_ns = ktime_get_ns() - a->t_freeze;
		a->moved = true;
	}
	a->out_phase = KMIG_OUT_NONE;
	a->frozen = false;
	a->ended = true;
	spin_unlock_bh(&a->lock);
	if (done) {
		kmig_count(KMIGRATE_S_OUT_DONE, 1);
		atomic64_set(&kmig.stats[KMIGRATE_S_TOTAL_NS], a->total_ns);
	} else {
		kmig_count(KMIGRATE_S_OUT_RESUMED, 1);
		pr_info("kmigrate: the destination of pid %d failed; it resumes here\n",
			a->tgid);
	}
	wake_up_all(&a->wait);
	/* The reference kmig_out_down() or DONE took for this work */
	kmig_arena_put(a);
}

/* Queue @end_work once per migration; under @a->lock. */
static void kmig_out_end(struct kmig_arena *a)
{
	if (a->frozen && !a->ending) {
		a->ending = true;
		kmig_arena_get(a);
		queue_work(kmig.wq, &a->end_work);
	}
}

/* The dialed endpoint is gone (the caller woke @a->wait). */
void kmig_out_down(struct kmig_arena *a)
{
	spin_lock_bh(&a->lock);
	kmig_out_end(a);
	spin_unlock_bh(&a->lock);
}

/**
 * kmig_out_recv - a message from the destination
 * @a: the arena
 * @type: its type, header checked
 * @msg: the message
 * @len: its length
 * @ctx: where the handler runs
 *
 * Context: softirq or process (kvmsg); never sleeps.
 * Return: 0, or -EPROTO for a message a destination may not send.
 */
int kmig_out_recv(struct kmig_arena *a, int type, const void *msg, u32 len,
		  enum kvmsg_ctx ctx)
{
	int ret = 0;

	spin_lock_bh(&a->lock);
	switch (type) {
	case KMIG_READY:
		ret = kmig_check_ready(msg, len);
		if (ret || a->ready || a->frozen) {
			ret = -EPROTO;
			break;
		}
		a->ready_status = be32_to_cpu(((const struct kmig_ready *)msg)->status);
		a->ready = true;
		break;
	case KMIG_RESUMED:
		if (len != sizeof(struct kmig_hdr) || !a->frozen || a->t_resumed) {
			ret = -EPROTO;
			break;
		}
		a->t_resumed = ktime_get_ns();
		a->downtime_ns = a->t_resumed - a->t_freeze;
		atomic64_set(&kmig.stats[KMIGRATE_S_DOWNTIME_NS],
			     a->downtime_ns);
		break;
	case KMIG_DONE:
		ret = kmig_check_done(msg, len);
		if (ret || !a->frozen || a->ending) {
			ret = -EPROTO;
			break;
		}
		/* ABORTED: the destination never ran it; resume here. */
		a->done = be32_to_cpu(((const struct kmig_done *)msg)->status) !=
			  KMIG_DONE_ABORTED;
		kmig_out_end(a);
		break;
	default:
		ret = -EPROTO;
	}
	spin_unlock_bh(&a->lock);
	wake_up_all(&a->wait);
	return ret;
}

/* Connect, register, grant; @a->ep (also *@epp) and @a->kr when 0. */
static int kmig_out_connect(struct kmig_arena *a, struct kverbs_ep **epp)
{
	struct kverbs_domain *dom;
	struct kverbs_region *kr;
	struct kverbs_grant *g;
	struct kmig_conn *c;
	struct kverbs_ep *ep;
	int ret;

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return -ENOMEM;
	c->a = a;
	c->dialed = true;
	/*
	 * kmig.dom_sem only while the region is made: from then on the
	 * region's reference keeps the domain's memory, and a domain being
	 * destroyed refuses the connect.  Not across the connect, which may
	 * wait for the domain's teardown work, where disconnects take
	 * kmig.lock (STOP holds that, then waits for dom_sem).
	 */
	down_read(&kmig.dom_sem);
	dom = kmig.dom;
	kr = dom ? kverbs_region_create(dom, a->pages, a->npages) :
		   ERR_PTR(-ENOTCONN);
	up_read(&kmig.dom_sem);
	if (IS_ERR(kr)) {
		kfree(c);
		return PTR_ERR(kr);
	}
	kmig_arena_get(a);
	ep = kverbs_ep_connect(dom, (const struct sockaddr *)&a->peer,
			       min(a->prep_timeout_ms, KMIG_CONNECT_MS), c);
	if (IS_ERR(ep)) {
		kverbs_region_destroy(kr);
		kfree(c);
		kmig_arena_put(a);
		return PTR_ERR(ep);
	}
	/* A previous incoming connection of @a, if any, is stale now. */
	down_write(&a->ep_sem);
	spin_lock_bh(&a->lock);
	a->ep = ep;
	a->conn = c;
	a->out = true;
	a->kr = kr;
	a->down = c->down;
	a->ready = false;
	a->ready_status = 0;
	a->done = false;
	a->frozen = false;
	a->ending = false;
	a->ended = false;
	a->t_resumed = 0;
	spin_unlock_bh(&a->lock);
	up_write(&a->ep_sem);

	*epp = ep;
	g = kverbs_region_grant(kr, ep, KVERBS_ACCESS_REMOTE_READ);
	ret = PTR_ERR_OR_ZERO(g);
	if (!ret)
		a->grant = g;
	return ret;
}

/* Tell the process its preparation ended (libkmigrate's poll()). */
static void kmig_out_signal(struct kmig_arena *a)
{
	struct pid *pid;

	mutex_lock(&kmig.lock);
	pid = get_pid(a->owner);
	mutex_unlock(&kmig.lock);
	if (pid)
		kill_pid(pid, KMIGRATE_SIGNAL, 1);
	put_pid(pid);
}

/* The preparation, off the process's path; see the top of this file. */
void kmig_out_prep_work(struct work_struct *w)
{
	struct kmig_arena *a = container_of(w, struct kmig_arena, prep_work);
	unsigned long timeout = msecs_to_jiffies(a->prep_timeout_ms);
	struct kverbs_ep *ep;
	int ret;

	/*
	 * An arena still arriving leaves once it has arrived (the prepare
	 * kicked the prefetcher) and its source has been told so: DONE goes
	 * on the arrival's connection, which the connect below replaces.
	 */
	wait_event_idle(a->wait, (READ_ONCE(a->state) != KMIGRATE_ST_PULLING &&
				  (!READ_ONCE(a->conn) || READ_ONCE(a->out) ||
				   READ_ONCE(a->done_sent))) ||
			READ_ONCE(a->cancel));
	ret = READ_ONCE(a->state) == KMIGRATE_ST_LOST ? -EIO : 0;
	if (!ret && READ_ONCE(a->cancel))
		ret = -ECANCELED;
	if (!ret) {
		/* the DONE queued just before must leave first */
		flush_work(&a->done_work);
		ret = kmig_out_connect(a, &ep);
	}
	if (!ret)
		ret = kmig_out_send_prepare(a, ep, a->prep_msg, a->prep_msg_len);
	if (!ret &&
	    !wait_event_idle_timeout(a->wait, READ_ONCE(a->ready) ||
				     READ_ONCE(a->down) || READ_ONCE(a->cancel),
				     timeout))
		ret = -ETIMEDOUT;
	if (!ret)
		ret = READ_ONCE(a->cancel) ? -ECANCELED :
		      !READ_ONCE(a->ready) ? -EHOSTUNREACH :
		      -a->ready_status;
	/* Undone before it is published: a new PREPARE may follow at once. */
	if (ret)
		kmig_out_close(a);
	kfree(a->prep_msg);
	a->prep_msg = NULL;
	spin_lock_bh(&a->lock);
	a->prep_err = ret;
	a->out_phase = ret ? KMIG_OUT_NONE : KMIG_OUT_PREPARED;
	a->prep_done = true;
	spin_unlock_bh(&a->lock);
	wake_up_all(&a->wait);
	kmig_out_signal(a);
	kmig_arena_put(a);
}

/**
 * kmig_out_prepare - KMIGRATE_IOC_PREPARE on @a's session
 * @a: the arena
 * @uarg: struct kmigrate_prepare
 *
 * Context: process.
 * Return: 0 (started), -EINVAL, -EFAULT, -ENOMEM, -ENOENT (moved
 * already), -EIO (a page of the arena was lost), -EBUSY (a migration is
 * under way, or the arena is not this process's to move).
 */
long kmig_out_prepare(struct kmig_arena *a,
		      const struct kmigrate_prepare __user *uarg)
{
	struct kmigrate_prepare arg;
	struct kmig_prepare *p;
	int ret = 0;
	u32 len;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if (arg.timeout_ms > KMIGRATE_TIMEOUT_MAX_MS)
		return -EINVAL;
	p = kmig_out_build(a, &arg, &len);
	if (IS_ERR(p))
		return PTR_ERR(p);
	spin_lock_bh(&a->lock);
	if (a->moved)
		ret = -ENOENT;
	else if (a->state == KMIGRATE_ST_LOST)
		ret = -EIO;
	else if (a->out_phase != KMIG_OUT_NONE ||
		 (a->state != KMIGRATE_ST_LOCAL &&
		  a->state != KMIGRATE_ST_ARRIVED &&
		  a->state != KMIGRATE_ST_PULLING))
		ret = -EBUSY;
	if (!ret) {
		a->out_phase = KMIG_OUT_PREPARING;
		a->prep_done = false;
		a->prep_err = 0;
		a->cancel = false;
		a->prep_msg = p;
		a->prep_msg_len = len;
		a->prep_timeout_ms = arg.timeout_ms ?: KMIG_PREPARE_MS;
		a->mode = arg.mode;
		a->flags = arg.flags;
		memset(&a->peer, 0, sizeof(a->peer));
		memcpy(&a->peer, &arg.dest, sizeof(arg.dest));
	}
	/* An arena still arriving leaves once every page is here. */
	if (!ret && a->state == KMIGRATE_ST_PULLING) {
		a->prefetch = true;
		kmig_pull_kick(a);
	}
	spin_unlock_bh(&a->lock);
	if (ret) {
		kfree(p);
		return ret;
	}
	kmig_arena_get(a);
	queue_work(kmig.wq, &a->prep_work);
	return 0;
}

/**
 * kmig_out_freeze - KMIGRATE_IOC_FREEZE on @a's session
 * @a: the arena
 * @uarg: struct kmigrate_freeze
 *
 * Context: process (the arena's only thread); sleeps.
 * Return: 0 (moved: the copy here is gone), -EHOSTDOWN (the destination
 * failed after the freeze: resume here), or, with nothing moved:
 * -EINVAL (bad arguments, nothing prepared), -EFAULT, -ENOMEM, -EAGAIN
 * (still preparing), -EBUSY (other threads), -EINTR, or the preparation's
 * error: -ENOTCONN (kmigrate not started), -ETIMEDOUT, -EHOSTUNREACH (the
 * destination went away), -EIO (a page was lost), the destination's
 * refusal (-EXDEV: another executable or libraries; -ENOEXEC: no spawner;
 * -ESRCH: its process died) or a connection error.
 */
long kmig_out_freeze(struct kmig_arena *a,
		     const struct kmigrate_freeze __user *uarg)
{
	struct kmigrate_freeze arg;
	struct kmig_frozen *f;
	int ret, phase;
	u32 len;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	f = kmig_out_build_frozen(a, &arg, &len);
	if (IS_ERR(f))
		return PTR_ERR(f);
	ret = -EINVAL;
	if (READ_ONCE(a->out_phase) == KMIG_OUT_NONE && !READ_ONCE(a->prep_done))
		goto out;
	if (!(arg.flags & KMIGRATE_FREEZE_WAIT) && !READ_ONCE(a->prep_done)) {
		ret = -EAGAIN;
		goto out;
	}
	ret = -EINTR;
	if (wait_event_killable(a->wait, READ_ONCE(a->prep_done)))
		goto out;
	spin_lock_bh(&a->lock);
	ret = a->prep_err;
	phase = a->out_phase;
	if (ret) {
		/* Told once; the next FREEZE finds nothing prepared. */
		a->prep_err = 0;
		a->prep_done = false;
	} else if (phase != KMIG_OUT_PREPARED) {
		ret = -EINVAL;
	} else if (get_nr_threads(current) != 1) {
		ret = -EBUSY;
	} else {
		/* The freeze: from here @end_work ends the migration. */
		a->t_freeze = ktime_get_ns();
		a->frozen = true;
		a->out_phase = KMIG_OUT_FROZEN;
		if (a->down)
			kmig_out_end(a);
	}
	spin_unlock_bh(&a->lock);
	if (ret)
		goto out;
	kmig_count(KMIGRATE_S_OUT, 1);
	down_read(&a->ep_sem);
	ret = a->out ? kmig_send(a->ep, f, len, 0) : -ENOTCONN;
	up_read(&a->ep_sem);
	if (ret) {
		/* Never sent (a fatal signal, no memory): end it as a loss. */
		spin_lock_bh(&a->lock);
		a->down = true;
		kmig_out_end(a);
		spin_unlock_bh(&a->lock);
	}
	if (wait_event_killable(a->wait, READ_ONCE(a->ended)))
		ret = -EINTR;
	else
		ret = a->moved ? 0 : -EHOSTDOWN;
out:
	kfree(f);
	return ret;
}

/**
 * kmig_out_cancel - the session of @a's process is going
 * @a: its arena
 *
 * A preparation under way is undone by its work, which this waits for;
 * a prepared one here.  A frozen migration goes on (see the top of this
 * file).
 *
 * Context: process.
 */
void kmig_out_cancel(struct kmig_arena *a)
{
	bool close;

	spin_lock_bh(&a->lock);
	a->cancel = true;
	spin_unlock_bh(&a->lock);
	wake_up_all(&a->wait);
	/* Bounded: its waits see @cancel, its connect KMIG_CONNECT_MS. */
	flush_work(&a->prep_work);
	spin_lock_bh(&a->lock);
	close = a->out_phase == KMIG_OUT_PREPARED;
	if (close)
		a->out_phase = KMIG_OUT_NONE;
	spin_unlock_bh(&a->lock);
	if (close)
		kmig_out_close(a);
}
