// SPDX-License-Identifier: GPL-2.0-only
/*
 * kmigrate destination: an incoming migration until its process runs.
 *
 * PREPARE (process context) makes an arena of absent pages and queues it
 * for the spawner; KEYS fill in the source's grant.  The spawner's
 * KMIGRATE_IOC_ACCEPT takes it and starts the executable; that process
 * attaches (its fingerprint must equal the source's), maps the arena and
 * calls KMIGRATE_IOC_RESUME, which sends READY and waits for FROZEN.
 * FROZEN grants the pages that do not move (zeroed here), hands over the
 * context and starts the pull (pull.c); RESUMED tells the source when the
 * process runs, DONE when nothing more is needed of it.
 *
 * DONE's status: ARRIVED (every page here), EXITED (the process ended
 * first: its pages no longer matter) or ABORTED (the process died before
 * it resumed: the source resumes its copy).  DONE is sent once, after
 * RESUMED if the process resumed.
 */
#include <linux/cred.h>
#include <linux/random.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <crypto/algapi.h>	/* crypto_memneq() */

#include "kmigrate-pri.h"
#include "check.h"

/*
 * READY and DONE go from work items: the task that causes them may be
 * dying (a fatal signal fails a send that would wait for a buffer), and a
 * lost DONE(EXITED) would let the source resume a process that already
 * ran here.  Each is sent at most once per migration, on the connection
 * that was current when it was asked for; the works hold a reference.
 * The source sends FROZEN only after READY, so DONE never overtakes it.
 */
static void kmig_in_tell(struct kmig_arena *a, int type, u32 status,
			 struct kmig_conn *conn)
{
	union {
		struct kmig_ready r;
		struct kmig_done d;
	} m = {};
	u32 len = type == KMIG_READY ? sizeof(m.r) : sizeof(m.d);

	if (type == KMIG_READY)
		m.r.status = cpu_to_be32(status);
	else
		m.d.status = cpu_to_be32(status);
	kmig_hdr_init(&m.r.hdr, type, len);
	down_read(&a->ep_sem);
	/* A failed send leaves the connection to fail: the source sees that. */
	if (a->ep && !a->out && a->conn == conn)
		kmig_send(a->ep, &m, len, 0);
	up_read(&a->ep_sem);
}

void kmig_in_ready_work(struct work_struct *w)
{
	struct kmig_arena *a = container_of(w, struct kmig_arena, ready_work);

	kmig_in_tell(a, KMIG_READY, a->ready_status_out, a->tell_conn);
	kmig_arena_put(a);
}

void kmig_in_done_work(struct work_struct *w)
{
	struct kmig_arena *a = container_of(w, struct kmig_arena, done_work);

	kmig_in_tell(a, KMIG_DONE, a->done_status, a->tell_conn);
	kmig_arena_put(a);
}

static void kmig_in_queue(struct kmig_arena *a, struct work_struct *w)
{
	kmig_arena_get(a);
	if (!queue_work(kmig.wq, w))
		kmig_arena_put(a);
}

/*
 * Store @status in @slot and queue @w, the first time only: @told latches
 * under @a->lock.  Returns true if this call queued @w.
 */
static bool kmig_in_tell_once(struct kmig_arena *a, bool *told, u32 *slot,
			      u32 status, struct work_struct *w)
{
	bool queue;

	spin_lock_bh(&a->lock);
	queue = !*told;
	*told = true;
	*slot = status;
	spin_unlock_bh(&a->lock);
	if (queue)
		kmig_in_queue(a, w);
	return queue;
}

/* READY(@status), once, sent when this returns. */
static void kmig_in_send_ready(struct kmig_arena *a, u32 status)
{
	if (kmig_in_tell_once(a, &a->ready_told, &a->ready_status_out, status,
			      &a->ready_work))
		flush_work(&a->ready_work);
}

