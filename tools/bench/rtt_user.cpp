// SPDX-License-Identifier: GPL-2.0-only
//
// kvbench-rtt-user: the user-level side of `./kvlab bench rtt`, a ping-pong
// over librdmacm/libibverbs in which each process blocks on a completion
// channel (ibv_get_cq_event), the "process" path of Liss et al.
//
//   kvbench-rtt-user --server [--port P]
//   kvbench-rtt-user --client ADDR [--port P] [--count N] [--size S] [--outstanding O]
//
// The client prints one line:
//   result count=N size=S outstanding=O median_ns=X p99_ns=Y msgs_per_s=Z
// The server echoes every message of one connection at a time, until killed.
#include "../kvping/args.hpp"
#include "../kvping/rdma.hpp"

#include <getopt.h>
#include <netdb.h>
#include <poll.h>

#include <algorithm>
#include <array>
#include <bitset>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <span>
#include <string_view>
#include <vector>

namespace {

using kvping::Error;
using namespace std::chrono_literals;

constexpr std::size_t slots = 64;          // receives posted, pings in flight
// A send slot is free again only once its completion is polled, which may
// come after the replies that let the next pings go: twice the window.
constexpr std::size_t send_slots = 2 * slots;
constexpr std::size_t slot_bytes = 4096;
constexpr std::uint64_t send_tag = 1ULL << 32;  // wr_id bit marking sends

struct Options {
    bool server = false;
    std::string addr;
    std::string port = "18518";
    std::uint32_t count = 1000;
    std::uint32_t size = 64;
    std::uint32_t outstanding = 1;
};

[[noreturn]] void usage(int status)
{
    std::fprintf(status ? stderr : stdout,
                 "usage: kvbench-rtt-user --server [--port P]\n"
                 "       kvbench-rtt-user --client ADDR [--port P] [--count N] [--size 8..4096]\n"
                 "                        [--outstanding 1..64]\n");
    std::exit(status);
}

Options parse(int argc, char **argv)
{
    enum { o_server = 256, o_client, o_port, o_count, o_size, o_out };
    static const option longopts[] = {
        {"server", no_argument, nullptr, o_server},
        {"client", required_argument, nullptr, o_client},
        {"port", required_argument, nullptr, o_port},
        {"count", required_argument, nullptr, o_count},
        {"size", required_argument, nullptr, o_size},
        {"outstanding", required_argument, nullptr, o_out},
        {"help", no_argument, nullptr, 'h'},
        {nullptr, 0, nullptr, 0},
    };
    Options o;
    int c = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, nullptr)) != -1) {
        const std::string_view arg = optarg != nullptr ? optarg : "";
        switch (c) {
        case o_server: o.server = true; break;
        case o_client: o.addr = arg; break;
        case o_port: o.port = std::to_string(kvping::parse_num<std::uint16_t>("--port", arg, 1, 65535)); break;
        case o_count: o.count = kvping::parse_num<std::uint32_t>("--count", arg, 1, 10000000); break;
        case o_size: o.size = kvping::parse_num<std::uint32_t>("--size", arg, 8, slot_bytes); break;
        case o_out: o.outstanding = kvping::parse_num<std::uint32_t>("--outstanding", arg, 1, slots); break;
        case 'h': usage(0);
        default: usage(1);
        }
    }
    if (optind != argc)
        throw Error(std::string("unexpected argument '") + argv[optind] + "'");
    if (o.server == !o.addr.empty())
        throw Error("give exactly one of --server and --client ADDR");
    return o;
}

std::uint8_t pattern(std::uint32_t seq, std::uint32_t i)
{
    return static_cast<std::uint8_t>(seq * 13U + i);
}

// Verbs resources of one connection, declared in destruction order.
class Conn {
public:
    explicit Conn(rdma_cm_id *id) : id_(id) {}

    void setup()
    {
        ibv_context *verbs = id_->verbs;
        pd_.reset(ibv_alloc_pd(verbs));
        if (!pd_)
            kvping::throw_errno("ibv_alloc_pd");
        cc_.reset(ibv_create_comp_channel(verbs));
        if (!cc_)
            kvping::throw_errno("ibv_create_comp_channel");
        cq_.reset(ibv_create_cq(verbs, slots + send_slots + 2, nullptr, cc_.get(), 0));
        if (!cq_)
            kvping::throw_errno("ibv_create_cq");
        if (const int err = ibv_req_notify_cq(cq_.get(), 0); err != 0)
            kvping::throw_err("ibv_req_notify_cq", err);
        ibv_qp_init_attr attr{};
        attr.send_cq = cq_.get();
        attr.recv_cq = cq_.get();
        attr.cap.max_send_wr = send_slots;
        attr.cap.max_recv_wr = slots;
        attr.cap.max_send_sge = 1;
        attr.cap.max_recv_sge = 1;
        attr.qp_type = IBV_QPT_RC;
        attr.sq_sig_all = 1;
        qp_ = kvping::Qp(id_, pd_.get(), attr);
        rx_.resize(slots * slot_bytes);
        tx_.resize(send_slots * slot_bytes);
        constexpr int local_write = IBV_ACCESS_LOCAL_WRITE;
        rx_mr_.reset(ibv_reg_mr(pd_.get(), rx_.data(), rx_.size(), local_write));
        tx_mr_.reset(ibv_reg_mr(pd_.get(), tx_.data(), tx_.size(), 0));
        if (!rx_mr_ || !tx_mr_)
            kvping::throw_errno("ibv_reg_mr");
        for (std::size_t s = 0; s < slots; ++s)
            post_recv(s);
    }

