// SPDX-License-Identifier: GPL-2.0-only
/*
 * A kdsm cluster at one node: the region, the full mesh of endpoints,
 * setup (HELLO, keys, READY), the heartbeat, failure and teardown.
 *
 * Formation: node i connects to every node j < i and accepts the others.
 * On each connection both sides send HELLO (protocol version, geometry,
 * options) and the keys of their region for that peer; a mismatch is
 * refused on both sides with the reason logged, and the cluster fails
 * (KDSM_A_ERROR says why).  The dialer speaks first: it chose the listed
 * address it connected to.  The acceptor grants its region and sends its
 * HELLO and keys only once the dialer's HELLO matched, so a connection
 * that claims a member's id learns nothing (not even the geometry) and
 * reaches nothing until it proved it knows the cluster; a key
 * (kverbs_domain_attr.auth_key) is what proves who it is.  A node
 * holding every peer's keys sends READY to all; it is READY itself when
 * every peer's READY arrived, so no node can fault before every node can
 * answer it with page data.
 *
 * Failure: a peer's endpoint going down (its guest died, it left, RC
 * retries ran out) fails the cluster at this node and, by ABORT, at
 * every other.  A failed node keeps what it holds: pages it can read or
 * write stay so; any other access, and every pending fault, gets SIGBUS;
 * locks and barriers return -EHOSTDOWN.  No transaction is resumed: with a
 * fixed home, the pages homed or owned at the dead node are lost, and
 * kdsm does not try to rebuild the others' directories.  The bound: a
 * connection that carries traffic fails within kverbs' RC retry bound (7
 * transmissions at 0.54 s, about 4 s); the heartbeat sends on every
 * connection each KDSM_PING_MS, so an idle one does too; then one ABORT.
 */
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <net/ipv6.h>
#include <linux/jiffies.h>
#include <linux/log2.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include <uapi/kverbs/cm.h>

#include "kdsm-pri.h"

static struct kdsm_peer kdsm_refused_peer = { .refused = true };

static const char *const kdsm_refusal_text[] = {
	[KDSM_REFUSE_NODE] = "unknown, duplicate or misdirected node id",
	[KDSM_REFUSE_VERSION] = "another protocol version",
	[KDSM_REFUSE_GEOMETRY] = "another node count, region size, placement or page size",
	[KDSM_REFUSE_OPTIONS] = "other options",
	[KDSM_REFUSE_STATE] = "its cluster failed or it left",
};

/*
 * Set by the control layer (netlink.c) while its family is registered,
 * cleared before it is unregistered; called under kd->lock after each
 * change of kd->state.  Read once per call: a caller that read it just
 * before it was cleared still calls into this module, which stays until
 * its exit returns, and the control layer then sends nothing.
 */
kdsm_notify_fn kdsm_state_notify;

/* Under kd->lock: wake the waiters of a new kd->state, tell the control. */
static void kdsm_state_changed(struct kdsm_cluster *kd)
{
	kdsm_notify_fn notify = READ_ONCE(kdsm_state_notify);

	lockdep_assert_held(&kd->lock);
	wake_up_all(&kd->state_wq);
	if (notify)
		notify(kd);
}

static __printf(2, 0) void kdsm_vfail_locked(struct kdsm_cluster *kd, const char *fmt,
			      va_list ap)
{
	lockdep_assert_held(&kd->lock);
	if (!kdsm_live(kd))
		return;
	vsnprintf(kd->error, sizeof(kd->error), fmt, ap);
	kd->state = KDSM_STATE_FAILED;
	pr_err("cluster failed: %s\n", kd->error);
	queue_work(kdsm_wq, &kd->fail_work);
	kdsm_state_changed(kd);
	wake_up_all(&kd->sync_wq);
}

/**
 * kdsm_fail_locked - fail the cluster at this node, with the reason
 * @kd: cluster
 * @fmt: the reason, for the log and KDSM_A_ERROR
 *
 * The first reason sticks.  Context: any; under kd->lock.
 */
void kdsm_fail_locked(struct kdsm_cluster *kd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kdsm_vfail_locked(kd, fmt, ap);
	va_end(ap);
}

/**
 * kdsm_fail - as kdsm_fail_locked(), taking kd->lock
 * @kd: cluster
 * @fmt: the reason
 *
 * Context: any; kd->lock not held.
 */
void kdsm_fail(struct kdsm_cluster *kd, const char *fmt, ...)
{
	va_list ap;

	spin_lock_bh(&kd->lock);
	va_start(ap, fmt);
	kdsm_vfail_locked(kd, fmt, ap);
	va_end(ap);
	spin_unlock_bh(&kd->lock);
}

/**
 * kdsm_reserve_locked - a send buffer to node @to, without waiting
 * @kd: cluster
 * @to: peer node
 *
 * For a state change that must not happen unless its message can leave:
 * reserve first, change, then kdsm_post() (or kvmsg_unreserve()).
 *
 * Context: any; under kd->lock.
 * Return: the buffer, or ERR_PTR: -EAGAIN (none free), -ENOTCONN (no
 * endpoint), or the endpoint's error.
 */
struct kvmsg_buf *kdsm_reserve_locked(struct kdsm_cluster *kd, u8 to)
{
	struct kverbs_ep *ep = kd->peers[to].ep;

	lockdep_assert_held(&kd->lock);
	if (!ep)
		return ERR_PTR(-ENOTCONN);
	return kvmsg_reserve(ep, KDSM_MSG_LEN, KVERBS_NOWAIT);
}

/**
 * kdsm_post - send a reserved buffer with the KDSM_MSG_LEN bytes of @msg
 * @kd: cluster
 * @b: from kdsm_reserve_locked() or kvmsg_reserve()
 * @msg: the message
 *
 * A failure means the endpoint is going down, which ->disconnected()
 * handles; the message is counted only when it was taken.
 *
 * Context: any.
 */
void kdsm_post(struct kdsm_cluster *kd, struct kvmsg_buf *b, const void *msg)
{
	memcpy(kvmsg_buf_data(b), msg, KDSM_MSG_LEN);
	if (!kvmsg_send(b, KDSM_MSG_LEN, 0, NULL))
		kdsm_count_msg(kd, *(const u8 *)msg, true);
}

/**
 * kdsm_xmit_locked - send one KDSM_MSG_LEN message to node @to
 * @kd: cluster
 * @to: peer node
 * @msg: the message
 *
 * Context: any; under kd->lock.
 * Return: 0, or as kdsm_reserve_locked().
 */
int kdsm_xmit_locked(struct kdsm_cluster *kd, u8 to, const void *msg)
{
	struct kvmsg_buf *b = kdsm_reserve_locked(kd, to);

	if (IS_ERR(b))
		return PTR_ERR(b);
	kdsm_post(kd, b, msg);
	return 0;
}

