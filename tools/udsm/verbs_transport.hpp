// SPDX-License-Identifier: GPL-2.0-only
//
// The verbs transport, a full mesh of RC queue pairs by librdmacm
// (verbs_form.cpp forms it; verbs_transport.cpp: the data path, leaving
// and failing).  The lower node of a pair listens and accepts, the higher
// dials (again and
// again until UDSM_JOIN_MS while the listener is missing or refuses);
// the connection's private data carries the geometry, checked on both
// sides, and the engine view's address and rkey.  A page is RDMA-written
// into the requester's engine view, then the reply is sent on the same
// QP: RC ordering puts the data in place before the reply's receive
// completes, as in the kernel.
//
// Sizing: sends (messages inline, RDMA writes) are unsignaled but every
// sig_every-th, whose completion frees the entries of the ones before
// it; a sender that finds sq_depth - 1 entries outstanding on its QP
// polls the send CQ (no channel: only senders reap it, under send_mu_)
// until a signaled one completes.  sig_every < sq_depth - 1, so one
// signaled send is always among the outstanding ones.  The send CQ holds
// every QP's signaled sends: nnodes * sq_depth / sig_every entries at
// most, and the one forced BYE or ABORT each, plus one CAS per result
// slot.  Each QP has recv_depth receive buffers of 32 bytes, reposted
// as soon as their message is handled; a peer that finds none waits in
// RNR retries (infinite), never fails.
//
// Limit (not enforced): a sender waiting for room holds the engine's
// lock, and the peer's receives may wait for its progress thread, which
// may wait for the peer's engine lock, held by a sender waiting for room
// the other way: a deadlock with no error.  It needs a QP's 63 sends
// and its peer's 64 receive buffers full in both directions of a pair;
// an outstanding fault puts 2-3 messages on a pair, so about 30 threads
// per node faulting on one home at once.  Documentation/udsm.rst says
// to stay well below; the unix transport's socket buffer is the same.
//
// The progress thread reaps the receive CQ: in block mode it sleeps on
// the completion channel (and the CM's event channel, for disconnects):
// ibv_req_notify_cq, poll, re-arm, poll again, so no completion slips
// between the last poll and the arming; in poll mode it polls the CQ and
// reads CM events without blocking.  A disconnect or an error completion
// of an established connection whose peer did not say BYE fails the
// cluster (sink::lost); error completions of an attempt that was never
// established (a rejected dial's QP, moved to ERROR by librdmacm) are
// told apart by the connection generation in wr_id, and ignored.
//
// Leaving: a peer that said BYE still serves requests until it
// disconnects, so its messages are delivered (and their buffers
// reposted) after its BYE as before it; BYE only excuses its disconnect
// and the flush errors that follow (the peer is then "gone").  A send to
// a gone peer fails the cluster: nothing would answer it.  Send errors
// (a send completion's status, ibv_post_send) are noted under send_mu_
// and reported (sink::lost, so the survivors get an ABORT) once it is
// released; every send WR's wr_id names its peer.
#pragma once

#include "transport.hpp"

#include <kverbs/kdsm.h>

#include <endian.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace udsm::verbs_detail {

constexpr unsigned sq_depth = 64;
constexpr unsigned sig_every = 16;
constexpr unsigned recv_depth = 64;

// wr_id of a send WR: bits 0-15 the WRs a signaled one frees, 16-23 the
// peer; a compare-and-swap adds its lock id (24-55), its result slot
// (bit 62) and cas_wr (bit 63).
// An ABORT carries abort_wr (bit 61).
constexpr std::uint64_t cas_wr = 1ull << 63, cas_px = 1ull << 62, abort_wr = 1ull << 61;
static_assert(sig_every < sq_depth - 1);

// in the connection's private data (at most 56 bytes on IB), big-endian
// on the wire (wire_order()); no padding, and zeroed whole (mine()), so
// no stale bytes leave; a shorter private data is refused (received())
struct conn_data {
    std::uint8_t node, nnodes, placement, reserved;
    std::uint32_t npages, page_size, rkey;
    std::uint64_t addr;
    std::uint32_t lock_rkey;  // 0: no atomics on this side
    std::uint32_t reserved2;
    std::uint64_t lock_addr;  // our lock words (the queue lock)
};
static_assert(sizeof(conn_data) == 40 && sizeof(conn_data) <= 56);

using clock = std::chrono::steady_clock;

inline std::runtime_error sys_error(const std::string &what)
{
    return std::runtime_error(what + ": " + std::strerror(errno));
}

