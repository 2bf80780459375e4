// SPDX-License-Identifier: GPL-2.0-only
/*
 * kfcache server: client connections and their handle tables.
 *
 * A handle is an open object (a path and, for files and directories, an
 * open file) that one connection named by LOOKUP or MOUNT.  One object
 * has one handle per connection however often it is looked up: the
 * handle counts the lookups, and the client's FORGET gives them back, as
 * FUSE's nlookup does.  A connection's handles die with it.
 */
#include <linux/file.h>
#include <linux/moduleparam.h>
#include <linux/random.h>
#include <linux/slab.h>

#include "srv-pri.h"

/**
 * kfc_handle_wire - the handle as the client names it
 * @c: connection
 * @h: handle of @c
 *
 * Context: any.
 * Return: @c's generation in the high half, @h's id in the low.
 */
u64 kfc_handle_wire(const struct kfc_conn *c, const struct kfc_handle *h)
{
	return (u64)c->gen << 32 | h->id;
}

/**
 * kfc_handle_get - the handle a client named
 * @c: connection
 * @wire: as kfc_handle_wire() gave it
 *
 * Context: a handler of @c's messages (softirq or process).
 * Return: the handle, or NULL: another connection's, forgotten, or never
 * made (the caller answers -ESTALE).
 */
struct kfc_handle *kfc_handle_get(struct kfc_conn *c, u64 wire)
{
	if ((u32)(wire >> 32) != c->gen)
		return NULL;
	return xa_load(&c->handles, (u32)wire);
}

static void kfc_handle_free(struct kfc_conn *c, struct kfc_handle *h)
{
	hash_del(&h->hnode);
	if (h->file)
		fput(h->file);
	path_put(&h->path);
	kfree(h);
	c->nhandles--;
	kfc_srv_count(KFC_S_HANDLES, -1);
}

/**
 * kfc_handle_make - the handle of @path for @c, with one more lookup
 * @c: connection
 * @path: object; the caller keeps its reference
 * @out: the handle
 *
 * Context: process (a deferred handler of @c); sleeps.
 * Return: 0, -ENOSPC (the connection holds KFC_SRV_MAX_HANDLES), -ENOMEM,
 * or the error of opening the object.
 */
int kfc_handle_make(struct kfc_conn *c, const struct path *path,
		    struct kfc_handle **out)
{
	struct inode *inode = d_inode(path->dentry);
	struct kfc_handle *h;
	struct file *file = NULL;
	u32 id;
	int ret;

	hash_for_each_possible(c->by_dentry, h, hnode,
			       (unsigned long)path->dentry) {
		if (h->path.dentry == path->dentry && h->path.mnt == path->mnt) {
			h->nlookup++;
			*out = h;
			return 0;
		}
	}
	if (c->nhandles >= KFC_SRV_MAX_HANDLES)
		return -ENOSPC;
	h = kzalloc(sizeof(*h), GFP_KERNEL);
	if (!h)
		return -ENOMEM;
	if (S_ISREG(inode->i_mode) || S_ISDIR(inode->i_mode)) {
		/*
		 * dentry_open() checks no permission: the check an open(2)
		 * as nobody would make.  Without it the handle still names
		 * the object (stat works, as it would locally), and reading
		 * it answers @open_err.
		 */
		ret = path_permission(path, MAY_READ);
		file = ret ? ERR_PTR(ret) :
		       dentry_open(path, O_RDONLY | O_LARGEFILE | O_NOATIME,
				   current_cred());
		if (IS_ERR(file)) {
			h->open_err = PTR_ERR(file);
			file = NULL;
		}
	}
	ret = xa_alloc(&c->handles, &id, h, xa_limit_32b, GFP_KERNEL);
	if (ret)
		goto out_free;
	h->id = id;
	h->nlookup = 1;
	h->path = *path;
	path_get(&h->path);
	h->file = file;
	hash_add(c->by_dentry, &h->hnode, (unsigned long)path->dentry);
	c->nhandles++;
	kfc_srv_count(KFC_S_HANDLES, 1);
	*out = h;
	return 0;

out_free:
	kfree(h);
	if (file)
		fput(file);
	return ret;
}

