// SPDX-License-Identifier: GPL-2.0-only
/*
 * kmigrate source: KMIGRATE_IOC_MIGRATE.
 *
 * Prepare (the process still runs in principle, but sleeps in this call):
 * register the arena's pages, connect, grant the destination remote read,
 * send PREPARE and the keys, wait for READY.  Any failure so far undoes
 * everything and the process goes on.
 *
 * Freeze: send FROZEN with the context.  From here the destination may
 * run the process and read any page; the source's copy is frozen by the
 * caller's not touching it (the call sleeps; the caller is the only
 * thread).  The migration ends in @end_work: DONE (the destination needs
 * nothing more) frees the copy and the call returns 0; a lost connection
 * before DONE gives the arena back and the call returns -EHOSTDOWN, so
 * the process resumes here from the freeze.  A fatal signal ends only
 * the wait: @end_work still runs, and frees the arena with the last
 * reference.
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

/* The messages of one migration, built from the caller's request */
struct kmig_out_msgs {
	struct kmig_prepare *prepare;
	u32 prepare_len;
	struct kmig_frozen *frozen;
	u32 frozen_len;
};

static bool kmig_dest_ok(const struct __kernel_sockaddr_storage *ss)
{
	const struct sockaddr_in6 *s6 = (const void *)ss;
	const struct sockaddr_in *s4 = (const void *)ss;

	if (ss->ss_family == AF_INET)
		return s4->sin_port;
	return ss->ss_family == AF_INET6 && s6->sin6_port;
}

static int kmig_out_build(struct kmig_arena *a,
			  const struct kmigrate_migrate *arg,
			  struct kmig_out_msgs *m)
{
	struct kmigrate_range *ranges;
	struct kmig_prepare *p;
	struct kmig_frozen *f;
	u8 *data;
	u32 i;

	if (arg->mode > KMIGRATE_MODE_PRECOPY ||
	    arg->flags & ~KMIGRATE_F_NO_PREFETCH ||
	    !arg->ctx_len || arg->ctx_len > KMIGRATE_CTX_MAX ||
	    !arg->nranges || arg->nranges > KMIGRATE_MAX_RANGES ||
	    arg->path_len < 2 || arg->path_len > KMIGRATE_PATH_MAX ||
	    !arg->args_len || arg->args_len > KMIGRATE_ARGS_MAX ||
	    !arg->fp_len || arg->fp_len > KMIGRATE_FP_MAX ||
	    !kmig_dest_ok(&arg->dest))
		return -EINVAL;

	m->prepare_len = sizeof(*p) + arg->path_len + arg->args_len +
			 arg->fp_len;
	p = kzalloc(m->prepare_len, GFP_KERNEL);
	m->prepare = p;
	m->frozen_len = struct_size(f, range, arg->nranges) + arg->ctx_len;
	f = kzalloc(m->frozen_len, GFP_KERNEL);
	m->frozen = f;
	ranges = kcalloc(arg->nranges, sizeof(*ranges), GFP_KERNEL);
	if (!p || !f || !ranges)
		goto nomem;
	data = p->data;
	if (copy_from_user(data, u64_to_user_ptr(arg->path), arg->path_len) ||
	    copy_from_user(data + arg->path_len, u64_to_user_ptr(arg->args),
			   arg->args_len) ||
	    copy_from_user(data + arg->path_len + arg->args_len,
			   u64_to_user_ptr(arg->fp), arg->fp_len) ||
	    copy_from_user(ranges, u64_to_user_ptr(arg->ranges),
			   arg->nranges * sizeof(*ranges)) ||
	    copy_from_user((u8 *)&f->range[arg->nranges],
			   u64_to_user_ptr(arg->ctx), arg->ctx_len)) {
		kfree(ranges);
		return -EFAULT;
	}
	if (!kmig_path_ok(data, arg->path_len) ||
	    !kmig_args_ok(data + arg->path_len, arg->args_len) ||
	    !kmig_ranges_ok(ranges, arg->nranges, a->npages, false)) {
		kfree(ranges);
		return -EINVAL;
	}
	kmig_hdr_init(&p->hdr, KMIG_PREPARE, m->prepare_len);
	p->va = cpu_to_be64(a->va);
	p->npages = cpu_to_be32(a->npages);
	p->mode = cpu_to_be32(arg->mode);
	p->flags = cpu_to_be32(arg->flags);
	p->uid = cpu_to_be32(from_kuid_munged(&init_user_ns, current_uid()));
	p->gid = cpu_to_be32(from_kgid_munged(&init_user_ns, current_gid()));
	p->path_len = cpu_to_be16(arg->path_len);
	p->args_len = cpu_to_be16(arg->args_len);
	p->fp_len = cpu_to_be16(arg->fp_len);

