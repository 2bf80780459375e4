// SPDX-License-Identifier: GPL-2.0-only
/*
 * kfcache_srv: serves directories read-only to kfcache clients over
 * kverbs.  Control: the generic netlink family "kfcache_srv"
 * (uapi/kverbs/kfcache.h); changes need CAP_NET_ADMIN and every refusal
 * says why in the extended ack.
 *
 * Exports: EXPORT takes a reference on the directory; UNEXPORT refuses new
 * mounts of it, while clients that mounted it keep their handles (they
 * hold their own references) until they unmount or disconnect.
 */
#include <linux/cred.h>
#include <linux/module.h>
#include <linux/sched/task.h>
#include <linux/namei.h>
#include <linux/slab.h>
#include <net/genetlink.h>
#include <net/ipv6.h>

#include "srv-pri.h"

struct kfc_srv kfc_srv = {
	.lock = __MUTEX_INITIALIZER(kfc_srv.lock),
	.exports = LIST_HEAD_INIT(kfc_srv.exports),
	.exports_gen = 1,	/* never 0: see kfc_exports_changed() */
};

static const struct nla_policy kfc_policy[KFC_A_MAX + 1] = {
	[KFC_A_ADDR] = NLA_POLICY_MIN_LEN(sizeof(struct sockaddr_in)),
	[KFC_A_NAME] = { .type = NLA_NUL_STRING, .len = KFC_NAME_MAX - 1 },
	[KFC_A_PATH] = { .type = NLA_NUL_STRING, .len = PATH_MAX - 1 },
	[KFC_A_KEY] = { .type = NLA_NUL_STRING, .len = KFC_KEY_DESC_MAX },
	[KFC_A_CLIENTS] = NLA_POLICY_RANGE(NLA_BINARY, sizeof(struct kfc_client),
					   KFC_CLIENTS_MAX *
					   sizeof(struct kfc_client)),
	/* replies only */
	[KFC_A_RUNNING] = { .type = NLA_REJECT },
	[KFC_A_EXPORT] = { .type = NLA_REJECT },
	[KFC_A_STATS] = { .type = NLA_REJECT },
};

static struct genl_family kfc_genl;

/* Domain and listener on @addr; under kfc_srv.lock. */
static int kfc_srv_start(const struct sockaddr_storage *addr,
			 const struct nlattr *key,
			 struct netlink_ext_ack *extack)
{
	struct kverbs_domain_attr attr = {
		.ops = &kfc_srv_dom_ops,
		.msg = &kfc_srv_msg_ops,
		.name = "kfcache_srv",
		.node_id = 1,
		.depth = KFC_DEPTH,
		.max_msg = KFC_MAX_MSG,
		.max_eps = KFC_SRV_MAX_EPS,
		.max_per_host = KFC_SRV_PER_HOST,
		.write_pages = KVERBS_PAGES_MAX_SGE,
		.auth_key = key ? nla_data(key) : NULL,
	};
	struct kverbs_listener *l;
	struct kverbs_domain *dom;

	if (kfc_srv.dom) {
		NL_SET_ERR_MSG(extack, "the server is running: stop it first");
		return -EEXIST;
	}
	dom = kverbs_domain_create(&attr);
	if (IS_ERR(dom) && key && kverbs_key_error(PTR_ERR(dom)))
		NL_SET_ERR_MSG_ATTR(extack, key,
				    "no usable logon key of that description in the caller's keyrings (keyctl add logon kverbs:NAME SECRET @u; 16 to 64 bytes)");
	else if (IS_ERR(dom))
		NL_SET_ERR_MSG(extack, "could not create the kverbs domain");
	if (IS_ERR(dom))
		return PTR_ERR(dom);
	l = kverbs_listen(dom, (const struct sockaddr *)addr);
	if (IS_ERR(l)) {
		kverbs_domain_destroy(dom);
		NL_SET_ERR_MSG(extack,
			       "could not listen on that address (see the kernel log)");
		return PTR_ERR(l);
	}
	kfc_srv.dom = dom;
	kfc_srv.listener = l;
	kfc_srv.addr = *addr;
	return 0;
}

/*
 * Detach the server under kfc_srv.lock; kfc_srv_destroy() it after the
 * lock is dropped: destroying the domain waits for deferred handlers, and
 * a deferred MOUNT takes kfc_srv.lock.
 */
