// SPDX-License-Identifier: GPL-2.0-only
//
// kvbench-rtt-user: the user-level side of `./kvlab bench rtt`, a ping-pong
// over librdmacm/libibverbs written the way a careful user-space program
// would be, so that the kernel paths are compared with the best user level
// rather than a straw man:
//
//   --wait event  (default) each process sleeps on a completion channel, the
//                 "process" path of Liss et al.: one wake-up per round trip
//                 (arm, drain, re-arm, poll once more to close the race);
//   --wait poll   each process spins on ibv_poll_cq, no completion channel.
//
// Sends are unsignaled except one in every signal_every, which reclaims
// itself and every earlier send; they complete on a CQ of their own that is
// never armed, so a send completion never wakes anyone.  Sends and receive
// reposts go out as one chained post per batch.  The data path makes no
// other system call: the CM channel is watched by a thread that, when the
// peer goes away, moves the QP to the error state so that the flushed
// receives end the run.
//
//   kvbench-rtt-user --server [--port P] [--wait event|poll] [--inline [--size S]]
//   kvbench-rtt-user --client ADDR [--port P] [--wait event|poll] [--count N]
//                    [--size S] [--outstanding O] [--check 0|1] [--inline]
//
// The client prints one line:
//   result mode=M count=N size=S outstanding=O median_ns=X p99_ns=Y msgs_per_s=Z inline=0|1
// The server echoes every message of one connection at a time, until killed.
#include "../kvping/args.hpp"
#include "../kvping/rdma.hpp"

#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using kvping::Error;
using namespace std::chrono_literals;

// A work request failed or was flushed: the connection is over.
struct Lost : Error {
    using Error::Error;
};

// W: receives kept posted, and the most messages in flight (--outstanding).
constexpr std::uint32_t window = 64;
// S: send i is signaled iff (i + 1) % S == 0; at most window / 4, as asked.
constexpr std::uint32_t signal_every = window / 4;
// D = max_send_wr.  SQ budget: a send's SQ entry and tx slot are ours again
// only once a signaled send at or after it has completed and been polled (RC
// send completions are in order).  Entries held at once, worst normal case:
//   (1) 64 = W       sends not yet acked: at most one per message in flight,
//                    since a peer sends (the echo, the next ping) only after
//                    receiving, and its ACK normally comes before that;
//   (2) 15 = S - 1   sends completed after the last signaled one: unsignaled,
//                    so not reclaimable until the next signaled one is polled;
//   (3) 17           slack for ACKs that run behind the replies;
//   = 96 = D.
// reserve(k), k <= W, never lets more than D entries be held; if it must wait
// it spins on the send CQ (never sleeps on it), and that wait ends: it waits
// only while more than D - W = 32 >= S entries are held, all of them posted,
// so a signaled send is among them and its completion (success or flush)
// will come.
constexpr std::uint32_t sq_depth = window + signal_every - 1 + 17;
static_assert(sq_depth == 96 && sq_depth - window >= signal_every);
// The send CQ holds at most one entry per signaled send held (D / S = 6), but
// a flush completes every held send, signaled or not: D.  The receive CQ
// holds at most one per posted receive: W.
constexpr std::uint32_t send_cq_depth = sq_depth;
constexpr std::uint32_t recv_cq_depth = window;
constexpr std::size_t slot_bytes = 4096;
constexpr unsigned ack_batch = 32;  // CQ events acknowledged per ibv_ack_cq_events

enum class Wait { event, poll };

struct Options {
    bool server = false;
    std::string addr;
    std::string port = "18518";
    Wait wait = Wait::event;
    std::uint32_t count = 1000;
    std::uint32_t size = 64;
    std::uint32_t outstanding = 1;
    bool check = true;
    bool inline_data = false;
};

const char *wait_name(Wait w)
{
    return w == Wait::event ? "event" : "poll";
}

[[noreturn]] void usage(int status)
{
    std::fprintf(status ? stderr : stdout,
                 "usage: kvbench-rtt-user --server [--port P] [--wait event|poll]\n"
                 "                        [--inline [--size S]]\n"
                 "       kvbench-rtt-user --client ADDR [--port P] [--wait event|poll]\n"
                 "                        [--count N] [--size 8..4096] [--outstanding 1..64]\n"
                 "                        [--check 0|1] [--inline]\n"
                 "  --wait event   sleep on a completion channel (default)\n"
                 "  --wait poll    spin on the completion queue\n"
                 "  --check 1      fill and verify every payload byte (default)\n"
                 "  --check 0      verify only length and sequence number\n"
                 "  --inline       send with IBV_SEND_INLINE if the QP grants --size bytes\n"
                 "                 of inline data (the server asks for its own --size)\n");
    std::exit(status);
}

