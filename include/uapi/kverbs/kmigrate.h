/* SPDX-License-Identifier: GPL-2.0-only WITH Linux-syscall-note */
/*
 * kmigrate: process migration over RDMA, post-copy by one-sided reads.
 *
 * Two interfaces:
 *
 * - /dev/kmigrate, for libkmigrate inside the migrating process and for
 *   the destination's spawner.  A process opens it once (a session),
 *   creates or attaches its arena there and migrates through it; the
 *   session's release ends whatever the process still owned.
 *
 * - The generic netlink family "kmigrate", for kmigrate(1): START listens
 *   for incoming migrations, STOP ends every migration, GET reports the
 *   arenas and counters, MOVE asks a process to migrate.  START, STOP and
 *   MOVE need CAP_SYS_ADMIN (a MOVE signals the process), GET CAP_NET_ADMIN.
 *
 * Only page contents, a register context the kernel never interprets,
 * offsets and keys travel: no kernel or DMA address.  The arena's user
 * address travels, since the destination maps it at the same place.
 *
 * All structures have explicit padding; reserved fields must be zero.
 */
#ifndef _UAPI_KVERBS_KMIGRATE_H
#define _UAPI_KVERBS_KMIGRATE_H

#include <linux/ioctl.h>
#include <linux/socket.h>
#include <linux/types.h>

#define KMIGRATE_DEV		"/dev/kmigrate"
#define KMIGRATE_GENL_NAME	"kmigrate"
#define KMIGRATE_GENL_VERSION	1
#define KMIGRATE_DEFAULT_PORT	18900

/* Arena size in pages, at most (1 GiB of 4 KiB pages) */
#define KMIGRATE_MAX_PAGES	(1U << 18)
/* A register context, opaque to the kernel, in bytes at most */
#define KMIGRATE_CTX_MAX	512
/* Page ranges a migration moves; pages outside them arrive zeroed */
#define KMIGRATE_MAX_RANGES	16
/* The destination's executable: an absolute path, with its NUL */
#define KMIGRATE_PATH_MAX	512
/* Its arguments: NUL-terminated strings back to back */
#define KMIGRATE_ARGS_MAX	2048
/* What the destination's process must present to attach */
#define KMIGRATE_FP_MAX		128

/*
 * kmigrate_prepare.timeout_ms at most.  A destination drops an arrival
 * whose process was not frozen and handed over within twice this of its
 * PREPARE: this bound, then as long again for the process to freeze.
 */
#define KMIGRATE_TIMEOUT_MAX_MS	120000
/*
 * Sent to a process that kmigrate(1) asks to move (MOVE), and when its
 * preparation ends (KMIGRATE_IOC_PREPARE).
 */
#define KMIGRATE_SIGNAL		23	/* SIGURG: ignored by default */

/**
 * struct kmigrate_create - KMIGRATE_IOC_CREATE: a new arena
 * @va: page-aligned address where the caller maps it, and where the
 *	destination's process will
 * @npages: 1..KMIGRATE_MAX_PAGES
 * @flags: zero
 * @fd: out: a descriptor to mmap(@va, @npages pages, PROT_READ |
 *	PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0); close it after
 * @reserved: zero
 *
 * One arena per session.  Its pages are zeroed and writable.
 */
struct kmigrate_create {
	__u64 va;
	__u32 npages;
	__u32 flags;
	__s32 fd;
	__u32 reserved;
};

/** struct kmigrate_range - arena pages [@first, @first + @count) */
struct kmigrate_range {
	__u32 first;
	__u32 count;
};

/* kmigrate_prepare.mode */
#define KMIGRATE_MODE_POSTCOPY	0	/* resume first, pages follow */
#define KMIGRATE_MODE_PRECOPY	1	/* every page first, then resume */

/* kmigrate_prepare.flags */
#define KMIGRATE_F_NO_PREFETCH	0x1	/* post-copy pulls on faults only */

