/* SPDX-License-Identifier: GPL-2.0-only WITH Linux-syscall-note */
/*
 * kfcache server control: the generic netlink family "kfcache_srv".
 * START listens on an address; EXPORT names a directory the clients may
 * mount read-only as <server>:/<name>, optionally only from the address
 * prefixes in CLIENTS; UNEXPORT and STOP undo them; GET reports the state
 * and counters.  Changes need CAP_NET_ADMIN.
 */
#ifndef _UAPI_KVERBS_KFCACHE_H
#define _UAPI_KVERBS_KFCACHE_H

#include <linux/types.h>

#define KFC_GENL_NAME		"kfcache_srv"
#define KFC_GENL_VERSION	1
#define KFC_DEFAULT_PORT	18800
#define KFC_NAME_MAX		32	/* an export's name, with its NUL */
#define KFC_KEY_DESC_MAX	255	/* a key's description, NUL excluded */
/* The key description the tools use unless told --key or --insecure */
#define KFC_DEFAULT_KEY		"kverbs:kfcache"
#define KFC_CLIENTS_MAX		16	/* prefixes in one export's CLIENTS */

/*
 * One entry of KFC_A_CLIENTS: the hosts of @family (AF_INET or AF_INET6)
 * whose address begins with the first @prefix_len bits of @addr (an IPv4
 * address in its first 4 bytes).  A client connecting over IPv6 with an
 * IPv4-mapped address is matched as IPv4.  @reserved: 0.
 */
struct kfc_client {
	__u8 family;
	__u8 prefix_len;
	__u16 reserved;
	__u8 addr[16];
};

enum {
	KFC_CMD_UNSPEC,
	KFC_CMD_START,		/* ADDR (sockaddr_in or _in6) */
	KFC_CMD_STOP,
	KFC_CMD_EXPORT,		/* NAME, PATH */
	KFC_CMD_UNEXPORT,	/* NAME */
	KFC_CMD_GET,		/* reply: RUNNING, ADDR, STATS */
	KFC_CMD_EXPORT_GET,	/* a dump (NLM_F_DUMP) only: one message
				 * per export, NAME, PATH, CLIENTS;
				 * NLM_F_DUMP_INTR if the exports changed
				 * meanwhile
				 */
	__KFC_CMD_MAX,
};

#define KFC_CMD_MAX (__KFC_CMD_MAX - 1)

enum {
	KFC_A_UNSPEC,
	KFC_A_ADDR,		/* binary: struct sockaddr_in / _in6 */
	KFC_A_NAME,		/* string */
	KFC_A_PATH,		/* string, absolute */
	KFC_A_RUNNING,		/* u8 */
	KFC_A_EXPORT,		/* unused (GET's exports before EXPORT_GET) */
	KFC_A_STATS,		/* nested: u64 counters, types below */
	KFC_A_PAD,
	KFC_A_KEY,		/* string: a logon key clients prove (START) */
	KFC_A_CLIENTS,		/* binary: struct kfc_client[1..KFC_CLIENTS_MAX]
				 * (EXPORT, EXPORT_GET); none: any client
				 * that proves the server's key
				 */
	__KFC_A_MAX,
};

#define KFC_A_MAX (__KFC_A_MAX - 1)

/* Counters in KFC_A_STATS, each a u64 attribute of this type. */
enum {
	KFC_S_UNSPEC,
	KFC_S_CLIENTS,		/* connected now */
	KFC_S_REQUESTS,		/* handled */
	KFC_S_READS,		/* READ requests */
	KFC_S_PAGES,		/* pages written to clients */
	KFC_S_SOFTIRQ,		/* requests completed in softirq */
	KFC_S_DEFERRED,		/* requests handled in process context */
	KFC_S_MALFORMED,	/* requests rejected, connection closed */
	KFC_S_ERRORS,		/* requests answered with an error */
	KFC_S_HANDLES,		/* open handles now */
	KFC_S_UNMOUNTED,	/* connections closed for not mounting */
	KFC_S_REFUSED,		/* MOUNTs from a host the export does not list */
	__KFC_S_MAX,
};

#define KFC_S_MAX (__KFC_S_MAX - 1)

#endif /* _UAPI_KVERBS_KFCACHE_H */