class verbs_transport final : public transport {
public:
    verbs_transport(const config &c, std::uint8_t *view, std::size_t page_size, stats &st)
        : c_(c), view_(view), ps_(page_size), st_(st), peers_(c.nnodes() + 1),
          recv_bufs_((c.nnodes() + 1) * recv_depth * msg_len),
          words_(KDSM_MAX_LOCKS / c.nnodes() + 1), results_(2 * KDSM_MAX_LOCKS)
    {
        stop_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        ch_ = rdma_create_event_channel();
        if (stop_ < 0 || wake_ < 0 || !ch_)
            throw sys_error("rdma_create_event_channel");
        // one CAS in flight per result slot: the reaping sender (maybe in
        // the SIGSEGV handler) never allocates
        cas_out_.reserve(results_.size());
    }
    ~verbs_transport() override;

    void form() override;
    void send(unsigned to, const void *msg) override;
    void write_page(unsigned to, std::uint32_t page) override;
    void run(sink &s, int extra_fd, const std::function<void()> &on_extra) override;
    void stop() override
    {
        const std::uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(stop_, &one, sizeof(one));
    }
    void leave() override;
    void abort_all(const void *msg) override;
    bool cas(unsigned to, std::uint32_t id, bool px, std::uint8_t cmp,
             std::uint8_t swap) override;

private:
    struct peer {
        rdma_cm_id *id = nullptr;
        std::uint32_t gen = 0;      // of the established connection
        bool up = false;
        std::atomic<bool> left{false};  // its BYE arrived
        std::atomic<bool> gone{false};  // then it disconnected (or flushed)
        unsigned outstanding = 0;   // send WRs not known complete, under send_mu_
        unsigned since_signal = 0;
        std::uint32_t rkey = 0;
        std::uint64_t addr = 0;
        std::uint32_t lock_rkey = 0;
        std::uint64_t lock_addr = 0;
    };

    sockaddr_storage addr_of(unsigned node) const;
    conn_data mine() const;
    void check(const conn_data &d, unsigned expect) const;
    void setup_device(ibv_context *ctx);
    void make_qp(rdma_cm_id *id, unsigned node);
    void dial(unsigned node, clock::time_point deadline);
    void accept_all(clock::time_point deadline);
    rdma_cm_event *wait_event(rdma_event_channel *ch, clock::time_point deadline);
    void post_recv(unsigned node, unsigned slot);
    struct failure {
        unsigned node = 0;
        std::string why;  // empty: none
    };
    void post(unsigned to, ibv_send_wr &wr, bool signal = false);
    failure post_locked(unsigned to, ibv_send_wr &wr, bool signal);
    void fail(const failure &f);
    void post_msg(unsigned to, const void *msg, bool signal, std::uint64_t tag = 0);
    failure reap_send_locked();
    void reap_send(sink &s);
    void learn(unsigned node, const conn_data &d);
    void handle(sink &s, const ibv_wc &wc);
    void drain_stale();
    void drop_attempt(unsigned node);
    [[noreturn]] void die(unsigned to, const std::string &why);
    int reap_recv(sink &s);
    void cm_events(sink &s);

    const config c_;
    std::uint8_t *view_;
    const std::size_t ps_;
    stats &st_;
    std::vector<peer> peers_;  // [node]
    std::vector<std::uint8_t> recv_bufs_;  // [node][slot][32]
    int stop_ = -1;
    rdma_event_channel *ch_ = nullptr;  // the listener's, then every id's
    rdma_cm_id *listener_ = nullptr;
    ibv_context *ctx_ = nullptr;
    ibv_pd *pd_ = nullptr;
    ibv_comp_channel *comp_ = nullptr;
    ibv_cq *rcq_ = nullptr, *scq_ = nullptr;
    ibv_mr *view_mr_ = nullptr, *recv_mr_ = nullptr;
    std::mutex send_mu_;  // every QP's send queue and the send CQ
    std::uint32_t next_gen_ = 1;
    std::atomic<unsigned> byes_{0};
    // completions reaped while forming, from peers already connected
    std::vector<ibv_wc> early_;
    // the queue lock: our lock words, granted for remote atomics, and the
    // CAS results, one slot per lock and role (each has one CAS in flight)
    std::vector<std::uint64_t> words_, results_;
    ibv_mr *words_mr_ = nullptr, *results_mr_ = nullptr;
    bool atomics_ = false;  // the device has them
    // CASes completed, for the progress thread (under send_mu_); a sender
    // that reaps one writes @wake_
    std::vector<std::uint64_t> cas_out_;
    int wake_ = -1;
    // abort_all() runs: a send that fails then is skipped, not reported
    std::atomic<bool> aborting_{false};
};

}  // namespace udsm::verbs_detail
