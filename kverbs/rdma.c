// SPDX-License-Identifier: GPL-2.0-only
/*
 * One-sided operations: RDMA read and write, compare-and-swap and
 * fetch-and-add, between a local registered region and a peer's region.
 *
 * Each operation takes an operation slot of the endpoint's send queue and
 * goes through kvmsg's single posting path, so it counts for selective
 * signaling like any message: without a @done callback it is posted
 * unsignaled and reclaimed by a later completion.
 */
#include "kverbs-pri.h"

static int kverbs_rdma_post(struct kverbs_ep *ep, struct ib_send_wr *wr,
			    kverbs_rdma_done_t done, void *ctx,
			    unsigned int flags)
{
	struct kvmsg_op *op;
	int ret;

	op = kvmsg_op_get(ep, flags);
	if (IS_ERR(op))
		return PTR_ERR(op);
	op->done = done;
	op->ctx = ctx;
	spin_lock_bh(&ep->lock);
	ret = kvmsg_post_op_locked(ep, op, wr);
	spin_unlock_bh(&ep->lock);
	if (ret)
		kvmsg_op_put(ep, op);
	return ret;
}

static int kverbs_rdma_rw(struct kverbs_ep *ep, enum ib_wr_opcode opcode,
			  struct kverbs_region *local, u64 off, u64 raddr,
			  u32 rkey, u32 len, kverbs_rdma_done_t done, void *ctx,
			  unsigned int flags)
{
	struct ib_rdma_wr wr = {};
	struct ib_sge sge;

	if (!len || kverbs_region_local(local, off, len, &sge))
		return -EINVAL;
	wr.wr.opcode = opcode;
	wr.wr.sg_list = &sge;
	wr.wr.num_sge = 1;
	wr.remote_addr = raddr;
	wr.rkey = rkey;
	return kverbs_rdma_post(ep, &wr.wr, done, ctx, flags);
}

/**
 * kverbs_rdma_read - read a peer's memory into a local region
 * @ep: connected endpoint
 * @local: registered region receiving the data
 * @off: offset in @local
 * @raddr: peer address (from the peer's kverbs_region_addr() + offset)
 * @rkey: the peer region's rkey
 * @len: bytes, within @local
 * @done: called once when the read completed or failed; NULL for none
 * @ctx: passed to @done
 * @flags: KVMSG_NOWAIT to fail instead of sleeping for a free slot
 *
 * @done gets 0, -EREMOTEIO (the peer refused the access: bad rkey or
 * bounds, or an invalidated region; the connection then closes) or
 * -ECONNRESET (flushed at teardown).  Context of @done: softirq or poll.
 *
 * Context: process, may sleep; softirq with KVMSG_NOWAIT.
 * Return: 0 when posted; -EINVAL, -EAGAIN, -EINTR, -ENOTCONN or the
 * endpoint's error, or a provider error.
 */
int kverbs_rdma_read(struct kverbs_ep *ep, struct kverbs_region *local,
		     u64 off, u64 raddr, u32 rkey, u32 len,
		     kverbs_rdma_done_t done, void *ctx, unsigned int flags)
{
	return kverbs_rdma_rw(ep, IB_WR_RDMA_READ, local, off, raddr, rkey,
			      len, done, ctx, flags);
}
EXPORT_SYMBOL_NS_GPL(kverbs_rdma_read, KVERBS_NS);

/**
 * kverbs_rdma_write - write a local region's bytes into a peer's memory
 * @ep: connected endpoint
 * @local: registered region holding the data
 * @off: offset in @local
 * @raddr: peer address
 * @rkey: the peer region's rkey
 * @len: bytes, within @local
 * @done: called once when the write completed or failed; NULL for none
 * @ctx: passed to @done
 * @flags: KVMSG_NOWAIT to fail instead of sleeping for a free slot
 *
 * A message sent after the write on the same endpoint arrives after the
 * written data is visible to the peer (RC ordering), which is how a peer
 * learns that the data is there.
 *
 * Context: process, may sleep; softirq with KVMSG_NOWAIT.
 * Return: as kverbs_rdma_read().
 */
