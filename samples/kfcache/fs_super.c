// SPDX-License-Identifier: GPL-2.0-only
/*
 * kfcache: a read-only file system served by kfcache_srv over RDMA.
 *
 *   mount -t kfcache <address>:/<export> <dir> [-o port=N,timeout=MS]
 *
 * <address> is an IPv4 address or a bracketed IPv6 one.  Each mount has
 * its own kverbs domain and one endpoint to the server; when that
 * connection goes, requests fail with -EIO until the mount is unmounted
 * (no reconnection).  See Documentation/kfcache.rst.
 */
#include <linux/backing-dev.h>
#include <linux/debugfs.h>
#include <linux/fs_context.h>
#include <linux/fs_parser.h>
#include <linux/inet.h>
#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/statfs.h>

#include "fs.h"

/*
 * A request's timeout must be longer than the transport's own detection
 * of a dead peer (RC retries, about 4 s with kverbs' defaults): a server
 * that is gone is then seen as a disconnect, which fails every request
 * at once, and a timeout means a live server that does not answer.
 */
#define KFC_TIMEOUT_MIN		10000

static unsigned int kfc_connect_ms = 10000;
module_param_named(connect_ms, kfc_connect_ms, uint, 0644);
MODULE_PARM_DESC(connect_ms, "how long a mount waits for the server (ms)");

static struct kmem_cache *kfc_inode_cachep;
static struct dentry *kfc_debugfs_root;

