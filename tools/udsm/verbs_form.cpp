// SPDX-License-Identifier: GPL-2.0-only
//
// The verbs transport's mesh formation (verbs_transport.hpp): the device,
// the connections' private data, dialing and accepting, and the stale
// completions of attempts that never got established.
#include "verbs_transport.hpp"

namespace udsm::verbs_detail {

namespace {

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

}  // namespace

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

}  // namespace udsm::verbs_detail
