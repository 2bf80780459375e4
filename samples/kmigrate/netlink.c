// SPDX-License-Identifier: GPL-2.0-only
/*
 * kmigrate control: the generic netlink family "kmigrate"
 * (uapi/kverbs/kmigrate.h).  START, STOP and MOVE need CAP_SYS_ADMIN
 * (MOVE signals a process of any user); every refusal says why in the
 * extended ack.
 */
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/pid.h>
#include <linux/sched/signal.h>
#include <net/genetlink.h>

#include "kmigrate-pri.h"

static const struct nla_policy kmig_policy[KMIGRATE_A_MAX + 1] = {
	[KMIGRATE_A_ADDR] = NLA_POLICY_MIN_LEN(sizeof(struct sockaddr_in)),
	[KMIGRATE_A_NODE] = NLA_POLICY_MIN(NLA_U32, 1),
	[KMIGRATE_A_PID] = NLA_POLICY_MIN(NLA_U32, 1),
	[KMIGRATE_A_MODE] = NLA_POLICY_MAX(NLA_U32, KMIGRATE_MODE_PRECOPY),
	[KMIGRATE_A_FLAGS] = NLA_POLICY_MASK(NLA_U32, KMIGRATE_F_NO_PREFETCH),
	[KMIGRATE_A_KEY] = { .type = NLA_NUL_STRING,
			     .len = KMIGRATE_KEY_DESC_MAX },
	/* replies only */
	[KMIGRATE_A_RUNNING] = { .type = NLA_REJECT },
	[KMIGRATE_A_ARENA] = { .type = NLA_REJECT },
	[KMIGRATE_A_STATS] = { .type = NLA_REJECT },
};

static struct genl_family kmig_genl;

/* An AF_INET or AF_INET6 address with a port, from @a into @ss. */
static int kmig_nl_addr(struct nlattr *a, struct sockaddr_storage *ss,
			struct netlink_ext_ack *extack)
{
	if (!a || nla_len(a) > sizeof(*ss)) {
		NL_SET_ERR_MSG(extack, "an address is required");
		return -EINVAL;
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, nla_data(a), nla_len(a));
	if (!(ss->ss_family == AF_INET &&
	      nla_len(a) == sizeof(struct sockaddr_in)) &&
	    !(ss->ss_family == AF_INET6 &&
	      nla_len(a) == sizeof(struct sockaddr_in6))) {
		NL_SET_ERR_MSG_ATTR(extack, a,
				    "the address must be a sockaddr_in or sockaddr_in6");
		return -EINVAL;
	}
	/* sin_port and sin6_port are at the same offset */
	if (!((struct sockaddr_in *)ss)->sin_port) {
		NL_SET_ERR_MSG_ATTR(extack, a, "the port must not be 0");
		return -EINVAL;
	}
	return 0;
}

static u32 kmig_addr_len(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) :
					  sizeof(struct sockaddr_in6);
}

/*
 * START, STOP and MOVE change what happens to processes on this node, as
 * the documentation has always said: CAP_SYS_ADMIN, of the socket's opener
 * as GENL_ADMIN_PERM checks CAP_NET_ADMIN (which alone let a caller move
 * another user's process to its own node and read its heap there).
 */
static bool kmig_nl_admin(struct sk_buff *skb, struct genl_info *info)
{
	if (netlink_capable(skb, CAP_SYS_ADMIN))
		return true;
	NL_SET_ERR_MSG(info->extack, "needs CAP_SYS_ADMIN");
	return false;
}

static int kmig_nl_start(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr **at = info->attrs;
	struct sockaddr_storage ss;
	int ret;

	if (!kmig_nl_admin(skb, info))
		return -EPERM;
	ret = kmig_nl_addr(at[KMIGRATE_A_ADDR], &ss, info->extack);
	if (ret)
		return ret;
	if (at[KMIGRATE_A_KEY] && !*(char *)nla_data(at[KMIGRATE_A_KEY])) {
		NL_SET_ERR_MSG_ATTR(info->extack, at[KMIGRATE_A_KEY],
				    "an empty key description");
		return -EINVAL;
	}
	mutex_lock(&kmig.lock);
	ret = kmig_node_start(&ss, at[KMIGRATE_A_NODE] ?
			      nla_get_u32(at[KMIGRATE_A_NODE]) : 1,
			      at[KMIGRATE_A_KEY] ?
			      nla_data(at[KMIGRATE_A_KEY]) : NULL);
	mutex_unlock(&kmig.lock);
	if (ret == -EEXIST)
		NL_SET_ERR_MSG(info->extack, "kmigrate is running: stop it first");
	else if (at[KMIGRATE_A_KEY] && kverbs_key_error(ret))
		NL_SET_ERR_MSG_ATTR(info->extack, at[KMIGRATE_A_KEY],
				    "no usable logon key of that description in the caller's keyrings (keyctl add logon kverbs:NAME SECRET @u; 16 to 64 bytes)");
	else if (ret)
		NL_SET_ERR_MSG(info->extack,
			       "could not listen on that address (see the kernel log)");
	return ret;
}

