// SPDX-License-Identifier: GPL-2.0-only
//
// The verbs transport's data path, leaving and failing; the design,
// sizing and locking are verbs_transport.hpp's comment.
#include "verbs_transport.hpp"

namespace udsm {

namespace verbs_detail {

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
        fail({node, std::string("ibv_post_recv: ") + std::strerror(errno)});
}

// Without a sink (before bind()): no ABORT, the message and exit 3.
void verbs_transport::die(unsigned to, const std::string &why)
{
    std::fprintf(stderr, "udsm: node %u lost node %u (%s)\n", c_.node, to, why.c_str());
    std::_Exit(3);
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

}  // namespace verbs_detail

std::unique_ptr<transport> make_verbs_transport(const config &c, std::uint8_t *view,
                                                std::size_t page_size, stats &st)
{
    return std::make_unique<verbs_detail::verbs_transport>(c, view, page_size, st);
}

}  // namespace udsm