/**
 * kmig_in_send_done - tell the source it may free its copy (or resume it)
 * @a: the arena
 * @status: KMIG_DONE_*
 *
 * Once per migration, from a work item; a no-op once the arrival's
 * connection is gone or another migration replaced it.
 *
 * Context: any but hard interrupt.
 */
void kmig_in_send_done(struct kmig_arena *a, u32 status)
{
	kmig_in_tell_once(a, &a->done_sent, &a->done_status, status,
			  &a->done_work);
}

/* @a no longer counts against KMIG_MAX_ARRIVING (attached, or freed). */
void kmig_in_unqueue(struct kmig_arena *a)
{
	if (xchg(&a->arriving, false))
		atomic_dec(&kmig.arriving);
}

/*
 * READY(@status) on an endpoint that has no arena.  Return: 0, or -EAGAIN
 * when it has no free send buffer (its peer holds the credits): the
 * handler is called again, for the same PREPARE, once it has one, and
 * until then nothing of it is kept.
 */
static int kmig_in_refuse(struct kverbs_ep *ep, u32 status)
{
	struct kmig_ready r = { .status = cpu_to_be32(status) };

	kmig_hdr_init(&r.hdr, KMIG_READY, sizeof(r));
	return kmig_send(ep, &r, sizeof(r), 0) == -EAGAIN ? -EAGAIN : 0;
}

/**
 * kmig_in_prepare - PREPARE on a new accepted endpoint
 * @ep: the endpoint, its conn without an arena
 * @p: the message, header checked
 * @len: its length
 *
 * Context: process (deferred kvmsg handler).
 * Return: 0 (a refusal goes back as READY), -EAGAIN (no buffer for the
 * refusal yet), or -EPROTO.
 */
int kmig_in_prepare(struct kverbs_ep *ep, const struct kmig_prepare *p,
		    u32 len)
{
	u32 npages, nkeys, path_len, args_len, fp_len;
	struct kmig_conn *c = kverbs_ep_priv(ep);
	struct kmig_exec *exec;
	struct kmig_arena *a;
	u64 va;

	if (kmig_check_prepare(p, len))
		return -EPROTO;
	if (!atomic_read(&kmig.spawners)) {
		pr_info_ratelimited("kmigrate: a migration arrived but no spawner (kmigrate serve) runs here: refused\n");
		return kmig_in_refuse(ep, ENOEXEC);
	}
	/* Every page comes by RDMA read, which this device may not do. */
	if (!kverbs_ep_max_read_pages(ep))
		return kmig_in_refuse(ep, EOPNOTSUPP);
	if (atomic_inc_return(&kmig.arriving) > KMIG_MAX_ARRIVING) {
		atomic_dec(&kmig.arriving);
		return kmig_in_refuse(ep, EBUSY);
	}
	npages = be32_to_cpu(p->npages);
	nkeys = be32_to_cpu(p->nkeys);
	va = be64_to_cpu(p->va);
	path_len = be16_to_cpu(p->path_len);
	args_len = be16_to_cpu(p->args_len);
	fp_len = be16_to_cpu(p->fp_len);

	exec = kzalloc(sizeof(*exec), GFP_KERNEL);
	a = exec ? kmig_arena_new(npages, va, KVMEM_PROT_NONE) :
		   ERR_PTR(-ENOMEM);
	if (IS_ERR(a))
		goto refuse;
	a->pstate = kvzalloc(npages, GFP_KERNEL);
	a->keys = kvcalloc(nkeys, sizeof(*a->keys), GFP_KERNEL);
	if (!a->pstate || !a->keys) {
		kmig_arena_put(a);
		goto refuse;
	}
	kverbs_ep_peer_addr(ep, &exec->peer);
	exec->path_len = path_len;
	exec->args_len = args_len;
	exec->fp_len = fp_len;
	memcpy(exec->path, p->data, path_len);
	memcpy(exec->args, p->data + path_len, args_len);
	memcpy(exec->fp, p->data + path_len + args_len, fp_len);
	a->exec = exec;
	a->arriving = true;
	a->nkeys = nkeys;
	a->extent_shift = be32_to_cpu(p->extent_shift);
	a->mode = be32_to_cpu(p->mode);
	a->flags = be32_to_cpu(p->flags);
	a->state = KMIGRATE_ST_INCOMING;
	atomic_set(&a->todo, npages);
	a->conn = c;
	a->tell_conn = c;
	a->ep = ep;
	kmig_conn_arrived(c, a);	/* the arena's first reference */

	mutex_lock(&kmig.lock);
	a->id = ++kmig.next_id ?: ++kmig.next_id;
	list_add_tail(&a->node, &kmig.arenas);
	list_add_tail(&a->in_node, &kmig.incoming);
	mutex_unlock(&kmig.lock);
	wake_up_interruptible(&kmig.incoming_wait);
	kmig_count(KMIGRATE_S_IN, 1);
	return 0;
refuse:
	atomic_dec(&kmig.arriving);
	kfree(exec);
	return kmig_in_refuse(ep, ENOMEM);
}