static int kmig_nl_stop(struct sk_buff *skb, struct genl_info *info)
{
	int ret;

	if (!kmig_nl_admin(skb, info))
		return -EPERM;
	ret = kmig_node_stop();
	if (ret)
		NL_SET_ERR_MSG(info->extack, "kmigrate is not running");
	return ret;
}

static int kmig_nl_move(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr **at = info->attrs;
	struct kmig_arena *a, *found = NULL;
	struct pid *pid = NULL, *want;
	struct sockaddr_storage ss;
	int ret;

	if (!kmig_nl_admin(skb, info))
		return -EPERM;
	if (!at[KMIGRATE_A_PID]) {
		NL_SET_ERR_MSG(info->extack, "a pid is required");
		return -EINVAL;
	}
	ret = kmig_nl_addr(at[KMIGRATE_A_ADDR], &ss, info->extack);
	if (ret)
		return ret;
	/* the pid as the caller's namespace sees it */
	want = find_get_pid(nla_get_u32(at[KMIGRATE_A_PID]));
	mutex_lock(&kmig.lock);
	list_for_each_entry(a, &kmig.arenas, node) {
		if (want && a->owner == want && !a->moved) {
			found = a;
			break;
		}
	}
	if (found) {
		a = found;
		pid = get_pid(a->owner);
		spin_lock_bh(&a->lock);
		memcpy(&a->move_dest, &ss, sizeof(ss));
		a->move_mode = at[KMIGRATE_A_MODE] ?
			       nla_get_u32(at[KMIGRATE_A_MODE]) : 0;
		a->move_flags = at[KMIGRATE_A_FLAGS] ?
				nla_get_u32(at[KMIGRATE_A_FLAGS]) : 0;
		a->move_pending = true;
		spin_unlock_bh(&a->lock);
	}
	mutex_unlock(&kmig.lock);
	put_pid(want);
	if (!pid) {
		NL_SET_ERR_MSG_ATTR(info->extack, at[KMIGRATE_A_PID],
				    "no process with an arena has that pid");
		return -ESRCH;
	}
	/* libkmigrate's handler notes it; kmigrate::poll() moves. */
	ret = kill_pid(pid, KMIGRATE_SIGNAL, 1);
	put_pid(pid);
	if (ret)
		NL_SET_ERR_MSG(info->extack, "could not signal the process");
	return ret;
}

static int kmig_nl_fill_arena(struct sk_buff *msg, struct kmig_arena *a)
{
	struct sockaddr_storage peer;
	struct nlattr *nest;
	u32 state, mode;
	bool has_peer;

	spin_lock_bh(&a->lock);
	state = a->out_phase == KMIG_OUT_FROZEN ? KMIGRATE_ST_FROZEN :
		a->out_phase != KMIG_OUT_NONE ? KMIGRATE_ST_PREPARING :
		a->state;
	mode = a->mode;
	has_peer = a->peer.ss_family;
	peer = a->peer;
	spin_unlock_bh(&a->lock);
	nest = nla_nest_start(msg, KMIGRATE_A_ARENA);
	if (!nest ||
	    nla_put_u32(msg, KMIGRATE_R_PID, a->owner ? pid_nr(a->owner) : 0) ||
	    nla_put_u32(msg, KMIGRATE_R_STATE, state) ||
	    nla_put_u32(msg, KMIGRATE_R_NPAGES, a->npages) ||
	    nla_put_u64_64bit(msg, KMIGRATE_R_VA, a->va, KMIGRATE_R_PAD) ||
	    (has_peer && nla_put(msg, KMIGRATE_R_PEER, kmig_addr_len(&peer),
				 &peer)) ||
	    nla_put_u32(msg, KMIGRATE_R_MODE, mode) ||
	    nla_put_u32(msg, KMIGRATE_R_TODO, a->pstate ?
			atomic_read(&a->todo) : 0) ||
	    nla_put_u64_64bit(msg, KMIGRATE_R_FAULTS,
			      atomic64_read(&a->fault_pages), KMIGRATE_R_PAD) ||
	    nla_put_u64_64bit(msg, KMIGRATE_R_PREFETCHED,
			      atomic64_read(&a->prefetch_pages),
			      KMIGRATE_R_PAD) ||
	    nla_put_u64_64bit(msg, KMIGRATE_R_FAULT_NS,
			      atomic64_read(&a->fault_ns), KMIGRATE_R_PAD) ||
	    nla_put_u64_64bit(msg, KMIGRATE_R_DOWNTIME_NS,
			      READ_ONCE(a->downtime_ns), KMIGRATE_R_PAD) ||
	    nla_put_u64_64bit(msg, KMIGRATE_R_TOTAL_NS,
			      READ_ONCE(a->total_ns), KMIGRATE_R_PAD))
		return -EMSGSIZE;
	nla_nest_end(msg, nest);
	return 0;
}

