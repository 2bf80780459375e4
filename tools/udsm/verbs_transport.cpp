// SPDX-License-Identifier: GPL-2.0-only
//
// The verbs transport: a full mesh of RC queue pairs by librdmacm.  The
// lower node of a pair listens and accepts, the higher dials (again and
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
// slot.  A sender waiting for room holds the engine's lock, and the
// peer's receives may wait for its progress thread, which may wait for
// that lock: a cycle would need a QP's 63 sends and its peer's 64
// receive buffers both full, while the protocol has a few messages per
// outstanding fault in flight between two nodes.  Each QP has recv_depth receive buffers of 32 bytes, reposted
// as soon as their message is handled; a peer that finds none waits in
// RNR retries (infinite), never fails.
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

namespace udsm {

namespace {

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

// host to wire order, or back (a swap either way on a little-endian host)
conn_data wire_order(conn_data d)
{
    d.npages = htobe32(d.npages);
    d.page_size = htobe32(d.page_size);
    d.rkey = htobe32(d.rkey);
    d.addr = htobe64(d.addr);
    d.lock_rkey = htobe32(d.lock_rkey);
    d.lock_addr = htobe64(d.lock_addr);
    return d;
}

// the peer's conn_data, in host order; throws on a short one
conn_data received(const rdma_conn_param &p)
{
    if (!p.private_data || p.private_data_len < sizeof(conn_data))
        throw std::runtime_error("a peer's connection private data has " +
                                 std::to_string(p.private_data_len) + " bytes, not " +
                                 std::to_string(sizeof(conn_data)));
    conn_data d;
    std::memcpy(&d, p.private_data, sizeof(d));
    return wire_order(d);
}

using clock = std::chrono::steady_clock;

std::runtime_error sys_error(const std::string &what)
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

verbs_transport::~verbs_transport()
{
    for (peer &p : peers_)
        if (p.id) {
            if (p.id->qp)
                rdma_destroy_qp(p.id);
            rdma_destroy_id(p.id);
        }
    if (listener_)
        rdma_destroy_id(listener_);
    if (view_mr_)
        ibv_dereg_mr(view_mr_);
    if (recv_mr_)
        ibv_dereg_mr(recv_mr_);
    if (words_mr_)
        ibv_dereg_mr(words_mr_);
    if (results_mr_)
        ibv_dereg_mr(results_mr_);
    if (rcq_)
        ibv_destroy_cq(rcq_);
    if (scq_)
        ibv_destroy_cq(scq_);
    if (comp_)
        ibv_destroy_comp_channel(comp_);
    if (pd_)
        ibv_dealloc_pd(pd_);
    if (ch_)
        rdma_destroy_event_channel(ch_);
    if (stop_ >= 0)
        ::close(stop_);
    if (wake_ >= 0)
        ::close(wake_);
}

sockaddr_storage verbs_transport::addr_of(unsigned node) const
{
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    const std::string port = std::to_string(c_.port);
    const int err = ::getaddrinfo(c_.peers[node - 1].c_str(), port.c_str(), &hints, &res);
    if (err)
        throw std::runtime_error("UDSM_PEERS: node " + std::to_string(node) + "'s address " +
                                 c_.peers[node - 1] + ": " + gai_strerror(err));
    sockaddr_storage ss{};
    std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
    ::freeaddrinfo(res);
    return ss;
}

conn_data verbs_transport::mine() const
{
    conn_data d;
    std::memset(&d, 0, sizeof(d));
    d.node = static_cast<std::uint8_t>(c_.node);
    d.nnodes = static_cast<std::uint8_t>(c_.nnodes());
    d.placement = c_.block ? KDSM_PLACE_BLOCK : KDSM_PLACE_CYCLIC;
    d.npages = c_.npages;
    d.page_size = static_cast<std::uint32_t>(ps_);
    d.rkey = view_mr_ ? view_mr_->rkey : 0;
    d.addr = reinterpret_cast<std::uintptr_t>(view_);
    d.lock_rkey = words_mr_ && atomics_ ? words_mr_->rkey : 0;
    d.lock_addr = reinterpret_cast<std::uintptr_t>(words_.data());
    return d;
}

void verbs_transport::check(const conn_data &d, unsigned expect) const
{
    std::string why;
    const conn_data m = mine();
    if (expect ? d.node != expect : (d.node <= c_.node || d.node > c_.nnodes()))
        why = "unexpected node " + std::to_string(d.node);
    else if (d.nnodes != m.nnodes || d.placement != m.placement || d.npages != m.npages ||
             d.page_size != m.page_size)
        why = "node " + std::to_string(d.node) + "'s geometry (nodes, placement, pages, page "
              "size) differs";
    if (!why.empty())
        throw std::runtime_error("node " + std::to_string(c_.node) + " refuses a peer: " + why);
}

void verbs_transport::setup_device(ibv_context *ctx)
{
    if (ctx_) {
        if (ctx != ctx_)
            throw std::runtime_error("the peers are reached through different RDMA devices");
        return;
    }
    ctx_ = ctx;
    pd_ = ibv_alloc_pd(ctx);
    comp_ = ibv_create_comp_channel(ctx);
    const int nq = int(c_.nnodes());
    rcq_ = pd_ && comp_ ? ibv_create_cq(ctx, nq * int(recv_depth), nullptr, comp_, 0) : nullptr;
    // the send CQ wakes it too: a CAS's result is an event
    scq_ = rcq_ ? ibv_create_cq(ctx, nq * int(sq_depth / sig_every + 2) + int(results_.size()),
                                nullptr, comp_, 0)
                : nullptr;
    if (!scq_)
        throw sys_error("RDMA device setup (PD, CQs)");
    // the least the protocol needs: peers RDMA-write pages, never read
    // (kdsm grants REMOTE_READ only for KDSM_OPT_FETCH_READ, which udsm
    // does not offer).  Every peer gets this rkey for the whole region:
    // udsm trusts its peers (Documentation/udsm.rst)
    view_mr_ = ibv_reg_mr(pd_, view_, std::size_t(c_.npages) * ps_,
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    recv_mr_ = ibv_reg_mr(pd_, recv_bufs_.data(), recv_bufs_.size(), IBV_ACCESS_LOCAL_WRITE);
    results_mr_ = ibv_reg_mr(pd_, results_.data(), results_.size() * sizeof(std::uint64_t),
                             IBV_ACCESS_LOCAL_WRITE);
    if (!view_mr_ || !recv_mr_ || !results_mr_)
        throw sys_error("ibv_reg_mr");
    ibv_device_attr attr{};
    atomics_ = !ibv_query_device(ctx, &attr) && attr.atomic_cap != IBV_ATOMIC_NONE;
    // without atomics the peers get no key: their queue locks here are
    // EOPNOTSUPP, everything else works
    if (atomics_)
        words_mr_ = ibv_reg_mr(pd_, words_.data(), words_.size() * sizeof(std::uint64_t),
                               IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
    // the receive CQ wakes the progress thread; poll mode never sleeps
    const int fl = ::fcntl(comp_->fd, F_GETFL);
    ::fcntl(comp_->fd, F_SETFL, fl | O_NONBLOCK);
    if (ibv_req_notify_cq(rcq_, 0) || ibv_req_notify_cq(scq_, 0))
        throw sys_error("ibv_req_notify_cq");
}

void verbs_transport::learn(unsigned node, const conn_data &d)
{
    peers_[node].rkey = d.rkey;
    peers_[node].addr = d.addr;
    peers_[node].lock_rkey = d.lock_rkey;
    peers_[node].lock_addr = d.lock_addr;
}

void verbs_transport::post_recv(unsigned node, unsigned slot)
{
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(recv_bufs_.data() +
                                                (node * recv_depth + slot) * msg_len);
    sge.length = msg_len;
    sge.lkey = recv_mr_->lkey;
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = std::uint64_t(peers_[node].gen) << 32 | node << 16 | slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (ibv_post_recv(peers_[node].id->qp, &wr, &bad))
        die(node, std::string("ibv_post_recv: ") + std::strerror(errno));
}

void verbs_transport::make_qp(rdma_cm_id *id, unsigned node)
{
    setup_device(id->verbs);
    ibv_qp_init_attr a{};
    a.send_cq = scq_;
    a.recv_cq = rcq_;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = sq_depth;
    a.cap.max_recv_wr = recv_depth;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = msg_len;
    if (rdma_create_qp(id, pd_, &a))
        throw sys_error("rdma_create_qp");
    peer &p = peers_[node];
    p.id = id;
    p.gen = next_gen_++;
    p.outstanding = p.since_signal = 0;
    id->context = reinterpret_cast<void *>(std::uintptr_t(node));
    for (unsigned s = 0; s < recv_depth; s++)
        post_recv(node, s);
}

rdma_cm_event *verbs_transport::wait_event(rdma_event_channel *ch, clock::time_point deadline)
{
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
        pollfd pf{ch->fd, POLLIN, 0};
        if (left <= 0 || ::poll(&pf, 1, int(left)) == 0)
            return nullptr;
        rdma_cm_event *ev = nullptr;
        if (rdma_get_cm_event(ch, &ev) == 0)
            return ev;
        if (errno != EAGAIN && errno != EINTR)
            throw sys_error("rdma_get_cm_event");
    }
}

// Dial @node until it accepts or the deadline: each attempt on its own
// channel, migrated to the main one once established.
void verbs_transport::dial(unsigned node, clock::time_point deadline)
{
    const sockaddr_storage dst = addr_of(node);
    std::string last = "no attempt";
    while (clock::now() < deadline) {
        rdma_event_channel *ch = rdma_create_event_channel();
        rdma_cm_id *id = nullptr;
        if (!ch || rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP)) {
            const std::runtime_error e = sys_error("rdma_create_id");
            if (ch)
                rdma_destroy_event_channel(ch);
            throw e;
        }
        // anything in the attempt that throws (a refused peer, a failed
        // QP) takes the attempt's QP, id and channel with it
        try {
            bool ok = false;
            auto step = [&](rdma_cm_event_type want) {
                rdma_cm_event *ev = wait_event(ch, std::min(deadline, clock::now() +
                                                            std::chrono::seconds(5)));
                if (!ev) {
                    last = "timed out";
                    return false;
                }
                const bool good = ev->event == want;
                if (good && want == RDMA_CM_EVENT_ESTABLISHED) {
                    conn_data d;
                    try {
                        d = received(ev->param.conn);
                    } catch (...) {
                        rdma_ack_cm_event(ev);
                        throw;
                    }
                    rdma_ack_cm_event(ev);
                    check(d, node);
                    learn(node, d);
                    return true;
                }
                if (!good)
                    last = rdma_event_str(ev->event);
                rdma_ack_cm_event(ev);
                return good;
            };
            if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr *>(
                                      const_cast<sockaddr_storage *>(&dst)), 2000) == 0 &&
                step(RDMA_CM_EVENT_ADDR_RESOLVED) && rdma_resolve_route(id, 2000) == 0 &&
                step(RDMA_CM_EVENT_ROUTE_RESOLVED)) {
                make_qp(id, node);
                const conn_data d = wire_order(mine());
                rdma_conn_param cp{};
                cp.private_data = &d;
                cp.private_data_len = sizeof(d);
                cp.responder_resources = 1;
                cp.initiator_depth = 1;
                // 6, not 7: rxe takes 7 as "retry for ever" (its completer
                // counts down only below 7, as bench/rawping/rawping.c says),
                // so a peer that dies silently would never fail a send; the
                // passive side takes the REQ's count
                cp.retry_count = 6;
                cp.rnr_retry_count = 7;  // infinite: a receiver reposts soon
                ok = rdma_connect(id, &cp) == 0 && step(RDMA_CM_EVENT_ESTABLISHED);
            }
            if (ok) {
                if (rdma_migrate_id(id, ch_))
                    throw sys_error("rdma_migrate_id");
                rdma_destroy_event_channel(ch);
                peers_[node].up = true;
                return;
            }
        } catch (...) {
            if (id->qp)
                rdma_destroy_qp(id);
            rdma_destroy_id(id);
            rdma_destroy_event_channel(ch);
            if (peers_[node].id == id)
                peers_[node].id = nullptr;
            throw;
        }
        // rejected (not listening yet) or unreachable: the QP is in ERROR,
        // its flushed receives carry a generation no connection has now
        if (id->qp)
            rdma_destroy_qp(id);
        rdma_destroy_id(id);
        rdma_destroy_event_channel(ch);
        peers_[node].id = nullptr;
        drain_stale();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error("node " + std::to_string(c_.node) + ": dialing node " +
                             std::to_string(node) + " (" + c_.peers[node - 1] +
                             ") failed within UDSM_JOIN_MS: " + last);
}

// Accept every higher node on the listener (the main channel).
void verbs_transport::accept_all(clock::time_point deadline)
{
    unsigned want = c_.nnodes() - c_.node;
    while (want) {
        rdma_cm_event *ev = wait_event(ch_, deadline);
        if (!ev)
            throw std::runtime_error("node " + std::to_string(c_.node) +
                                     ": the higher nodes did not all connect within UDSM_JOIN_MS");
        rdma_cm_id *id = ev->id;
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            conn_data d{};
            std::string bad;
            try {
                d = received(ev->param.conn);
            } catch (const std::exception &e) {
                bad = e.what();
            }
            rdma_ack_cm_event(ev);
            try {
                if (!bad.empty())
                    throw std::runtime_error("node " + std::to_string(c_.node) +
                                             " refuses a peer: " + bad);
                check(d, 0);
            } catch (const std::exception &e) {
                rdma_reject(id, nullptr, 0);
                rdma_destroy_id(id);
                throw;
            }
            if (peers_[d.node].up) {
                rdma_reject(id, nullptr, 0);
                rdma_destroy_id(id);
                throw std::runtime_error("node " + std::to_string(d.node) + " connected twice");
            }
            drop_attempt(d.node);  // an earlier one, which its dialer gave up
            make_qp(id, d.node);
            learn(d.node, d);
            const conn_data m = wire_order(mine());
            rdma_conn_param cp{};
            cp.private_data = &m;
            cp.private_data_len = sizeof(m);
            cp.responder_resources = 1;
            cp.initiator_depth = 1;
            cp.retry_count = 6;  // as dial(): finite on rxe too
            cp.rnr_retry_count = 7;
            if (rdma_accept(id, &cp))
                throw sys_error("rdma_accept");
        } else {
            const unsigned n = unsigned(reinterpret_cast<std::uintptr_t>(id->context));
            const bool est = ev->event == RDMA_CM_EVENT_ESTABLISHED;
            rdma_ack_cm_event(ev);
            if (!n || n > c_.nnodes() || peers_[n].id != id || peers_[n].up)
                continue;
            if (est) {
                peers_[n].up = true;
                want--;
            } else {
                drop_attempt(n);  // failed: its dialer tries again
            }
        }
    }
}