/**
 * kfc_handle_forget - give back @n lookups of @h; free it at none
 * @c: connection
 * @h: handle of @c
 * @n: lookups the client dropped, at most @h->nlookup
 *
 * Context: process (a deferred handler of @c); sleeps.
 */
void kfc_handle_forget(struct kfc_conn *c, struct kfc_handle *h, u64 n)
{
	h->nlookup -= n;
	if (h->nlookup)
		return;
	xa_erase(&c->handles, h->id);
	kfc_handle_free(c, h);
}

static unsigned int kfc_srv_mount_ms = KFC_SRV_MOUNT_MS;
module_param_named(mount_ms, kfc_srv_mount_ms, uint, 0644);
MODULE_PARM_DESC(mount_ms,
		 "ms a new connection has to mount before it is closed (1000..600000, default 10000)");

static unsigned int kfc_srv_mount_deadline_ms(void)
{
	return clamp(READ_ONCE(kfc_srv_mount_ms), 1000U, 600000U);
}

static void kfc_srv_deadline(struct work_struct *work)
{
	struct kfc_conn *c = container_of(to_delayed_work(work),
					  struct kfc_conn, deadline);
	struct sockaddr_storage peer;

	if (READ_ONCE(c->mounted))
		return;
	kverbs_ep_peer_addr(c->ep, &peer);
	pr_info_ratelimited("kfcache_srv: node %u from %pISc did not mount in time: closing\n",
			    kverbs_ep_peer_node(c->ep), &peer);
	kfc_srv_count(KFC_S_UNMOUNTED, 1);
	kverbs_ep_disconnect(c->ep);
}

static void kfc_srv_connected(struct kverbs_ep *ep)
{
	struct kfc_conn *c = kzalloc(sizeof(*c), GFP_KERNEL);

	/* Without state no request can be served: close at once. */
	if (!c) {
		kverbs_ep_disconnect(ep);
		return;
	}
	if (kverbs_ep_max_send(ep) < KFC_MAX_MSG) {
		pr_warn("kfcache_srv: node %u takes messages of %u bytes, not %u: refused\n",
			kverbs_ep_peer_node(ep), kverbs_ep_max_send(ep),
			KFC_MAX_MSG);
		kfree(c);
		kverbs_ep_disconnect(ep);
		return;
	}
	c->ep = ep;
	INIT_DELAYED_WORK(&c->deadline, kfc_srv_deadline);
	c->gen = get_random_u32() | 1;
	xa_init_flags(&c->handles, XA_FLAGS_ALLOC1);
	hash_init(c->by_dentry);
	kverbs_ep_set_priv(ep, c);
	kfc_srv_count(KFC_S_CLIENTS, 1);
	pr_info("kfcache_srv: client node %u connected\n",
		kverbs_ep_peer_node(ep));
	schedule_delayed_work(&c->deadline,
			      msecs_to_jiffies(kfc_srv_mount_deadline_ms()));
}

static void kfc_srv_disconnected(struct kverbs_ep *ep, int err)
{
	struct kfc_conn *c = kverbs_ep_priv(ep);
	struct kfc_handle *h;
	unsigned long id;

	if (!c)
		return;
	/* Its work uses @ep: it ends before @ep may be freed. */
	cancel_delayed_work_sync(&c->deadline);
	xa_for_each(&c->handles, id, h) {
		xa_erase(&c->handles, id);
		kfc_handle_free(c, h);
	}
	xa_destroy(&c->handles);
	kverbs_ep_set_priv(ep, NULL);
	kfree(c);
	kfc_srv_count(KFC_S_CLIENTS, -1);
	pr_info("kfcache_srv: client node %u gone (%d)\n",
		kverbs_ep_peer_node(ep), err);
}

const struct kverbs_domain_ops kfc_srv_dom_ops = {
	.connected = kfc_srv_connected,
	.disconnected = kfc_srv_disconnected,
};
