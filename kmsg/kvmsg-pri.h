/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kvmsg internals: the functions of the message layer and the pure pieces
 * of logic (credits, wire headers, deferral order) that KUnit drives
 * without a device.  The state is in kvmsg-state.h.
 *
 * kvmsg calls down into kverbs only through the send-queue ledger
 * (kverbs_sq_post_locked(), struct kverbs_wr), endpoint references
 * (kverbs_ep_get/put()), kverbs_ep_fail() and a few read-only accessors;
 * kverbs calls up only through kvmsg_upper_ops and completions.
 */
#ifndef _KVMSG_PRI_H
#define _KVMSG_PRI_H

#include "../kverbs/kverbs-pri.h"
#include <uapi/kverbs/kvmsg.h>

#undef pr_fmt
#define pr_fmt(fmt) "kvmsg: " fmt

u32 kvmsg_max_kept(u32 depth);
void kvmsg_credit_init(struct kvmsg_credit *c, u32 peer_depth, u32 our_depth);
bool kvmsg_credit_take(struct kvmsg_credit *c, u16 *grant);
int kvmsg_credit_receive(struct kvmsg_credit *c, u32 grant);
void kvmsg_credit_reposted(struct kvmsg_credit *c);
bool kvmsg_credit_want_ctrl(const struct kvmsg_credit *c);

/* Wire header validation verdicts; 0 is a good header. */
enum kvmsg_wire_err {
	KVMSG_WIRE_OK,
	KVMSG_WIRE_SHORT,
	KVMSG_WIRE_TYPE,
	KVMSG_WIRE_FLAGS,
	KVMSG_WIRE_LEN,
	KVMSG_WIRE_CREDIT,
	KVMSG_WIRE_SEQ,
	KVMSG_WIRE_MAX,
};

void kvmsg_hdr_fill(struct kvmsg_hdr *h, u8 type, u16 credits, u32 seq,
		    u32 len);
enum kvmsg_wire_err kvmsg_hdr_check(const void *buf, u32 byte_len, u32 seq,
				    u32 max_len, u32 *len, u16 *credits,
				    u8 *type);
const char *kvmsg_wire_err_str(enum kvmsg_wire_err e);

void kvmsg_backlog_init(struct kvmsg_backlog *b);
bool kvmsg_backlog_must_queue(const struct kvmsg_backlog *b);
void kvmsg_backlog_add(struct kvmsg_backlog *b, struct kvmsg_rx *rx);
void kvmsg_backlog_push_front(struct kvmsg_backlog *b, struct kvmsg_rx *rx);
struct kvmsg_rx *kvmsg_backlog_next(struct kvmsg_backlog *b);

/* buffers.c: the hooks kverbs calls (kvmsg_upper_ops) */
extern const struct kverbs_upper_ops kvmsg_upper_ops;
size_t kvmsg_ep_mem(const struct kverbs_ep *ep);

/* send.c */
int kvmsg_flush_locked(struct kverbs_ep *ep);
int kvmsg_send_auth_locked(struct kverbs_ep *ep, const void *proof, u32 len);
void kvmsg_fail_pending(struct kverbs_ep *ep);
extern const struct kverbs_wr_ops kvmsg_buf_wr_ops;

/* recv.c */
int kvmsg_post_recv(struct kverbs_ep *ep, struct kvmsg_rx *rx);
void kvmsg_recv_done(struct ib_cq *cq, struct ib_wc *wc);
void kvmsg_schedule_defer(struct kverbs_ep *ep);
void kvmsg_room_locked(struct kverbs_ep *ep, u8 what);
void kvmsg_defer_work(struct work_struct *work);

#endif /* _KVMSG_PRI_H */