/*
 * FROZEN: the process may run.  Only this handler writes the fields it
 * fills before @got_frozen (one endpoint's messages are handled one at a
 * time), so the O(npages) part runs outside @a->lock: nothing reads them
 * before @got_frozen, which a fault checks.
 */
static int kmig_in_frozen(struct kmig_arena *a, const struct kmig_frozen *f,
			  u32 len)
{
	struct kvmem_range gaps[KMIGRATE_MAX_RANGES + 1];
	u32 i, n = 0, next = 0;
	bool ok;

	spin_lock_bh(&a->lock);
	ok = !kmig_check_frozen(f, len, a->npages) &&
	     a->state == KMIGRATE_ST_INCOMING && a->ready_sent &&
	     a->have_keys == a->nkeys && !a->got_frozen;
	spin_unlock_bh(&a->lock);
	if (!ok)
		return -EPROTO;
	a->nranges = be16_to_cpu(f->nranges);
	for (i = 0; i < a->nranges; i++) {
		a->ranges[i].first = be32_to_cpu(f->range[i].first);
		a->ranges[i].count = be32_to_cpu(f->range[i].count);
	}
	a->ctx_len = be16_to_cpu(f->ctx_len);
	memcpy(a->ctx, &f->range[a->nranges], a->ctx_len);

	/* Pages that do not move are the zeroed pages already here. */
	for (i = 0; i <= a->nranges; i++) {
		u32 end = i < a->nranges ? a->ranges[i].first : a->npages;

		if (end > next) {
			gaps[n].first = next;
			gaps[n].count = end - next;
			memset(a->pstate + next, KMIG_PG_HERE, end - next);
			n++;
		}
		if (i < a->nranges)
			next = a->ranges[i].first + a->ranges[i].count;
	}
	if (n)
		kvmem_protect(a->vr, gaps, n, KVMEM_PROT_RW, 0);
	atomic_set(&a->todo, kmig_ranges_pages(a->ranges, a->nranges, false));
	a->cursor_range = a->nranges - 1;
	a->cursor_page = a->ranges[a->nranges - 1].first;

	spin_lock_bh(&a->lock);
	a->t_frozen = ktime_get_ns();
	a->got_frozen = true;
	/* A source lost meanwhile made the arena LOST: it stays so. */
	if (a->state == KMIGRATE_ST_INCOMING)
		a->state = KMIGRATE_ST_PULLING;
	if (a->released)
		a->aborted = true;	/* nobody to resume: the source keeps it */
	else if (a->state == KMIGRATE_ST_PULLING &&
		 (a->mode == KMIGRATE_MODE_PRECOPY ||
		  !(a->flags & KMIGRATE_F_NO_PREFETCH))) {
		a->prefetch = true;
		kmig_pull_kick(a);
	}
	spin_unlock_bh(&a->lock);
	return 0;
}

