/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * kdsm: the sequential-consistency DSM sample (samples/kdsm/).
 *
 * Control is the generic netlink family "kdsm": KDSM_CMD_CREATE makes
 * this node a member of a cluster, KDSM_CMD_GET reports its state and
 * counters, KDSM_CMD_DELETE leaves; each needs CAP_NET_ADMIN.  A
 * process attaches through /dev/kdsm: KDSM_IOC_ATTACH returns a
 * descriptor of the shared region to mmap() (MAP_SHARED, offset 0, the
 * whole region), and the locks and barriers are ioctls on that
 * descriptor.  See Documentation/kdsm.rst.
 */
#ifndef _UAPI_KVERBS_KDSM_H
#define _UAPI_KVERBS_KDSM_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define KDSM_GENL_NAME		"kdsm"
#define KDSM_GENL_VERSION	1
/* The wire protocol; peers running another one are refused. */
#define KDSM_PROTO_VERSION	3

#define KDSM_MAX_NODES		8
#define KDSM_DEFAULT_PORT	18600
#define KDSM_MAX_LOCKS		1024

enum kdsm_cmd {
	KDSM_CMD_UNSPEC,
	KDSM_CMD_CREATE,	/* join a cluster; CAP_NET_ADMIN, as all */
	KDSM_CMD_GET,		/* state and counters */
	KDSM_CMD_DELETE,	/* leave; CAP_NET_ADMIN */
	/*
	 * Notification to KDSM_MCGRP_STATE when this node's state changes
	 * (formed, failed, left): STATE, and NODE and ERROR as GET has
	 * them.  Changes close together may give one notification of the
	 * latest state.  Joining the group needs CAP_NET_ADMIN.
	 */
	KDSM_CMD_STATE_NTF,
	__KDSM_CMD_MAX,
};

#define KDSM_CMD_MAX	(__KDSM_CMD_MAX - 1)

#define KDSM_MCGRP_STATE	"state"

/* Cluster placement of pages on their homes */
enum kdsm_placement {
	KDSM_PLACE_CYCLIC,	/* page p at node p % N + 1 */
	KDSM_PLACE_BLOCK,	/* page p at node p * N / npages + 1 */
};

/* KDSM_A_OPTIONS */
#define KDSM_OPT_FETCH_READ	0x1	/* fetch READ copies by RDMA read */
/*
 * Test only: a sharer acknowledges the invalidation of an odd-numbered
 * page but keeps reading its stale copy.  The litmus tests show that
 * they catch it; never a mode for applications.
 */
#define KDSM_OPT_WEAK		0x2
/*
 * Where deferred events run (Documentation/kdsm-design.rst, "Deferral
 * target"): by default the kdsm workqueue (WQ_HIGHPRI, like a kverbs
 * domain's); NORMAL kdsm's normal-priority workqueue; FIFO a
 * kthread_worker of the cluster's own at SCHED_FIFO.  At most one.
 */
#define KDSM_OPT_DEFER_NORMAL	0x4
#define KDSM_OPT_DEFER_FIFO	0x8
/*
 * Modes for comparison with the paper (Documentation/kdsm-modes.rst):
 * TASK handles every peer message in process context (the paper's "task
 * queue"); SIM is TASK plus a 1 us delay before each action that would
 * need a system call at user level (the paper's "user-level
 * simulation").  Neither: softirq first (mode K).
 */
#define KDSM_OPT_MODE_TASK	0x10
#define KDSM_OPT_MODE_SIM	0x20
#define KDSM_OPT_ALL		0x3f

enum kdsm_state {
	KDSM_STATE_NONE,	/* no cluster */
	KDSM_STATE_FORMING,	/* connecting the mesh, exchanging HELLO */
	KDSM_STATE_READY,
	KDSM_STATE_FAILED,	/* a peer refused, died or left: see ERROR */
};