static int kfc_stats_show(struct seq_file *m, void *v)
{
	struct kfc_sb *s = m->private;

	seq_printf(m, "reads %lld\npages %lld\nns_register %lld\nns_answer %lld\nns_revoke %lld\nmalformed %lld\nlate %lld\nforget_dropped %lld\ndead %d\n",
		   atomic64_read(&s->reads), atomic64_read(&s->read_pages),
		   atomic64_read(&s->ns_register),
		   atomic64_read(&s->ns_answer), atomic64_read(&s->ns_revoke),
		   atomic64_read(&s->malformed), atomic64_read(&s->late),
		   atomic64_read(&s->forget_dropped), READ_ONCE(s->dead));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(kfc_stats);

struct kfc_fs_params {
	struct sockaddr_storage addr;
	char export[KFC_NAME_MAX];
	u16 port;
	unsigned int timeout_ms;
	unsigned int inflight;
	bool server_setid;
	bool server_devices;
	bool insecure;
	char key[KFC_KEY_DESC_MAX + 1];
};

enum {
	KFC_OPT_PORT, KFC_OPT_TIMEOUT, KFC_OPT_INFLIGHT, KFC_OPT_SETID,
	KFC_OPT_DEVICES, KFC_OPT_KEY, KFC_OPT_INSECURE,
};

/*
 * The server is not authenticated, so by default nothing it says widens
 * what a local account may do: set-user-ID and set-group-ID bits are
 * dropped and device nodes do not open (SB_I_NODEV), as nosuid,nodev do
 * for NFS and FUSE.  "server_setid" and "server_devices" keep them, for a
 * server the operator trusts.
 *
 * Client and server authenticate each other by default, with the logon
 * key KFC_DEFAULT_KEY of the mounting task's keyrings; "key=" names
 * another, "insecure" mounts without (from a server started --insecure).
 */
static const struct fs_parameter_spec kfc_fs_params_spec[] = {
	fsparam_u32("port", KFC_OPT_PORT),
	fsparam_u32("timeout", KFC_OPT_TIMEOUT),
	fsparam_u32("inflight", KFC_OPT_INFLIGHT),
	fsparam_flag("server_setid", KFC_OPT_SETID),
	fsparam_flag("server_devices", KFC_OPT_DEVICES),
	fsparam_string("key", KFC_OPT_KEY),
	fsparam_flag("insecure", KFC_OPT_INSECURE),
	{}
};

/*
 * Pages of READs in flight per mount (fs_read.c): 64 pages, 256 KB, two
 * READs of the largest size, one landing while the next is registered.
 * Bursts of 512 KB already overflow the testbed's emulated link.
 */
#define KFC_INFLIGHT_DEFAULT	(2 * KFC_READ_MAX_PAGES)

static int kfc_parse_param(struct fs_context *fc, struct fs_parameter *param)
{
	struct kfc_fs_params *p = fc->fs_private;
	struct fs_parse_result result;
	int opt;

	opt = fs_parse(fc, kfc_fs_params_spec, param, &result);
	if (opt < 0)
		return opt;
	switch (opt) {
	case KFC_OPT_PORT:
		if (!result.uint_32 || result.uint_32 > 65535)
			return invalfc(fc, "port must be 1..65535");
		p->port = result.uint_32;
		break;
	case KFC_OPT_TIMEOUT:
		if (result.uint_32 < KFC_TIMEOUT_MIN || result.uint_32 > 600000)
			return invalfc(fc, "timeout must be %u..600000 ms",
				       KFC_TIMEOUT_MIN);
		p->timeout_ms = result.uint_32;
		break;
	case KFC_OPT_INFLIGHT:
		if (!result.uint_32 || result.uint_32 > 8 * KFC_READ_MAX_PAGES)
			return invalfc(fc, "inflight must be 1..%d pages",
				       8 * KFC_READ_MAX_PAGES);
		p->inflight = result.uint_32;
		break;
	case KFC_OPT_SETID:
		p->server_setid = true;
		break;
	case KFC_OPT_DEVICES:
		p->server_devices = true;
		break;
	case KFC_OPT_KEY:
		if (!*param->string ||
		    strscpy(p->key, param->string, sizeof(p->key)) < 0)
			return invalfc(fc, "key must be 1..%d characters",
				       KFC_KEY_DESC_MAX);
		break;
	case KFC_OPT_INSECURE:
		p->insecure = true;
		break;
	}
	if (p->insecure && *p->key)
		return invalfc(fc, "key and insecure exclude each other");
	return 0;
}

/* "<ipv4>:/<export>" or "[<ipv6>]:/<export>" */
static int kfc_parse_source(struct fs_context *fc, struct kfc_fs_params *p)
{
	const char *src = fc->source, *sep, *host, *name, *end;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&p->addr;
	struct sockaddr_in *in = (struct sockaddr_in *)&p->addr;
	size_t hlen;

	if (!src)
		return invalfc(fc, "a source <address>:/<export> is required");
	sep = strstr(src, ":/");
	if (!sep)
		return invalfc(fc, "the source must be <address>:/<export>");
	host = src;
	hlen = sep - src;
	name = sep + 2;
	if (!*name || strchr(name, '/') || strlen(name) >= KFC_NAME_MAX)
		return invalfc(fc, "the export must be one name of under %d bytes",
			       KFC_NAME_MAX);
	strscpy(p->export, name, sizeof(p->export));
	memset(&p->addr, 0, sizeof(p->addr));
	if (hlen > 2 && host[0] == '[' && host[hlen - 1] == ']') {
		if (!in6_pton(host + 1, hlen - 2, in6->sin6_addr.s6_addr, -1,
			      NULL))
			return invalfc(fc, "bad IPv6 address");
		in6->sin6_family = AF_INET6;
		return 0;
	}
	if (in4_pton(host, hlen, (u8 *)&in->sin_addr.s_addr, -1, &end) != 1 ||
	    end != sep)
		return invalfc(fc, "bad IPv4 address");
	in->sin_family = AF_INET;
	return 0;
}

static struct inode *kfc_alloc_inode(struct super_block *sb)
{
	struct kfc_inode *ki = alloc_inode_sb(sb, kfc_inode_cachep,
					      GFP_KERNEL);

	if (!ki)
		return NULL;
	ki->handle = 0;
	ki->nlookup = 0;
	ki->stale = false;
	return &ki->vfs;
}

static void kfc_free_inode(struct inode *inode)
{
	kmem_cache_free(kfc_inode_cachep, KFC_I(inode));
}

static void kfc_evict_inode(struct inode *inode)
{
	struct kfc_inode *ki = KFC_I(inode);

	truncate_inode_pages_final(&inode->i_data);
	clear_inode(inode);
	kfc_forget(KFC_SB(inode->i_sb), ki->handle, ki->nlookup);
}

static int kfc_show_options(struct seq_file *m, struct dentry *root)
{
	struct kfc_sb *s = KFC_SB(root->d_sb);

	seq_printf(m, ",port=%u,timeout=%u,inflight=%u",
		   ntohs(((struct sockaddr_in *)&s->addr)->sin_port),
		   s->timeout_ms, s->inflight_max);
	if (s->server_setid)
		seq_puts(m, ",server_setid");
	if (!(root->d_sb->s_iflags & SB_I_NODEV))
		seq_puts(m, ",server_devices");
	if (*s->key)
		seq_show_option(m, "key", s->key);
	else
		seq_puts(m, ",insecure");
	return 0;
}

static const struct super_operations kfc_sops = {
	.alloc_inode = kfc_alloc_inode,
	.free_inode = kfc_free_inode,
	.evict_inode = kfc_evict_inode,
	.statfs = simple_statfs,
	.show_options = kfc_show_options,
};

/* The mount's domain and endpoint; the export's root. */
static int kfc_connect(struct super_block *sb, struct kfc_sb *s,
		       struct kfc_attr_reply *r)
{
	struct kverbs_domain_attr attr = {
		.ops = &kfc_fs_dom_ops,
		.msg = &kfc_fs_msg_ops,
		.priv = s,
		.name = "kfcache",
		.node_id = 2,
		.depth = KFC_DEPTH,
		.max_msg = KFC_MAX_MSG,
		.max_eps = 1,
		.auth_key = *s->key ? s->key : NULL,
	};
	struct kverbs_ep *ep;

	s->dom = kverbs_domain_create(&attr);
	if (IS_ERR(s->dom)) {
		int ret = PTR_ERR(s->dom);

		s->dom = NULL;
		return ret;
	}
	ep = kverbs_ep_connect(s->dom, (struct sockaddr *)&s->addr,
			       clamp(READ_ONCE(kfc_connect_ms), 100U, 600000U),
			       s);
	if (IS_ERR(ep))
		return PTR_ERR(ep);
	s->ep = ep;
	/* every request and reply must fit both ways */
	if (kverbs_ep_max_send(ep) < KFC_MAX_MSG)
		return -EPROTO;
	return kfc_name_call(s, KFC_MOUNT, 0, s->export, strlen(s->export),
			     r);
}

static void kfc_disconnect(struct kfc_sb *s)
{
	WRITE_ONCE(s->closing, true);
	if (s->ep)
		kverbs_ep_close(s->ep);
	if (s->dom)
		kverbs_domain_destroy(s->dom);
	s->ep = NULL;
	s->dom = NULL;
}

static int kfc_fill_super(struct super_block *sb, struct fs_context *fc)
{
	struct kfc_fs_params *p = fc->fs_private;
	struct kfc_attr_reply *r;
	struct inode *root;
	struct kfc_sb *s;
	int ret;

	s = kzalloc(sizeof(*s), GFP_KERNEL);
	r = kmalloc(sizeof(*r), GFP_KERNEL);
	if (!s || !r) {
		kfree(s);
		kfree(r);
		return -ENOMEM;
	}
	s->addr = p->addr;
	((struct sockaddr_in *)&s->addr)->sin_port = htons(p->port);
	strscpy(s->export, p->export, sizeof(s->export));
	if (!p->insecure)
		strscpy(s->key, *p->key ? p->key : KFC_DEFAULT_KEY,
			sizeof(s->key));
	s->timeout_ms = p->timeout_ms;
	s->inflight_max = p->inflight;
	s->server_setid = p->server_setid;
	init_waitqueue_head(&s->inflight_wait);
	spin_lock_init(&s->forget_lock);
	INIT_LIST_HEAD(&s->forgets);
	INIT_DELAYED_WORK(&s->forget_work, kfc_forget_work);
	xa_init_flags(&s->calls, XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_BH);
	sb->s_fs_info = s;
	sb->s_flags |= SB_RDONLY | SB_NOSEC;
	if (!p->server_devices)
		sb->s_iflags |= SB_I_NODEV;
	sb->s_magic = KFC_MAGIC;
	sb->s_op = &kfc_sops;
	sb->s_d_op = &kfc_dentry_ops;
	sb->s_maxbytes = MAX_LFS_FILESIZE;
	sb->s_blocksize = PAGE_SIZE;
	sb->s_blocksize_bits = PAGE_SHIFT;
	sb->s_time_gran = 1;

	ret = super_setup_bdi(sb);
	if (ret)
		goto out;
	/*
	 * A readahead window of four READs of the largest size: with the
	 * default budget (inflight) two in flight while two are prepared.
	 */
	sb->s_bdi->ra_pages = 4 * KFC_READ_MAX_PAGES;
	sb->s_bdi->io_pages = KFC_READ_MAX_PAGES;

	if (kfc_debugfs_root) {
		char name[32];

		snprintf(name, sizeof(name), "%u:%u", MAJOR(sb->s_dev),
			 MINOR(sb->s_dev));
		s->debugfs = debugfs_create_dir(name, kfc_debugfs_root);
		debugfs_create_file("stats", 0400, s->debugfs, s,
				    &kfc_stats_fops);
	}
	ret = kfc_connect(sb, s, r);
	if (ret) {
		if (ret == -ENOENT)
			errorfc(fc, "the server has no export named %s",
				s->export);
		else if (*s->key && kverbs_key_error(ret) && !s->dom)
			errorfc(fc,
				"no usable logon key %s in the mounting task's keyrings (-o key= names another, -o insecure mounts without)",
				s->key);
		else if (ret == -EACCES && s->ep)	/* MOUNT's answer */
			errorfc(fc, "the server does not let this host mount %s",
				s->export);
		else if (ret == -EACCES)
			errorfc(fc, "%s",
				"authentication with the server failed (another key, or none on one side)");
		else
			errorfc(fc, "cannot reach the server's export (%d)",
				ret);
		goto out;
	}
	if (!S_ISDIR(be32_to_cpu(r->attr.mode))) {
		ret = -ENOTDIR;
		goto out;
	}
	root = kfc_iget(sb, &r->attr);
	if (IS_ERR(root)) {
		ret = PTR_ERR(root);
		goto out;
	}
	sb->s_root = d_make_root(root);
	ret = sb->s_root ? 0 : -ENOMEM;
out:
	kfree(r);
	return ret;
}

static int kfc_get_tree(struct fs_context *fc)
{
	int ret = kfc_parse_source(fc, fc->fs_private);

	return ret ?: get_tree_nodev(fc, kfc_fill_super);
}

static void kfc_free_fc(struct fs_context *fc)
{
	kfree(fc->fs_private);
}

/* Options are fixed at mount; read-only stays read-only. */
static int kfc_reconfigure(struct fs_context *fc)
{
	sync_filesystem(fc->root->d_sb);
	fc->sb_flags |= SB_RDONLY;
	return 0;
}

static const struct fs_context_operations kfc_context_ops = {
	.parse_param = kfc_parse_param,
	.get_tree = kfc_get_tree,
	.reconfigure = kfc_reconfigure,
	.free = kfc_free_fc,
};

static int kfc_init_fs_context(struct fs_context *fc)
{
	struct kfc_fs_params *p = kzalloc(sizeof(*p), GFP_KERNEL);

	if (!p)
		return -ENOMEM;
	p->port = KFC_DEFAULT_PORT;
	p->timeout_ms = 30000;
	p->inflight = KFC_INFLIGHT_DEFAULT;
	fc->fs_private = p;
	fc->ops = &kfc_context_ops;
	return 0;
}

/*
 * Inodes go first (their FORGETs are skipped: the server drops the
 * connection's handles with it), then the connection, then the state.
 */
static void kfc_kill_sb(struct super_block *sb)
{
	struct kfc_sb *s = KFC_SB(sb);

	if (s)
		WRITE_ONCE(s->closing, true);
	kill_anon_super(sb);
	if (!s)
		return;
	debugfs_remove(s->debugfs);
	kfc_forget_drain(s);
	kfc_disconnect(s);
	xa_destroy(&s->calls);
	kfree(s);
}

static struct file_system_type kfc_fs_type = {
	.owner = THIS_MODULE,
	.name = "kfcache",
	.init_fs_context = kfc_init_fs_context,
	.parameters = kfc_fs_params_spec,
	.kill_sb = kfc_kill_sb,
};
MODULE_ALIAS_FS("kfcache");

static void kfc_inode_init_once(void *p)
{
	struct kfc_inode *ki = p;

	inode_init_once(&ki->vfs);
}

static int __init kfc_fs_init(void)
{
	int ret;

	kfc_inode_cachep = kmem_cache_create("kfcache_inode",
					     sizeof(struct kfc_inode), 0,
					     SLAB_RECLAIM_ACCOUNT |
					     SLAB_ACCOUNT, kfc_inode_init_once);
	if (!kfc_inode_cachep)
		return -ENOMEM;
	kfc_debugfs_root = debugfs_create_dir("kfcache", NULL);
	ret = register_filesystem(&kfc_fs_type);
	if (ret) {
		debugfs_remove(kfc_debugfs_root);
		kmem_cache_destroy(kfc_inode_cachep);
	}
	return ret;
}

static void __exit kfc_fs_exit(void)
{
	unregister_filesystem(&kfc_fs_type);
	debugfs_remove(kfc_debugfs_root);
	/* free_inode runs after an RCU grace period */
	rcu_barrier();
	kmem_cache_destroy(kfc_inode_cachep);
}

module_init(kfc_fs_init);
module_exit(kfc_fs_exit);
MODULE_DESCRIPTION("kfcache: a read-only file system served over RDMA");
MODULE_LICENSE("GPL");
MODULE_VERSION(KVERBS_VERSION);
KVERBS_IMPORT_NS();