void verbs_transport::form()
{
    const auto deadline = clock::now() + std::chrono::milliseconds(c_.join_ms);
    if (c_.node < c_.nnodes()) {
        sockaddr_storage me = addr_of(c_.node);
        if (rdma_create_id(ch_, &listener_, nullptr, RDMA_PS_TCP) ||
            rdma_bind_addr(listener_, reinterpret_cast<sockaddr *>(&me)) ||
            rdma_listen(listener_, KDSM_MAX_NODES))
            throw sys_error("listening on " + c_.peers[c_.node - 1] + " port " +
                            std::to_string(c_.port));
        if (listener_->verbs)
            setup_device(listener_->verbs);
    }
    for (unsigned n = 1; n < c_.node; n++)
        dial(n, deadline);
    accept_all(deadline);
    const int fl = ::fcntl(ch_->fd, F_GETFL);
    ::fcntl(ch_->fd, F_SETFL, fl | O_NONBLOCK);
}

void verbs_transport::die(unsigned to, const std::string &why)
{
    std::fprintf(stderr, "udsm: node %u lost node %u (%s)\n", c_.node, to, why.c_str());
    std::_Exit(3);
}

// The flushed receives of a destroyed attempt's QP out of the receive
// CQ, which they would overflow over many attempts.  Every completion of
// a node's current attempt (its id set: connected, or accepted and not
// yet seen ESTABLISHED here, while the dialer may be sending already) is
// kept for the progress thread; handle() checks the generation again.
void verbs_transport::drain_stale()
{
    ibv_wc wc[16];
    int n;
    while ((n = ibv_poll_cq(rcq_, 16, wc)) > 0)
        for (int i = 0; i < n; i++) {
            const unsigned node = unsigned(wc[i].wr_id >> 16 & 0xff);
            if (node <= c_.nnodes() && peers_[node].id &&
                std::uint32_t(wc[i].wr_id >> 32) == peers_[node].gen)
                early_.push_back(wc[i]);
        }
}