/**
 * struct kmigrate_prepare - KMIGRATE_IOC_PREPARE: get a destination ready
 * @dest: the destination's kmigrate address: sockaddr_in or sockaddr_in6
 *	with its port
 * @mode: KMIGRATE_MODE_*
 * @flags: KMIGRATE_F_*
 * @path: user pointer: the executable the destination starts, absolute,
 *	@path_len bytes with the NUL (2..KMIGRATE_PATH_MAX)
 * @args: user pointer: its argv, @args_len bytes (1..KMIGRATE_ARGS_MAX),
 *	NUL-terminated strings back to back
 * @fp: user pointer: @fp_len bytes (1..KMIGRATE_FP_MAX) the destination's
 *	process must present in KMIGRATE_IOC_ATTACH
 * @path_len: see @path
 * @args_len: see @args
 * @fp_len: see @fp
 * @timeout_ms: bound on connecting, starting and attaching the
 *	destination's process; 0 for 30 s, at most KMIGRATE_TIMEOUT_MAX_MS
 *
 * Returns at once; the process goes on running while the kernel
 * registers the arena, connects, and the destination starts its process.
 * When that ends, well or not, the process gets KMIGRATE_SIGNAL, and
 * KMIGRATE_IOC_FREEZE migrates it or returns why not.  -EBUSY if a
 * migration is under way.
 */
struct kmigrate_prepare {
	struct __kernel_sockaddr_storage dest;
	__u32 mode;
	__u32 flags;
	__u64 path;
	__u64 args;
	__u64 fp;
	__u32 path_len;
	__u32 args_len;
	__u32 fp_len;
	__u32 timeout_ms;
};

/* kmigrate_freeze.flags */
#define KMIGRATE_FREEZE_WAIT	0x1	/* wait for the preparation to end */

/**
 * struct kmigrate_freeze - KMIGRATE_IOC_FREEZE: migrate, once prepared
 * @ctx: user pointer: the register context to resume from, @ctx_len bytes
 *	(1..KMIGRATE_CTX_MAX), handed to the destination's process as is
 * @ranges: user pointer: @nranges (1..KMIGRATE_MAX_RANGES) sorted,
 *	disjoint, non-empty struct kmigrate_range: the pages that move;
 *	the others arrive zeroed
 * @ctx_len: see @ctx
 * @nranges: see @ranges
 * @flags: KMIGRATE_FREEZE_*
 * @reserved: zero
 *
 * Without KMIGRATE_FREEZE_WAIT, -EAGAIN while the preparation runs.  A
 * failed preparation returns its error here, once, and nothing moved.
 * Otherwise this is the freeze: the calling task must be the arena's only
 * thread (-EBUSY) and must not touch the arena during the call (it runs on
 * another stack: libkmigrate switches to the process's own).  It returns
 * 0 when the destination holds the whole arena: the source's copy is gone
 * and the process must exit without touching it.  -EHOSTDOWN: the
 * destination failed after the freeze, the arena is the caller's again,
 * unchanged since the freeze, and the process resumes here.
 */
struct kmigrate_freeze {
	__u64 ctx;
	__u64 ranges;
	__u32 ctx_len;
	__u32 nranges;
	__u32 flags;
	__u32 reserved;
};

/* bytes of a migration's attach token */
#define KMIGRATE_TOKEN_LEN	16

/**
 * struct kmigrate_incoming - KMIGRATE_IOC_ACCEPT: the next process to start
 * @id: the migration's id on this node, for KMIGRATE_IOC_ATTACH
 * @path_len: bytes of @path, with the NUL
 * @args_len: bytes of @args
 * @reserved: zero
 * @token: the secret KMIGRATE_IOC_ATTACH must present for @id, random,
 *	made by this ACCEPT; only the spawner and the process it starts
 *	learn it
 * @peer: the source's address, as its connection arrived
 * @path: the executable the source names, absolute, NUL-terminated
 * @args: its argv, NUL-terminated strings back to back
 *
 * Nothing here is a credential: the source's user is not passed on.  The
 * spawner (kmigrate serve) decides by its own policy whether @peer may
 * start @path and as which local account, and either starts it (address
 * space randomisation off, KMIGRATE_INCOMING=@id:@token in hex in its
 * environment) or refuses it with KMIGRATE_IOC_REFUSE.
 */
struct kmigrate_incoming {
	__u32 id;
	__u32 path_len;
	__u32 args_len;
	__u32 reserved;
	__u8 token[KMIGRATE_TOKEN_LEN];
	struct __kernel_sockaddr_storage peer;
	char path[KMIGRATE_PATH_MAX];
	char args[KMIGRATE_ARGS_MAX];
};