/* kdsm_xmit(), and only on connection @conn if given (else -ESTALE) */
static int kdsm_xmit_on(struct kdsm_cluster *kd, u8 to, const u32 *conn,
			const void *msg)
{
	int ret;

	for (;;) {
		spin_lock_bh(&kd->lock);
		if (!kdsm_live(kd))
			ret = -ESHUTDOWN;
		else if (conn && *conn != kd->peers[to].conn)
			ret = -ESTALE;
		else
			ret = kdsm_xmit_locked(kd, to, msg);
		if (ret == -EAGAIN && kd->state == KDSM_STATE_FORMING &&
		    time_after(jiffies, kd->join_deadline)) {
			kdsm_fail_locked(kd, "node %u: no send credit from node %u within %u ms",
					 kd->geo.self, to, kd->join_ms);
			ret = -ETIMEDOUT;
		}
		spin_unlock_bh(&kd->lock);
		if (ret != -EAGAIN)
			return ret;
		if (fatal_signal_pending(current))
			return -EINTR;
		usleep_range(20, 100);	/* completions free buffers */
	}
}

/**
 * kdsm_xmit - send one message, waiting for a send buffer
 * @kd: cluster
 * @to: peer node
 * @msg: the message
 *
 * Waits while the cluster is live, and while forming only until the join
 * deadline, which then fails it; teardown fails it first.  A READY
 * cluster's peer that stays connected but returns no credits keeps a
 * sender here (a known limit: Documentation/kdsm.rst, Failure).
 *
 * Context: process; may sleep.
 * Return: as kdsm_xmit_locked(), never -EAGAIN; -ESHUTDOWN when the
 * cluster is no longer live, -ETIMEDOUT past the join deadline, -EINTR on
 * a fatal signal.
 */
int kdsm_xmit(struct kdsm_cluster *kd, u8 to, const void *msg)
{
	return kdsm_xmit_on(kd, to, NULL, msg);
}

static void kdsm_sig(struct kdsm_sig *s, u8 type, u8 code, u8 node)
{
	*s = (struct kdsm_sig){ .type = type, .code = code, .node = node };
}

/*
 * Refuse node @node on @ep, on both sides, with why.  @fatal: a listed
 * peer does not match, so the cluster cannot form; a stray, duplicate or
 * late connection is only turned away.
 */
static void kdsm_refuse(struct kdsm_cluster *kd, struct kverbs_ep *ep,
			u8 node, u8 code, const char *detail, bool fatal)
{
	struct kdsm_sig s;
	struct kvmsg_buf *b;

	pr_err("refusing node %u: %s (%s)\n", node, kdsm_refusal_text[code],
	       detail);
	kdsm_sig(&s, KDSM_REFUSE, code, kd->geo.self);
	b = kvmsg_reserve(ep, KDSM_MSG_LEN, KVERBS_NOWAIT);
	if (!IS_ERR(b))
		kdsm_post(kd, b, &s);
	if (!fatal)
		return;
	spin_lock_bh(&kd->lock);
	if (kd->state == KDSM_STATE_FORMING)
		kdsm_fail_locked(kd, "node %u refused node %u: %s (%s)",
				 kd->geo.self, node, kdsm_refusal_text[code],
				 detail);
	spin_unlock_bh(&kd->lock);
}

static void kdsm_hello_fill(struct kdsm_cluster *kd, struct kdsm_hello *h,
			    u8 shift, u16 nkeys, u8 lock_keys)
{
	*h = (struct kdsm_hello){
		.type = KDSM_HELLO,
		.version = KDSM_PROTO_VERSION,
		.nnodes = kd->geo.nnodes,
		.placement = kd->geo.block ? KDSM_PLACE_BLOCK : KDSM_PLACE_CYCLIC,
		.npages = cpu_to_be32(kd->geo.npages),
		.options = cpu_to_be32(kd->options & KDSM_OPT_SHARED),
		.page_shift = PAGE_SHIFT,
		.extent_shift = shift,
		.nkeys = cpu_to_be16(nkeys),
		.lock_keys = lock_keys,
	};
}

/*
 * Our HELLO and our region's keys for peer @p, in order: one key per
 * extent of the grant (kverbs_grant_extent()), then the key of our lock
 * words if we could grant them (@lg; HELLO says).  Sent from greet_work, not
 * from ->connected(): kvmsg returns no credits on an endpoint until its
 * ->connected() returned, at either end, so a region with more extents
 * than send buffers would wait there for ever.
 */
static int kdsm_greet(struct kdsm_cluster *kd, struct kdsm_peer *p,
		      struct kverbs_grant *g, struct kverbs_grant *lg, u32 conn)
{
	u64 ext = kverbs_grant_extent(g);
	u64 len = (u64)kd->geo.npages << PAGE_SHIFT;
	u32 i, nkeys = DIV_ROUND_UP_ULL(len, ext);
	struct kverbs_remote rem;
	struct kdsm_hello h;
	struct kdsm_key k;
	int ret;

	if (nkeys > U16_MAX)		/* kdsm_hello.nkeys */
		return -E2BIG;
	kdsm_hello_fill(kd, &h, ilog2(ext), nkeys, lg ? 1 : 0);
	ret = kdsm_xmit_on(kd, p->node, &conn, &h);
	for (i = 0; !ret && i < nkeys + (lg ? 1 : 0); i++) {
		if (i < nkeys)
			ret = kverbs_grant_remote(g, i * ext, PAGE_SIZE, &rem);
		else
			ret = kdsm_qlock_key(kd, lg, &rem.rkey);
		if (ret)
			break;
		k = (struct kdsm_key){ .type = KDSM_KEY,
				       .index = cpu_to_be32(i),
				       .rkey = cpu_to_be32(rem.rkey) };
		ret = kdsm_xmit_on(kd, p->node, &conn, &k);
	}
	return ret;
}

/*
 * While forming, a connection that goes down, or (accepted) is replaced
 * by a newer one, before the peer's HELLO arrived carried nothing of the
 * peer's: forget it, and the dialer dials again until the join deadline
 * (the dial loop itself while it still waits for the connection, else
 * dial_work).  A dialer gives up an attempt that takes longer than
 * KDSM_CONNECT_MS while the acceptor called the endpoint connected when
 * it accepted it (kverbs_ep_accept()), so under load (eight TCG guests)
 * a first connection can die under either side.  Our greeting on it
 * stops (@conn), and the next connection gets a greeting of its own.
 */