/**
 * kmig_in_recv - a message from the source
 * @a: the arena
 * @type: its type, header checked
 * @msg: the message
 * @len: its length
 * @ctx: where the handler runs
 *
 * Context: softirq or process (kvmsg).
 * Return: 0, -EAGAIN (needs process context) or -EPROTO.
 */
int kmig_in_recv(struct kmig_arena *a, int type, const void *msg, u32 len,
		 enum kvmsg_ctx ctx)
{
	const struct kmig_keys *k = msg;
	int ret = 0;
	u32 i, n;

	if (type == KMIG_FROZEN) {
		if (ctx != KVMSG_CTX_PROCESS)
			return -EAGAIN;
		ret = kmig_in_frozen(a, msg, len);
		wake_up_all(&a->wait);
		if (!ret && READ_ONCE(a->aborted))
			kmig_in_send_done(a, KMIG_DONE_ABORTED);
		return ret;
	}
	spin_lock_bh(&a->lock);
	switch (type) {
	case KMIG_KEYS:
		if (a->state != KMIGRATE_ST_INCOMING ||
		    kmig_check_keys(k, len, a->nkeys, a->have_keys)) {
			ret = -EPROTO;
			break;
		}
		n = be32_to_cpu(k->count);
		for (i = 0; i < n; i++)
			a->keys[a->have_keys + i] = be32_to_cpu(k->key[i]);
		a->have_keys += n;
		break;
	default:
		ret = -EPROTO;
	}
	spin_unlock_bh(&a->lock);
	wake_up_all(&a->wait);
	return ret;
}

/* The source is gone (process context, the endpoint still set). */
void kmig_in_down(struct kmig_arena *a)
{
	int state;

	mutex_lock(&kmig.lock);
	list_del_init(&a->in_node);
	mutex_unlock(&kmig.lock);
	spin_lock_bh(&a->lock);
	state = a->state;
	if (state == KMIGRATE_ST_INCOMING || state == KMIGRATE_ST_PULLING)
		a->state = KMIGRATE_ST_LOST;
	spin_unlock_bh(&a->lock);
	if (state == KMIGRATE_ST_PULLING) {
		kmig_count(KMIGRATE_S_IN_LOST, 1);
		kmig_pull_lose(a);
	}
}

/**
 * kmig_in_accept - KMIGRATE_IOC_ACCEPT: the next process to start
 * @uarg: struct kmigrate_incoming
 *
 * Context: process; sleeps (interruptible) until a migration arrives.
 * Return: 0, -EFAULT, -ENOMEM or -ERESTARTSYS.
 */
long kmig_in_accept(struct kmigrate_incoming __user *uarg)
{
	struct kmigrate_incoming *in;
	struct kmig_arena *a;
	long ret;

	in = kzalloc(sizeof(*in), GFP_KERNEL);
	if (!in)
		return -ENOMEM;
	for (;;) {
		ret = wait_event_interruptible(kmig.incoming_wait,
					       !list_empty(&kmig.incoming));
		if (ret)
			goto out;
		mutex_lock(&kmig.lock);
		a = list_first_entry_or_null(&kmig.incoming, struct kmig_arena,
					     in_node);
		if (a) {
			list_del_init(&a->in_node);
			in->id = a->id;
			get_random_bytes(a->exec->token, sizeof(a->exec->token));
			memcpy(in->token, a->exec->token, sizeof(in->token));
			BUILD_BUG_ON(sizeof(in->peer) != sizeof(a->exec->peer));
			memcpy(&in->peer, &a->exec->peer, sizeof(in->peer));
			in->path_len = a->exec->path_len;
			in->args_len = a->exec->args_len;
			memcpy(in->path, a->exec->path, a->exec->path_len);
			memcpy(in->args, a->exec->args, a->exec->args_len);
			a->accepted = true;
		}
		mutex_unlock(&kmig.lock);
		if (a)
			break;
	}
	ret = copy_to_user(uarg, in, sizeof(*in)) ? -EFAULT : 0;
out:
	kfree(in);
	return ret;
}

