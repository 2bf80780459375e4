// SPDX-License-Identifier: GPL-2.0-only
/*
 * One-sided operations: RDMA read and write, compare-and-swap and
 * fetch-and-add, between a local region (its pages by the endpoint's
 * local DMA key) and the extent of a peer's region that a grant of the
 * peer's made reachable on this connection.
 *
 * Each operation takes an operation slot of the endpoint's send queue and
 * goes through the ledger (sq.c), so it counts for selective signaling
 * like any message: a write without a @done callback is posted unsignaled
 * and reclaimed by a later completion.  A read or an atomic must have one:
 * the device writes local memory when it executes them, and only their
 * own completion tells the caller when that is over.
 */
#include "kverbs-pri.h"

static int kverbs_rdma_post(struct kverbs_ep *ep, struct ib_send_wr *wr,
			    const struct kverbs_rdma_op *rop,
			    unsigned int flags)
{
	struct kverbs_op *op;
	int ret;

	op = kverbs_op_get(ep, flags);
	if (IS_ERR(op))
		return PTR_ERR(op);
	op->done = rop->done;
	op->ctx = rop->ctx;
	ret = kverbs_op_post(ep, op, wr);
	if (ret)
		kverbs_op_put(ep, op);
	return ret;
}

/* Operations whose responder's answer the device writes into our memory. */
static bool opcode_writes_local(enum ib_wr_opcode opcode)
{
	return opcode != IB_WR_RDMA_WRITE;
}

/* The operation's own fields, checked; 0 or -EINVAL. */
static int kverbs_rdma_check_op(enum ib_wr_opcode opcode,
				const struct kverbs_rdma_op *rop, u32 len)
{
	const struct kverbs_remote *rem = &rop->remote;

	if (!rop->local || !len || rem->reserved || len > rem->len)
		return -EINVAL;
	if (!rop->done && opcode_writes_local(opcode) &&
	    !kverbs_test_undo(KVERBS_UNDO_NODONE))
		return -EINVAL;
	return 0;
}

/* The local SGEs and the remote bounds of @rop, checked; or -errno. */
static int kverbs_rdma_check(struct kverbs_ep *ep, enum ib_wr_opcode opcode,
			     const struct kverbs_rdma_op *rop, u32 len,
			     struct ib_sge *sge, int max)
{
	int ret = kverbs_rdma_check_op(opcode, rop, len);

	if (ret)
		return ret;
	return kverbs_region_local(rop->local, ep, rop->local_off, len, sge,
				   max);
}

/* A read into a region on iWARP: its pages, registered by rdma_rw. */
static int kverbs_rdma_read_rw(struct kverbs_ep *ep,
			       const struct kverbs_rdma_op *rop,
			       unsigned int flags)
{
	const struct kverbs_region *r = rop->local;
	int ret;

	ret = kverbs_rdma_check_op(IB_WR_RDMA_READ, rop, rop->len) ?:
	      kverbs_region_range(r, ep, rop->local_off, rop->len);
	if (ret)
		return ret;
	/* kverbs_rw_done() calls @done: required here, test builds too */
	if (!rop->done)
		return -EINVAL;
	return kverbs_rw_read(ep, &r->pages[rop->local_off >> PAGE_SHIFT],
			      offset_in_page(rop->local_off), rop->len,
			      &rop->remote, rop->done, rop->ctx, flags);
}

static int kverbs_rdma_rw(struct kverbs_ep *ep, enum ib_wr_opcode opcode,
			  const struct kverbs_rdma_op *rop, unsigned int flags)
{
	struct ib_sge sge[KVERBS_RDMA_MAX_SEGS];
	struct ib_rdma_wr wr = {};
	int n;

	/* An iWARP READ sink must be an MR with REMOTE_WRITE: rdma_rw.c */
	if (opcode == IB_WR_RDMA_READ && READ_ONCE(ep->iwarp))
		return kverbs_rdma_read_rw(ep, rop, flags);
	n = kverbs_rdma_check(ep, opcode, rop, rop->len, sge,
			      opcode == IB_WR_RDMA_READ ? ep->max_sge_rd :
			      ep->max_sge);
	if (n < 0)
		return n;
	wr.wr.opcode = opcode;
	wr.wr.sg_list = sge;
	wr.wr.num_sge = n;
	wr.remote_addr = rop->remote.offset;
	wr.rkey = rop->remote.rkey;
	return kverbs_rdma_post(ep, &wr.wr, rop, flags);
}

/**
 * kverbs_rdma_read - read a peer's memory into a local region
 * @ep: connected endpoint
 * @op: @op->len bytes from @op->remote into @op->local at @op->local_off
 * @flags: KVERBS_NOWAIT to fail instead of sleeping for a free slot
 *
 * @op->done gets 0, -EREMOTEIO (the peer refused the access: bad rkey or
 * bounds, or an invalidated region; the connection then closes) or
 * -ECONNRESET (flushed at teardown).  @op is copied; it may live on the
 * caller's stack.
 *
 * Context: process, may sleep; see KVERBS_NOWAIT for atomic contexts.
 * Return: 0 when posted; -EINVAL (no local region or another domain's,
 * @op->len zero or beyond @op->remote.len or the local region, more than
 * KVERBS_RDMA_MAX_SEGS contiguous runs, a non-zero reserved field, no
 * @op->done: the read's data lands at a time only its completion tells),
 * -ENODEV (the domain has no device), -EOPNOTSUPP (a read on iWARP from a
 * caller that may not sleep: its sink is registered through rdma_rw, at
 * most 256 pages, or -EINVAL), -EAGAIN, -EINTR,
 * -ENOTCONN or the endpoint's error, or a provider error.
 */
