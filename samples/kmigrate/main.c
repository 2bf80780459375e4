// SPDX-License-Identifier: GPL-2.0-only
/*
 * kmigrate: process migration over RDMA, post-copy by one-sided reads.
 *
 * A process linked with libkmigrate keeps its heap and stack in an arena
 * (a kvmem region mapped at the same address on every node).  Migrating
 * it hands the destination a register context and the arena's grant; the
 * destination's process runs at once and pulls each page it touches by
 * RDMA read from the source's registered pages, while a prefetcher pulls
 * the rest.  See Documentation/kmigrate.rst.
 *
 * This file: the module, the /dev/kmigrate sessions and the arenas' life.
 * A session is one open of /dev/kmigrate by one process, owning at most
 * one arena; its ioctls are serialised by the session's mutex.
 */
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/pid.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <net/genetlink.h>

#include "kmigrate-pri.h"
#include "check.h"

struct kmig kmig = {
	.lock = __MUTEX_INITIALIZER(kmig.lock),
	.dom_sem = __RWSEM_INITIALIZER(kmig.dom_sem),
	.arenas = LIST_HEAD_INIT(kmig.arenas),
	.incoming = LIST_HEAD_INIT(kmig.incoming),
	.incoming_wait = __WAIT_QUEUE_HEAD_INITIALIZER(kmig.incoming_wait),
};

struct kmig_session {
	struct mutex lock;		/* one ioctl at a time */
	struct kmig_arena *arena;	/* owned (a reference), or NULL */
	bool spawner;			/* counted in kmig.spawners */
};

static const struct kvmem_ops kmig_vm_ops = {
	.fault = kmig_pull_fault,
};

static void kmig_arena_free_work(struct work_struct *w)
{
	struct kmig_arena *a = container_of(w, struct kmig_arena, free_work);

	/* A live registration or grant over pages about to go is a bug. */
	WARN_ON_ONCE(a->kr || a->grant || (a->out && a->ep));
	kmig_in_unqueue(a);
	mutex_lock(&kmig.lock);
	if (!list_empty(&a->node))
		list_del(&a->node);
	if (!list_empty(&a->in_node))
		list_del(&a->in_node);
	mutex_unlock(&kmig.lock);
	/* No callback runs once this returns; none holds @a meanwhile. */
	kvmem_region_destroy(a->vr);
	put_pid(a->owner);
	kvfree(a->pstate);
	kvfree(a->keys);
	kfree(a->exec);
	kfree(a);
}

static void kmig_arena_release(struct kref *ref)
{
	struct kmig_arena *a = container_of(ref, struct kmig_arena, ref);

	/* The last reference may be a read's, in softirq. */
	queue_work(kmig.wq, &a->free_work);
}

void kmig_arena_get(struct kmig_arena *a)
{
	kref_get(&a->ref);
}

void kmig_arena_put(struct kmig_arena *a)
{
	kref_put(&a->ref, kmig_arena_release);
}

/**
 * kmig_arena_new - an arena of zeroed pages, not yet listed
 * @npages: its size
 * @va: where its process maps it
 * @prot: KVMEM_PROT_RW for a new process, KVMEM_PROT_NONE for one
 *	arriving (every page is pulled or granted before it is touched)
 *
 * Context: process.
 * Return: the arena with one reference, or ERR_PTR.
 */
struct kmig_arena *kmig_arena_new(u32 npages, u64 va, u32 prot)
{
	struct kmig_arena *a;
	u32 n;

	a = kzalloc(sizeof(*a), GFP_KERNEL);
	if (!a)
		return ERR_PTR(-ENOMEM);
	kref_init(&a->ref);
	INIT_WORK(&a->free_work, kmig_arena_free_work);
	INIT_WORK(&a->end_work, kmig_out_end_work);
	INIT_WORK(&a->prep_work, kmig_out_prep_work);
	INIT_WORK(&a->pull_work, kmig_pull_work);
	INIT_WORK(&a->arrive_work, kmig_in_arrive_work);
	INIT_WORK(&a->lose_work, kmig_pull_lose_work);
	INIT_WORK(&a->ready_work, kmig_in_ready_work);
	INIT_WORK(&a->done_work, kmig_in_done_work);
	INIT_LIST_HEAD(&a->node);
	INIT_LIST_HEAD(&a->in_node);
	spin_lock_init(&a->lock);
	init_rwsem(&a->ep_sem);
	init_waitqueue_head(&a->wait);
	a->npages = npages;
	a->va = va;
	a->state = KMIGRATE_ST_LOCAL;
	a->vr = kvmem_region_create(npages, prot, &kmig_vm_ops, a);
	if (IS_ERR(a->vr)) {
		long err = PTR_ERR(a->vr);

		kfree(a);
		return ERR_PTR(err);
	}
	a->pages = kvmem_region_pages(a->vr, &n);
	return a;
}