/**
 * kmig_in_attach - KMIGRATE_IOC_ATTACH: the calling process takes an arena
 * @arg: the request
 * @fp: its fingerprint, @arg->fp_len bytes
 *
 * Only the process the spawner started may attach: it presents the token
 * ACCEPT gave the spawner, whatever its user (the spawner chose that by
 * its own policy).  A wrong fingerprint (another executable or other
 * libraries) also refuses the migration, with READY(EXDEV).
 *
 * Context: process.
 * Return: the arena with a reference for the session, or ERR_PTR:
 * -ENOENT (no such migration waiting), -EPERM (a wrong token), -EXDEV.
 */
struct kmig_arena *kmig_in_attach(struct kmigrate_attach *arg, const u8 *fp)
{
	struct kmig_arena *a, *found = NULL;
	int ret = -ENOENT;

	mutex_lock(&kmig.lock);
	list_for_each_entry(a, &kmig.arenas, node) {
		if (a->id == arg->id && a->exec && a->accepted &&
		    READ_ONCE(a->state) == KMIGRATE_ST_INCOMING &&
		    !READ_ONCE(a->down)) {
			found = a;
			break;
		}
	}
	a = found;
	if (!a)
		goto out;
	ret = -EPERM;
	if (crypto_memneq(arg->token, a->exec->token, sizeof(arg->token)))
		goto out;
	ret = -EXDEV;
	if (arg->fp_len != a->exec->fp_len ||
	    memcmp(fp, a->exec->fp, arg->fp_len)) {
		kfree(a->exec);
		a->exec = NULL;
		kmig_arena_get(a);
		mutex_unlock(&kmig.lock);
		kmig_in_send_ready(a, EXDEV);
		kmig_arena_put(a);
		return ERR_PTR(ret);
	}
	kfree(a->exec);
	a->exec = NULL;
	a->owner = get_pid(task_tgid(current));
	a->tgid = task_tgid_nr(current);
	kmig_in_unqueue(a);
	kmig_arena_get(a);
	ret = 0;
out:
	mutex_unlock(&kmig.lock);
	return ret ? ERR_PTR(ret) : a;
}

/**
 * kmig_in_spawn_refused - KMIGRATE_IOC_REFUSE: the spawner will not start
 *	an accepted migration
 * @arg: the migration and the status its source is told
 *
 * The source gets READY(@arg->status) at once, as for a wrong
 * fingerprint, and frees nothing of its own; the arena goes with its
 * connection.
 *
 * Context: process.
 * Return: 0, -EINVAL (a status READY cannot carry), -ENOENT (no accepted
 * migration waiting with that id).
 */
int kmig_in_spawn_refused(const struct kmigrate_refuse *arg)
{
	struct kmig_arena *a, *found = NULL;

	/* what READY may carry (kmig_check_ready()) */
	if (arg->status != EACCES && arg->status != EINVAL &&
	    arg->status != EAGAIN)
		return -EINVAL;
	mutex_lock(&kmig.lock);
	list_for_each_entry(a, &kmig.arenas, node) {
		if (a->id == arg->id && a->exec && a->accepted &&
		    READ_ONCE(a->state) == KMIGRATE_ST_INCOMING) {
			found = a;
			break;
		}
	}
	if (!found) {
		mutex_unlock(&kmig.lock);
		return -ENOENT;
	}
	a = found;
	kfree(a->exec);
	a->exec = NULL;
	kmig_arena_get(a);
	mutex_unlock(&kmig.lock);
	/* no longer counts against KMIG_MAX_ARRIVING: refusals cannot fill it */
	kmig_in_unqueue(a);
	kmig_count(KMIGRATE_S_IN_REFUSED, 1);
	kmig_in_send_ready(a, arg->status);
	kmig_arena_put(a);
	return 0;
}