static struct kverbs_domain *kfc_srv_detach(struct kverbs_listener **l)
{
	struct kverbs_domain *dom = kfc_srv.dom;

	*l = kfc_srv.listener;
	kfc_srv.listener = NULL;
	kfc_srv.dom = NULL;
	return dom;
}

/* Listener first, so no client connects while the domain goes. */
static void kfc_srv_destroy(struct kverbs_domain *dom,
			    struct kverbs_listener *l)
{
	if (!dom)
		return;
	kverbs_listener_destroy(l);
	kverbs_domain_destroy(dom);
}

static int kfc_nl_start(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr *a = info->attrs[KFC_A_ADDR];
	struct sockaddr_storage ss = {};
	int ret;

	if (!a || nla_len(a) > sizeof(ss)) {
		NL_SET_ERR_MSG(info->extack, "an address is required");
		return -EINVAL;
	}
	memcpy(&ss, nla_data(a), nla_len(a));
	/* sin_port and sin6_port are at the same offset */
	if (!((struct sockaddr_in *)&ss)->sin_port) {
		NL_SET_ERR_MSG_ATTR(info->extack, a, "the port must not be 0");
		return -EINVAL;
	}
	if (!(ss.ss_family == AF_INET &&
	      nla_len(a) == sizeof(struct sockaddr_in)) &&
	    !(ss.ss_family == AF_INET6 &&
	      nla_len(a) == sizeof(struct sockaddr_in6))) {
		NL_SET_ERR_MSG_ATTR(info->extack, a,
				    "the address must be a sockaddr_in or sockaddr_in6");
		return -EINVAL;
	}
	if (info->attrs[KFC_A_KEY] && !*(char *)nla_data(info->attrs[KFC_A_KEY])) {
		NL_SET_ERR_MSG_ATTR(info->extack, info->attrs[KFC_A_KEY],
				    "an empty key description");
		return -EINVAL;
	}
	mutex_lock(&kfc_srv.lock);
	ret = kfc_srv_start(&ss, info->attrs[KFC_A_KEY], info->extack);
	mutex_unlock(&kfc_srv.lock);
	return ret;
}

static int kfc_nl_stop(struct sk_buff *skb, struct genl_info *info)
{
	struct kverbs_listener *l;
	struct kverbs_domain *dom;

	mutex_lock(&kfc_srv.lock);
	dom = kfc_srv_detach(&l);
	mutex_unlock(&kfc_srv.lock);
	if (!dom) {
		NL_SET_ERR_MSG(info->extack, "the server is not running");
		return -ENOENT;
	}
	kfc_srv_destroy(dom, l);
	return 0;
}

/*
 * Under kfc_srv.lock: the exports changed.  The generation is never 0,
 * which would turn the dump's NLM_F_DUMP_INTR check off.
 */
static void kfc_exports_changed(void)
{
	if (!++kfc_srv.exports_gen)
		kfc_srv.exports_gen = 1;
}

static struct kfc_export *kfc_export_find(const char *name)
{
	struct kfc_export *e;

	list_for_each_entry(e, &kfc_srv.exports, node)
		if (!strcmp(e->name, name))
			return e;
	return NULL;
}

/* One prefix of an export's client list: valid? */
static bool kfc_client_valid(const struct kfc_client *c)
{
	if (c->reserved)
		return false;
	if (c->family == AF_INET)
		return c->prefix_len <= 32 && !memchr_inv(c->addr + 4, 0, 12);
	/* IPv4-mapped clients are matched as IPv4: name them so */
	return c->family == AF_INET6 && c->prefix_len <= 128 &&
	       !ipv6_addr_v4mapped((const struct in6_addr *)c->addr);
}

/* Does @c take @a (16 bytes; IPv4 in the first 4) of @family? */
static bool kfc_client_match(const struct kfc_client *c, u8 family,
			     const u8 *a)
{
	unsigned int bytes = c->prefix_len / 8, bits = c->prefix_len % 8;

	if (c->family != family || memcmp(c->addr, a, bytes))
		return false;
	return !bits || !((c->addr[bytes] ^ a[bytes]) & (0xff << (8 - bits)));
}

/**
 * kfc_export_allows - may a client at @peer mount @e?
 * @e: export
 * @peer: the client's address as the RDMA CM saw it
 *
 * Context: any; @e is stable (kfc_srv.lock, or its MOUNT's reference).
 * Return: true if @e lists no clients or one of its prefixes holds @peer.
 */
