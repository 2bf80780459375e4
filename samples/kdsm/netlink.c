// SPDX-License-Identifier: GPL-2.0-only
/*
 * The generic netlink family "kdsm": create (join), get, delete (leave),
 * and a multicast group, "state", told of each change of this node's
 * state (kdsmctl --wait waits on it, kdsmctl monitor prints it).  Changes
 * need CAP_NET_ADMIN.  Every refusal says why in the extended ack.
 */
#include <linux/in.h>
#include <linux/in6.h>
#include <net/genetlink.h>

#include "kdsm-pri.h"

static const struct nla_policy kdsm_peer_policy[KDSM_A_MAX + 1] = {
	[KDSM_A_PEER_NODE] = NLA_POLICY_RANGE(NLA_U8, 1, KDSM_MAX_NODES),
	[KDSM_A_PEER_ADDR] = NLA_POLICY_MIN_LEN(sizeof(struct sockaddr_in)),
};

static const struct nla_policy kdsm_policy[KDSM_A_MAX + 1] = {
	[KDSM_A_NODE] = NLA_POLICY_RANGE(NLA_U8, 1, KDSM_MAX_NODES),
	[KDSM_A_NPAGES] = { .type = NLA_U32 },
	[KDSM_A_PLACEMENT] = NLA_POLICY_MAX(NLA_U8, KDSM_PLACE_BLOCK),
	[KDSM_A_OPTIONS] = NLA_POLICY_MASK(NLA_U32, KDSM_OPT_ALL),
	[KDSM_A_PORT] = NLA_POLICY_MIN(NLA_U16, 1),
	[KDSM_A_PEERS] = NLA_POLICY_NESTED_ARRAY(kdsm_peer_policy),
	[KDSM_A_JOIN_MS] = { .type = NLA_U32 },
	[KDSM_A_KEY] = { .type = NLA_NUL_STRING, .len = KDSM_KEY_DESC_MAX },
};

static struct genl_family kdsm_genl;
static void kdsm_nl_state_changed(struct kdsm_cluster *kd);

/* An address attribute: a whole sockaddr_in or sockaddr_in6. */
static int kdsm_parse_addr(const struct nlattr *a, struct sockaddr_storage *ss)
{
	int len = nla_len(a);
	sa_family_t family;

	if (len > sizeof(*ss))
		return -EINVAL;
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, nla_data(a), len);
	family = ss->ss_family;
	if (family == AF_INET && len == sizeof(struct sockaddr_in))
		return 0;
	if (family == AF_INET6 && len == sizeof(struct sockaddr_in6))
		return 0;
	return -EINVAL;
}

/* Every node exactly once, ids 1..N: N is the cluster size. */
static int kdsm_parse_peers(struct genl_info *info,
			    struct sockaddr_storage *addrs, u8 *nnodes)
{
	struct nlattr *tb[KDSM_A_MAX + 1], *a;
	u8 seen = 0, node, n = 0;
	int rem, ret;

	nla_for_each_nested(a, info->attrs[KDSM_A_PEERS], rem) {
		ret = nla_parse_nested(tb, KDSM_A_MAX, a, kdsm_peer_policy,
				       info->extack);
		if (ret)
			return ret;
		if (!tb[KDSM_A_PEER_NODE] || !tb[KDSM_A_PEER_ADDR]) {
			NL_SET_ERR_MSG_ATTR(info->extack, a,
					    "each peer needs a node id and an address");
			return -EINVAL;
		}
		node = nla_get_u8(tb[KDSM_A_PEER_NODE]);
		if (seen & BIT(node - 1)) {
			NL_SET_ERR_MSG_ATTR(info->extack, a,
					    "a node id is listed twice");
			return -EINVAL;
		}
		if (kdsm_parse_addr(tb[KDSM_A_PEER_ADDR], &addrs[node])) {
			NL_SET_ERR_MSG_ATTR(info->extack, tb[KDSM_A_PEER_ADDR],
					    "an address must be a sockaddr_in or sockaddr_in6");
			return -EINVAL;
		}
		seen |= BIT(node - 1);
		n++;
	}
	if (n < 2 || seen != GENMASK(n - 1, 0)) {
		NL_SET_ERR_MSG(info->extack,
			       "list 2 to 8 nodes, every node (this one too) with ids 1..N");
		return -EINVAL;
	}
	*nnodes = n;
	return 0;
}