static bool kdsm_peer_restart_locked(struct kdsm_cluster *kd,
				     struct kdsm_peer *p)
{
	lockdep_assert_held(&kd->lock);
	if (kd->state != KDSM_STATE_FORMING || p->hello || p->refused)
		return false;
	if (p->node < kd->geo.self && !p->dialing) {
		p->redial = true;
		queue_work(kdsm_wq, &kd->dial_work);
	}
	WRITE_ONCE(p->ep, NULL);
	p->conn++;
	p->greeting = false;
	p->greeted = false;
	/*
	 * @stale holds at most one grant, for greet_work to revoke; any
	 * further one stays on the region's list, holding its endpoint,
	 * until kverbs_region_destroy() (at most join_ms / KDSM_CONNECT_MS).
	 */
	if (!p->stale)
		p->stale = p->grant;
	p->grant = NULL;
	if (!p->lock_stale)
		p->lock_stale = p->lock_grant;
	p->lock_grant = NULL;
	return true;
}

/* The IPv4 address of @sa, also as an IPv4-mapped IPv6 one; false if none. */
static bool kdsm_addr_v4(const struct sockaddr *sa, __be32 *a)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

	if (sa->sa_family == AF_INET) {
		*a = ((const struct sockaddr_in *)sa)->sin_addr.s_addr;
		return true;
	}
	if (sa->sa_family == AF_INET6 && ipv6_addr_v4mapped(&s6->sin6_addr)) {
		*a = s6->sin6_addr.s6_addr32[3];
		return true;
	}
	return false;
}

/* Whether @a and @b name one host (the port aside). */
static bool kdsm_same_host(const struct sockaddr *a,
			   const struct sockaddr *b)
{
	__be32 a4, b4;
	bool a_v4 = kdsm_addr_v4(a, &a4), b_v4 = kdsm_addr_v4(b, &b4);

	if (a_v4 || b_v4)
		return a_v4 && b_v4 && a4 == b4;
	return a->sa_family == AF_INET6 && b->sa_family == AF_INET6 &&
	       ipv6_addr_equal(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr);
}

/*
 * A connection request, before any endpoint exists for it: a member only
 * if it claims a node this one accepts (higher ids dial lower ones) and
 * comes from that node's listed address.  The address is a floor, not
 * authentication (it can be spoofed on RoCE), but no account of another
 * host can now take a member's place by writing its id.  The peers'
 * addresses are set before the listener exists and never change.
 * Context: rdma_cm handler; does not sleep.
 */
static int kdsm_authorize(struct kverbs_domain *dom, u32 node,
			  const struct sockaddr *from)
{
	struct kdsm_cluster *kd = kverbs_domain_priv(dom);
	const struct sockaddr *listed;

	if (node <= kd->geo.self || node > kd->geo.nnodes) {
		pr_warn_ratelimited("node %u: refusing a connection from %pISpc claiming node %u: only nodes %u..%u dial here\n",
				    kd->geo.self, from, node, kd->geo.self + 1,
				    kd->geo.nnodes);
		return -EPERM;
	}
	listed = (const struct sockaddr *)&kd->peers[node].addr;
	if (!kdsm_same_host(from, listed)) {
		pr_warn_ratelimited("node %u: refusing a connection from %pISpc claiming node %u, which is at %pISc\n",
				    kd->geo.self, from, node, listed);
		return -EPERM;
	}
	return 0;
}

/*
 * Grant @p, on @ep, our region (and lock words), and have greet_work send
 * our HELLO and keys.  A dialer does it at ->connected, an acceptor once
 * the dialer's HELLO matched (grant_work).  Context: process; @ep valid
 * (its ->connected, or grant_work, which its ->disconnected flushes).
 */
static void kdsm_grant_peer(struct kdsm_cluster *kd, struct kdsm_peer *p,
			    struct kverbs_ep *ep)
{
	struct kverbs_grant *g, *lg;

	/* the peer reads our pages only with the fetch-by-read option */
	g = kverbs_region_grant(kd->kr, ep, KVERBS_ACCESS_REMOTE_WRITE |
				((kd->options & KDSM_OPT_FETCH_READ) ?
				 KVERBS_ACCESS_REMOTE_READ : 0));
	if (IS_ERR(g)) {
		/* a dying endpoint's error is ->disconnected()'s to judge */
		if (PTR_ERR(g) == -ENOMEM || PTR_ERR(g) == -EINVAL ||
		    PTR_ERR(g) == -ENODEV)
			kdsm_fail(kd, "node %u: granting node %u our region: %pe",
				  kd->geo.self, p->node, g);
		return;
	}
	lg = kdsm_qlock_grant(kd, ep);	/* NULL: no queue locks here */
	spin_lock_bh(&kd->lock);
	if (p->ep == ep) {
		p->grant = g;
		p->lock_grant = lg;
	} else {		/* replaced already */
		if (!p->stale)
			p->stale = g;
		if (!p->lock_stale)
			p->lock_stale = lg;
	}
	spin_unlock_bh(&kd->lock);
	queue_work(kdsm_wq, &kd->greet_work);
}

static void kdsm_connected(struct kverbs_ep *ep)
{
	struct kdsm_cluster *kd = kverbs_domain_priv(kverbs_ep_domain(ep));
	struct kdsm_peer *p = kverbs_ep_priv(ep);
	u32 node = kverbs_ep_peer_node(ep);
	u8 code = KDSM_REFUSE_NODE;
	bool replaced;
	char why[64];

	if (!p) {	/* accepted: nodes with higher ids dial us */
		if (node <= kd->geo.self || node > kd->geo.nnodes) {
			snprintf(why, sizeof(why),
				 "node %u accepts only nodes %u..%u",
				 kd->geo.self, kd->geo.self + 1,
				 kd->geo.nnodes);
			goto refuse;
		}
		p = &kd->peers[node];
		spin_lock_bh(&kd->lock);
		if (!kdsm_live(kd)) {
			spin_unlock_bh(&kd->lock);
			code = KDSM_REFUSE_STATE;
			snprintf(why, sizeof(why), "node %u is %s", kd->geo.self,
				 kd->state == KDSM_STATE_FAILED ? "failed" :
				 "leaving");
			goto refuse;
		}
		replaced = p->ep && !p->refused &&
			   kdsm_peer_restart_locked(kd, p);
		if (p->refused || (p->ep && !replaced)) {
			spin_unlock_bh(&kd->lock);
			snprintf(why, sizeof(why), "node %u is connected already",
				 node);
			goto refuse;
		}
		WRITE_ONCE(p->ep, ep);
		p->conn++;
		spin_unlock_bh(&kd->lock);
		kverbs_ep_set_priv(ep, p);
		if (replaced)
			pr_info("node %u: node %u dialed again before its HELLO; its earlier connection is dropped\n",
				kd->geo.self, node);
	} else {
		if (node != p->node) {
			snprintf(why, sizeof(why),
				 "dialed node %u at %pISpc, it says node %u",
				 p->node, &p->addr, node);
			kverbs_ep_set_priv(ep, &kdsm_refused_peer);
			kdsm_refuse(kd, ep, node, KDSM_REFUSE_NODE, why, true);
			return;
		}
		spin_lock_bh(&kd->lock);
		WRITE_ONCE(p->ep, ep);
		p->conn++;
		spin_unlock_bh(&kd->lock);
	}
	if (p->node > kd->geo.self) {	/* accepted: its HELLO first */
		pr_info("node %u: node %u connected; awaiting its HELLO\n",
			kd->geo.self, p->node);
		return;
	}
	kdsm_grant_peer(kd, p, ep);
	pr_info("node %u connected to node %u\n", kd->geo.self, p->node);
	return;

refuse:
	kverbs_ep_set_priv(ep, &kdsm_refused_peer);
	kdsm_refuse(kd, ep, node, code, why, false);
}

