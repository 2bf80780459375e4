// SPDX-License-Identifier: GPL-2.0-only
/*
 * kdsm counters: per-CPU, summed when read, by debugfs
 * (kdsm/node<N>/stats) and by KDSM_CMD_GET.
 */
#include <linux/debugfs.h>
#include <linux/log2.h>
#include <linux/seq_file.h>

#include "kdsm-pri.h"

static const char *const kdsm_stat_names[KDSM_STAT_FAULT_HIST] = {
	[KDSM_STAT_READ_FAULTS] = "read_faults",
	[KDSM_STAT_WRITE_FAULTS] = "write_faults",
	[KDSM_STAT_UPGRADES] = "upgrades",
	[KDSM_STAT_MSGS_TX] = "msgs_tx",
	[KDSM_STAT_MSGS_RX] = "msgs_rx",
	[KDSM_STAT_INVALIDATIONS] = "invalidations",
	[KDSM_STAT_RDMA_WRITE_BYTES] = "rdma_write_bytes",
	[KDSM_STAT_RDMA_READ_BYTES] = "rdma_read_bytes",
	[KDSM_STAT_EV_SOFTIRQ] = "events_softirq",
	[KDSM_STAT_EV_DEFER_ZAP] = "events_deferred_zap",
	[KDSM_STAT_EV_DEFER_NOBUF] = "events_deferred_nobuf",
	[KDSM_STAT_EV_DEFER_ORDER] = "events_deferred_order",
	[KDSM_STAT_EV_DEFER_NOMEM] = "events_deferred_nomem",
	[KDSM_STAT_SOFTIRQ_NS] = "softirq_ns",
	[KDSM_STAT_DEFER_NS] = "deferred_ns",
	[KDSM_STAT_MALFORMED] = "malformed",
	[KDSM_STAT_LOCKS] = "locks",
	[KDSM_STAT_BARRIERS] = "barriers",
	[KDSM_STAT_FAULT_NS] = "fault_ns",
};

/* The counters after the per-type ones */
static const char *const kdsm_stat_names2[] = {
	[KDSM_STAT_ATOMIC_LOCKS - KDSM_STAT_ATOMIC_LOCKS] = "atomic_locks",
	[KDSM_STAT_ATOMIC_OPS - KDSM_STAT_ATOMIC_LOCKS] = "atomic_ops",
	[KDSM_STAT_CAS_RETRIES - KDSM_STAT_ATOMIC_LOCKS] = "cas_retries",
	[KDSM_STAT_DEFER_WAKES - KDSM_STAT_ATOMIC_LOCKS] = "defer_wakes",
	[KDSM_STAT_DEFER_WAKE_NS - KDSM_STAT_ATOMIC_LOCKS] = "defer_wake_ns",
	[KDSM_STAT_EV_DEFER_MODE - KDSM_STAT_ATOMIC_LOCKS] = "events_deferred_mode",
	[KDSM_STAT_LOCKS_OWNER_DEAD - KDSM_STAT_ATOMIC_LOCKS] = "locks_owner_dead",
};

static_assert(ARRAY_SIZE(kdsm_stat_names2) ==
	      __KDSM_STAT_MAX - KDSM_STAT_ATOMIC_LOCKS);

/* Wire types, for the per-type message counters */
static const char *const kdsm_type_names[32] = {
	[KDSM_READ_REQ] = "read_req", [KDSM_WRITE_REQ] = "write_req",
	[KDSM_FWD_READ] = "fwd_read", [KDSM_FWD_WRITE] = "fwd_write",
	[KDSM_INV] = "inv", [KDSM_INV_ACK] = "inv_ack",
	[KDSM_READ_REPLY] = "read_reply", [KDSM_WRITE_REPLY] = "write_reply",
	[KDSM_DONE] = "done", [KDSM_HELLO] = "hello", [KDSM_KEY] = "key",
	[KDSM_READY] = "ready", [KDSM_PING] = "ping",
	[KDSM_REFUSE] = "refuse", [KDSM_ABORT] = "abort",
	[KDSM_LOCK_REQ] = "lock_req", [KDSM_LOCK_GRANT] = "lock_grant",
	[KDSM_UNLOCK] = "unlock", [KDSM_BAR_ENTER] = "bar_enter",
	[KDSM_BAR_GO] = "bar_go", [KDSM_QL_NEXT] = "ql_next",
	[KDSM_QL_PASS] = "ql_pass", [KDSM_QL_CAS] = "ql_cas",
	[KDSM_QL_CAS_DONE] = "ql_cas_done",
};