Options parse(int argc, char **argv)
{
    enum { o_server = 256, o_client, o_port, o_wait, o_count, o_size, o_out, o_check, o_inline };
    static const option longopts[] = {
        {"server", no_argument, nullptr, o_server},
        {"client", required_argument, nullptr, o_client},
        {"port", required_argument, nullptr, o_port},
        {"wait", required_argument, nullptr, o_wait},
        {"count", required_argument, nullptr, o_count},
        {"size", required_argument, nullptr, o_size},
        {"outstanding", required_argument, nullptr, o_out},
        {"check", required_argument, nullptr, o_check},
        {"inline", no_argument, nullptr, o_inline},
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
        case o_wait:
            if (arg == "event")
                o.wait = Wait::event;
            else if (arg == "poll")
                o.wait = Wait::poll;
            else
                throw Error("--wait: '" + std::string(arg) + "' is neither event nor poll");
            break;
        case o_count: o.count = kvping::parse_num<std::uint32_t>("--count", arg, 1, 10000000); break;
        case o_size: o.size = kvping::parse_num<std::uint32_t>("--size", arg, 8, slot_bytes); break;
        case o_out: o.outstanding = kvping::parse_num<std::uint32_t>("--outstanding", arg, 1, window); break;
        case o_check: o.check = kvping::parse_num<std::uint32_t>("--check", arg, 0, 1) != 0; break;
        case o_inline: o.inline_data = true; break;
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

// Page-aligned message slots.
struct FreeDeleter {
    void operator()(std::uint8_t *p) const noexcept { std::free(p); }
};
using Slots = std::unique_ptr<std::uint8_t[], FreeDeleter>;

Slots alloc_slots(std::size_t n)
{
    Slots s(static_cast<std::uint8_t *>(std::aligned_alloc(4096, n * slot_bytes)));
    if (!s)
        throw Error("out of memory");
    std::memset(s.get(), 0, n * slot_bytes);
    return s;
}

// CQ events taken from the channel and not yet acknowledged: acked in
// batches, and all before the CQ is destroyed (ibv_destroy_cq waits for every
// event to be acked).  Declare after the Cq it counts for.
class CqEventAcks {
public:
    CqEventAcks() = default;
    explicit CqEventAcks(ibv_cq *cq) noexcept : cq_(cq) {}
    CqEventAcks(const CqEventAcks &) = delete;
    CqEventAcks &operator=(const CqEventAcks &) = delete;
    ~CqEventAcks() { flush(); }

    void add() noexcept
    {
        if (++pending_ == ack_batch)
            flush();
    }

private:
    void flush() noexcept
    {
        if (pending_ != 0)
            ibv_ack_cq_events(cq_, pending_);
        pending_ = 0;
    }

    ibv_cq *cq_ = nullptr;
    unsigned pending_ = 0;
};

// Verbs resources and the data path of one connection, declared in
// destruction order.
class Conn {
public:
    // inline_request: max_inline_data to ask for, 0 for none.
    Conn(rdma_cm_id *id, Wait wait, std::uint32_t inline_request) : id_(id), wait_(wait)
    {
        ibv_context *verbs = id_->verbs;
        pd_.reset(ibv_alloc_pd(verbs));
        if (!pd_)
            kvping::throw_errno("ibv_alloc_pd");
        // Only receives may wake the process: the send CQ has no channel.
        scq_.reset(ibv_create_cq(verbs, send_cq_depth, nullptr, nullptr, 0));
        if (!scq_)
            kvping::throw_errno("ibv_create_cq (send)");
        if (wait_ == Wait::event) {
            cc_.reset(ibv_create_comp_channel(verbs));
            if (!cc_)
                kvping::throw_errno("ibv_create_comp_channel");
        }
        rcq_.reset(ibv_create_cq(verbs, recv_cq_depth, nullptr, cc_.get(), 0));
        if (!rcq_)
            kvping::throw_errno("ibv_create_cq (receive)");
        acks_ = std::make_unique<CqEventAcks>(rcq_.get());
        rx_ = alloc_slots(window);
        tx_ = alloc_slots(sq_depth);
        rx_mr_.reset(ibv_reg_mr(pd_.get(), rx_.get(), window * slot_bytes, IBV_ACCESS_LOCAL_WRITE));
        tx_mr_.reset(ibv_reg_mr(pd_.get(), tx_.get(), sq_depth * slot_bytes, 0));
        if (!rx_mr_ || !tx_mr_)
            kvping::throw_errno("ibv_reg_mr");
        create_qp(inline_request);
        for (std::uint32_t s = 0; s < window; ++s)
            stage_recv(s);
        post_recvs();
    }

    [[nodiscard]] ibv_qp *qp() const noexcept { return qp_.get(); }
    // Bytes a send may carry inline; 0 if inline sends were not asked for.
    [[nodiscard]] std::uint32_t max_inline() const noexcept { return max_inline_; }

    // The next batch (one or more) of receive completions, all successful;
    // Lost if one failed or was flushed.  Event mode sleeps on the channel
    // when the CQ is empty, poll mode spins.
    std::span<const ibv_wc> next_batch()
    {
        for (;;) {
            const int n = ibv_poll_cq(rcq_.get(), static_cast<int>(rwc_.size()), rwc_.data());
            if (n < 0)
                throw Error("ibv_poll_cq failed");
            if (n > 0) {
                const std::span<const ibv_wc> batch(rwc_.data(), static_cast<std::size_t>(n));
                for (const ibv_wc &wc : batch)
                    if (wc.status != IBV_WC_SUCCESS)
                        throw Lost(std::string("receive: ") + ibv_wc_status_str(wc.status));
                return batch;
            }
            if (wait_ == Wait::poll)
                continue;
            if (!armed_) {
                // Arm, then poll once more: a completion that landed after
                // the empty poll but before the arm raises no event.
                if (const int err = ibv_req_notify_cq(rcq_.get(), 0); err != 0)
                    kvping::throw_err("ibv_req_notify_cq", err);
                armed_ = true;
                continue;
            }
            ibv_cq *ev_cq = nullptr;
            void *ctx = nullptr;
            while (ibv_get_cq_event(cc_.get(), &ev_cq, &ctx) != 0)
                if (errno != EINTR)
                    kvping::throw_errno("ibv_get_cq_event");
            acks_->add();
            armed_ = false;
            if (ev_cq != rcq_.get())
                throw Error("completion event for an unknown CQ");
        }
    }

    [[nodiscard]] std::span<const std::uint8_t> payload(const ibv_wc &wc) const noexcept
    {
        return {rx_.get() + wc.wr_id * slot_bytes, wc.byte_len};
    }

    // Posts the receives of a batch from next_batch() again, in one call.
    void repost(std::span<const ibv_wc> batch)
    {
        for (const ibv_wc &wc : batch)
            stage_recv(static_cast<std::uint32_t>(wc.wr_id));
        post_recvs();
    }

    // Makes room in the SQ for k <= W more sends (see the SQ budget).
    void reserve(std::uint32_t k)
    {
        if (k > window || staged_ != 0)
            throw Error("reserve: more sends than the window");
        if (held() + k <= sq_depth)
            return;
        reap();
        while (held() + k > sq_depth)
            reap();
    }

    // The buffer of the next send, len bytes, to be filled before post_sends().
    std::uint8_t *stage_send(std::uint32_t len)
    {
        const std::uint64_t i = posted_ + staged_;
        std::uint8_t *buf = tx_.get() + (i % sq_depth) * slot_bytes;
        ssge_[staged_] = {reinterpret_cast<std::uintptr_t>(buf), len, tx_mr_->lkey};
        ibv_send_wr &wr = swr_[staged_];
        wr = {};
        wr.wr_id = i;
        wr.sg_list = &ssge_[staged_];
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        if ((i + 1) % signal_every == 0)
            wr.send_flags |= IBV_SEND_SIGNALED;
        if (max_inline_ != 0 && len <= max_inline_)
            wr.send_flags |= IBV_SEND_INLINE;
        if (staged_ != 0)
            swr_[staged_ - 1].next = &wr;
        ++staged_;
        return buf;
    }

    // Posts every staged send (already chained) in one ibv_post_send.
    void post_sends()
    {
        if (staged_ == 0)
            return;
        ibv_send_wr *bad = nullptr;
        if (const int err = ibv_post_send(qp_.get(), swr_.data(), &bad); err != 0)
            kvping::throw_err("ibv_post_send", err);
        posted_ += staged_;
        staged_ = 0;
    }

private:
    void create_qp(std::uint32_t inline_request)
    {
        auto attempt = [&](std::uint32_t inline_bytes) {
            ibv_qp_init_attr attr{};
            attr.send_cq = scq_.get();
            attr.recv_cq = rcq_.get();
            attr.cap.max_send_wr = sq_depth;
            attr.cap.max_recv_wr = window;
            attr.cap.max_send_sge = 1;
            attr.cap.max_recv_sge = 1;
            attr.cap.max_inline_data = inline_bytes;
            attr.qp_type = IBV_QPT_RC;
            attr.sq_sig_all = 0;
            qp_ = kvping::Qp(id_, pd_.get(), attr);
            return attr.cap.max_inline_data;
        };
        if (inline_request == 0) {
            attempt(0);
            return;
        }
        try {
            max_inline_ = attempt(inline_request);
        } catch (const Error &) {
            attempt(0);  // the device grants less inline data than asked
        }
    }

    [[nodiscard]] std::uint64_t held() const noexcept { return posted_ - reclaimed_; }

    // Polls the send CQ: each signaled completion frees its send and all
    // earlier ones.
    void reap()
    {
        std::array<ibv_wc, 16> wc{};
        int n = 0;
        do {
            n = ibv_poll_cq(scq_.get(), static_cast<int>(wc.size()), wc.data());
            if (n < 0)
                throw Error("ibv_poll_cq failed");
            for (int j = 0; j < n; ++j) {
                if (wc[j].status != IBV_WC_SUCCESS)
                    throw Lost(std::string("send: ") + ibv_wc_status_str(wc[j].status));
                reclaimed_ = wc[j].wr_id + 1;
            }
        } while (n == static_cast<int>(wc.size()));
    }

    void stage_recv(std::uint32_t s)
    {
        rsge_[rstaged_] = {reinterpret_cast<std::uintptr_t>(rx_.get() + s * slot_bytes),
                           static_cast<std::uint32_t>(slot_bytes), rx_mr_->lkey};
        ibv_recv_wr &wr = rwr_[rstaged_];
        wr = {};
        wr.wr_id = s;
        wr.sg_list = &rsge_[rstaged_];
        wr.num_sge = 1;
        ++rstaged_;
    }

    void post_recvs()
    {
        if (rstaged_ == 0)
            return;
        for (std::uint32_t j = 0; j + 1 < rstaged_; ++j)
            rwr_[j].next = &rwr_[j + 1];
        ibv_recv_wr *bad = nullptr;
        rstaged_ = 0;
        if (const int err = ibv_post_recv(qp_.get(), rwr_.data(), &bad); err != 0)
            kvping::throw_err("ibv_post_recv", err);
    }

    rdma_cm_id *id_;
    Wait wait_;
    kvping::Pd pd_;
    kvping::Cq scq_;
    kvping::CompChannel cc_;  // event mode only
    kvping::Cq rcq_;
    std::unique_ptr<CqEventAcks> acks_;  // before rcq_ is destroyed
    Slots rx_;
    Slots tx_;
    kvping::Mr rx_mr_;
    kvping::Mr tx_mr_;
    kvping::Qp qp_;

    std::uint32_t max_inline_ = 0;
    bool armed_ = false;
    std::uint64_t posted_ = 0;     // sends posted so far; send i has wr_id i
    std::uint64_t reclaimed_ = 0;  // sends [0, reclaimed_) are done
    std::uint32_t staged_ = 0;
    std::uint32_t rstaged_ = 0;
    std::array<ibv_wc, window> rwc_{};
    std::array<ibv_send_wr, window> swr_{};
    std::array<ibv_sge, window> ssge_{};
    std::array<ibv_recv_wr, window> rwr_{};
    std::array<ibv_sge, window> rsge_{};
};

class EventFd {
public:
    EventFd() : fd_(::eventfd(0, EFD_CLOEXEC))
    {
        if (fd_ < 0)
            kvping::throw_errno("eventfd");
    }
    EventFd(const EventFd &) = delete;
    EventFd &operator=(const EventFd &) = delete;
    ~EventFd() { ::close(fd_); }

    [[nodiscard]] int get() const noexcept { return fd_; }
    void signal() const noexcept
    {
        const std::uint64_t one = 1;
        [[maybe_unused]] const ssize_t n = ::write(fd_, &one, sizeof(one));
    }

private:
    int fd_;
};

// Watches a connection's CM channel from a thread of its own, off the data
// path.  When the peer disconnects (or, with a stall limit, when `progress`
// stops moving for that long) it moves the QP to the error state: every
// posted receive then completes with a flush error, which wakes the data path
// in either wait mode and ends the run.  Declare after the Conn and the
// Connection: it is stopped and joined before they go.
class PeerWatch {
public:
    PeerWatch(rdma_event_channel &ch, ibv_qp *qp, std::chrono::milliseconds stall = 0ms,
              const std::atomic<std::uint64_t> *progress = nullptr)
        : ch_(ch), qp_(qp), stall_(stall), progress_(progress), thread_([this] { run(); })
    {
    }
    PeerWatch(const PeerWatch &) = delete;
    PeerWatch &operator=(const PeerWatch &) = delete;
    ~PeerWatch()
    {
        stop_.signal();
        thread_.join();
    }

    // Why it broke the connection, or nullptr.
    [[nodiscard]] const char *reason() const noexcept { return reason_.load(std::memory_order_acquire); }

private:
    void fire(const char *why) noexcept
    {
        reason_.store(why, std::memory_order_release);
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_ERR;
        static_cast<void>(ibv_modify_qp(qp_, &attr, IBV_QP_STATE));
    }

    void run() noexcept
    {
        const bool timed = progress_ != nullptr && stall_.count() > 0;
        std::uint64_t seen = timed ? progress_->load(std::memory_order_relaxed) : 0;
        for (;;) {
            std::array<pollfd, 2> fds{{{ch_.fd, POLLIN, 0}, {stop_.get(), POLLIN, 0}}};
            const int n = ::poll(fds.data(), fds.size(), timed ? static_cast<int>(stall_.count()) : -1);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                return fire("poll on the CM channel failed");
            }
            if (fds[1].revents != 0)
                return;
            if (n == 0) {
                const std::uint64_t now = progress_->load(std::memory_order_relaxed);
                if (now == seen)
                    return fire("no reply for too long");
                seen = now;
                continue;
            }
            rdma_cm_event *raw = nullptr;
            if (rdma_get_cm_event(&ch_, &raw) != 0)
                return fire("rdma_get_cm_event failed");
            const kvping::CmEvent ev(raw);
            if (ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
                return fire(rdma_event_str(ev->event));
        }
    }

    rdma_event_channel &ch_;
    ibv_qp *qp_;
    std::chrono::milliseconds stall_;
    const std::atomic<std::uint64_t> *progress_;
    EventFd stop_;
    std::atomic<const char *> reason_{nullptr};
    std::thread thread_;  // last: starts once the members above exist
};

void expect(const kvping::CmEvent &ev, rdma_cm_event_type want)
{
    if (ev->event != want)
        throw Error(std::string("expected ") + rdma_event_str(want) + ", got " +
                    rdma_event_str(ev->event));
}

// As rawping: 6 transport retries (rxe takes 7 as "forever", so a lost
// packet would hang the run); RNR 7 is safe, receives are always reposted.
rdma_conn_param conn_param()
{
    rdma_conn_param param{};
    param.rnr_retry_count = 7;
    param.retry_count = 6;
    return param;
}

// Echoes every message of the connection `req` asks for, until it ends.
void serve(const Options &o, kvping::CmEvent req)
{
    // The connection gets a CM channel of its own, so that its watcher sees
    // only its events and new requests wait on the listener's.
    kvping::EventChannel cch(rdma_create_event_channel());
    const int create_err = errno;
    kvping::CmId id(req->id);
    req.reset();
    if (!cch)
        kvping::throw_err("rdma_create_event_channel", create_err);
    if (rdma_migrate_id(id.get(), cch.get()) != 0)
        kvping::throw_errno("rdma_migrate_id");
    Conn c(id.get(), o.wait, o.inline_data ? o.size : 0);
    rdma_conn_param param = conn_param();
    if (rdma_accept(id.get(), &param) != 0)
        kvping::throw_errno("rdma_accept");
    expect(kvping::next_cm_event(*cch, 10s, "ESTABLISHED"), RDMA_CM_EVENT_ESTABLISHED);
    kvping::Connection conn(id.get());
    PeerWatch watch(*cch, c.qp());
    std::printf("kvbench-rtt-user: connected, wait=%s inline up to %u bytes\n",
                wait_name(o.wait), c.max_inline());
    std::fflush(stdout);
    try {
        for (;;) {
            const auto batch = c.next_batch();
            c.reserve(static_cast<std::uint32_t>(batch.size()));
            for (const ibv_wc &wc : batch) {
                const auto m = c.payload(wc);
                std::memcpy(c.stage_send(static_cast<std::uint32_t>(m.size())), m.data(), m.size());
            }
            // Receives first: the echo lets the peer send again at once.
            c.repost(batch);
            c.post_sends();
        }
    } catch (const Lost &e) {
        const char *why = watch.reason();
        std::printf("kvbench-rtt-user: connection over (%s)\n", why != nullptr ? why : e.what());
        std::fflush(stdout);
    }
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
    std::printf("kvbench-rtt-user: listening on port %s, wait=%s\n", o.port.c_str(),
                wait_name(o.wait));
    std::fflush(stdout);
    for (;;) {
        auto req = kvping::next_cm_event(*ch, 24h, "a connection");
        if (req->event != RDMA_CM_EVENT_CONNECT_REQUEST)
            continue;
        try {
            serve(o, std::move(req));
        } catch (const Error &e) {
            std::fprintf(stderr, "kvbench-rtt-user: connection failed: %s\n", e.what());
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
    Conn c(raw, o.wait, o.inline_data ? o.size : 0);
    rdma_conn_param param = conn_param();
    if (rdma_connect(raw, &param) != 0)
        kvping::throw_errno("rdma_connect");
    expect(kvping::next_cm_event(*ch, 10s, "ESTABLISHED"), RDMA_CM_EVENT_ESTABLISHED);
    kvping::Connection conn(raw);
    std::atomic<std::uint64_t> progress{0};  // replies so far, for the watcher
    PeerWatch watch(*ch, c.qp(), 10s, &progress);
    const bool inlined = o.inline_data && c.max_inline() >= o.size;

    using clock = std::chrono::steady_clock;
    std::vector<clock::time_point> t0(o.count);
    std::vector<std::uint64_t> rtt(o.count);
    std::uint32_t sent = 0, replies = 0;
    // Sends pings sent .. sent + k - 1 in one post; t0 is taken once their
    // payloads are written, just before ibv_post_send.
    auto send_pings = [&](std::uint32_t k) {
        c.reserve(k);
        for (std::uint32_t j = 0; j < k; ++j) {
            const std::uint32_t seq = sent + j;
            std::uint8_t *p = c.stage_send(o.size);
            if (o.check)
                for (std::uint32_t i = sizeof(seq); i < o.size; ++i)
                    p[i] = pattern(seq, i);
            std::memcpy(p, &seq, sizeof(seq));
        }
        const auto now = clock::now();
        c.post_sends();
        std::fill_n(t0.begin() + sent, k, now);
        sent += k;
    };
    const auto start = clock::now();
    try {
        send_pings(std::min(o.count, o.outstanding));
        while (replies < o.count) {
            const auto batch = c.next_batch();
            const auto t1 = clock::now();
            for (const ibv_wc &wc : batch) {
                const auto m = c.payload(wc);
                if (m.size() != o.size)
                    throw Error("reply of " + std::to_string(m.size()) + " bytes");
                std::uint32_t seq = 0;
                std::memcpy(&seq, m.data(), sizeof(seq));
                if (seq != replies)
                    throw Error("reply " + std::to_string(seq) + ", expected " +
                                std::to_string(replies));
                if (o.check)
                    for (std::uint32_t i = sizeof(seq); i < o.size; ++i)
                        if (m[i] != pattern(seq, i))
                            throw Error("reply " + std::to_string(seq) + " corrupt");
                rtt[replies] = static_cast<std::uint64_t>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0[seq]).count());
                ++replies;
            }
            progress.store(replies, std::memory_order_relaxed);
            c.repost(batch);
            if (const auto k = std::min<std::uint32_t>(o.count - sent,
                                                       static_cast<std::uint32_t>(batch.size()));
                k != 0)
                send_pings(k);
        }
    } catch (const Lost &e) {
        const char *why = watch.reason();
        throw Error(std::string("connection lost after ") + std::to_string(replies) +
                    " replies: " + (why != nullptr ? why : e.what()));
    }
    const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(
        clock::now() - start).count();
    std::ranges::sort(rtt);
    std::printf("result mode=%s count=%u size=%u outstanding=%u median_ns=%llu p99_ns=%llu "
                "msgs_per_s=%llu inline=%d\n",
                wait_name(o.wait), o.count, o.size, o.outstanding,
                static_cast<unsigned long long>(rtt[rtt.size() / 2]),
                static_cast<unsigned long long>(rtt[(rtt.size() - 1) * 99 / 100]),
                static_cast<unsigned long long>(
                    static_cast<double>(o.count) * 1e9 / static_cast<double>(std::max<long long>(elapsed, 1))),
                inlined ? 1 : 0);
    std::fflush(stdout);
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