// An accepted attempt that never got established: its QP (in ERROR,
// its receives flushed with a generation no connection has) and its id.
void verbs_transport::drop_attempt(unsigned node)
{
    peer &p = peers_[node];
    if (!p.id || p.up)
        return;
    if (p.id->qp)
        rdma_destroy_qp(p.id);
    rdma_destroy_id(p.id);
    p.id = nullptr;
    drain_stale();
}

// Post @wr on @to's QP, signaled every sig_every-th (or @signal); wait
// for room.  A failure is reported once send_mu_ is released: lost()
// sends ABORTs, which take it.
void verbs_transport::post(unsigned to, ibv_send_wr &wr, bool signal)
{
    failure f;
    {
        std::lock_guard l(send_mu_);
        f = post_locked(to, wr, signal);
    }
    if (!f.why.empty())
        fail(f);
}

verbs_transport::failure verbs_transport::post_locked(unsigned to, ibv_send_wr &wr, bool signal)
{
    peer &p = peers_[to];
    // nothing would answer: its progress thread is gone
    if (p.gone)
        return {to, "it has left the cluster"};
    while (p.outstanding >= sq_depth - 1) {
        failure f = reap_send_locked();
        if (!f.why.empty())
            return f;
        if (p.gone)  // flushed: its queue is empty now
            return {to, "it has left the cluster"};
        if (!cas_out_.empty()) {
            const std::uint64_t one = 1;
            [[maybe_unused]] ssize_t n = ::write(wake_, &one, sizeof(one));
        }
    }
    p.outstanding++;
    // every WR names its peer (an unsignaled one's error completion too);
    // a signaled one also the WRs it frees; a CAS's own bits stay
    wr.wr_id = (wr.wr_id & ~0xffffffull) | std::uint64_t(to) << 16;
    if (++p.since_signal == sig_every || signal) {
        wr.send_flags |= IBV_SEND_SIGNALED;
        wr.wr_id |= p.since_signal;
        p.since_signal = 0;
    }
    ibv_send_wr *bad = nullptr;
    if (ibv_post_send(p.id->qp, &wr, &bad))
        return {to, std::string("ibv_post_send: ") + std::strerror(errno)};
    return {};
}