/**
 * kmig_in_resume - KMIGRATE_IOC_RESUME: wait for the context
 * @a: the session's arena
 * @uarg: struct kmigrate_resume
 *
 * Context: process; sleeps (killable).
 * Return: 0 (run), -EINVAL (not a migration waiting to resume),
 * -EHOSTDOWN (the source went away first), -EINTR, -EFAULT.
 */
long kmig_in_resume(struct kmig_arena *a, struct kmigrate_resume __user *uarg)
{
	struct kmigrate_resume arg;
	struct kmig_hdr h;
	bool arrived;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if (arg.reserved)
		return -EINVAL;
	spin_lock_bh(&a->lock);
	if (a->state != KMIGRATE_ST_INCOMING || a->ready_sent) {
		spin_unlock_bh(&a->lock);
		return -EINVAL;
	}
	spin_unlock_bh(&a->lock);
	if (wait_event_killable(a->wait,
				READ_ONCE(a->have_keys) == a->nkeys ||
				READ_ONCE(a->down)))
		return -EINTR;
	spin_lock_bh(&a->lock);
	a->ready_sent = !a->down;
	spin_unlock_bh(&a->lock);
	if (!a->ready_sent)
		return -EHOSTDOWN;
	kmig_in_send_ready(a, 0);
	if (wait_event_killable(a->wait,
				(READ_ONCE(a->got_frozen) &&
				 (a->mode == KMIGRATE_MODE_POSTCOPY ||
				  READ_ONCE(a->arrived))) ||
				READ_ONCE(a->state) == KMIGRATE_ST_LOST))
		return -EINTR;
	if (READ_ONCE(a->state) == KMIGRATE_ST_LOST)
		return -EHOSTDOWN;
	if (copy_to_user(u64_to_user_ptr(arg.ctx), a->ctx, a->ctx_len))
		return -EFAULT;
	arg.ctx_len = a->ctx_len;
	if (copy_to_user(uarg, &arg, sizeof(arg)))
		return -EFAULT;

	/* RESUMED before DONE: whoever sees both flags second sends DONE. */
	kmig_hdr_init(&h, KMIG_RESUMED, sizeof(h));
	down_read(&a->ep_sem);
	if (a->ep && !a->out)
		kmig_send(a->ep, &h, sizeof(h), 0);
	up_read(&a->ep_sem);
	spin_lock_bh(&a->lock);
	a->resumed = true;
	a->downtime_ns = ktime_get_ns() - a->t_frozen;
	arrived = a->arrived;
	spin_unlock_bh(&a->lock);
	if (arrived)
		kmig_in_send_done(a, KMIG_DONE_ARRIVED);
	return 0;
}

/**
 * kmig_in_release - the session of @a's process is going
 * @a: its arena (any role)
 *
 * An arena still arriving needs nothing more from its source: EXITED if
 * its process ran, ABORTED if it never resumed (the source resumes it).
 *
 * Context: process.
 */
void kmig_in_release(struct kmig_arena *a)
{
	bool ran, pending;

	spin_lock_bh(&a->lock);
	a->released = true;
	pending = !a->out && a->ep && !a->done_sent &&
		  (a->state == KMIGRATE_ST_INCOMING ||
		   a->state == KMIGRATE_ST_PULLING);
	ran = a->resumed;
	if (pending && !a->ready_sent && !a->got_frozen) {
		/* READY never went: refuse, rather than DONE out of turn. */
		a->ready_sent = true;
		a->done_sent = true;
		spin_unlock_bh(&a->lock);
		kmig_in_send_ready(a, ESRCH);
		return;
	}
	spin_unlock_bh(&a->lock);
	if (pending && (ran || a->got_frozen))
		kmig_in_send_done(a, ran ? KMIG_DONE_EXITED :
				  KMIG_DONE_ABORTED);
}