static int kdsm_nl_create(struct sk_buff *skb, struct genl_info *info)
{
	struct sockaddr_storage *addrs;
	struct nlattr **at = info->attrs;
	struct kdsm_cluster *kd;
	struct kdsm_geo geo = {};
	const char *key = NULL;
	u32 options = 0, join_ms = KDSM_JOIN_MS;
	u16 port = KDSM_DEFAULT_PORT;
	int ret;

	if (!at[KDSM_A_NODE] || !at[KDSM_A_NPAGES] || !at[KDSM_A_PEERS]) {
		NL_SET_ERR_MSG(info->extack, "node, npages and peers are required");
		return -EINVAL;
	}
	geo.self = nla_get_u8(at[KDSM_A_NODE]);
	geo.npages = nla_get_u32(at[KDSM_A_NPAGES]);
	if (!geo.npages || geo.npages > kdsm_max_pages) {
		NL_SET_ERR_MSG_ATTR(info->extack, at[KDSM_A_NPAGES],
				    "region size must be 1 page up to the module's max_pages");
		return -EINVAL;
	}
	if (at[KDSM_A_PLACEMENT])
		geo.block = nla_get_u8(at[KDSM_A_PLACEMENT]) ==
			    KDSM_PLACE_BLOCK;
	if (at[KDSM_A_OPTIONS])
		options = nla_get_u32(at[KDSM_A_OPTIONS]);
	geo.fetch = options & KDSM_OPT_FETCH_READ;
	if ((options & KDSM_OPT_DEFER_NORMAL) && (options & KDSM_OPT_DEFER_FIFO)) {
		NL_SET_ERR_MSG_ATTR(info->extack, at[KDSM_A_OPTIONS],
				    "one deferral target at most");
		return -EINVAL;
	}
	if (at[KDSM_A_PORT])
		port = nla_get_u16(at[KDSM_A_PORT]);
	if (at[KDSM_A_JOIN_MS])
		join_ms = nla_get_u32(at[KDSM_A_JOIN_MS]);
	if (at[KDSM_A_KEY]) {
		key = nla_data(at[KDSM_A_KEY]);
		if (!*key) {
			NL_SET_ERR_MSG_ATTR(info->extack, at[KDSM_A_KEY],
					    "an empty key description");
			return -EINVAL;
		}
	}
	if (join_ms < 1000 || join_ms > 600000) {
		NL_SET_ERR_MSG_ATTR(info->extack, at[KDSM_A_JOIN_MS],
				    "the join deadline must be 1000 to 600000 ms");
		return -EINVAL;
	}
	addrs = kcalloc(KDSM_MAX_NODES + 1, sizeof(*addrs), GFP_KERNEL);
	if (!addrs)
		return -ENOMEM;
	ret = kdsm_parse_peers(info, addrs, &geo.nnodes);
	if (ret)
		goto out;
	if (geo.self > geo.nnodes) {
		NL_SET_ERR_MSG_ATTR(info->extack, at[KDSM_A_NODE],
				    "this node's id is not in the peer list");
		ret = -EINVAL;
		goto out;
	}
	if (geo.npages < geo.nnodes) {
		NL_SET_ERR_MSG_ATTR(info->extack, at[KDSM_A_NPAGES],
				    "fewer pages than nodes");
		ret = -EINVAL;
		goto out;
	}
	mutex_lock(&kdsm_ctl_mutex);
	if (kdsm_cl) {
		NL_SET_ERR_MSG(info->extack,
			       "this node is in a cluster already: delete it first");
		ret = -EEXIST;
	} else {
		kd = kdsm_cluster_create(&geo, options, port, join_ms, addrs,
					 key);
		ret = PTR_ERR_OR_ZERO(kd);
		if (!ret) {
			kdsm_cl = kd;
			spin_lock_bh(&kd->lock);
			kdsm_nl_state_changed(kd);	/* forming, or later */
			spin_unlock_bh(&kd->lock);
		} else if (key && kverbs_key_error(ret)) {
			NL_SET_ERR_MSG_ATTR(info->extack, at[KDSM_A_KEY],
					    "no usable logon key of that description in the caller's keyrings (keyctl add logon kverbs:NAME SECRET @u; 16 to 64 bytes)");
		} else {
			NL_SET_ERR_MSG(info->extack,
				       "could not set up the region, domain or listener (see the kernel log)");
		}
	}
	mutex_unlock(&kdsm_ctl_mutex);
out:
	kfree(addrs);
	return ret;
}