/*
 * An acceptor's grants, once a peer's HELLO matched: not in the message
 * handler, whose deferred context serves every peer and must not wait
 * for a send-queue slot or a registration that one peer's connection
 * holds up.  ->disconnected flushes this before its endpoint goes, so
 * @ep, still the peer's under kd->lock here, stays valid while granted.
 */
static void kdsm_grant_work(struct work_struct *w)
{
	struct kdsm_cluster *kd = container_of(w, struct kdsm_cluster,
					       grant_work);
	struct kverbs_ep *ep;
	struct kdsm_peer *p;
	u8 n;

	for (n = kd->geo.self + 1; n <= kd->geo.nnodes; n++) {
		p = &kd->peers[n];
		spin_lock_bh(&kd->lock);
		ep = p->grant_ep;
		p->grant_ep = NULL;
		if (ep != p->ep || !kdsm_live(kd))
			ep = NULL;
		spin_unlock_bh(&kd->lock);
		if (ep)
			kdsm_grant_peer(kd, p, ep);
	}
}

static void kdsm_greet_work(struct work_struct *w)
{
	struct kdsm_cluster *kd = container_of(w, struct kdsm_cluster,
					       greet_work);
	struct kverbs_grant *g, *lg, *stale, *lstale;
	struct kdsm_peer *p;
	u32 conn;
	int ret;
	u8 n;

	for (n = 1; n <= kd->geo.nnodes; n++) {
		p = &kd->peers[n];
		spin_lock_bh(&kd->lock);
		stale = p->stale;
		p->stale = NULL;
		lstale = p->lock_stale;
		p->lock_stale = NULL;
		g = p->grant;
		lg = p->lock_grant;
		conn = p->conn;
		if (!g || p->greeting || !kdsm_live(kd))
			g = NULL;
		else
			p->greeting = true;
		spin_unlock_bh(&kd->lock);
		if (stale)
			kverbs_grant_revoke(stale);
		if (lstale)
			kverbs_grant_revoke(lstale);
		if (!g)
			continue;
		ret = kdsm_greet(kd, p, g, lg, conn);
		/*
		 * Our own errors fail the cluster; an endpoint's (it is going
		 * down) are ->disconnected()'s to judge: a forming cluster
		 * may forget the connection (kdsm_peer_restart_locked()).
		 */
		if (ret == -E2BIG || ret == -EINVAL) {
			kdsm_fail(kd, "node %u: greeting node %u failed: %d",
				  kd->geo.self, n, ret);
			continue;
		}
		spin_lock_bh(&kd->lock);
		if (p->conn == conn)
			p->greeted = !ret;
		wake_up_all(&kd->state_wq);
		spin_unlock_bh(&kd->lock);
	}
}

static void kdsm_disconnected(struct kverbs_ep *ep, int err)
{
	struct kdsm_cluster *kd = kverbs_domain_priv(kverbs_ep_domain(ep));
	struct kdsm_peer *p = kverbs_ep_priv(ep);

	/* a turned-away connection never was a peer's endpoint */
	if (!p || p == &kdsm_refused_peer)
		return;
	flush_work(&kd->grant_work);	/* it may be granting on @ep */
	spin_lock_bh(&kd->lock);
	if (p->ep != ep) {
		spin_unlock_bh(&kd->lock);
		return;
	}
	if (kdsm_peer_restart_locked(kd, p)) {
		spin_unlock_bh(&kd->lock);
		pr_info("node %u: node %u's connection went down before its HELLO (%d); %s\n",
			kd->geo.self, p->node, err,
			p->node < kd->geo.self ? "dialing again" :
			"it may dial again");
		return;
	}
	WRITE_ONCE(p->ep, NULL);
	if (kdsm_live(kd))
		kd->lost = p->node;
	kdsm_fail_locked(kd, "node %u lost node %u (%d)", kd->geo.self,
			 p->node, err);
	spin_unlock_bh(&kd->lock);
}

/* Every peer's keys are here: tell them all. */
static bool kdsm_keys_complete(struct kdsm_cluster *kd)
{
	u8 n;

	for (n = 1; n <= kd->geo.nnodes; n++)
		if (n != kd->geo.self && !kdsm_peer_keyed(&kd->peers[n]))
			return false;
	return true;
}

/*
 * READY may follow our greeting only: a peer takes READY before our keys
 * for a protocol error.
 */
static bool kdsm_may_announce(struct kdsm_cluster *kd)
{
	u8 n;

	for (n = 1; n <= kd->geo.nnodes; n++)
		if (n != kd->geo.self && !kd->peers[n].greeted)
			return false;
	return kdsm_keys_complete(kd);
}

static bool kdsm_all_ready(struct kdsm_cluster *kd)
{
	u8 n;

	for (n = 1; n <= kd->geo.nnodes; n++)
		if (n != kd->geo.self && !kd->peers[n].ready)
			return false;
	return true;
}

static int kdsm_hello_recv(struct kdsm_cluster *kd, struct kdsm_peer *p,
			   struct kverbs_ep *ep, const struct kdsm_hello *h,
			   enum kvmsg_ctx ctx)
{
	u32 npages = be32_to_cpu(h->npages);
	u16 nkeys = be16_to_cpu(h->nkeys);
	char why[96];
	u32 *keys;
	u8 code = 0;