enum kdsm_attr {
	KDSM_A_UNSPEC,
	KDSM_A_NODE,		/* u8: this node's id, 1..nnodes */
	KDSM_A_NPAGES,		/* u32: region size in pages */
	KDSM_A_PLACEMENT,	/* u8: enum kdsm_placement */
	KDSM_A_OPTIONS,		/* u32: KDSM_OPT_* */
	KDSM_A_PORT,		/* u16: rdma_cm port, every node */
	KDSM_A_PEERS,		/* nest of KDSM_A_PEER, one per node */
	KDSM_A_PEER,		/* nest: KDSM_A_PEER_NODE, KDSM_A_PEER_ADDR */
	KDSM_A_PEER_NODE,	/* u8 */
	KDSM_A_PEER_ADDR,	/* binary: struct sockaddr_in or sockaddr_in6 */
	KDSM_A_STATE,		/* u8: enum kdsm_state (GET) */
	KDSM_A_ERROR,		/* string: why FAILED (GET) */
	KDSM_A_NNODES,		/* u8 (GET) */
	KDSM_A_STATS,		/* nest of u64, attribute type = enum kdsm_stat */
	KDSM_A_JOIN_MS,		/* u32: mesh formation deadline (CREATE) */
	KDSM_A_PAD,
	/* string: a logon key every member proves (CREATE; security.rst) */
	KDSM_A_KEY,
	__KDSM_A_MAX,
};

/* Longest KDSM_A_KEY, the key's description, NUL excluded */
#define KDSM_KEY_DESC_MAX	255
/* The key description the tools use unless told --key or --insecure */
#define KDSM_DEFAULT_KEY	"kverbs:kdsm"

#define KDSM_A_MAX	(__KDSM_A_MAX - 1)

/*
 * Counters of this node.  Messages are counted by wire type (both
 * directions, self-addressed ones excluded).  An asynchronous event is a
 * protocol message this node handles; it completes in softirq or is
 * deferred to process context for one of three reasons.
 */
enum kdsm_stat {
	KDSM_STAT_UNSPEC,
	KDSM_STAT_READ_FAULTS,
	KDSM_STAT_WRITE_FAULTS,		/* upgrades included */
	KDSM_STAT_UPGRADES,		/* write faults on a READ copy */
	KDSM_STAT_MSGS_TX,
	KDSM_STAT_MSGS_RX,
	KDSM_STAT_INVALIDATIONS,	/* INV handled here */
	KDSM_STAT_RDMA_WRITE_BYTES,
	KDSM_STAT_RDMA_READ_BYTES,
	KDSM_STAT_EV_SOFTIRQ,		/* completed in the handler */
	KDSM_STAT_EV_DEFER_ZAP,		/* a revoke of a mapped page */
	KDSM_STAT_EV_DEFER_NOBUF,	/* no send buffer or RDMA slot */
	KDSM_STAT_EV_DEFER_ORDER,	/* behind a deferred event of its page */
	KDSM_STAT_EV_DEFER_NOMEM,	/* no memory in softirq: kvmsg defers */
	KDSM_STAT_SOFTIRQ_NS,		/* summed handler time, completed events */
	KDSM_STAT_DEFER_NS,		/* summed arrival-to-completion, deferred */
	KDSM_STAT_MALFORMED,		/* peer messages dropped, ep closed */
	KDSM_STAT_LOCKS,		/* kernel-lock acquisitions here */
	KDSM_STAT_BARRIERS,
	KDSM_STAT_FAULT_NS,		/* summed fault latency */
	KDSM_STAT_FAULT_HIST,		/* 16 more: faults by latency, log2 us */
	KDSM_STAT_MSG_TYPE = KDSM_STAT_FAULT_HIST + 16,	/* 32 more: by type */
	KDSM_STAT_ATOMIC_LOCKS = KDSM_STAT_MSG_TYPE + 32, /* queue-lock acquisitions */
	KDSM_STAT_ATOMIC_OPS,		/* RDMA atomics issued, as helper too */
	KDSM_STAT_CAS_RETRIES,		/* a CAS found another tail: again */
	KDSM_STAT_DEFER_WAKES,		/* the deferral worker started */
	KDSM_STAT_DEFER_WAKE_NS,	/* summed queueing-to-start of it */
	KDSM_STAT_EV_DEFER_MODE,	/* deferred: mode T or S */
	KDSM_STAT_LOCKS_OWNER_DEAD,	/* kernel locks released: holder died */
	__KDSM_STAT_MAX,
};