/**
 * struct kmigrate_refuse - KMIGRATE_IOC_REFUSE: the spawner will not start
 *	an accepted migration
 * @id: from struct kmigrate_incoming
 * @status: the errno the source is told (READY): EACCES (no rule of the
 *	policy allows it), EINVAL (a malformed path or argv) or EAGAIN (the
 *	spawner could not start it now)
 */
struct kmigrate_refuse {
	__u32 id;
	__u32 status;
};

/**
 * struct kmigrate_attach - KMIGRATE_IOC_ATTACH: become a migration's process
 * @id: from KMIGRATE_INCOMING
 * @fp_len: bytes at @fp
 * @fp: user pointer: the executable's fingerprint, equal to the source's
 * @fd: out: the arena's descriptor, to map at @va as in kmigrate_create
 * @npages: out
 * @va: out
 * @token: from KMIGRATE_INCOMING: the ACCEPT's @token
 */
struct kmigrate_attach {
	__u32 id;
	__u32 fp_len;
	__u64 fp;
	__s32 fd;
	__u32 npages;
	__u64 va;
	__u8 token[KMIGRATE_TOKEN_LEN];
};

/**
 * struct kmigrate_resume - KMIGRATE_IOC_RESUME: wait for the context
 * @ctx: user pointer to KMIGRATE_CTX_MAX bytes: out: the context
 * @ctx_len: out: its length
 * @reserved: zero
 *
 * Called once the arena is mapped: tells the source to freeze, and
 * returns when the process may run (post-copy: at once; pre-copy: once
 * every page is here).  Pages not yet here are fetched when touched;
 * touching one the source can no longer give raises SIGBUS.
 */
struct kmigrate_resume {
	__u64 ctx;
	__u32 ctx_len;
	__u32 reserved;
};

/**
 * struct kmigrate_move - KMIGRATE_IOC_MOVE_TARGET: where kmigrate(1) asked
 *	this process to go
 * @dest: out: the address given to MOVE
 * @mode: out: KMIGRATE_MODE_*
 * @flags: out: KMIGRATE_F_*
 *
 * -ENOENT if nothing was asked.  The request is consumed.
 */
struct kmigrate_move {
	struct __kernel_sockaddr_storage dest;
	__u32 mode;
	__u32 flags;
};

#define KMIGRATE_IOC_MAGIC	'M'
#define KMIGRATE_IOC_CREATE	_IOWR(KMIGRATE_IOC_MAGIC, 0x60, struct kmigrate_create)
#define KMIGRATE_IOC_PREPARE	_IOW(KMIGRATE_IOC_MAGIC, 0x61, struct kmigrate_prepare)
#define KMIGRATE_IOC_ACCEPT	_IOR(KMIGRATE_IOC_MAGIC, 0x62, struct kmigrate_incoming)
#define KMIGRATE_IOC_ATTACH	_IOWR(KMIGRATE_IOC_MAGIC, 0x63, struct kmigrate_attach)
#define KMIGRATE_IOC_RESUME	_IOWR(KMIGRATE_IOC_MAGIC, 0x64, struct kmigrate_resume)
#define KMIGRATE_IOC_MOVE_TARGET	_IOR(KMIGRATE_IOC_MAGIC, 0x65, struct kmigrate_move)
#define KMIGRATE_IOC_FREEZE	_IOW(KMIGRATE_IOC_MAGIC, 0x66, struct kmigrate_freeze)
#define KMIGRATE_IOC_REFUSE	_IOW(KMIGRATE_IOC_MAGIC, 0x67, struct kmigrate_refuse)

/* Generic netlink */
enum {
	KMIGRATE_CMD_UNSPEC,
	KMIGRATE_CMD_START,	/* ADDR (listen), NODE (optional, non-zero) */
	KMIGRATE_CMD_STOP,
	KMIGRATE_CMD_GET,	/* reply: RUNNING, NODE, ADDR, ARENA..., STATS */
	KMIGRATE_CMD_MOVE,	/* PID, ADDR, MODE (optional), FLAGS (optional) */
	__KMIGRATE_CMD_MAX,
};

#define KMIGRATE_CMD_MAX (__KMIGRATE_CMD_MAX - 1)