	if (p->hello || memchr_inv(h->reserved, 0, sizeof(h->reserved)))
		return -EPROTO;
	if (h->version != KDSM_PROTO_VERSION) {
		code = KDSM_REFUSE_VERSION;
		snprintf(why, sizeof(why), "it runs version %u, this node %u",
			 h->version, KDSM_PROTO_VERSION);
	} else if (h->nnodes != kd->geo.nnodes || npages != kd->geo.npages ||
		   h->placement != (kd->geo.block ? KDSM_PLACE_BLOCK :
				    KDSM_PLACE_CYCLIC) ||
		   h->page_shift != PAGE_SHIFT) {
		code = KDSM_REFUSE_GEOMETRY;
		snprintf(why, sizeof(why),
			 "it has %u nodes, %u pages, placement %u, page shift %u; this node %u, %u, %u, %u",
			 h->nnodes, npages, h->placement, h->page_shift,
			 kd->geo.nnodes, kd->geo.npages, kd->geo.block,
			 PAGE_SHIFT);
	} else if (be32_to_cpu(h->options) != (kd->options & KDSM_OPT_SHARED)) {
		code = KDSM_REFUSE_OPTIONS;
		snprintf(why, sizeof(why), "it has options %#x, this node %#x",
			 be32_to_cpu(h->options), kd->options & KDSM_OPT_SHARED);
	} else if (h->extent_shift < PAGE_SHIFT || h->extent_shift > 40 ||
		   nkeys != DIV_ROUND_UP_ULL((u64)npages << PAGE_SHIFT,
					     1ULL << h->extent_shift) ||
		   h->lock_keys > 1) {
		return -EPROTO;
	}
	if (code) {
		p->refused = true;
		kdsm_refuse(kd, ep, p->node, code, why, true);
		return 0;
	}
	if (ctx == KVMSG_CTX_PROCESS) {
		keys = kcalloc(nkeys, sizeof(*keys), GFP_KERNEL);
		if (!keys)
			return -ENOMEM;
	} else {
		keys = kcalloc(nkeys, sizeof(*keys), GFP_ATOMIC);
		if (!keys)
			return -EAGAIN;	/* again, in process context */
	}
	spin_lock_bh(&kd->lock);
	if (p->ep != ep) {	/* replaced while forming */
		spin_unlock_bh(&kd->lock);
		kfree(keys);
		return 0;
	}
	p->rkeys = keys;
	p->rkey_shift = h->extent_shift;
	p->nkeys_region = nkeys;
	p->nkeys_want = nkeys + h->lock_keys;
	p->hello = true;
	if (p->node > kd->geo.self)	/* accepted: now grant and greet */
		p->grant_ep = ep;
	spin_unlock_bh(&kd->lock);
	if (p->node > kd->geo.self)
		queue_work(kdsm_wq, &kd->grant_work);
	return 0;
}

static int kdsm_key_recv(struct kdsm_cluster *kd, struct kdsm_peer *p,
			 struct kverbs_ep *ep, const struct kdsm_key *k)
{
	if (!p->hello || be32_to_cpu(k->index) != p->nkeys ||
	    p->nkeys >= p->nkeys_want || memchr_inv(k->reserved0, 0, 3) ||
	    memchr_inv(k->reserved, 0, sizeof(k->reserved)))
		return -EPROTO;
	spin_lock_bh(&kd->lock);
	if (p->ep != ep) {	/* replaced while forming */
		spin_unlock_bh(&kd->lock);
		return 0;
	}
	if (p->nkeys < p->nkeys_region) {
		p->rkeys[p->nkeys] = be32_to_cpu(k->rkey);
	} else {			/* the last: its lock words */
		p->lock_rkey = be32_to_cpu(k->rkey);
		p->lock_keyed = true;
	}
	p->nkeys++;
	if (kdsm_keys_complete(kd))
		wake_up_all(&kd->state_wq);
	spin_unlock_bh(&kd->lock);
	return 0;
}

static int kdsm_ctl_recv(struct kdsm_cluster *kd, struct kdsm_peer *p,
			 struct kverbs_ep *ep, const void *data,
			 enum kvmsg_ctx ctx)
{
	const struct kdsm_sig *s = data;
	u8 type = s->type;

	switch (type) {
	case KDSM_HELLO:
		return kdsm_hello_recv(kd, p, ep, data, ctx);
	case KDSM_KEY:
		return kdsm_key_recv(kd, p, ep, data);
	}
	if (s->reserved0 || memchr_inv(s->reserved, 0, sizeof(s->reserved)))
		return -EPROTO;
	/* only locks and barriers carry an id or a generation */
	if (type < KDSM_LOCK_REQ && (s->id || s->gen))
		return -EPROTO;
	switch (type) {
	case KDSM_READY:
	case KDSM_PING:
		if (s->code || s->node)
			return -EPROTO;
		if (type == KDSM_PING)
			return 0;
		if (p->ready || !kdsm_peer_keyed(p))
			return -EPROTO;
		spin_lock_bh(&kd->lock);
		p->ready = true;
		if (kd->sent_ready && kdsm_all_ready(kd) &&
		    kd->state == KDSM_STATE_FORMING) {
			kd->state = KDSM_STATE_READY;
			kdsm_state_changed(kd);
		}
		spin_unlock_bh(&kd->lock);
		return 0;
	case KDSM_REFUSE:
		if (!s->code || s->code >= ARRAY_SIZE(kdsm_refusal_text) ||
		    s->node != p->node)
			return -EPROTO;
		p->refused = true;
		kdsm_fail(kd, "node %u refused node %u: %s", p->node,
			  kd->geo.self, kdsm_refusal_text[s->code]);
		return 0;
	case KDSM_ABORT:
		if (s->node < 1 || s->node > kd->geo.nnodes)
			return -EPROTO;
		spin_lock_bh(&kd->lock);
		if (kdsm_live(kd))
			kd->lost = s->node;
		kdsm_fail_locked(kd, "node %u reports node %u lost", p->node,
				 s->node);
		spin_unlock_bh(&kd->lock);
		return 0;
	}
	if (!kdsm_peer_keyed(p))
		return -EPROTO;
	if (type >= KDSM_QL_NEXT)
		return kdsm_qlock_recv(kd, p->node, s);
	return kdsm_sync_recv(kd, p->node, s, ctx);
}

static int kdsm_recv(struct kverbs_ep *ep, struct kvmsg_rx *rx,
		     enum kvmsg_ctx ctx)
{
	struct kdsm_cluster *kd = kverbs_domain_priv(kverbs_ep_domain(ep));
	struct kdsm_peer *p = kverbs_ep_priv(ep);
	const struct kdsm_msg *m = kvmsg_rx_data(rx);
	u32 len = kvmsg_rx_len(rx);
	int ret;

	/*
	 * A refused peer's messages are dropped, not rejected: rejecting
	 * closes the connection, which may reach the peer before our
	 * REFUSE does, and it would not learn why.  Only a peer's current
	 * connection is heard; one replaced while forming is dropped.
	 */
	if (!p || p->refused || READ_ONCE(p->ep) != ep)
		return 0;
	if (len != KDSM_MSG_LEN) {
		ret = -EPROTO;
		goto bad;
	}
	kdsm_count_msg(kd, m->type, false);
	if (m->type >= KDSM_HELLO && m->type < KDSM_CTL_END) {
		ret = kdsm_ctl_recv(kd, p, ep, m, ctx);
	} else if (!kdsm_peer_keyed(p)) {
		ret = -EPROTO;	/* no page traffic before its keys */
	} else {
		ret = kdsm_msg_check(&kd->geo, m, len, p->node);
		if (!ret)
			ret = kdsm_engine_recv(kd, p, m, ctx);
	}
	if (!ret || ret == -EAGAIN)
		return ret;
	if (ret == -ENOMEM) {	/* in process context: nothing to retry */
		kdsm_fail(kd, "node %u: no memory for node %u's message",
			  kd->geo.self, p->node);
		return 0;
	}
bad:
	kdsm_count(kd, KDSM_STAT_MALFORMED, 1);
	pr_err_ratelimited("node %u: malformed message (type %u, %u bytes) from node %u: %d, closing\n",
			   kd->geo.self, len ? m->type : 0, len, p->node, ret);
	return ret;
}