/* Under kmig.lock. */
static int kmig_nl_fill(struct sk_buff *msg)
{
	struct kmig_arena *a;
	struct nlattr *nest;
	int i;

	if (nla_put_u8(msg, KMIGRATE_A_RUNNING, !!kmig.dom))
		return -EMSGSIZE;
	if (kmig.dom &&
	    (nla_put(msg, KMIGRATE_A_ADDR, kmig_addr_len(&kmig.addr),
		     &kmig.addr) ||
	     nla_put_u32(msg, KMIGRATE_A_NODE, kmig.node_id)))
		return -EMSGSIZE;
	list_for_each_entry(a, &kmig.arenas, node)
		if (kmig_nl_fill_arena(msg, a))
			return -EMSGSIZE;
	nest = nla_nest_start(msg, KMIGRATE_A_STATS);
	if (!nest)
		return -EMSGSIZE;
	for (i = 1; i <= KMIGRATE_S_MAX; i++)
		if (nla_put_u64_64bit(msg, i, atomic64_read(&kmig.stats[i]),
				      KMIGRATE_S_UNSPEC))
			return -EMSGSIZE;
	nla_nest_end(msg, nest);
	return 0;
}

static int kmig_nl_get(struct sk_buff *skb, struct genl_info *info)
{
	struct kmig_arena *a;
	struct sk_buff *msg;
	size_t size = 1024;
	void *hdr;
	int ret;

	mutex_lock(&kmig.lock);
	list_for_each_entry(a, &kmig.arenas, node)
		size += 256;
	msg = genlmsg_new(size, GFP_KERNEL);
	if (!msg) {
		mutex_unlock(&kmig.lock);
		return -ENOMEM;
	}
	hdr = genlmsg_put_reply(msg, info, &kmig_genl, 0, KMIGRATE_CMD_GET);
	ret = hdr ? kmig_nl_fill(msg) : -EMSGSIZE;
	mutex_unlock(&kmig.lock);
	if (ret) {
		nlmsg_free(msg);
		return ret;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

static const struct genl_small_ops kmig_genl_ops[] = {
	{ .cmd = KMIGRATE_CMD_START, .doit = kmig_nl_start,
	  .flags = GENL_ADMIN_PERM },
	{ .cmd = KMIGRATE_CMD_STOP, .doit = kmig_nl_stop,
	  .flags = GENL_ADMIN_PERM },
	/* pids, arenas and peer addresses of every user: not for everyone */
	{ .cmd = KMIGRATE_CMD_GET, .doit = kmig_nl_get,
	  .flags = GENL_ADMIN_PERM },
	{ .cmd = KMIGRATE_CMD_MOVE, .doit = kmig_nl_move,
	  .flags = GENL_ADMIN_PERM },
};

static struct genl_family kmig_genl = {
	.name = KMIGRATE_GENL_NAME,
	.version = KMIGRATE_GENL_VERSION,
	.maxattr = KMIGRATE_A_MAX,
	.policy = kmig_policy,
	.parallel_ops = true,	/* kmig.lock serialises */
	.small_ops = kmig_genl_ops,
	.n_small_ops = ARRAY_SIZE(kmig_genl_ops),
	.resv_start_op = 0,	/* a new family: every command strict */
	.module = THIS_MODULE,
};

int kmig_genl_init(void)
{
	return genl_register_family(&kmig_genl);
}

void kmig_genl_exit(void)
{
	genl_unregister_family(&kmig_genl);
}