// A send failed: the cluster fails on its peer (ABORT to the others);
// while aborting already, it is skipped.
void verbs_transport::fail(const failure &f)
{
    if (aborting_)
        return;
    if (sink_)
        sink_->lost(f.node, f.why);
    die(f.node, f.why);
}

// The signaled sends' completions, each freeing the entries it covers.
// An error completion of a peer that said BYE is its disconnect's flush:
// the peer is gone, its queue empty; any other is the first failure.
verbs_transport::failure verbs_transport::reap_send_locked()
{
    ibv_wc wc[8];
    const int n = ibv_poll_cq(scq_, 8, wc);
    if (n < 0)
        return {0, "polling the send CQ failed"};
    failure f;
    for (int i = 0; i < n; i++) {
        const unsigned node = unsigned(wc[i].wr_id >> 16 & 0xff);
        peer &p = peers_[node];
        if (wc[i].status != IBV_WC_SUCCESS) {
            if (p.left) {
                p.gone = true;
                p.outstanding = 0;
            } else if (f.why.empty()) {
                f = {node, std::string("send completion: ") + ibv_wc_status_str(wc[i].status)};
            }
            continue;
        }
        p.outstanding -= unsigned(wc[i].wr_id & 0xffff);
        if (wc[i].wr_id & cas_wr)
            cas_out_.push_back(wc[i].wr_id);
    }
    return f;
}