static void kdsm_send_done(struct kverbs_ep *ep, void *cookie, int status)
{
}

static const struct kverbs_domain_ops kdsm_domain_ops = {
	.authorize = kdsm_authorize,
	.connected = kdsm_connected,
	.disconnected = kdsm_disconnected,
};

static const struct kvmsg_ops kdsm_msg_ops = {
	.recv = kdsm_recv,
	.send_done = kdsm_send_done,
};

static const struct kvmem_ops kdsm_kvmem_ops = {
	.fault = kdsm_engine_fault,
	.ioctl = kdsm_region_ioctl,
	.release = kdsm_region_release,
};

/* Tell every peer we hold their keys, then wait for theirs. */
static void kdsm_announce(struct kdsm_cluster *kd, unsigned long deadline)
{
	struct kdsm_sig s;
	long left;
	u8 n;

	left = max_t(long, deadline - jiffies, 1);
	left = wait_event_timeout(kd->state_wq, !kdsm_live(kd) ||
				  kdsm_may_announce(kd), left);
	if (!left)
		goto timeout;
	kdsm_sig(&s, KDSM_READY, 0, 0);
	for (n = 1; n <= kd->geo.nnodes; n++) {
		if (n == kd->geo.self || !kdsm_live(kd))
			continue;
		if (kdsm_xmit(kd, n, &s))
			return;	/* failed: a lost peer, or the deadline */
	}
	spin_lock_bh(&kd->lock);
	kd->sent_ready = true;
	if (kdsm_all_ready(kd) && kd->state == KDSM_STATE_FORMING) {
		kd->state = KDSM_STATE_READY;
		kdsm_state_changed(kd);
	}
	spin_unlock_bh(&kd->lock);
	left = max_t(long, deadline - jiffies, 1);
	if (wait_event_timeout(kd->state_wq, kd->state != KDSM_STATE_FORMING,
			       left))
		goto done;
timeout:
	spin_lock_bh(&kd->lock);
	for (n = 1; n <= kd->geo.nnodes; n++)
		if (n != kd->geo.self && !kd->peers[n].ready)
			break;
	if (n > kd->geo.nnodes)
		kdsm_fail_locked(kd, "node %u: not ready within %u ms",
				 kd->geo.self, kd->join_ms);
	else
		kdsm_fail_locked(kd, "node %u: node %u not ready within %u ms",
				 kd->geo.self, n, kd->join_ms);
	spin_unlock_bh(&kd->lock);
done:
	if (kd->state == KDSM_STATE_READY)
		pr_info("node %u: cluster of %u nodes ready, %u pages\n",
			kd->geo.self, kd->geo.nnodes, kd->geo.npages);
}

/*
 * Connect to lower node @p (it accepts us) until connected, failed, or
 * the join deadline.  An attempt that went down before we took it (its
 * ->disconnected() found @p->dialing) is dialed again.
 */
static void kdsm_dial(struct kdsm_cluster *kd, struct kdsm_peer *p)
{
	struct kverbs_ep *ep;
	bool kept;

	for (;;) {
		if (!kdsm_live(kd))
			break;
		ep = kverbs_ep_connect(kd->dom, (struct sockaddr *)&p->addr,
				       KDSM_CONNECT_MS, p);
		if (!IS_ERR(ep)) {
			spin_lock_bh(&kd->lock);
			kept = p->ep == ep;
			if (kept) {
				p->dialed = ep;
				p->dialing = false;
			}
			spin_unlock_bh(&kd->lock);
			if (kept)
				return;
			kverbs_ep_close(ep);
			ep = ERR_PTR(-ECONNRESET);
		}
		if (time_after(jiffies, kd->join_deadline)) {
			kdsm_fail(kd, "node %u: node %u at %pISpc: %pe after %u ms",
				  kd->geo.self, p->node, &p->addr, ep,
				  kd->join_ms);
			break;
		}
		msleep(200);	/* it may not listen yet */
	}
	spin_lock_bh(&kd->lock);
	p->dialing = false;
	spin_unlock_bh(&kd->lock);
}

static void kdsm_form_work(struct work_struct *w)
{
	struct kdsm_cluster *kd = container_of(w, struct kdsm_cluster,
					       form_work);
	struct kdsm_peer *p;
	u8 j;

	for (j = 1; j < kd->geo.self; j++) {
		p = &kd->peers[j];
		spin_lock_bh(&kd->lock);
		p->dialing = true;
		spin_unlock_bh(&kd->lock);
		kdsm_dial(kd, p);
	}
	kdsm_announce(kd, kd->join_deadline);
}

/* Dial again the peers whose connection went down while forming. */
static void kdsm_dial_work(struct work_struct *w)
{
	struct kdsm_cluster *kd = container_of(w, struct kdsm_cluster,
					       dial_work);
	struct kverbs_ep *old;
	struct kdsm_peer *p;
	bool redial;
	u8 j;

	for (j = 1; j < kd->geo.self; j++) {
		p = &kd->peers[j];
		spin_lock_bh(&kd->lock);
		redial = p->redial && kdsm_live(kd);
		old = NULL;
		if (redial) {
			p->redial = false;
			p->dialing = true;
			old = p->dialed;
			p->dialed = NULL;
		}
		spin_unlock_bh(&kd->lock);
		if (!redial)
			continue;
		if (old)
			kverbs_ep_close(old);
		pr_info("node %u: dialing node %u again\n", kd->geo.self, j);
		kdsm_dial(kd, p);
	}
}