	kmig_hdr_init(&f->hdr, KMIG_FROZEN, m->frozen_len);
	f->nranges = cpu_to_be16(arg->nranges);
	f->ctx_len = cpu_to_be16(arg->ctx_len);
	for (i = 0; i < arg->nranges; i++) {
		f->range[i].first = cpu_to_be32(ranges[i].first);
		f->range[i].count = cpu_to_be32(ranges[i].count);
	}
	kfree(ranges);
	return 0;
nomem:
	kfree(ranges);
	return -ENOMEM;
}

/* PREPARE, then the grant's keys in order. */
static int kmig_out_send_prepare(struct kmig_arena *a, struct kverbs_ep *ep,
				 struct kmig_out_msgs *m)
{
	u64 extent = kverbs_grant_extent(a->grant);
	u32 nkeys = kmig_nkeys(a->npages, ilog2(extent));
	struct kmig_keys *k;
	u32 first, i;
	int ret;

	m->prepare->nkeys = cpu_to_be32(nkeys);
	m->prepare->extent_shift = cpu_to_be32(ilog2(extent));
	ret = kmig_send(ep, m->prepare, m->prepare_len, 0);
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
	struct kmig_conn *c = NULL;

	if (a->grant)
		kverbs_grant_revoke(a->grant);
	a->grant = NULL;
	down_write(&a->ep_sem);
	if (a->out) {
		/* Runs the disconnect while @ep is still the current one. */
		kverbs_ep_close(a->ep);
		spin_lock_bh(&a->lock);
		c = a->conn;
		a->ep = NULL;
		a->conn = NULL;
		a->out = false;
		spin_unlock_bh(&a->lock);
	}
	up_write(&a->ep_sem);
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
	a->state = KMIGRATE_ST_LOCAL;
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

/* Wait for the arena to be wholly here, if it is still arriving. */
static int kmig_out_wait_local(struct kmig_arena *a)
{
	int ret;

	ret = wait_event_killable(a->wait,
				  READ_ONCE(a->state) != KMIGRATE_ST_PULLING);
	if (ret)
		return -EINTR;
	switch (READ_ONCE(a->state)) {
	case KMIGRATE_ST_LOCAL:
	case KMIGRATE_ST_ARRIVED:
		return a->moved ? -ENOENT : 0;
	case KMIGRATE_ST_LOST:
		return -EIO;
	default:
		return -EINVAL;
	}
}

static int kmig_out_connect(struct kmig_arena *a,
			    const struct kmigrate_migrate *arg,
			    unsigned int timeout_ms)
{
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
	down_read(&kmig.dom_sem);
	if (!kmig.dom) {
		up_read(&kmig.dom_sem);
		kfree(c);
		return -ENOTCONN;
	}
	kr = kverbs_region_create(kmig.dom, a->pages, a->npages);
	if (IS_ERR(kr)) {
		up_read(&kmig.dom_sem);
		kfree(c);
		return PTR_ERR(kr);
	}
	kmig_arena_get(a);
	ep = kverbs_ep_connect(kmig.dom, (const struct sockaddr *)&arg->dest,
			       min(timeout_ms, KMIG_CONNECT_MS), c);
	up_read(&kmig.dom_sem);
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
	a->mode = arg->mode;
	a->flags = arg->flags;
	memcpy(&a->peer, &arg->dest, sizeof(a->peer));
	a->state = KMIGRATE_ST_PREPARING;
	spin_unlock_bh(&a->lock);
	up_write(&a->ep_sem);

	g = kverbs_region_grant(kr, ep, KVERBS_ACCESS_REMOTE_READ);
	ret = PTR_ERR_OR_ZERO(g);
	if (!ret)
		a->grant = g;
	return ret;
}

/**
 * kmig_out_migrate - KMIGRATE_IOC_MIGRATE on @a's session
 * @a: the arena
 * @uarg: struct kmigrate_migrate
 *
 * Context: process (the arena's only thread); sleeps.
 * Return: 0 (moved: the copy here is gone), -EHOSTDOWN (the destination
 * failed after the freeze: resume here), or, with nothing changed:
 * -EINVAL, -EFAULT, -ENOMEM, -EBUSY (other threads), -ENOENT (moved
 * already), -EIO (a page of the arena was lost), -ENOTCONN (not started),
 * -ETIMEDOUT, -EHOSTUNREACH (the destination went away while preparing),
 * -EINTR, the destination's refusal (-EXDEV: another executable or
 * libraries; -ENOEXEC: no spawner) or a connection error.
 */
long kmig_out_migrate(struct kmig_arena *a,
		      const struct kmigrate_migrate __user *uarg)
{
	struct kmig_out_msgs m = {};
	struct kmigrate_migrate arg;
	unsigned int timeout_ms;
	long left;
	int ret;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	ret = kmig_out_build(a, &arg, &m);
	if (ret)
		goto out;
	if (get_nr_threads(current) != 1) {
		ret = -EBUSY;
		goto out;
	}
	ret = kmig_out_wait_local(a);
	if (ret)
		goto out;
	timeout_ms = arg.timeout_ms ?: KMIG_PREPARE_MS;
	ret = kmig_out_connect(a, &arg, timeout_ms);
	if (!ret)
		ret = kmig_out_send_prepare(a, a->ep, &m);
	if (ret)
		goto undo;
	left = wait_event_killable_timeout(a->wait,
					   READ_ONCE(a->ready) || READ_ONCE(a->down),
					   msecs_to_jiffies(timeout_ms));
	if (!READ_ONCE(a->ready)) {
		ret = READ_ONCE(a->down) ? -EHOSTUNREACH :
		      left ? -EINTR : -ETIMEDOUT;
		goto undo;
	}
	if (a->ready_status) {
		ret = -a->ready_status;
		goto undo;
	}

	/* The freeze: from here @end_work ends the migration. */
	spin_lock_bh(&a->lock);
	a->t_freeze = ktime_get_ns();
	a->frozen = true;
	a->state = KMIGRATE_ST_FROZEN;
	if (a->down)
		kmig_out_end(a);
	spin_unlock_bh(&a->lock);
	kmig_count(KMIGRATE_S_OUT, 1);
	/* A failure shows as a disconnect, which ends it. */
	down_read(&a->ep_sem);
	if (a->out)
		kmig_send(a->ep, m.frozen, m.frozen_len, 0);
	up_read(&a->ep_sem);
	if (wait_event_killable(a->wait, READ_ONCE(a->ended)))
		ret = -EINTR;
	else
		ret = a->moved ? 0 : -EHOSTDOWN;
	goto out;
undo:
	kmig_out_close(a);
	spin_lock_bh(&a->lock);
	a->state = KMIGRATE_ST_LOCAL;
	spin_unlock_bh(&a->lock);
out:
	kfree(m.prepare);
	kfree(m.frozen);
	return ret;
}