#define KDSM_STAT_MAX	(__KDSM_STAT_MAX - 1)

#define KDSM_HIST_BUCKETS	16	/* [2^i, 2^(i+1)) us; last: beyond */
/*
 * KDSM_STAT_MSG_TYPE + t counts messages of wire type t sent: types below
 * KDSM_WIRE_CTL_FIRST are the page protocol's, the rest setup, heartbeat,
 * locks and barriers.
 */
#define KDSM_WIRE_CTL_FIRST	16

/**
 * struct kdsm_info - KDSM_IOC_INFO
 * @node: this node's id
 * @nnodes: cluster size
 * @state: enum kdsm_state
 * @placement: enum kdsm_placement
 * @options: KDSM_OPT_*
 * @npages: region pages
 * @page_size: bytes per page
 */
struct kdsm_info {
	__u8 node;
	__u8 nnodes;
	__u8 state;
	__u8 placement;
	__u32 options;
	__u32 npages;
	__u32 page_size;
};

/**
 * struct kdsm_lock_arg - KDSM_IOC_LOCK and KDSM_IOC_UNLOCK
 * @id: lock, 0..KDSM_MAX_LOCKS - 1
 * @flags: KDSM_LOCK_*; 0 is the kernel lock (messages to the lock's
 *	manager).  A node uses an id as one kind at a time; across nodes
 *	the two kinds of one id are separate locks.  KDSM_LOCK_ROBUST (lock
 *	only): the caller takes -EOWNERDEAD, see below.
 */
struct kdsm_lock_arg {
	__u32 id;
	__u32 flags;
};

/* bytes of struct kdsm_state_arg.error, its NUL included */
#define KDSM_ERROR_LEN		160

/**
 * struct kdsm_state_arg - KDSM_IOC_STATE
 * @state: enum kdsm_state
 * @pad: zero
 * @error: why the cluster FAILED (as KDSM_A_ERROR), NUL-terminated;
 *	empty in any other state
 *
 * One ioctl, no allocation: libkdsm's SIGBUS handler reads it to report
 * a lost node the same way a failed lock or barrier does.
 */
struct kdsm_state_arg {
	__u8 state;
	__u8 pad[7];
	char error[KDSM_ERROR_LEN];
};

/* the queue lock on RDMA atomics (Devulapalli and Wyckoff, ICPP'05) */
#define KDSM_LOCK_ATOMIC	0x1
/*
 * A lock is released when the open file that took it loses its last
 * reference (its process died, say).  With KDSM_LOCK_ROBUST, KDSM_IOC_LOCK
 * of a kernel lock so released since its last grant returns -EOWNERDEAD
 * holding the lock, once (a robust pthread mutex's EOWNERDEAD, without
 * ENOTRECOVERABLE); without it, 0.  The queue lock never reports it.
 */
#define KDSM_LOCK_ROBUST	0x2
#define KDSM_LOCK_FLAGS		0x3

#define KDSM_IOC_MAGIC		0xd5
/* on /dev/kdsm */
#define KDSM_IOC_ATTACH		_IO(KDSM_IOC_MAGIC, 1)	/* returns a region fd */
#define KDSM_IOC_INFO		_IOR(KDSM_IOC_MAGIC, 2, struct kdsm_info)
/* on the region descriptor; one task of a node per lock at a time */
#define KDSM_IOC_LOCK		_IOW(KDSM_IOC_MAGIC, 3, struct kdsm_lock_arg)
#define KDSM_IOC_UNLOCK		_IOW(KDSM_IOC_MAGIC, 4, struct kdsm_lock_arg)
#define KDSM_IOC_BARRIER	_IO(KDSM_IOC_MAGIC, 5)
#define KDSM_IOC_STATE		_IOR(KDSM_IOC_MAGIC, 6, struct kdsm_state_arg)

#endif /* _UAPI_KVERBS_KDSM_H */