/* Fail what can no longer be obtained; see the top of this file. */
static void kdsm_fail_work(struct work_struct *w)
{
	struct kdsm_cluster *kd = container_of(w, struct kdsm_cluster,
					       fail_work);
	u32 first, end, page, npages = kd->geo.npages;
	struct kvmem_range range;
	unsigned long *lost;
	struct kdsm_sig s;
	u8 n;

	/*
	 * One try each, no wait: a peer that returns no credits is lost
	 * too, and its own heartbeat fails it.
	 */
	spin_lock_bh(&kd->lock);
	kdsm_sig(&s, KDSM_ABORT, 0, kd->lost ?: kd->geo.self);
	for (n = 1; n <= kd->geo.nnodes; n++)
		if (n != kd->geo.self)
			kdsm_xmit_locked(kd, n, &s);
	spin_unlock_bh(&kd->lock);
	/*
	 * Lock and barrier waiters were woken when the cluster failed.  A
	 * page is lost when this node cannot use it, or a task of ours waits
	 * for it (fault_t0: its fault may still sit in the deferred queue).
	 */
	lost = bitmap_zalloc(npages, GFP_KERNEL);
	spin_lock_bh(&kd->lock);
	for (page = 0; lost && page < npages; page++)
		if (kd->pg[page].prot == KDSM_NONE || kd->pg[page].pending ||
		    kd->fault_t0[page])
			__set_bit(page, lost);
	spin_unlock_bh(&kd->lock);
	/* without memory the faults still fail, one by one, as they come */
	for (first = 0; lost && first < npages; first = end) {
		first = find_next_bit(lost, npages, first);
		if (first >= npages)
			break;
		end = find_next_zero_bit(lost, npages, first);
		range = (struct kvmem_range){ .first = first,
					      .count = end - first };
		kvmem_fail(kd->vr, &range, 1);
	}
	bitmap_free(lost);
}

static void kdsm_ping_work(struct work_struct *w)
{
	struct kdsm_cluster *kd = container_of(to_delayed_work(w),
					       struct kdsm_cluster, ping_work);
	struct kdsm_sig s;
	u8 n;

	kdsm_sig(&s, KDSM_PING, 0, 0);
	spin_lock_bh(&kd->lock);
	if (!kdsm_live(kd)) {
		spin_unlock_bh(&kd->lock);
		return;
	}
	/*
	 * Only to members: a connection whose HELLO did not match yet gets
	 * nothing of ours (the acceptor's rule, see the top of this file).
	 */
	for (n = 1; n <= kd->geo.nnodes; n++)
		if (n != kd->geo.self && kd->peers[n].hello)
			kdsm_xmit_locked(kd, n, &s);	/* busy: no need */
	queue_delayed_work(kdsm_wq, &kd->ping_work,
			   msecs_to_jiffies(KDSM_PING_MS));
	spin_unlock_bh(&kd->lock);
}

/*
 * Home pages start owned and writable at their home, the rest NONE:
 * one kvmem_protect() per KVMEM_MAX_RANGES runs (cyclic placement makes
 * a run of every page).
 */
static int kdsm_pages_init(struct kdsm_cluster *kd)
{
	struct kvmem_range *ranges;
	u32 p, nr = 0, n = kd->geo.npages;
	int ret = 0;

	kd->pg = vcalloc(n, sizeof(*kd->pg));
	kd->home = vcalloc(n, sizeof(*kd->home));
	kd->homeq = vcalloc(n, sizeof(*kd->homeq));
	kd->homeq_len = vcalloc(n, sizeof(*kd->homeq_len));
	kd->defer = vcalloc(n, sizeof(*kd->defer));
	kd->fault_t0 = vcalloc(n, sizeof(*kd->fault_t0));
	ranges = kvmalloc_array(KVMEM_MAX_RANGES, sizeof(*ranges), GFP_KERNEL);
	if (!kd->pg || !kd->home || !kd->homeq || !kd->homeq_len ||
	    !kd->defer || !kd->fault_t0 || !ranges) {
		kvfree(ranges);
		return -ENOMEM;
	}
	for (p = 0; p < n && !ret; p++) {
		u8 home = kdsm_home_of(&kd->geo, p);

		kd->home[p].owner = home;	/* meaningful at the home only */
		if (home != kd->geo.self)
			continue;
		kd->pg[p] = (struct kdsm_page){ .prot = KDSM_RW, .owner = true };
		if (nr && ranges[nr - 1].first + ranges[nr - 1].count == p) {
			ranges[nr - 1].count++;
			continue;
		}
		if (nr == KVMEM_MAX_RANGES) {
			ret = kvmem_protect(kd->vr, ranges, nr, KVMEM_PROT_RW, 0);
			nr = 0;
		}
		ranges[nr++] = (struct kvmem_range){ .first = p, .count = 1 };
	}
	if (!ret && nr)
		ret = kvmem_protect(kd->vr, ranges, nr, KVMEM_PROT_RW, 0);
	kvfree(ranges);
	return ret;
}

static void kdsm_cluster_free(struct kdsm_cluster *kd)
{
	u8 n;

	/* idle: drained, or never queued (nothing defers once not live) */
	WARN_ON_ONCE(!list_empty(&kd->deferred));
	if (kd->defer_kw)
		kthread_destroy_worker(kd->defer_kw);

	for (n = 1; n <= KDSM_MAX_NODES; n++)
		kfree(kd->peers[n].rkeys);
	vfree(kd->pg);
	vfree(kd->home);
	vfree(kd->homeq);
	vfree(kd->homeq_len);
	vfree(kd->defer);
	vfree(kd->fault_t0);
	kfree(kd->lockwait);
	kfree(kd->lockmgr);
	kfree(kd->spare);	/* a fault may park one after the drain */
	free_percpu(kd->stats);
	kfree(kd);
}

/**
 * kdsm_cluster_create - join a cluster: region, listener, then the mesh
 * @geo: this node's id, the node count, pages and placement (checked)
 * @options: KDSM_OPT_* (checked)
 * @port: rdma_cm port of every node
 * @join_ms: deadline for the mesh and setup
 * @addrs: address of every node, by id (index 0 unused); the port is set
 *	here
 * @key: description of the logon key every member must prove
 *	(kverbs_domain_attr.auth_key), or NULL
 *
 * Returns at once; formation continues in the background: the cluster
 * becomes READY or FAILED (KDSM_CMD_GET, kdsm_wait_ready()).
 *
 * Context: process; may sleep.
 * Return: the cluster or ERR_PTR.
 */