    void post_recv(std::size_t s)
    {
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(&rx_[s * slot_bytes]),
                    static_cast<std::uint32_t>(slot_bytes), rx_mr_->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = s;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr *bad = nullptr;
        if (const int err = ibv_post_recv(qp_.get(), &wr, &bad); err != 0)
            kvping::throw_err("ibv_post_recv", err);
    }

    // Sends a copy of msg from a free slot (one whose send completed).
    void send(std::span<const std::uint8_t> msg)
    {
        std::size_t s = 0;
        while (s < send_slots && busy_[s])
            ++s;
        if (s == send_slots)
            throw Error("no free send slot");
        busy_[s] = true;
        std::memcpy(&tx_[s * slot_bytes], msg.data(), msg.size());
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(&tx_[s * slot_bytes]),
                    static_cast<std::uint32_t>(msg.size()), tx_mr_->lkey};
        ibv_send_wr wr{};
        wr.wr_id = send_tag | s;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        ibv_send_wr *bad = nullptr;
        if (const int err = ibv_post_send(qp_.get(), &wr, &bad); err != 0)
            kvping::throw_err("ibv_post_send", err);
    }

    // Calls on_recv(span) for each received message; blocks on the channel
    // when the CQ is empty.  Returns false on a flushed or failed WR.
    template <class F>
    bool process(F &&on_recv, std::chrono::milliseconds timeout)
    {
        std::array<ibv_wc, 16> wc{};
        int n = ibv_poll_cq(cq_.get(), static_cast<int>(wc.size()), wc.data());
        if (n < 0)
            throw Error("ibv_poll_cq failed");
        if (n == 0) {
            kvping::wait_cq(*cc_, *cq_, timeout);
            return true;
        }
        for (int i = 0; i < n; ++i) {
            if (wc[i].status != IBV_WC_SUCCESS)
                return false;
            if (wc[i].wr_id & send_tag) {
                busy_[wc[i].wr_id & 0xffff] = false;
                continue;
            }
            const auto s = static_cast<std::size_t>(wc[i].wr_id);
            on_recv(std::span<const std::uint8_t>(&rx_[s * slot_bytes], wc[i].byte_len));
            post_recv(s);
        }
        return true;
    }

    [[nodiscard]] int cm_fd() const noexcept { return id_->channel->fd; }

private:
    rdma_cm_id *id_;
    kvping::Pd pd_;
    kvping::CompChannel cc_;
    kvping::Cq cq_;
    std::vector<std::uint8_t> rx_;
    std::vector<std::uint8_t> tx_;
    kvping::Mr rx_mr_;
    kvping::Mr tx_mr_;
    kvping::Qp qp_;
    std::bitset<send_slots> busy_;
};

void expect(const kvping::CmEvent &ev, rdma_cm_event_type want)
{
    if (ev->event != want)
        throw Error(std::string("expected ") + rdma_event_str(want) + ", got " +
                    rdma_event_str(ev->event));
}

int run_server(const Options &o)
{
    kvping::EventChannel ch(rdma_create_event_channel());
    if (!ch)
        kvping::throw_errno("rdma_create_event_channel");
    rdma_cm_id *lid = nullptr;
    if (rdma_create_id(ch.get(), &lid, nullptr, RDMA_PS_TCP) != 0)
        kvping::throw_errno("rdma_create_id");
    kvping::CmId listener(lid);
    addrinfo hints{};
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_family = AF_INET;
    addrinfo *ai = nullptr;
    if (getaddrinfo(nullptr, o.port.c_str(), &hints, &ai) != 0)
        throw Error("getaddrinfo failed");
    const int bound = rdma_bind_addr(lid, ai->ai_addr);
    freeaddrinfo(ai);
    if (bound != 0 || rdma_listen(lid, 4) != 0)
        kvping::throw_errno("rdma_bind_addr/rdma_listen");
    std::printf("kvbench-rtt-user: listening on port %s\n", o.port.c_str());
    std::fflush(stdout);
    for (;;) {
        auto req = kvping::next_cm_event(*ch, 24h, "a connection");
        if (req->event != RDMA_CM_EVENT_CONNECT_REQUEST)
            continue;
        kvping::CmId id(req->id);
        req.reset();
        Conn c(id.get());
        c.setup();
        rdma_conn_param param{};
        param.rnr_retry_count = 7;
        param.retry_count = 7;
        if (rdma_accept(id.get(), &param) != 0)
            kvping::throw_errno("rdma_accept");
        expect(kvping::next_cm_event(*ch, 10s, "ESTABLISHED"), RDMA_CM_EVENT_ESTABLISHED);
        kvping::Connection conn(id.get());
        // Echo until the peer disconnects (its event) or a WR fails.
        bool up = true;
        while (up) {
            // A quiet 200 ms only means it is time to look at the CM events.
            try {
                up = c.process([&](std::span<const std::uint8_t> m) { c.send(m); }, 200ms);
            } catch (const Error &e) {
                if (std::string_view(e.what()).find("timed out") != 0)
                    throw;
            }
            if (auto ev = kvping::poll_cm_event(*ch, 0ms); ev &&
                ev->event == RDMA_CM_EVENT_DISCONNECTED)
                up = false;
        }
    }
}

