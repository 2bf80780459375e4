// SPDX-License-Identifier: GPL-2.0-only
/*
 * kmigrate node: one kverbs domain and listener while started; the
 * dispatch of every message to its migration, and of every disconnect.
 *
 * An accepted endpoint gets a struct kmig_conn at ->connected, and its
 * first message, PREPARE, an arena.  A dialed endpoint is created by the
 * source with its conn as priv.  A message or disconnect of
 * an endpoint that is no longer its arena's current one (@a->ep) belongs
 * to a finished migration and is ignored.
 */
#include <linux/slab.h>

#include "kmigrate-pri.h"
#include "check.h"

static int kmig_recv(struct kverbs_ep *ep, struct kvmsg_rx *rx,
		     enum kvmsg_ctx ctx)
{
	struct kmig_conn *c = kverbs_ep_priv(ep);
	const void *msg = kvmsg_rx_data(rx);
	struct kmig_arena *a;
	u32 len = kvmsg_rx_len(rx);
	bool current_ep;
	int type, ret;

	type = kmig_check_hdr(msg, len);
	if (type < 0) {
		ret = type;
		goto malformed;
	}
	if (!c)		/* ->connected found no memory and closed it */
		return -ENOMEM;
	if (!c->dialed && !c->a) {
		/* An accepted connection starts with PREPARE. */
		if (type != KMIG_PREPARE) {
			ret = -EPROTO;
			goto malformed;
		}
		if (ctx != KVMSG_CTX_PROCESS)
			return -EAGAIN;
		ret = kmig_in_prepare(ep, msg, len);
		if (ret == -EPROTO)
			goto malformed;
		return ret;
	}
	a = c->a;
	spin_lock_bh(&a->lock);
	current_ep = a->ep == ep;
	spin_unlock_bh(&a->lock);
	if (!current_ep)
		return 0;
	ret = c->dialed ? kmig_out_recv(a, type, msg, len, ctx) :
		       kmig_in_recv(a, type, msg, len, ctx);
	if (ret == -EPROTO)
		goto malformed;
	return ret;
malformed:
	kmig_count(KMIGRATE_S_MALFORMED, 1);
	pr_warn_ratelimited("kmigrate: malformed message from node %u: connection closed\n",
			    kverbs_ep_peer_node(ep));
	return ret;
}

static void kmig_send_done(struct kverbs_ep *ep, void *cookie, int status)
{
}

const struct kvmsg_ops kmig_msg_ops = {
	.recv = kmig_recv,
	.send_done = kmig_send_done,
};

/*
 * An accepted connection's deadlines: no PREPARE within KMIG_HELLO_MS (or
 * only refused ones), or no FROZEN within KMIG_ARRIVE_MS of the PREPARE
 * that made its arena.  A migration frozen in time is left alone.
 */
static void kmig_deadline(struct work_struct *work)
{
	struct kmig_conn *c = container_of(to_delayed_work(work),
					   struct kmig_conn, deadline);
	struct kmig_arena *a = READ_ONCE(c->a);
	struct sockaddr_storage peer;

	if (a && READ_ONCE(a->got_frozen))
		return;
	kverbs_ep_peer_addr(c->ep, &peer);
	pr_info_ratelimited("kmigrate: node %u from %pISc %s in time: closing\n",
			    kverbs_ep_peer_node(c->ep), &peer,
			    a ? "did not hand its process over" :
				"asked for no migration");
	kmig_count(KMIGRATE_S_EXPIRED, 1);
	kverbs_ep_disconnect(c->ep);
}

/**
 * kmig_conn_arrived - an accepted connection got its arena
 * @c: its conn, without an arena until now
 * @a: the arena PREPARE made; @c takes its first reference
 *
 * Context: process (the PREPARE handler of @c's endpoint).
 */
void kmig_conn_arrived(struct kmig_conn *c, struct kmig_arena *a)
{
	WRITE_ONCE(c->a, a);
	mod_delayed_work(system_wq, &c->deadline,
			 msecs_to_jiffies(KMIG_ARRIVE_MS));
}

static void kmig_connected(struct kverbs_ep *ep)
{
	struct kmig_conn *c;

	if (kverbs_ep_priv(ep))		/* dialed: the source's conn */
		return;
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c) {
		kverbs_ep_disconnect(ep);
		return;
	}
	c->ep = ep;
	INIT_DELAYED_WORK(&c->deadline, kmig_deadline);
	kverbs_ep_set_priv(ep, c);
	schedule_delayed_work(&c->deadline, msecs_to_jiffies(KMIG_HELLO_MS));
}