static int kdsm_nl_fill(struct sk_buff *msg, struct kdsm_cluster *kd)
{
	struct nlattr *nest;
	u64 *v;
	int i, ret = -EMSGSIZE;

	if (!kd)
		return nla_put_u8(msg, KDSM_A_STATE, KDSM_STATE_NONE);
	if (nla_put_u8(msg, KDSM_A_STATE, READ_ONCE(kd->state)) ||
	    nla_put_u8(msg, KDSM_A_NODE, kd->geo.self) ||
	    nla_put_u8(msg, KDSM_A_NNODES, kd->geo.nnodes) ||
	    nla_put_u32(msg, KDSM_A_NPAGES, kd->geo.npages) ||
	    nla_put_u8(msg, KDSM_A_PLACEMENT, kd->geo.block ?
		       KDSM_PLACE_BLOCK : KDSM_PLACE_CYCLIC) ||
	    nla_put_u32(msg, KDSM_A_OPTIONS, kd->options) ||
	    nla_put_u16(msg, KDSM_A_PORT, kd->port))
		return -EMSGSIZE;
	spin_lock_bh(&kd->lock);
	ret = kd->state == KDSM_STATE_FAILED ?
	      nla_put_string(msg, KDSM_A_ERROR, kd->error) : 0;
	spin_unlock_bh(&kd->lock);
	if (ret)
		return ret;
	v = kcalloc(__KDSM_STAT_MAX, sizeof(*v), GFP_KERNEL);
	if (!v)
		return -ENOMEM;
	kdsm_stats_sum(kd, v);
	ret = -EMSGSIZE;
	nest = nla_nest_start(msg, KDSM_A_STATS);
	if (!nest)
		goto out;
	for (i = 1; i < __KDSM_STAT_MAX; i++)
		if (nla_put_u64_64bit(msg, i, v[i], KDSM_STAT_UNSPEC))
			goto out;
	nla_nest_end(msg, nest);
	ret = 0;
out:
	kfree(v);
	return ret;
}