// In the progress thread: the send CQ, and the CASes whose results are in.
void verbs_transport::reap_send(sink &s)
{
    std::vector<std::uint64_t> done;
    failure f;
    {
        std::lock_guard l(send_mu_);
        f = reap_send_locked();
        // copied, not swapped: cas_out_ keeps its reserved room
        done.assign(cas_out_.begin(), cas_out_.end());
        cas_out_.clear();
    }
    if (!f.why.empty())
        fail(f);
    for (const std::uint64_t w : done) {
        const auto id = std::uint32_t(w >> 24 & 0xffffffff);
        const bool px = w & cas_px;
        s.cas_done(id, px, results_[2 * id + px]);
    }
}

bool verbs_transport::cas(unsigned to, std::uint32_t id, bool px, std::uint8_t cmp,
                          std::uint8_t swap)
{
    const peer &p = peers_[to];
    if (!atomics_ || !p.lock_rkey)
        return false;
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(&results_[2 * id + px]);
    sge.length = sizeof(std::uint64_t);
    sge.lkey = results_mr_->lkey;
    ibv_send_wr wr{};
    wr.wr_id = cas_wr | (px ? cas_px : 0) | std::uint64_t(id) << 24;
    wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.atomic.remote_addr = p.lock_addr + std::uint64_t(id / c_.nnodes()) * sizeof(std::uint64_t);
    wr.wr.atomic.rkey = p.lock_rkey;
    wr.wr.atomic.compare_add = cmp;
    wr.wr.atomic.swap = swap;
    post(to, wr, true);
    // a sender may reap it: the progress thread hears of it through @wake_
    return true;
}