bool kfc_export_allows(const struct kfc_export *e,
		       const struct sockaddr_storage *peer)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)peer;
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)peer;
	u8 a[16] = {}, family = peer->ss_family;
	unsigned int i;

	if (!e->nclients)
		return true;
	if (family == AF_INET) {
		memcpy(a, &s4->sin_addr, 4);
	} else if (family == AF_INET6 && ipv6_addr_v4mapped(&s6->sin6_addr)) {
		family = AF_INET;
		memcpy(a, &s6->sin6_addr.s6_addr32[3], 4);
	} else if (family == AF_INET6) {
		memcpy(a, &s6->sin6_addr, 16);
	} else {
		return false;
	}
	for (i = 0; i < e->nclients; i++)
		if (kfc_client_match(&e->clients[i], family, a))
			return true;
	return false;
}

/* The export's client list from @a, checked; 0 or -EINVAL. */
static int kfc_export_clients(struct kfc_export *e, const struct nlattr *a,
			      struct netlink_ext_ack *extack)
{
	unsigned int i, n = nla_len(a) / sizeof(struct kfc_client);

	if (nla_len(a) % sizeof(struct kfc_client)) {
		NL_SET_ERR_MSG_ATTR(extack, a,
				    "not a whole number of struct kfc_client");
		return -EINVAL;
	}
	memcpy(e->clients, nla_data(a), n * sizeof(struct kfc_client));
	for (i = 0; i < n; i++) {
		if (!kfc_client_valid(&e->clients[i])) {
			NL_SET_ERR_MSG_ATTR(extack, a,
					    "each client: AF_INET, or AF_INET6 not IPv4-mapped; a prefix length within its address; reserved bytes 0");
			return -EINVAL;
		}
	}
	e->nclients = n;
	return 0;
}

static int kfc_nl_export(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr **at = info->attrs;
	struct kfc_export *e;
	const char *name;
	int ret;

	if (!at[KFC_A_NAME] || !at[KFC_A_PATH]) {
		NL_SET_ERR_MSG(info->extack, "a name and a path are required");
		return -EINVAL;
	}
	if (*(char *)nla_data(at[KFC_A_PATH]) != '/') {
		NL_SET_ERR_MSG_ATTR(info->extack, at[KFC_A_PATH],
				    "the path must be absolute");
		return -EINVAL;
	}
	name = nla_data(at[KFC_A_NAME]);
	if (!*name || strchr(name, '/')) {
		NL_SET_ERR_MSG_ATTR(info->extack, at[KFC_A_NAME],
				    "an export's name is one non-empty path component");
		return -EINVAL;
	}
	e = kzalloc(sizeof(*e), GFP_KERNEL);
	if (!e)
		return -ENOMEM;
	strscpy(e->name, name, sizeof(e->name));
	if (at[KFC_A_CLIENTS]) {
		ret = kfc_export_clients(e, at[KFC_A_CLIENTS], info->extack);
		if (ret) {
			kfree(e);
			return ret;
		}
	}
	ret = kern_path(nla_data(at[KFC_A_PATH]), LOOKUP_FOLLOW |
			LOOKUP_DIRECTORY, &e->root);
	if (ret) {
		NL_SET_ERR_MSG_ATTR(info->extack, at[KFC_A_PATH],
				    "the path is not an existing directory");
		kfree(e);
		return ret;
	}
	mutex_lock(&kfc_srv.lock);
	if (kfc_export_find(e->name)) {
		NL_SET_ERR_MSG_ATTR(info->extack, at[KFC_A_NAME],
				    "an export of that name exists");
		ret = -EEXIST;
	} else {
		list_add_tail(&e->node, &kfc_srv.exports);
		kfc_exports_changed();
	}
	mutex_unlock(&kfc_srv.lock);
	if (ret) {
		path_put(&e->root);
		kfree(e);
	}
	return ret;
}

/* Under kfc_srv.lock. */
static void kfc_export_free(struct kfc_export *e)
{
	list_del(&e->node);
	kfc_exports_changed();
	path_put(&e->root);
	kfree(e);
}