/**
 * kdsm_stats_sum - every counter, summed over the CPUs
 * @kd: cluster
 * @out: __KDSM_STAT_MAX values
 *
 * Context: any.
 */
void kdsm_stats_sum(struct kdsm_cluster *kd, u64 *out)
{
	int cpu, i;

	memset(out, 0, sizeof(u64) * __KDSM_STAT_MAX);
	for_each_possible_cpu(cpu) {
		struct kdsm_stats *s = per_cpu_ptr(kd->stats, cpu);

		for (i = 0; i < __KDSM_STAT_MAX; i++)
			out[i] += READ_ONCE(s->v[i]);
	}
}

/**
 * kdsm_count_fault_done - a fault was answered after @ns
 * @kd: cluster
 * @ns: fault to grant
 *
 * Context: any.
 */
void kdsm_count_fault_done(struct kdsm_cluster *kd, u64 ns)
{
	u64 us = div_u64(ns, NSEC_PER_USEC);
	unsigned int b = us ? ilog2(us) : 0;

	kdsm_count(kd, KDSM_STAT_FAULT_NS, ns);
	kdsm_count(kd, KDSM_STAT_FAULT_HIST +
		   min_t(unsigned int, b, KDSM_HIST_BUCKETS - 1), 1);
}

/**
 * kdsm_count_msg - a message of wire type @type left (@tx) or arrived
 * @kd: cluster
 * @type: its type; per-type counters count sent messages
 * @tx: sent
 *
 * Context: any.
 */
void kdsm_count_msg(struct kdsm_cluster *kd, u8 type, bool tx)
{
	kdsm_count(kd, tx ? KDSM_STAT_MSGS_TX : KDSM_STAT_MSGS_RX, 1);
	if (tx && type < 32)
		kdsm_count(kd, KDSM_STAT_MSG_TYPE + type, 1);
}

static int kdsm_stats_show(struct seq_file *m, void *unused)
{
	struct kdsm_cluster *kd = m->private;
	u64 *v;
	int i;

	v = kcalloc(__KDSM_STAT_MAX, sizeof(*v), GFP_KERNEL);
	if (!v)
		return -ENOMEM;
	kdsm_stats_sum(kd, v);
	for (i = 1; i < KDSM_STAT_FAULT_HIST; i++)
		seq_printf(m, "%s %llu\n", kdsm_stat_names[i], v[i]);
	for (i = KDSM_STAT_ATOMIC_LOCKS; i < __KDSM_STAT_MAX; i++)
		seq_printf(m, "%s %llu\n",
			   kdsm_stat_names2[i - KDSM_STAT_ATOMIC_LOCKS], v[i]);
	for (i = 0; i < KDSM_HIST_BUCKETS; i++)
		seq_printf(m, "fault_us_%u %llu\n", 1U << i,
			   v[KDSM_STAT_FAULT_HIST + i]);
	for (i = 0; i < 32; i++)
		if (kdsm_type_names[i])
			seq_printf(m, "sent_%s %llu\n", kdsm_type_names[i],
				   v[KDSM_STAT_MSG_TYPE + i]);
	kfree(v);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(kdsm_stats);

/**
 * kdsm_debugfs_add - kdsm/node<N>/stats
 * @kd: cluster
 *
 * Context: process.
 * Return: 0 (debugfs failures are not errors).
 */
int kdsm_debugfs_add(struct kdsm_cluster *kd)
{
	char name[16];

	snprintf(name, sizeof(name), "node%u", kd->geo.self);
	kd->debugfs = debugfs_create_dir(name, kdsm_debugfs_root);
	debugfs_create_file("stats", 0400, kd->debugfs, kd,
			    &kdsm_stats_fops);
	return 0;
}