/* List @a for GET and MOVE. */
void kmig_arena_publish(struct kmig_arena *a)
{
	mutex_lock(&kmig.lock);
	list_add_tail(&a->node, &kmig.arenas);
	mutex_unlock(&kmig.lock);
}

void kmig_hdr_init(struct kmig_hdr *h, int type, u32 len)
{
	h->type = cpu_to_be16(type);
	h->version = cpu_to_be16(KMIG_PROTO_VERSION);
	h->len = cpu_to_be32(len);
}

/**
 * kmig_send - send @len bytes of @msg on @ep
 * @ep: endpoint
 * @msg: the message, header filled
 * @len: its length, at most KMIG_MAX_MSG
 * @flags: KVERBS_NOWAIT from an atomic context
 *
 * Context: process, or softirq with KVERBS_NOWAIT.
 * Return: 0 or kvmsg's error.
 */
int kmig_send(struct kverbs_ep *ep, const void *msg, u32 len,
	      unsigned int flags)
{
	struct kvmsg_buf *buf = kvmsg_reserve(ep, len, flags);

	if (IS_ERR(buf))
		return PTR_ERR(buf);
	memcpy(kvmsg_buf_data(buf), msg, len);
	return kvmsg_send(buf, len, 0, NULL);
}

static long kmig_dev_create(struct kmig_session *s,
			    struct kmigrate_create __user *uarg)
{
	struct kmigrate_create arg;
	struct kmig_arena *a;
	int fd;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if (arg.flags || arg.reserved)
		return -EINVAL;
	if (!kmig_arena_ok(arg.va, arg.npages) ||
	    arg.va + ((u64)arg.npages << PAGE_SHIFT) > TASK_SIZE)
		return -EINVAL;
	if (s->arena)
		return -EEXIST;
	a = kmig_arena_new(arg.npages, arg.va, KVMEM_PROT_RW);
	if (IS_ERR(a))
		return PTR_ERR(a);
	fd = kvmem_region_fd(a->vr);
	if (fd < 0) {
		kmig_arena_put(a);
		return fd;
	}
	a->owner = get_pid(task_tgid(current));
	a->tgid = task_tgid_nr(current);
	kmig_arena_publish(a);
	s->arena = a;
	arg.fd = fd;
	/* The descriptor stays installed: the arena is the session's. */
	return copy_to_user(uarg, &arg, sizeof(arg)) ? -EFAULT : 0;
}

static long kmig_dev_attach(struct kmig_session *s,
			    struct kmigrate_attach __user *uarg)
{
	struct kmigrate_attach arg;
	u8 fp[KMIGRATE_FP_MAX];
	struct kmig_arena *a;
	int fd;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if (!arg.fp_len || arg.fp_len > KMIGRATE_FP_MAX)
		return -EINVAL;
	if (copy_from_user(fp, u64_to_user_ptr(arg.fp), arg.fp_len))
		return -EFAULT;
	if (s->arena)
		return -EEXIST;
	a = kmig_in_attach(&arg, fp);
	if (IS_ERR(a))
		return PTR_ERR(a);
	fd = kvmem_region_fd(a->vr);
	if (fd < 0) {
		kmig_in_release(a);
		kmig_arena_put(a);
		return fd;
	}
	s->arena = a;
	arg.fd = fd;
	arg.va = a->va;
	arg.npages = a->npages;
	return copy_to_user(uarg, &arg, sizeof(arg)) ? -EFAULT : 0;
}

static long kmig_dev_move_target(struct kmig_arena *a,
				 struct kmigrate_move __user *uarg)
{
	struct kmigrate_move arg = {};
	bool pending;

	spin_lock_bh(&a->lock);
	pending = a->move_pending;
	if (pending) {
		memcpy(&arg.dest, &a->move_dest, sizeof(arg.dest));
		arg.mode = a->move_mode;
		arg.flags = a->move_flags;
		a->move_pending = false;
	}
	spin_unlock_bh(&a->lock);
	if (!pending)
		return -ENOENT;
	return copy_to_user(uarg, &arg, sizeof(arg)) ? -EFAULT : 0;
}

/*
 * Return: 0 or -errno: -ENOTTY (unknown command), -ENOENT (no arena for
 * a command that needs one), -EEXIST (the session has one), -EPERM, or
 * the command's error (uapi/kverbs/kmigrate.h).
 */