void verbs_transport::post_msg(unsigned to, const void *msg, bool signal, std::uint64_t tag)
{
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(msg);
    sge.length = msg_len;
    ibv_send_wr wr{};
    wr.wr_id = tag;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_INLINE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    post(to, wr, signal);
    st_.msg(*static_cast<const std::uint8_t *>(msg), true);
}

void verbs_transport::send(unsigned to, const void *msg)
{
    post_msg(to, msg, false);
}

void verbs_transport::write_page(unsigned to, std::uint32_t page)
{
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(view_ + std::size_t(page) * ps_);
    sge.length = static_cast<std::uint32_t>(ps_);
    sge.lkey = view_mr_->lkey;
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = peers_[to].addr + std::uint64_t(page) * ps_;
    wr.wr.rdma.rkey = peers_[to].rkey;
    post(to, wr);
    st_.add(KDSM_STAT_RDMA_WRITE_BYTES, ps_);
}

void verbs_transport::handle(sink &s, const ibv_wc &wc)
{
    const std::uint32_t gen = std::uint32_t(wc.wr_id >> 32);
    const unsigned node = unsigned(wc.wr_id >> 16 & 0xff);
    const unsigned slot = unsigned(wc.wr_id & 0xffff);
    peer &p = peers_[node];
    // an attempt never established
    if (gen != p.gen || !p.up)
        return;
    if (wc.status != IBV_WC_SUCCESS) {
        // after its BYE: its disconnect's flush
        if (p.left) {
            p.gone = true;
            return;
        }
        s.lost(node, std::string("receive completion: ") + ibv_wc_status_str(wc.status));
    }
    // a SEND of one whole message, nothing else: a short one would be
    // read with the slot's previous bytes
    if (wc.opcode != IBV_WC_RECV || wc.byte_len != msg_len) {
        st_.add(KDSM_STAT_MALFORMED);
        s.lost(node, "a receive of opcode " + std::to_string(wc.opcode) + " and " +
                         std::to_string(wc.byte_len) + " bytes, not a " +
                         std::to_string(msg_len) + "-byte SEND");
    }
    std::uint8_t copy[msg_len];
    std::memcpy(copy, recv_bufs_.data() + (node * recv_depth + slot) * msg_len, msg_len);
    post_recv(node, slot);
    st_.msg(copy[0], false);
    if (copy[0] == UDSM_BYE) {
        p.left = true;
        byes_++;
    } else {
        s.deliver(node, copy);
    }
}