static void kmig_disconnected(struct kverbs_ep *ep, int err)
{
	struct kmig_conn *c = kverbs_ep_priv(ep);
	struct kmig_arena *a;
	bool current_ep;

	if (!c)
		return;
	if (!c->dialed) {
		/* Its work uses @ep, which goes when this returns. */
		cancel_delayed_work_sync(&c->deadline);
		kverbs_ep_set_priv(ep, NULL);
		if (!c->a) {
			kfree(c);
			return;
		}
	}
	a = c->a;
	spin_lock_bh(&a->lock);
	c->down = true;
	current_ep = a->ep == ep;
	if (current_ep)
		a->down = true;
	spin_unlock_bh(&a->lock);
	if (current_ep) {
		if (c->dialed)
			kmig_out_down(a);
		else
			kmig_in_down(a);
	}
	wake_up_all(&a->wait);
	/* A dialed endpoint and its conn are the source's until it closes. */
	if (c->dialed)
		return;
	/* Accepted: the endpoint goes when this returns, and its reference. */
	if (current_ep) {
		/* A departure may have replaced it meanwhile: clear only ours. */
		down_write(&a->ep_sem);
		spin_lock_bh(&a->lock);
		if (a->ep == ep) {
			a->ep = NULL;
			a->conn = NULL;
		}
		spin_unlock_bh(&a->lock);
		up_write(&a->ep_sem);
	}
	kfree(c);
	kmig_arena_put(a);
}

const struct kverbs_domain_ops kmig_dom_ops = {
	.connected = kmig_connected,
	.disconnected = kmig_disconnected,
};

/**
 * kmig_node_start - listen for incoming migrations on @addr
 * @addr: local address and port
 * @node_id: this node's id for peers' logs, non-zero
 * @key: a logon key's description every peer proves, in both directions
 *	(kverbs_domain_attr.auth_key), or NULL
 *
 * Context: process, under kmig.lock; the caller's keyrings are searched.
 * Return: 0, -EEXIST (started), or the domain's or listener's error.
 */
int kmig_node_start(const struct sockaddr_storage *addr, u32 node_id,
		    const char *key)
{
	struct kverbs_domain_attr attr = {
		.ops = &kmig_dom_ops,
		.msg = &kmig_msg_ops,
		.name = "kmigrate",
		.node_id = node_id,
		.depth = KMIG_DEPTH,
		.max_msg = KMIG_MAX_MSG,
		.max_eps = KMIG_MAX_EPS,
		.max_accepted = KMIG_MAX_ACCEPTED,
		.max_per_host = KMIG_PER_HOST,
		.read_pages = KVERBS_PAGES_MAX_SGE,
		.auth_key = key,
	};
	struct kverbs_listener *l;
	struct kverbs_domain *dom;

	lockdep_assert_held(&kmig.lock);
	if (kmig.dom)
		return -EEXIST;
	dom = kverbs_domain_create(&attr);
	if (IS_ERR(dom))
		return PTR_ERR(dom);
	l = kverbs_listen(dom, (const struct sockaddr *)addr);
	if (IS_ERR(l)) {
		kverbs_domain_destroy(dom);
		return PTR_ERR(l);
	}
	down_write(&kmig.dom_sem);
	kmig.dom = dom;
	kmig.listener = l;
	kmig.addr = *addr;
	kmig.node_id = node_id;
	up_write(&kmig.dom_sem);
	return 0;
}

/**
 * kmig_node_stop - end every migration of this node and stop listening
 *
 * Sources resume their processes, destinations lose what they had not
 * pulled (SIGBUS when touched); arenas that arrived stay with their
 * processes.
 *
 * Context: process; not under kmig.lock.
 * Return: 0, or -ENOENT if not started.
 */
int kmig_node_stop(void)
{
	struct kverbs_listener *l;
	struct kverbs_domain *dom;

	mutex_lock(&kmig.lock);
	down_write(&kmig.dom_sem);
	dom = kmig.dom;
	l = kmig.listener;
	kmig.dom = NULL;
	kmig.listener = NULL;
	up_write(&kmig.dom_sem);
	mutex_unlock(&kmig.lock);
	if (!dom)
		return -ENOENT;
	kverbs_listener_destroy(l);
	/* Every endpoint fails; the disconnects run before this returns. */
	kverbs_domain_destroy(dom);
	return 0;
}