int kverbs_rdma_read(struct kverbs_ep *ep, const struct kverbs_rdma_op *op,
		     unsigned int flags)
{
	return kverbs_rdma_rw(ep, IB_WR_RDMA_READ, op, flags);
}
EXPORT_SYMBOL_NS_GPL(kverbs_rdma_read, KVERBS_NS);
ALLOW_ERROR_INJECTION(kverbs_rdma_read, ERRNO);

/**
 * kverbs_rdma_write - write a local region's bytes into a peer's memory
 * @ep: connected endpoint
 * @op: @op->len bytes from @op->local at @op->local_off to @op->remote
 * @flags: KVERBS_NOWAIT to fail instead of sleeping for a free slot
 *
 * A message sent after the write on the same endpoint arrives after the
 * written data is visible to the peer (RC ordering), which is how a peer
 * learns that the data is there.
 *
 * Context: process, may sleep; see KVERBS_NOWAIT for atomic contexts.
 * Return: as kverbs_rdma_read(), except that @op->done may be NULL (the
 * write is then posted unsignaled).
 */
int kverbs_rdma_write(struct kverbs_ep *ep, const struct kverbs_rdma_op *op,
		      unsigned int flags)
{
	return kverbs_rdma_rw(ep, IB_WR_RDMA_WRITE, op, flags);
}
EXPORT_SYMBOL_NS_GPL(kverbs_rdma_write, KVERBS_NS);
ALLOW_ERROR_INJECTION(kverbs_rdma_write, ERRNO);

static int kverbs_atomic(struct kverbs_ep *ep, enum ib_wr_opcode opcode,
			 const struct kverbs_rdma_op *rop, u64 compare_add,
			 u64 swap, unsigned int flags)
{
	struct ib_sge sge[KVERBS_RDMA_MAX_SEGS];
	struct ib_atomic_wr wr = {};
	int n;

	if (!READ_ONCE(ep->atomics))
		return -EOPNOTSUPP;
	if ((rop->remote.offset | rop->local_off) & 7)
		return -EINVAL;
	n = kverbs_rdma_check(ep, opcode, rop, 8, sge, 1);
	if (n < 0)
		return n;
	wr.wr.opcode = opcode;
	wr.wr.sg_list = sge;
	wr.wr.num_sge = n;
	wr.remote_addr = rop->remote.offset;
	wr.rkey = rop->remote.rkey;
	wr.compare_add = compare_add;
	wr.swap = swap;
	return kverbs_rdma_post(ep, &wr.wr, rop, flags);
}

/**
 * kverbs_atomic_cmp_swap - compare-and-swap a peer's 64-bit word
 * @ep: connected endpoint
 * @op: the word at @op->remote (8-byte aligned offset, in an extent
 *	granted KVERBS_ACCESS_REMOTE_ATOMIC); its previous value lands at
 *	@op->local_off (8-byte aligned) in @op->local; @op->len is ignored
 * @compare: value expected
 * @swap: value stored if it matched
 * @flags: KVERBS_NOWAIT to fail instead of sleeping for a free slot
 *
 * The previous value is in the device's byte order for atomics (host
 * order on rxe).
 *
 * Context: process, may sleep; see KVERBS_NOWAIT for atomic contexts.
 * Return: as kverbs_rdma_read(), or -EOPNOTSUPP if the device has no
 * atomics.
 */
int kverbs_atomic_cmp_swap(struct kverbs_ep *ep,
			   const struct kverbs_rdma_op *op, u64 compare,
			   u64 swap, unsigned int flags)
{
	return kverbs_atomic(ep, IB_WR_ATOMIC_CMP_AND_SWP, op, compare, swap,
			     flags);
}
EXPORT_SYMBOL_NS_GPL(kverbs_atomic_cmp_swap, KVERBS_NS);

/**
 * kverbs_atomic_fetch_add - add to a peer's 64-bit word
 * @ep: connected endpoint
 * @op: as for kverbs_atomic_cmp_swap()
 * @add: amount added
 * @flags: KVERBS_NOWAIT to fail instead of sleeping for a free slot
 *
 * Context: process, may sleep; see KVERBS_NOWAIT for atomic contexts.
 * Return: as kverbs_atomic_cmp_swap().
 */
int kverbs_atomic_fetch_add(struct kverbs_ep *ep,
			    const struct kverbs_rdma_op *op, u64 add,
			    unsigned int flags)
{
	return kverbs_atomic(ep, IB_WR_ATOMIC_FETCH_AND_ADD, op, add, 0, flags);
}
EXPORT_SYMBOL_NS_GPL(kverbs_atomic_fetch_add, KVERBS_NS);