static int kdsm_nl_get(struct sk_buff *skb, struct genl_info *info)
{
	struct sk_buff *msg;
	void *hdr;
	int ret;

	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &kdsm_genl, 0, KDSM_CMD_GET);
	if (!hdr) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	mutex_lock(&kdsm_ctl_mutex);
	ret = kdsm_nl_fill(msg, kdsm_cl);
	mutex_unlock(&kdsm_ctl_mutex);
	if (ret) {
		nlmsg_free(msg);
		return ret;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

/*
 * State notifications.  The state machine calls the hook under kd->lock,
 * in softirq too, so the hook only copies the state into @kdsm_ntf and
 * queues the work, which sends the latest copy (changes close together
 * merge).  The work takes no lock of kdsm's but @kdsm_ntf.lock, and runs
 * on system_wq: nothing kdsm flushes while holding a lock waits for it.
 * @live: notifications may be queued; cleared at exit before the work is
 * cancelled and the family unregistered.
 */
static struct {
	spinlock_t lock;	/* the fields below */
	bool live;
	u8 state;
	u8 node;
	char error[sizeof_field(struct kdsm_cluster, error)];
} kdsm_ntf = { .lock = __SPIN_LOCK_UNLOCKED(kdsm_ntf.lock) };

static void kdsm_ntf_work_fn(struct work_struct *work);
static DECLARE_WORK(kdsm_ntf_work, kdsm_ntf_work_fn);

/* Record @state of node @node (@error if failed) and queue its sending. */
static void kdsm_ntf_set(u8 state, u8 node, const char *error)
{
	unsigned long flags;

	spin_lock_irqsave(&kdsm_ntf.lock, flags);
	if (kdsm_ntf.live) {
		kdsm_ntf.state = state;
		kdsm_ntf.node = node;
		strscpy(kdsm_ntf.error, error ?: "", sizeof(kdsm_ntf.error));
		queue_work(system_wq, &kdsm_ntf_work);
	}
	spin_unlock_irqrestore(&kdsm_ntf.lock, flags);
}

/* kdsm_state_notify: under kd->lock. */
static void kdsm_nl_state_changed(struct kdsm_cluster *kd)
{
	lockdep_assert_held(&kd->lock);
	kdsm_ntf_set(kd->state, kd->geo.self,
		     kd->state == KDSM_STATE_FAILED ? kd->error : NULL);
}

/* STATE_NTF of the latest state recorded; nobody listening is no error. */
static void kdsm_ntf_work_fn(struct work_struct *work)
{
	char error[sizeof(kdsm_ntf.error)];
	struct sk_buff *msg;
	u8 state, node;
	void *hdr;

	if (!genl_has_listeners(&kdsm_genl, &init_net, 0))
		return;
	spin_lock_irq(&kdsm_ntf.lock);
	state = kdsm_ntf.state;
	node = kdsm_ntf.node;
	memcpy(error, kdsm_ntf.error, sizeof(error));
	spin_unlock_irq(&kdsm_ntf.lock);
	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return;
	hdr = genlmsg_put(msg, 0, 0, &kdsm_genl, 0, KDSM_CMD_STATE_NTF);
	if (!hdr || nla_put_u8(msg, KDSM_A_STATE, state) ||
	    (state != KDSM_STATE_NONE && nla_put_u8(msg, KDSM_A_NODE, node)) ||
	    (*error && nla_put_string(msg, KDSM_A_ERROR, error))) {
		nlmsg_free(msg);
		return;
	}
	genlmsg_end(msg, hdr);
	genlmsg_multicast(&kdsm_genl, msg, 0, 0, GFP_KERNEL);
}

static int kdsm_nl_delete(struct sk_buff *skb, struct genl_info *info)
{
	struct kdsm_cluster *kd;

	mutex_lock(&kdsm_ctl_mutex);
	kd = kdsm_cl;
	kdsm_cl = NULL;
	if (kd)
		kdsm_cluster_destroy(kd);
	mutex_unlock(&kdsm_ctl_mutex);
	if (!kd) {
		NL_SET_ERR_MSG(info->extack, "this node is in no cluster");
		return -ENOENT;
	}
	kdsm_ntf_set(KDSM_STATE_NONE, 0, NULL);
	return 0;
}

static const struct genl_small_ops kdsm_genl_ops[] = {
	{
		.cmd = KDSM_CMD_CREATE,
		.doit = kdsm_nl_create,
		.flags = GENL_ADMIN_PERM,
	},
	{
		.cmd = KDSM_CMD_GET,
		.doit = kdsm_nl_get,
		/* the geometry a forged HELLO needs, and peer addresses */
		.flags = GENL_ADMIN_PERM,
	},
	{
		.cmd = KDSM_CMD_DELETE,
		.doit = kdsm_nl_delete,
		.flags = GENL_ADMIN_PERM,
	},
};

static const struct genl_multicast_group kdsm_mcgrps[] = {
	/* what the state tells a listener is as private as GET's */
	{ .name = KDSM_MCGRP_STATE, .flags = GENL_MCAST_CAP_NET_ADMIN },
};

static struct genl_family kdsm_genl = {
	.name = KDSM_GENL_NAME,
	.version = KDSM_GENL_VERSION,
	.maxattr = KDSM_A_MAX,
	.policy = kdsm_policy,
	.parallel_ops = true,	/* kdsm_ctl_mutex serialises */
	.small_ops = kdsm_genl_ops,
	.n_small_ops = ARRAY_SIZE(kdsm_genl_ops),
	.resv_start_op = KDSM_CMD_DELETE + 1,
	.mcgrps = kdsm_mcgrps,
	.n_mcgrps = ARRAY_SIZE(kdsm_mcgrps),
	.module = THIS_MODULE,
};

/* No notification is queued or sent after this returns. */
static void kdsm_genl_exit_ntf(void)
{
	WRITE_ONCE(kdsm_state_notify, NULL);
	spin_lock_irq(&kdsm_ntf.lock);
	kdsm_ntf.live = false;
	spin_unlock_irq(&kdsm_ntf.lock);
	cancel_work_sync(&kdsm_ntf_work);
}

int kdsm_genl_init(void)
{
	int ret;

	/* before the first CREATE can come */
	spin_lock_irq(&kdsm_ntf.lock);
	kdsm_ntf.live = true;
	spin_unlock_irq(&kdsm_ntf.lock);
	WRITE_ONCE(kdsm_state_notify, kdsm_nl_state_changed);
	ret = genl_register_family(&kdsm_genl);
	if (ret)
		kdsm_genl_exit_ntf();
	return ret;
}

void kdsm_genl_exit(void)
{
	kdsm_genl_exit_ntf();
	genl_unregister_family(&kdsm_genl);
}