static int kfc_nl_unexport(struct sk_buff *skb, struct genl_info *info)
{
	struct kfc_export *e;

	if (!info->attrs[KFC_A_NAME]) {
		NL_SET_ERR_MSG(info->extack, "a name is required");
		return -EINVAL;
	}
	mutex_lock(&kfc_srv.lock);
	e = kfc_export_find(nla_data(info->attrs[KFC_A_NAME]));
	if (e)
		kfc_export_free(e);
	mutex_unlock(&kfc_srv.lock);
	if (!e) {
		NL_SET_ERR_MSG_ATTR(info->extack, info->attrs[KFC_A_NAME],
				    "no export of that name");
		return -ENOENT;
	}
	return 0;
}

/* Under kfc_srv.lock: the server's state and counters. */
static int kfc_nl_fill(struct sk_buff *msg)
{
	struct nlattr *nest;
	int i;

	if (nla_put_u8(msg, KFC_A_RUNNING, !!kfc_srv.dom))
		return -EMSGSIZE;
	if (kfc_srv.dom &&
	    nla_put(msg, KFC_A_ADDR, kfc_srv.addr.ss_family == AF_INET ?
		    sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6),
		    &kfc_srv.addr))
		return -EMSGSIZE;
	nest = nla_nest_start(msg, KFC_A_STATS);
	if (!nest)
		return -EMSGSIZE;
	for (i = 1; i <= KFC_S_MAX; i++)
		if (nla_put_u64_64bit(msg, i, atomic64_read(&kfc_srv.stats[i]),
				      KFC_S_UNSPEC))
			return -EMSGSIZE;
	nla_nest_end(msg, nest);
	return 0;
}