// The receive CQ to its end; how many completions it held.
int verbs_transport::reap_recv(sink &s)
{
    ibv_wc wc[16];
    int n, all = 0;
    while ((n = ibv_poll_cq(rcq_, 16, wc)) > 0) {
        all += n;
        for (int i = 0; i < n; i++)
            handle(s, wc[i]);
    }
    if (n < 0)
        s.lost(0, "polling the receive CQ failed");
    return all;
}

void verbs_transport::cm_events(sink &s)
{
    // a peer's BYE completes here before its disconnect can: reap first
    reap_recv(s);
    rdma_cm_event *ev = nullptr;
    while (rdma_get_cm_event(ch_, &ev) == 0) {
        const unsigned n = unsigned(reinterpret_cast<std::uintptr_t>(ev->id->context));
        const rdma_cm_event_type type = ev->event;
        rdma_cm_id *id = ev->id;
        rdma_ack_cm_event(ev);
        // the listener stays: a request now (a stray or duplicate dialer,
        // a restarted node) is refused, and its new id destroyed (acked
        // first: destroying waits for its events)
        if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
            rdma_reject(id, nullptr, 0);
            rdma_destroy_id(id);
            std::fprintf(stderr, "udsm: node %u refused a connection request after the mesh "
                                 "formed\n", c_.node);
            continue;
        }
        if (!n || n > c_.nnodes())
            continue;
        if (type != RDMA_CM_EVENT_DISCONNECTED && type != RDMA_CM_EVENT_DEVICE_REMOVAL)
            continue;
        if (peers_[n].left)
            peers_[n].gone = true;  // after its BYE: no failure
        else
            s.lost(n, rdma_event_str(type));
    }
}