struct kdsm_cluster *kdsm_cluster_create(const struct kdsm_geo *geo,
					 u32 options, u16 port, u32 join_ms,
					 const struct sockaddr_storage *addrs,
					 const char *key)
{
	struct kverbs_domain_attr attr = {
		.ops = &kdsm_domain_ops,
		.msg = &kdsm_msg_ops,
		.name = "kdsm",
		.node_id = geo->self,
		.depth = KDSM_DEPTH,
		.max_msg = max_t(u32, KDSM_MSG_LEN, KVERBS_CM_MIN_MSG),
		.max_eps = geo->nnodes,
		.auth_key = key,
	};
	struct kdsm_cluster *kd;
	struct page **pages;
	u32 npages;
	int ret;
	u8 n;

	kd = kzalloc(sizeof(*kd), GFP_KERNEL);
	if (!kd)
		return ERR_PTR(-ENOMEM);
	kd->geo = *geo;
	kd->options = options;
	kd->port = port;
	kd->join_ms = join_ms;
	kd->join_deadline = jiffies + msecs_to_jiffies(join_ms);
	kd->state = KDSM_STATE_FORMING;
	spin_lock_init(&kd->lock);
	INIT_LIST_HEAD(&kd->deferred);
	kd->defer_idle = true;
	INIT_WORK(&kd->defer_work, kdsm_defer_work);
	kthread_init_work(&kd->defer_kwork, kdsm_defer_kwork);
	INIT_WORK(&kd->form_work, kdsm_form_work);
	INIT_WORK(&kd->greet_work, kdsm_greet_work);
	INIT_WORK(&kd->grant_work, kdsm_grant_work);
	INIT_WORK(&kd->dial_work, kdsm_dial_work);
	INIT_WORK(&kd->fail_work, kdsm_fail_work);
	INIT_WORK(&kd->orphan_work, kdsm_orphan_work);
	INIT_DELAYED_WORK(&kd->ping_work, kdsm_ping_work);
	init_waitqueue_head(&kd->sync_wq);
	init_waitqueue_head(&kd->state_wq);
	for (n = 1; n <= geo->nnodes; n++) {
		kd->peers[n].node = n;
		kd->peers[n].addr = addrs[n];
		if (addrs[n].ss_family == AF_INET)
			((struct sockaddr_in *)&kd->peers[n].addr)->sin_port =
				htons(port);
		else
			((struct sockaddr_in6 *)&kd->peers[n].addr)->sin6_port =
				htons(port);
	}
	kd->stats = alloc_percpu(struct kdsm_stats);
	kd->lockwait = kcalloc(KDSM_MAX_LOCKS, sizeof(*kd->lockwait),
			       GFP_KERNEL);
	kd->lockmgr = kcalloc(KDSM_MAX_LOCKS, sizeof(*kd->lockmgr),
			      GFP_KERNEL);
	ret = -ENOMEM;
	if (!kd->stats || !kd->lockwait || !kd->lockmgr)
		goto out_free;
	if (options & KDSM_OPT_DEFER_FIFO) {
		/* woken at creation up to 6.13 (later: kthread_run_worker) */
		kd->defer_kw = kthread_create_worker(0, "kdsm%u-defer",
						     geo->self);
		ret = PTR_ERR_OR_ZERO(kd->defer_kw);
		if (ret) {
			kd->defer_kw = NULL;
			goto out_free;
		}
		sched_set_fifo(kd->defer_kw->task);
	}

	kd->vr = kvmem_region_create(geo->npages, KVMEM_PROT_NONE,
				     &kdsm_kvmem_ops, kd);
	ret = PTR_ERR_OR_ZERO(kd->vr);
	if (ret) {
		kd->vr = NULL;
		goto out_free;
	}
	ret = kdsm_pages_init(kd);
	if (ret)
		goto out_vr;
	attr.priv = kd;
	kd->dom = kverbs_domain_create(&attr);
	ret = PTR_ERR_OR_ZERO(kd->dom);
	if (ret)
		goto out_vr;
	pages = kvmem_region_pages(kd->vr, &npages);
	kd->kr = kverbs_region_create(kd->dom, pages, npages);
	ret = PTR_ERR_OR_ZERO(kd->kr);
	if (ret)
		goto out_dom;
	ret = kdsm_qlock_init(kd);
	if (ret)
		goto out_kr;
	ret = kdsm_debugfs_add(kd);
	if (ret)
		goto out_kr;
	/* last: from here peers connect, and nothing fails */
	if (geo->self < geo->nnodes) {
		kd->listener = kverbs_listen(kd->dom, (struct sockaddr *)
					     &kd->peers[geo->self].addr);
		ret = PTR_ERR_OR_ZERO(kd->listener);
		if (ret) {
			kd->listener = NULL;
			goto out_debugfs;
		}
	}
	queue_work(kdsm_wq, &kd->form_work);
	queue_delayed_work(kdsm_wq, &kd->ping_work,
			   msecs_to_jiffies(KDSM_PING_MS));
	return kd;

out_debugfs:
	debugfs_remove_recursive(kd->debugfs);
out_kr:
	kdsm_qlock_free(kd);
	kverbs_region_destroy(kd->kr);
out_dom:
	kverbs_domain_destroy(kd->dom);
out_vr:
	kvmem_region_destroy(kd->vr);
out_free:
	kdsm_cluster_free(kd);
	return ERR_PTR(ret);
}

/**
 * kdsm_cluster_destroy - leave: peers see this node go, mappings SIGBUS
 * @kd: cluster
 *
 * Context: process; may sleep.  Under kdsm_ctl_mutex.
 */
void kdsm_cluster_destroy(struct kdsm_cluster *kd)
{
	u8 n;

	kdsm_fail(kd, "node %u left", kd->geo.self);
	cancel_work_sync(&kd->form_work);
	cancel_work_sync(&kd->dial_work);
	cancel_work_sync(&kd->greet_work);
	cancel_work_sync(&kd->grant_work);
	cancel_delayed_work_sync(&kd->ping_work);
	cancel_work_sync(&kd->ql_work);	/* queued only while live */
	cancel_work_sync(&kd->orphan_work);	/* the same */
	flush_work(&kd->fail_work);	/* sync waiters woken */
	debugfs_remove_recursive(kd->debugfs);
	if (kd->listener)
		kverbs_listener_destroy(kd->listener);
	for (n = 1; n <= kd->geo.nnodes; n++)
		if (kd->peers[n].dialed)
			kverbs_ep_close(kd->peers[n].dialed);
	kverbs_domain_destroy(kd->dom);	/* every ->disconnected ran */
	cancel_work_sync(&kd->greet_work);	/* a late ->connected's */
	cancel_work_sync(&kd->grant_work);	/* a late HELLO's */
	kdsm_engine_drain(kd);
	kdsm_qlock_free(kd);		/* no atomic in flight: endpoints gone */
	kverbs_region_destroy(kd->kr);
	kvmem_region_destroy(kd->vr);
	kdsm_cluster_free(kd);
}

/**
 * kdsm_wait_ready - wait until the cluster is READY or FAILED
 * @kd: cluster
 *
 * Context: process; killable, bounded by the join deadline.
 * Return: 0 when READY, -EHOSTDOWN when FAILED, -ETIMEDOUT, -EINTR.
 */
long kdsm_wait_ready(struct kdsm_cluster *kd)
{
	long left = wait_event_killable_timeout(kd->state_wq,
				kd->state != KDSM_STATE_FORMING,
				msecs_to_jiffies(kd->join_ms) + HZ);

	if (left < 0)
		return -EINTR;
	if (!left)
		return -ETIMEDOUT;
	return kd->state == KDSM_STATE_READY ? 0 : -EHOSTDOWN;
}