int kverbs_rdma_write(struct kverbs_ep *ep, struct kverbs_region *local,
		      u64 off, u64 raddr, u32 rkey, u32 len,
		      kverbs_rdma_done_t done, void *ctx, unsigned int flags)
{
	return kverbs_rdma_rw(ep, IB_WR_RDMA_WRITE, local, off, raddr, rkey,
			      len, done, ctx, flags);
}
EXPORT_SYMBOL_NS_GPL(kverbs_rdma_write, KVERBS_NS);

static int kverbs_atomic(struct kverbs_ep *ep, enum ib_wr_opcode opcode,
			 struct kverbs_region *local, u64 off, u64 raddr,
			 u32 rkey, u64 compare_add, u64 swap,
			 kverbs_rdma_done_t done, void *ctx, unsigned int flags)
{
	struct ib_atomic_wr wr = {};
	struct ib_sge sge;

	if (ep->dom->kdev &&
	    ep->dom->kdev->ibdev->attrs.atomic_cap == IB_ATOMIC_NONE)
		return -EOPNOTSUPP;
	if ((raddr | off) & 7 || kverbs_region_local(local, off, 8, &sge))
		return -EINVAL;
	wr.wr.opcode = opcode;
	wr.wr.sg_list = &sge;
	wr.wr.num_sge = 1;
	wr.remote_addr = raddr;
	wr.rkey = rkey;
	wr.compare_add = compare_add;
	wr.swap = swap;
	return kverbs_rdma_post(ep, &wr.wr, done, ctx, flags);
}

/**
 * kverbs_atomic_cmp_swap - compare-and-swap a peer's 64-bit word
 * @ep: connected endpoint
 * @local: registered region receiving the word's previous value
 * @off: 8-byte aligned offset in @local
 * @raddr: 8-byte aligned peer address
 * @rkey: the peer region's rkey (registered with KVERBS_ACCESS_REMOTE_ATOMIC)
 * @compare: value expected at @raddr
 * @swap: value stored if it matched
 * @done: called once on completion; NULL for none
 * @ctx: passed to @done
 * @flags: KVMSG_NOWAIT to fail instead of sleeping for a free slot
 *
 * The previous value lands at @off in @local in the device's byte order
 * for atomics (host order on rxe).
 *
 * Context: process, may sleep; softirq with KVMSG_NOWAIT.
 * Return: as kverbs_rdma_read(), or -EOPNOTSUPP if the device has no
 * atomics.
 */
int kverbs_atomic_cmp_swap(struct kverbs_ep *ep, struct kverbs_region *local,
			   u64 off, u64 raddr, u32 rkey, u64 compare,
			   u64 swap, kverbs_rdma_done_t done, void *ctx,
			   unsigned int flags)
{
	return kverbs_atomic(ep, IB_WR_ATOMIC_CMP_AND_SWP, local, off, raddr,
			     rkey, compare, swap, done, ctx, flags);
}
EXPORT_SYMBOL_NS_GPL(kverbs_atomic_cmp_swap, KVERBS_NS);

/**
 * kverbs_atomic_fetch_add - add to a peer's 64-bit word
 * @ep: connected endpoint
 * @local: registered region receiving the word's previous value
 * @off: 8-byte aligned offset in @local
 * @raddr: 8-byte aligned peer address
 * @rkey: the peer region's rkey (registered with KVERBS_ACCESS_REMOTE_ATOMIC)
 * @add: amount added
 * @done: called once on completion; NULL for none
 * @ctx: passed to @done
 * @flags: KVMSG_NOWAIT to fail instead of sleeping for a free slot
 *
 * Context: process, may sleep; softirq with KVMSG_NOWAIT.
 * Return: as kverbs_atomic_cmp_swap().
 */
int kverbs_atomic_fetch_add(struct kverbs_ep *ep, struct kverbs_region *local,
			    u64 off, u64 raddr, u32 rkey, u64 add,
			    kverbs_rdma_done_t done, void *ctx,
			    unsigned int flags)
{
	return kverbs_atomic(ep, IB_WR_ATOMIC_FETCH_AND_ADD, local, off, raddr,
			     rkey, add, 0, done, ctx, flags);
}
EXPORT_SYMBOL_NS_GPL(kverbs_atomic_fetch_add, KVERBS_NS);