void verbs_transport::run(sink &s, int extra_fd, const std::function<void()> &on_extra)
{
    const bool busy = c_.progress == progress_kind::poll;
    for (const ibv_wc &wc : early_)
        handle(s, wc);
    early_.clear();
    for (unsigned spin = 0;; spin++) {
        pollfd fds[5] = {{stop_, POLLIN, 0}, {ch_->fd, POLLIN, 0}, {comp_->fd, POLLIN, 0},
                         {wake_, POLLIN, 0}, {extra_fd, POLLIN, 0}};
        const nfds_t nfds = extra_fd >= 0 ? 5 : 4;
        if (busy) {
            // the CQs and the faults every turn; the descriptors (stop,
            // CM) now and then; an empty turn yields, for a host with
            // fewer CPUs than running threads
            if (!reap_recv(s))
                std::this_thread::yield();
            reap_send(s);
            if (extra_fd >= 0)
                on_extra();
            if (spin % 256 || ::poll(fds, nfds, 0) <= 0)
                continue;
        } else if (::poll(fds, nfds, -1) < 0) {
            if (errno == EINTR)
                continue;
            s.lost(0, std::string("poll: ") + std::strerror(errno));
        }
        if (fds[0].revents)
            return;
        if (fds[1].revents)
            cm_events(s);
        if (nfds == 5 && fds[4].revents && !busy)
            on_extra();
        if (fds[3].revents) {
            std::uint64_t v;
            [[maybe_unused]] ssize_t r = ::read(wake_, &v, sizeof(v));
            reap_send(s);
        }
        if (fds[2].revents) {
            ibv_cq *cq = nullptr;
            void *ctx = nullptr;
            while (ibv_get_cq_event(comp_, &cq, &ctx) == 0)
                ibv_ack_cq_events(cq, 1);
            // poll, re-arm, poll again: nothing arrives unseen
            reap_recv(s);
            reap_send(s);
            if (ibv_req_notify_cq(rcq_, 0) || ibv_req_notify_cq(scq_, 0))
                s.lost(0, "ibv_req_notify_cq failed");
            reap_recv(s);
            reap_send(s);
        }
    }
}

void verbs_transport::abort_all(const void *msg)
{
    // a sender stuck on a failed QP holds send_mu_: then give up
    std::unique_lock l(send_mu_, std::try_to_lock);
    if (!l)
        return;
    l.unlock();
    // a send failing now is skipped (fail()), not reported again
    aborting_ = true;
    // not to the lost node (kdsm_sig's node, byte 2): its QP may be
    // failing, and the others are the ones to tell
    const unsigned lost = static_cast<const std::uint8_t *>(msg)[2];
    unsigned sent = 0;
    for (unsigned n = 1; n <= c_.nnodes(); n++)
        if (n != c_.node && n != lost && peers_[n].up && !peers_[n].left && !peers_[n].gone) {
            post_msg(n, msg, true, abort_wr);
            sent++;
        }
    // every ABORT's forced completion, or 100 ms: the exit would drop
    // what is not sent
    const auto end = clock::now() + std::chrono::milliseconds(100);
    ibv_wc wc[8];
    for (int got; sent && clock::now() < end;) {
        if ((got = ibv_poll_cq(scq_, 8, wc)) < 0)
            break;
        for (int i = 0; i < got; i++)
            if (wc[i].wr_id & abort_wr && sent)
                sent--;
        if (!got)
            std::this_thread::yield();
    }
}

void verbs_transport::leave()
{
    // BYE signaled, and reaped: a disconnect flushes what is not sent
    std::uint8_t bye[msg_len] = {UDSM_BYE};
    for (unsigned n = 1; n <= c_.nnodes(); n++)
        if (n != c_.node && peers_[n].up && !peers_[n].gone)
            post_msg(n, bye, true);
    for (;;) {
        failure f;
        {
            std::lock_guard l(send_mu_);
            if (std::all_of(peers_.begin(), peers_.end(),
                            [](const peer &p) { return !p.up || !p.outstanding || p.gone; }))
                break;
            f = reap_send_locked();
        }
        if (!f.why.empty())
            fail(f);
    }
    // as the unix transport: every peer's BYE, so none disconnects on a
    // peer still sending, bounded by UDSM_LEAVE_MS (not the formation
    // deadline: a peer's epilogue after the last barrier may be long)
    const auto end = clock::now() + std::chrono::milliseconds(c_.leave_ms);
    while (byes_.load() < c_.nnodes() - 1 && clock::now() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (unsigned n = 1; n <= c_.nnodes(); n++)
        if (peers_[n].id)
            rdma_disconnect(peers_[n].id);
}

}  // namespace

std::unique_ptr<transport> make_verbs_transport(const config &c, std::uint8_t *view,
                                                std::size_t page_size, stats &st)
{
    return std::make_unique<verbs_transport>(c, view, page_size, st);
}

}  // namespace udsm