enum {
	KMIGRATE_A_UNSPEC,
	KMIGRATE_A_ADDR,	/* binary: struct sockaddr_in / _in6 */
	KMIGRATE_A_NODE,	/* u32 */
	KMIGRATE_A_PID,		/* u32 */
	KMIGRATE_A_MODE,	/* u32 */
	KMIGRATE_A_FLAGS,	/* u32 */
	KMIGRATE_A_RUNNING,	/* u8 */
	KMIGRATE_A_ARENA,	/* nested: KMIGRATE_R_* (repeated) */
	KMIGRATE_A_STATS,	/* nested: u64 counters, KMIGRATE_S_* */
	KMIGRATE_A_PAD,
	/* string: a logon key every peer proves, both ways (START) */
	KMIGRATE_A_KEY,
	__KMIGRATE_A_MAX,
};

/* Longest KMIGRATE_A_KEY, the key's description, NUL excluded */
#define KMIGRATE_KEY_DESC_MAX	255
/* The key description the tools use unless told --key or --insecure */
#define KMIGRATE_DEFAULT_KEY	"kverbs:kmigrate"

#define KMIGRATE_A_MAX (__KMIGRATE_A_MAX - 1)

/* An arena's role and state, KMIGRATE_R_STATE */
enum {
	KMIGRATE_ST_LOCAL,	/* running here, never moved or moved back */
	KMIGRATE_ST_PREPARING,	/* source: the destination is starting */
	KMIGRATE_ST_FROZEN,	/* source: the destination holds the process */
	KMIGRATE_ST_INCOMING,	/* destination: waiting for its process */
	KMIGRATE_ST_PULLING,	/* destination: running, pages still away */
	KMIGRATE_ST_ARRIVED,	/* destination: every page here */
	KMIGRATE_ST_LOST,	/* destination: the source died, pages lost */
};

/* Attributes of KMIGRATE_A_ARENA */
enum {
	KMIGRATE_R_UNSPEC,
	KMIGRATE_R_PID,		/* u32: the owning process, 0 if none */
	KMIGRATE_R_STATE,	/* u32: KMIGRATE_ST_* */
	KMIGRATE_R_NPAGES,	/* u32 */
	KMIGRATE_R_VA,		/* u64 */
	KMIGRATE_R_PEER,	/* binary sockaddr: the other side, if any */
	KMIGRATE_R_MODE,	/* u32 */
	KMIGRATE_R_TODO,	/* u32: pages still to pull (destination) */
	KMIGRATE_R_FAULTS,	/* u64: pulled on a fault (destination) */
	KMIGRATE_R_PREFETCHED,	/* u64: pulled by the prefetcher */
	KMIGRATE_R_FAULT_NS,	/* u64: summed fault service time */
	KMIGRATE_R_DOWNTIME_NS,	/* u64: freeze to resume, see kmigrate.rst */
	KMIGRATE_R_TOTAL_NS,	/* u64: freeze to the last page */
	KMIGRATE_R_PAD,
	__KMIGRATE_R_MAX,
};

#define KMIGRATE_R_MAX (__KMIGRATE_R_MAX - 1)

/* Counters in KMIGRATE_A_STATS, each a u64 attribute of this type */
enum {
	KMIGRATE_S_UNSPEC,
	KMIGRATE_S_OUT,		/* migrations started here */
	KMIGRATE_S_OUT_DONE,	/* ... whose destination took everything */
	KMIGRATE_S_OUT_RESUMED,	/* ... resumed here after the destination failed */
	KMIGRATE_S_IN,		/* migrations received */
	KMIGRATE_S_IN_DONE,	/* ... that pulled every page */
	KMIGRATE_S_IN_LOST,	/* ... whose source failed first */
	KMIGRATE_S_FAULT_PAGES,	/* pages pulled on faults */
	KMIGRATE_S_PREFETCH_PAGES,	/* pages pulled by prefetchers */
	KMIGRATE_S_READS,	/* RDMA reads posted */
	KMIGRATE_S_MALFORMED,	/* peer messages rejected */
	KMIGRATE_S_DOWNTIME_NS,	/* of the last migration out */
	KMIGRATE_S_TOTAL_NS,	/* of the last migration out */
	KMIGRATE_S_IN_REFUSED,	/* migrations the spawner refused (policy) */
	KMIGRATE_S_EXPIRED,	/* connections closed at a destination deadline */
	__KMIGRATE_S_MAX,
};

#define KMIGRATE_S_MAX (__KMIGRATE_S_MAX - 1)

#endif /* _UAPI_KVERBS_KMIGRATE_H */