static int kfc_nl_get(struct sk_buff *skb, struct genl_info *info)
{
	struct sk_buff *msg;
	void *hdr;
	int ret;

	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &kfc_genl, 0, KFC_CMD_GET);
	if (!hdr) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	mutex_lock(&kfc_srv.lock);
	ret = kfc_nl_fill(msg);
	mutex_unlock(&kfc_srv.lock);
	if (ret) {
		nlmsg_free(msg);
		return ret;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

/* An export's attributes.  Under kfc_srv.lock; @buf holds PATH_MAX bytes. */
static int kfc_nl_put_export(struct sk_buff *msg, const struct kfc_export *e,
			     char *buf)
{
	char *p = d_path(&e->root, buf, PATH_MAX);

	if (nla_put_string(msg, KFC_A_NAME, e->name) ||
	    nla_put_string(msg, KFC_A_PATH, IS_ERR(p) ? "?" : p) ||
	    (e->nclients &&
	     nla_put(msg, KFC_A_CLIENTS,
		     e->nclients * sizeof(struct kfc_client), e->clients)))
		return -EMSGSIZE;
	return 0;
}

/*
 * The largest message of one export: with less room a dump's first part
 * could hold none of a long one (NLMSG_GOODSIZE is below a PATH_MAX path
 * on 4 KiB pages) and the dump would fail.
 */
static int kfc_nl_export_start(struct netlink_callback *cb)
{
	cb->min_dump_alloc = NLMSG_HDRLEN + GENL_HDRLEN +
			     nla_total_size(KFC_NAME_MAX) +
			     nla_total_size(PATH_MAX) +
			     nla_total_size(KFC_CLIENTS_MAX *
					    sizeof(struct kfc_client));
	return 0;
}

/*
 * EXPORT_GET, a dump: one message per export, from the cb->args[0]th
 * on (the list's order); cb->seq is the list's generation, so a part
 * taken after an export or unexport carries NLM_F_DUMP_INTR.
 */
static int kfc_nl_export_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	long i = 0, from = cb->args[0], put = 0;
	struct kfc_export *e;
	char *buf;
	void *hdr;
	int ret = 0;

	buf = kmalloc(PATH_MAX, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	mutex_lock(&kfc_srv.lock);
	cb->seq = kfc_srv.exports_gen;
	list_for_each_entry(e, &kfc_srv.exports, node) {
		if (i < from) {
			i++;
			continue;
		}
		hdr = genlmsg_put(skb, NETLINK_CB(cb->skb).portid,
				  cb->nlh->nlmsg_seq, &kfc_genl, NLM_F_MULTI,
				  KFC_CMD_EXPORT_GET);
		if (!hdr)
			break;
		genl_dump_check_consistent(cb, hdr);
		if (kfc_nl_put_export(skb, e, buf)) {
			genlmsg_cancel(skb, hdr);
			break;
		}
		genlmsg_end(skb, hdr);
		i++;
		put++;
	}
	/* an export too big for an empty message would end the dump early */
	if (!put && !list_entry_is_head(e, &kfc_srv.exports, node))
		ret = -EMSGSIZE;
	mutex_unlock(&kfc_srv.lock);
	kfree(buf);
	cb->args[0] = i;
	return ret ?: skb->len;
}

static const struct genl_small_ops kfc_genl_ops[] = {
	{ .cmd = KFC_CMD_START, .doit = kfc_nl_start,
	  .flags = GENL_ADMIN_PERM },
	{ .cmd = KFC_CMD_STOP, .doit = kfc_nl_stop, .flags = GENL_ADMIN_PERM },
	{ .cmd = KFC_CMD_EXPORT, .doit = kfc_nl_export,
	  .flags = GENL_ADMIN_PERM },
	{ .cmd = KFC_CMD_UNEXPORT, .doit = kfc_nl_unexport,
	  .flags = GENL_ADMIN_PERM },
	{ .cmd = KFC_CMD_GET, .doit = kfc_nl_get, .flags = GENL_ADMIN_PERM },
};

/* EXPORT_GET's dump needs .start (cb->min_dump_alloc): a full genl_ops. */
static const struct genl_ops kfc_genl_dump_ops[] = {
	{ .cmd = KFC_CMD_EXPORT_GET, .start = kfc_nl_export_start,
	  .dumpit = kfc_nl_export_dump, .flags = GENL_ADMIN_PERM },
};

static struct genl_family kfc_genl = {
	.name = KFC_GENL_NAME,
	.version = KFC_GENL_VERSION,
	.maxattr = KFC_A_MAX,
	.policy = kfc_policy,
	.parallel_ops = true,	/* kfc_srv.lock serialises */
	.small_ops = kfc_genl_ops,
	.n_small_ops = ARRAY_SIZE(kfc_genl_ops),
	.ops = kfc_genl_dump_ops,
	.n_ops = ARRAY_SIZE(kfc_genl_dump_ops),
	.resv_start_op = 0,	/* a new family: every command strict */
	.module = THIS_MODULE,
};

/*
 * The credentials every request runs with: nobody, no capabilities, so a
 * client reads what any unprivileged local user may read.  Handlers run
 * on kernel workers whose own credentials are root's.
 */
static const struct cred *kfc_srv_make_cred(void)
{
	struct cred *cred = prepare_kernel_cred(&init_task);

	if (!cred)
		return NULL;
	cred->uid = KUIDT_INIT(KFC_SRV_ANON_ID);
	cred->euid = cred->uid;
	cred->suid = cred->uid;
	cred->fsuid = cred->uid;
	cred->gid = KGIDT_INIT(KFC_SRV_ANON_ID);
	cred->egid = cred->gid;
	cred->sgid = cred->gid;
	cred->fsgid = cred->gid;
	cap_clear(cred->cap_inheritable);
	cap_clear(cred->cap_permitted);
	cap_clear(cred->cap_effective);
	cap_clear(cred->cap_bset);
	cap_clear(cred->cap_ambient);
	return cred;
}

static int __init kfc_srv_init(void)
{
	int ret;

	kfc_srv.cred = kfc_srv_make_cred();
	if (!kfc_srv.cred)
		return -ENOMEM;
	ret = genl_register_family(&kfc_genl);
	if (ret)
		put_cred(kfc_srv.cred);
	return ret;
}

static void __exit kfc_srv_exit(void)
{
	struct kfc_export *e, *tmp;
	struct kverbs_listener *l;
	struct kverbs_domain *dom;

	genl_unregister_family(&kfc_genl);
	mutex_lock(&kfc_srv.lock);
	dom = kfc_srv_detach(&l);
	mutex_unlock(&kfc_srv.lock);
	kfc_srv_destroy(dom, l);
	list_for_each_entry_safe(e, tmp, &kfc_srv.exports, node)
		kfc_export_free(e);
	put_cred(kfc_srv.cred);
}

module_init(kfc_srv_init);
module_exit(kfc_srv_exit);
MODULE_DESCRIPTION("kfcache server: directories served read-only over RDMA");
MODULE_LICENSE("GPL");
/* kfcachectl loads it: the kernel asks modprobe for an unknown family */
MODULE_ALIAS_GENL_FAMILY(KFC_GENL_NAME);
MODULE_VERSION(KVERBS_VERSION);
KVERBS_IMPORT_NS();