static long kmig_dev_ioctl(struct file *f, unsigned int cmd,
			   unsigned long arg)
{
	struct kmig_session *s = f->private_data;
	void __user *uarg = (void __user *)arg;
	long ret;

	if (cmd == KMIGRATE_IOC_ACCEPT) {
		/* The spawner: it starts processes as other users. */
		if (!capable(CAP_SYS_ADMIN))
			return -EPERM;
		mutex_lock(&s->lock);
		if (!s->spawner)
			atomic_inc(&kmig.spawners);
		s->spawner = true;
		mutex_unlock(&s->lock);
		return kmig_in_accept(uarg);
	}
	if (cmd == KMIGRATE_IOC_REFUSE) {
		struct kmigrate_refuse r;

		if (!capable(CAP_SYS_ADMIN))
			return -EPERM;
		if (copy_from_user(&r, uarg, sizeof(r)))
			return -EFAULT;
		return kmig_in_spawn_refused(&r);
	}
	mutex_lock(&s->lock);
	switch (cmd) {
	case KMIGRATE_IOC_CREATE:
		ret = kmig_dev_create(s, uarg);
		break;
	case KMIGRATE_IOC_ATTACH:
		ret = kmig_dev_attach(s, uarg);
		break;
	case KMIGRATE_IOC_PREPARE:
		ret = s->arena ? kmig_out_prepare(s->arena, uarg) : -ENOENT;
		break;
	case KMIGRATE_IOC_FREEZE:
		ret = s->arena ? kmig_out_freeze(s->arena, uarg) : -ENOENT;
		break;
	case KMIGRATE_IOC_RESUME:
		ret = s->arena ? kmig_in_resume(s->arena, uarg) : -ENOENT;
		break;
	case KMIGRATE_IOC_MOVE_TARGET:
		ret = s->arena ? kmig_dev_move_target(s->arena, uarg) : -ENOENT;
		break;
	default:
		ret = -ENOTTY;
	}
	mutex_unlock(&s->lock);
	return ret;
}

static int kmig_dev_open(struct inode *inode, struct file *f)
{
	struct kmig_session *s = kzalloc(sizeof(*s), GFP_KERNEL);

	if (!s)
		return -ENOMEM;
	mutex_init(&s->lock);
	f->private_data = s;
	return 0;
}

/*
 * The process is gone (or closed its session): a migration being prepared
 * is undone, an arena still pulling tells its source it needs nothing
 * more; the pages go with the last reference (a mapping may outlive this,
 * and then faults with SIGBUS).
 */
static int kmig_dev_release(struct inode *inode, struct file *f)
{
	struct kmig_session *s = f->private_data;
	struct kmig_arena *a = s->arena;

	if (s->spawner)
		atomic_dec(&kmig.spawners);
	if (a) {
		kmig_out_cancel(a);
		kmig_in_release(a);
		mutex_lock(&kmig.lock);
		put_pid(a->owner);
		a->owner = NULL;
		mutex_unlock(&kmig.lock);
		kmig_arena_put(a);
	}
	kfree(s);
	return 0;
}

static const struct file_operations kmig_dev_fops = {
	.owner = THIS_MODULE,
	.open = kmig_dev_open,
	.release = kmig_dev_release,
	.unlocked_ioctl = kmig_dev_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice kmig_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kmigrate",
	.fops = &kmig_dev_fops,
	.mode = 0600,	/* a udev rule may open it to a group */
};

static int __init kmig_init(void)
{
	int ret;

	/* check.h's wire rules count 4 KiB pages */
	BUILD_BUG_ON(PAGE_SHIFT != KMIG_PAGE_SHIFT);
	/*
	 * Not WQ_MEM_RECLAIM: no reclaim waits for a migration, and its works
	 * flush one another (a departure waits for its arrival's DONE work),
	 * which a rescuer running one work at a time could not serve.
	 */
	kmig.wq = alloc_workqueue("kmigrate", WQ_UNBOUND, 0);
	if (!kmig.wq)
		return -ENOMEM;
	ret = misc_register(&kmig_dev);
	if (ret)
		goto out_wq;
	ret = kmig_genl_init();
	if (ret)
		goto out_dev;
	return 0;
out_dev:
	misc_deregister(&kmig_dev);
out_wq:
	destroy_workqueue(kmig.wq);
	return ret;
}

/*
 * No session is open (each holds the module); STOP ends the migrations
 * the node still serves, whose last work items the flush waits for.
 */
static void __exit kmig_exit(void)
{
	kmig_genl_exit();
	misc_deregister(&kmig_dev);
	kmig_node_stop();
	flush_workqueue(kmig.wq);
	destroy_workqueue(kmig.wq);
}

module_init(kmig_init);
module_exit(kmig_exit);
MODULE_LICENSE("GPL");
/* kmigrate(8) loads it: the kernel asks modprobe for an unknown family */
MODULE_ALIAS_GENL_FAMILY(KMIGRATE_GENL_NAME);
MODULE_VERSION(KVERBS_VERSION);
MODULE_DESCRIPTION("kmigrate: process migration over RDMA (kverbs sample)");
KVERBS_IMPORT_NS();
