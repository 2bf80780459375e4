/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rawping internals shared by its files: rawping.c (parameters, the
 * connection, the ping-pong and the result), page.c (page=1, the
 * FRWR-registered page the server RDMA-writes before each echo) and
 * read.c (read=1, the server's page the client RDMA-reads, and poll=1).
 */
#ifndef _RAWPING_PRI_H
#define _RAWPING_PRI_H

#undef pr_fmt
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/build_bug.h>
#include <linux/completion.h>
#include <linux/scatterlist.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#define RAWPING_SLOTS	64	/* receive slots; the most pings in flight */
#define RAWPING_SIGNAL_EVERY	(RAWPING_SLOTS / 4)
#define RAWPING_TX_SLOTS	(RAWPING_SLOTS + RAWPING_SIGNAL_EVERY)
#define RAWPING_MAX	4096
#define RAWPING_MAX_CONN	8
#define RAWPING_PAGE	4096	/* the bytes of each RDMA write or read */

/*
 * Queue budget, per connection:
 *
 * Send queue, max_send_wr = RAWPING_TX_SLOTS + 1 = 81 (page mode:
 * 2 * RAWPING_TX_SLOTS + 2 = 162; read mode: 2 on the client, 3 on the
 * server; see rawping_send_wrs()):
 *   1. 80 sends, one per send slot.  A send is posted only into a free
 *      slot, and a slot is freed only when a signaled send at or after it
 *      completed; the provider retired those SQ entries before it handed
 *      us that completion, so busy slots cover every SQ entry in use,
 *      unsignaled ones included.
 *   2. Page mode: 80 RDMA writes, the server's, one posted just before
 *      each echo and unsignaled; it is retired with its slot's send, so a
 *      busy slot covers two SQ entries.
 *   3. Page mode: 1 for the client's IB_WR_REG_MR, signaled and completed
 *      before the first ping is posted.
 *   4. Read mode, client: 1 RDMA read, signaled.  The next is posted
 *      only from its completion, after the provider retired it: one is
 *      in flight.  It sends nothing.
 *   5. Read mode, server: 1 IB_WR_REG_MR, posted at ESTABLISHED, and 1
 *      ready message (from send slot 0's buffer), posted from the
 *      registration's completion; both signaled, each posted once.  A
 *      read client sends nothing, so the server echoes nothing.  Read
 *      mode uses no send slot.
 *   6. 1 for the drain WR of ib_drain_qp() at teardown.
 * Why 64 + 16 slots: up to 64 sends may be in flight (the client's window,
 * or the server's echoes of it), plus at most 15 that completed unsignaled
 * and wait for the next signal.  If the ring still fills (a reply outran
 * the ack of its ping), the last send in it is signaled (see below), so a
 * completion is coming and the blocked send is posted from it.
 *
 * Receive queue, max_recv_wr = RAWPING_SLOTS + 1 = 65:
 *   1. 64 receives, one per receive slot: one per ping in flight.  Read
 *      mode posts them alike and never reposts one: the client's take
 *      the one ready message; the server's take none (a message there
 *      ends the connection).
 *   2. 1 for the drain WR.
 *
 * CQ, 146 entries (page mode 227; read mode 67 on the client, 68 on the
 * server): every WR of either queue completes at most once, a flush
 * included, unsignaled ones too: 81 + 65 (162 + 65; 2 + 65; 3 + 65).
 *
 * Signaling: the send in slot s is signaled iff s % 16 == 15.  The ring
 * is a multiple of 16 slots and a completion frees up to a signaled slot,
 * so the oldest busy slot is always a multiple of 16: any 16 busy slots,
 * and a full ring, hold a signaled send.
 */
static_assert(RAWPING_TX_SLOTS % RAWPING_SIGNAL_EVERY == 0);

/*
 * Connection private data: the client's @size one way, the largest
 * message the server sends inline (0: none) the other.  Page mode: the
 * client's page (its length, RAWPING_PAGE, and its rkey, at iova 0) and
 * whether the server fills it (RAWPING_HELLO_CHECK); the server answers
 * with @page_len RAWPING_PAGE when it writes the page.  Read mode: the
 * client asks with RAWPING_HELLO_READ and no page; the server answers
 * with RAWPING_HELLO_READ and its page (@page_len RAWPING_PAGE, @rkey,
 * at iova 0).  A hello shorter than the struct (an older rawping) reads
 * as zeros past its end: no page, no read mode.
 */
struct rawping_hello {
	__be32 size;
	__be32 inline_max;
	__be32 page_len;
	__be32 rkey;
	__be32 flags;
};

#define RAWPING_HELLO_MIN	offsetofend(struct rawping_hello, inline_max)
#define RAWPING_HELLO_CHECK	BIT(0)
#define RAWPING_HELLO_READ	BIT(1)

/* rdma_cm over IB leaves a REQ 56 bytes of private data after its header. */
static_assert(sizeof(struct rawping_hello) <= 56);

/*
 * One connection.  The @tx_used busy send slots are the ones just before
 * @tx_next, the next to post (mod RAWPING_TX_SLOTS).  The server queues
 * received slots in @pend until a send slot is free for their echo.
 * @lock (bh) orders the client task filling the window with the
 * completion handlers, which post and reclaim under it; the completions
 * of one CQ run one at a time (poll=1: in the client's task, from
 * rawping_wait() or the drain, never in softirq).
 */
struct rawping_conn {
	spinlock_t lock;		/* see above */
	struct work_struct free_work;	/* server: see rawping_close() */
	unsigned long closing;		/* bit 0: free_work queued, once */
	struct rdma_cm_id *id;
	struct ib_pd *pd;
	struct ib_cq *cq;
	u8 *rx_buf;
	u8 *tx_buf;
	u64 rx_dma;
	u64 tx_dma;
	struct ib_cqe rx_cqe[RAWPING_SLOTS];
	struct ib_cqe tx_cqe[RAWPING_TX_SLOTS];
	/*
	 * Page mode.  Client: @page_buf is the registered page, mapped as
	 * @page_sg, its MR @mr; @reg_cqe completes the registration.  Server:
	 * @page_buf is the write's source at @page_dma, one for the
	 * connection: the client waits for echo n, which RC orders after
	 * write n's data, before it sends ping n + 1 (outstanding=1), so the
	 * device no longer reads the buffer when the server fills it again.
	 * @write_cqe: the writes are unsignaled; only a flush completes one.
	 * Read mode: client: @page_buf is where the reads land, no MR;
	 * server: the page it exports, filled once, registered by @mr
	 * (@reg_cqe).  @read_cqe: the client's reads, the server's ready
	 * message.
	 */
	bool page_mode;
	bool read_mode;
	bool page_check;	/* server: fill the page; client: verify it */
	u8 *page_buf;
	struct scatterlist page_sg;
	u64 page_dma;		/* nonzero: @page_sg is mapped for @page_dir */
	enum dma_data_direction page_dir;
	struct ib_mr *mr;
	struct ib_cqe reg_cqe;
	struct ib_cqe write_cqe;
	struct ib_cqe read_cqe;
	u32 remote_rkey;	/* the peer's page (page mode: the client's) */
	u32 tx_next;
	u32 tx_used;
	u32 msg_len;		/* the messages' size, 0 if unknown */
	u32 inline_max;		/* longest inline send; 0: no inline */
	bool is_client;
	bool established;
	int error;		/* the first error; set once; see conn_free */
	struct completion event;	/* CM progress or the end of the run */
	/* server */
	u32 pend_head;
	u32 pend_tail;
	u8 pend[RAWPING_SLOTS];
	u32 rx_len[RAWPING_SLOTS];
	/* client */
	bool poll;		/* the CQ is IB_POLL_DIRECT: rawping_wait() */
	bool read_ready;	/* read mode: the ready message came (CQ) */
	struct completion ready;	/* it came, or the first error */
	u32 count;		/* pings or reads in the run, 1.. */
	u32 peer_inline_max;
	u32 sent;		/* pings (reads) posted */
	u32 replies;		/* replies (reads) completed */
	u32 page_mismatches;
	u64 *t0;
	u64 *rtt;
};

/* rawping.c */
void rawping_fail(struct rawping_conn *c, int err);

static inline int rawping_wc_error(const struct ib_wc *wc)
{
	return wc->status == IB_WC_WR_FLUSH_ERR ? -ECONNRESET : -EIO;
}

/* page.c: page mode, and the page that read mode uses too */
int rawping_map_page(struct rawping_conn *c, enum dma_data_direction dir);
int rawping_page_mr(struct rawping_conn *c);
int rawping_post_reg(struct rawping_conn *c, int access);
void rawping_page_fill(struct rawping_conn *c, u32 seq);
int rawping_setup_page(struct rawping_conn *c);
int rawping_register_page(struct rawping_conn *c);
int rawping_page_write(struct rawping_conn *c, const u8 *src, u32 len,
		       struct ib_rdma_wr *wr, struct ib_sge *sge);
void rawping_page_verify(struct rawping_conn *c, u32 seq);
int rawping_page_accept(struct rawping_conn *c,
			const struct rawping_hello *peer);
void rawping_page_hello(const struct rawping_conn *c,
			struct rawping_hello *hello);
int rawping_page_established(const struct rawping_conn *c,
			     const struct rawping_hello *peer);

/* read.c: read mode, and the client's wait (poll=1) */
long rawping_wait(struct rawping_conn *c, struct completion *x, long timeout);
int rawping_read_post(struct rawping_conn *c);
void rawping_read_recv_done(struct ib_cq *cq, struct ib_wc *wc);
int rawping_read_setup(struct rawping_conn *c);
int rawping_read_accept(const struct rawping_conn *c,
			const struct rawping_hello *peer);
void rawping_read_hello(const struct rawping_conn *c,
			struct rawping_hello *hello);
int rawping_read_established(struct rawping_conn *c,
			     const struct rawping_hello *peer);
int rawping_read_wait_ready(struct rawping_conn *c);

#endif /* _RAWPING_PRI_H */