int run_client(const Options &o)
{
    kvping::EventChannel ch(rdma_create_event_channel());
    if (!ch)
        kvping::throw_errno("rdma_create_event_channel");
    rdma_cm_id *raw = nullptr;
    if (rdma_create_id(ch.get(), &raw, nullptr, RDMA_PS_TCP) != 0)
        kvping::throw_errno("rdma_create_id");
    kvping::CmId id(raw);
    addrinfo hints{};
    hints.ai_flags = AI_NUMERICSERV;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *ai = nullptr;
    if (getaddrinfo(o.addr.c_str(), o.port.c_str(), &hints, &ai) != 0)
        throw Error("cannot resolve " + o.addr);
    const int r = rdma_resolve_addr(raw, nullptr, ai->ai_addr, 5000);
    freeaddrinfo(ai);
    if (r != 0)
        kvping::throw_errno("rdma_resolve_addr");
    expect(kvping::next_cm_event(*ch, 10s, "ADDR_RESOLVED"), RDMA_CM_EVENT_ADDR_RESOLVED);
    if (rdma_resolve_route(raw, 5000) != 0)
        kvping::throw_errno("rdma_resolve_route");
    expect(kvping::next_cm_event(*ch, 10s, "ROUTE_RESOLVED"), RDMA_CM_EVENT_ROUTE_RESOLVED);
    Conn c(raw);
    c.setup();
    rdma_conn_param param{};
    param.rnr_retry_count = 7;
    param.retry_count = 7;
    if (rdma_connect(raw, &param) != 0)
        kvping::throw_errno("rdma_connect");
    expect(kvping::next_cm_event(*ch, 10s, "ESTABLISHED"), RDMA_CM_EVENT_ESTABLISHED);
    kvping::Connection conn(raw);

    using clock = std::chrono::steady_clock;
    std::vector<clock::time_point> t0(o.count);
    std::vector<std::uint64_t> rtt(o.count);
    std::vector<std::uint8_t> msg(o.size);
    std::uint32_t sent = 0, replies = 0;
    auto send_next = [&] {
        for (std::uint32_t i = 0; i < o.size; ++i)
            msg[i] = pattern(sent, i);
        std::memcpy(msg.data(), &sent, sizeof(sent));
        t0[sent] = clock::now();
        c.send(msg);
        ++sent;
    };
    const auto start = clock::now();
    while (sent < o.count && sent < o.outstanding)
        send_next();
    while (replies < o.count) {
        const bool ok = c.process([&](std::span<const std::uint8_t> m) {
            std::uint32_t seq = 0;
            if (m.size() != o.size)
                throw Error("reply of " + std::to_string(m.size()) + " bytes");
            std::memcpy(&seq, m.data(), sizeof(seq));
            if (seq != replies)
                throw Error("reply " + std::to_string(seq) + ", expected " +
                            std::to_string(replies));
            for (std::uint32_t i = sizeof(seq); i < o.size; ++i)
                if (m[i] != pattern(seq, i))
                    throw Error("reply " + std::to_string(seq) + " corrupt");
            rtt[replies] = static_cast<std::uint64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t0[seq])
                    .count());
            ++replies;
            if (sent < o.count)
                send_next();
        }, 10s);
        if (!ok)
            throw Error("a work request failed");
    }
    const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(
        clock::now() - start).count();
    std::ranges::sort(rtt);
    std::printf("result count=%u size=%u outstanding=%u median_ns=%llu p99_ns=%llu "
                "msgs_per_s=%llu\n",
                o.count, o.size, o.outstanding,
                static_cast<unsigned long long>(rtt[rtt.size() / 2]),
                static_cast<unsigned long long>(rtt[(rtt.size() - 1) * 99 / 100]),
                static_cast<unsigned long long>(
                    static_cast<double>(o.count) * 1e9 / static_cast<double>(std::max<long long>(elapsed, 1))));
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    try {
        const Options o = parse(argc, argv);
        return o.server ? run_server(o) : run_client(o);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "kvbench-rtt-user: %s\n", e.what());
        return 1;
    }
}
