// SPDX-License-Identifier: GPL-2.0-only
//
// The unix transport: the nodes are processes of one host, a stream
// socket per pair, UDSM_DIR/node<N>.sock node N's listener.  The lower
// node of a pair accepts, the higher dials (again until UDSM_JOIN_MS
// while the listener is missing) and both send a HELLO with the
// geometry, which must match.  A frame is a 32-byte message, or a page
// frame (UDSM_PAGE_FRAME, the page index, then the page): the "RDMA
// write" travels on the socket ahead of the reply that follows it, and
// the receiver copies it into its engine view.
//
// Leaving: a peer's frames are delivered after its BYE as before it (it
// serves requests until it closes); its close then is no failure, and
// the progress thread marks it gone and stops reading it (the socket is
// closed in the destructor, so no sender ever meets a reused descriptor:
// peer::sock is written only in form() and the destructor).  A send to a
// gone peer fails the cluster, but in leave(): nothing would answer.
//
// Sends are blocking writes of whole frames under the peer's send mutex;
// a socket buffer holds many frames, and a pair's traffic is bounded by
// the faults outstanding between them, so a send does not wait on a peer
// that waits on us.
#include "transport.hpp"

#include <kverbs/kdsm.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace udsm {

namespace {

// Frames that are not messages (types are below 32), so not counted as
// such: a page follows; a compare-and-swap on our lock words (px, cmp,
// swap, the lock id), and its result (px, id, the old word), which stand
// for the RDMA atomic and its completion.
constexpr std::uint8_t page_frame = 0xd0;
constexpr std::uint8_t cas_frame = 0xd1;
constexpr std::uint8_t cas_result_frame = 0xd2;

struct hello {
    std::uint8_t type, node, nnodes, placement;
    std::uint32_t npages, page_size;
    std::uint8_t reserved[20];
};
static_assert(sizeof(hello) == msg_len);

struct fd_guard {
    int fd = -1;
    fd_guard() = default;
    explicit fd_guard(int f) : fd(f) {}
    fd_guard(fd_guard &&o) noexcept : fd(std::exchange(o.fd, -1)) {}
    fd_guard &operator=(fd_guard &&o) noexcept
    {
        std::swap(fd, o.fd);
        return *this;
    }
    ~fd_guard()
    {
        if (fd >= 0)
            ::close(fd);
    }
};

std::runtime_error sys_error(const std::string &what)
{
    return std::runtime_error(what + ": " + std::strerror(errno));
}

class unix_transport final : public transport {
public:
    unix_transport(const config &c, std::uint8_t *view, std::size_t page_size, stats &st)
        : c_(c), view_(view), ps_(page_size), st_(st), peers_(c.nnodes() + 1),
          words_(KDSM_MAX_LOCKS / c.nnodes() + 1)
    {
        stop_.fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (stop_.fd < 0)
            throw sys_error("eventfd");
    }

    void form() override;
    void send(unsigned to, const void *msg) override
    {
        std::unique_lock l(peers_[to].send_mu);
        if (peers_[to].gone || !write_all(to, msg, msg_len))
            send_failed(l, to);
        st_.msg(*static_cast<const std::uint8_t *>(msg), true);
    }
    void write_page(unsigned to, std::uint32_t page) override
    {
        std::uint8_t h[msg_len] = {page_frame};
        std::memcpy(h + 4, &page, 4);
        std::unique_lock l(peers_[to].send_mu);
        if (peers_[to].gone || !write_all(to, h, sizeof(h)) ||
            !write_all(to, view_ + std::size_t(page) * ps_, ps_))
            send_failed(l, to);
        st_.add(KDSM_STAT_RDMA_WRITE_BYTES, ps_);
    }
    void run(sink &s, int extra_fd, const std::function<void()> &on_extra) override;
    bool cas(unsigned to, std::uint32_t id, bool px, std::uint8_t cmp,
             std::uint8_t swap) override
    {
        std::uint8_t f[msg_len] = {cas_frame, px, cmp, swap};
        std::memcpy(f + 4, &id, 4);
        std::unique_lock l(peers_[to].send_mu);
        if (peers_[to].gone || !write_all(to, f, sizeof(f)))
            send_failed(l, to);
        return true;
    }
    void stop() override
    {
        const std::uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(stop_.fd, &one, sizeof(one));
    }
    // BYE to all, then wait for every peer's (bounded by UDSM_LEAVE_MS: a
    // peer that never comes to its end closes on us and fails), so that
    // no node closes while a peer may still send to it, and none leaves
    // unread bytes behind (a reset on the other side).  A peer that said
    // BYE and closed already (its wait ran out) gets none, and an error
    // sending to a peer that said BYE is harmless.
    void abort_all(const void *msg) override
    {
        for (unsigned n = 1; n <= c_.nnodes(); n++) {
            peer &p = peers_[n];
            // a sender holds it briefly, unless its peer is failing too
            if (n == c_.node || p.sock.fd < 0 || p.gone ||
                !p.send_mu.try_lock_for(std::chrono::milliseconds(100)))
                continue;
            ::send(p.sock.fd, msg, msg_len, MSG_NOSIGNAL | MSG_DONTWAIT);
            p.send_mu.unlock();
        }
    }
    void leave() override
    {
        std::uint8_t bye[msg_len] = {UDSM_BYE};
        for (unsigned n = 1; n <= c_.nnodes(); n++) {
            peer &p = peers_[n];
            if (n == c_.node || p.sock.fd < 0 || p.gone)
                continue;
            std::unique_lock l(p.send_mu);
            if (!write_all(n, bye, msg_len) && !p.left)
                send_failed(l, n);
            st_.msg(UDSM_BYE, true);
        }
        const auto end = std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(c_.leave_ms);
        while (byes_.load() < c_.nnodes() - 1 && std::chrono::steady_clock::now() < end)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }

private:
    struct peer {
        fd_guard sock;                  // set in form(), closed in the destructor
        std::timed_mutex send_mu;       // whole frames to it
        std::vector<std::uint8_t> in;   // bytes of an incomplete frame (progress thread)
        std::atomic<bool> left{false};  // its BYE arrived
        std::atomic<bool> gone{false};  // then it closed: not read, not written
    };
    std::atomic<unsigned> byes_{0};  // peers whose BYE arrived

    hello my_hello() const
    {
        hello h{};
        h.type = UDSM_HELLO;
        h.node = static_cast<std::uint8_t>(c_.node);
        h.nnodes = static_cast<std::uint8_t>(c_.nnodes());
        h.placement = c_.block ? KDSM_PLACE_BLOCK : KDSM_PLACE_CYCLIC;
        h.npages = c_.npages;
        h.page_size = static_cast<std::uint32_t>(ps_);
        return h;
    }
    std::string path(unsigned node) const { return c_.dir + "/node" + std::to_string(node) + ".sock"; }
    sockaddr_un addr(unsigned node) const
    {
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        const std::string p = path(node);
        if (p.size() >= sizeof(a.sun_path))
            throw std::runtime_error("UDSM_DIR: socket path " + p + " too long");
        std::memcpy(a.sun_path, p.c_str(), p.size() + 1);
        return a;
    }
    // false: the peer is gone (errno says how)
    bool write_all(unsigned to, const void *p, std::size_t n)
    {
        const auto *b = static_cast<const std::uint8_t *>(p);
        while (n) {
            const ssize_t w = ::send(peers_[to].sock.fd, b, n, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return false;
            b += w;
            n -= std::size_t(w);
        }
        return true;
    }
    // the cluster fails on @to, its send mutex released first (the ABORT
    // to the others takes theirs).  In a cascade @to may be a survivor
    // that ended on the first lost node: its ABORT saying so can wait in
    // our receive queue behind messages that need the engine's lock,
    // which this thread holds, so the closed connection is what we name.
    [[noreturn]] void send_failed(std::unique_lock<std::timed_mutex> &l, unsigned to)
    {
        const std::string why = peers_[to].gone ? std::string("it has left the cluster")
                                                : std::string("send: ") + std::strerror(errno);
        l.unlock();
        if (sink_)
            sink_->lost(to, why);
        std::fprintf(stderr, "udsm: node %u lost node %u (%s)\n", c_.node, to, why.c_str());
        std::_Exit(3);
    }
    void write_all_fd(int fd, const hello *h)
    {
        if (::send(fd, h, sizeof(*h), MSG_NOSIGNAL) != ssize_t(sizeof(*h)))
            throw sys_error("sending HELLO");
        st_.msg(h->type, true);
    }
    // one HELLO, whole, by @deadline
    hello read_hello(int fd, std::chrono::steady_clock::time_point deadline);
    void check_hello(const hello &h, unsigned expect) const;
    // a CAS on our words (answered), or our CAS's result
    void cas_frame_in(sink &s, unsigned n, const std::uint8_t *f);
    // the frames buffered from @n; false: the peer closed
    bool drain(sink &s, unsigned n);

    const config c_;
    std::uint8_t *view_;
    const std::size_t ps_;
    stats &st_;
    std::vector<peer> peers_;  // [node]
    fd_guard stop_;
    // our lock words (the queue lock's tails): the progress thread alone
    // runs the CASes on them, in arrival order
    std::vector<std::uint64_t> words_;
};

hello unix_transport::read_hello(int fd, std::chrono::steady_clock::time_point deadline)
{
    hello h;
    std::size_t got = 0;
    while (got < sizeof(h)) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now()).count();
        pollfd p{fd, POLLIN, 0};
        if (left <= 0 || ::poll(&p, 1, int(left)) == 0)
            throw std::runtime_error("no HELLO within UDSM_JOIN_MS");
        const ssize_t r = ::recv(fd, reinterpret_cast<std::uint8_t *>(&h) + got, sizeof(h) - got, 0);
        if (r <= 0)
            throw std::runtime_error("connection closed during HELLO");
        got += std::size_t(r);
    }
    st_.msg(h.type, false);
    return h;
}

void unix_transport::check_hello(const hello &h, unsigned expect) const
{
    const hello me = my_hello();
    std::string why;
    if (h.type != UDSM_HELLO)
        why = "not a HELLO";
    else if (expect ? h.node != expect : (h.node <= c_.node || h.node > c_.nnodes()))
        why = "node " + std::to_string(h.node) + " where " +
              (expect ? "node " + std::to_string(expect) : std::string("a higher node")) + " was due";
    else if (h.nnodes != me.nnodes || h.placement != me.placement || h.npages != me.npages ||
             h.page_size != me.page_size)
        why = "its geometry (nodes, placement, pages, page size) differs";
    if (!why.empty())
        throw std::runtime_error("node " + std::to_string(c_.node) + " refuses a peer: " + why);
}

void unix_transport::form()
{
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(c_.join_ms);
    fd_guard lsn(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (lsn.fd < 0)
        throw sys_error("socket");
    const sockaddr_un me = addr(c_.node);
    ::unlink(me.sun_path);
    if (::bind(lsn.fd, reinterpret_cast<const sockaddr *>(&me), sizeof(me)) ||
        ::listen(lsn.fd, KDSM_MAX_NODES))
        throw sys_error("listen on " + path(c_.node));
    const hello mine = my_hello();
    // dial every lower node; each answers once its own dials are done
    for (unsigned n = 1; n < c_.node; n++) {
        const sockaddr_un a = addr(n);
        fd_guard s;
        for (;;) {
            s = fd_guard(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
            if (::connect(s.fd, reinterpret_cast<const sockaddr *>(&a), sizeof(a)) == 0)
                break;
            if ((errno != ENOENT && errno != ECONNREFUSED) ||
                std::chrono::steady_clock::now() > deadline)
                throw std::runtime_error("node " + std::to_string(c_.node) + ": dialing node " +
                                         std::to_string(n) + " at " + path(n) + ": " +
                                         std::strerror(errno));
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        write_all_fd(s.fd, &mine);
        check_hello(read_hello(s.fd, deadline), n);
        peers_[n].sock = std::move(s);
    }
    // accept every higher node
    for (unsigned k = c_.node + 1; k <= c_.nnodes(); k++) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now()).count();
        pollfd p{lsn.fd, POLLIN, 0};
        if (left <= 0 || ::poll(&p, 1, int(left)) <= 0)
            throw std::runtime_error("node " + std::to_string(c_.node) +
                                     ": the higher nodes did not all connect within UDSM_JOIN_MS");
        fd_guard s(::accept4(lsn.fd, nullptr, nullptr, SOCK_CLOEXEC));
        if (s.fd < 0)
            throw sys_error("accept");
        const hello h = read_hello(s.fd, deadline);
        check_hello(h, 0);
        if (peers_[h.node].sock.fd >= 0)
            throw std::runtime_error("node " + std::to_string(h.node) + " connected twice");
        write_all_fd(s.fd, &mine);
        peers_[h.node].sock = std::move(s);
    }
    ::unlink(me.sun_path);
}

void unix_transport::cas_frame_in(sink &s, unsigned n, const std::uint8_t *f)
{
    std::uint32_t id;
    std::memcpy(&id, f + 4, 4);
    // a lock's word lives at node id % nnodes + 1, its manager: only a
    // CAS on our words comes in, only from that node a result
    const unsigned holder = id % c_.nnodes() + 1;
    if (id >= KDSM_MAX_LOCKS || (f[0] == cas_result_frame ? holder != n : holder != c_.node)) {
        st_.add(KDSM_STAT_MALFORMED);
        s.lost(n, id >= KDSM_MAX_LOCKS ? "a CAS frame past the locks"
                  : f[0] == cas_result_frame ? "a CAS result for a lock word it does not hold"
                                             : "a CAS on a lock word that is not ours");
    }
    if (f[0] == cas_result_frame) {
        std::uint64_t old;
        std::memcpy(&old, f + 8, 8);
        s.cas_done(id, f[1], old);
        return;
    }
    std::uint64_t &w = words_[id / c_.nnodes()];
    std::uint8_t r[msg_len] = {cas_result_frame, f[1]};
    std::memcpy(r + 4, &id, 4);
    std::memcpy(r + 8, &w, 8);
    if (w == f[2])
        w = f[3];
    std::unique_lock l(peers_[n].send_mu);
    if (!write_all(n, r, sizeof(r)))
        send_failed(l, n);
}

bool unix_transport::drain(sink &s, unsigned n)
{
    peer &p = peers_[n];
    std::uint8_t buf[65536];
    for (;;) {
        const ssize_t r = ::recv(p.sock.fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return true;
        if (r < 0 && !p.left)
            s.lost(n, std::string("receive: ") + std::strerror(errno));
        if (r <= 0)
            return false;
        p.in.insert(p.in.end(), buf, buf + r);
        std::size_t at = 0;
        // whole frames only; a page frame's page lands in the engine view
        while (p.in.size() - at >= msg_len) {
            const std::uint8_t *f = p.in.data() + at;
            if (f[0] == page_frame) {
                if (p.in.size() - at < msg_len + ps_)
                    break;
                std::uint32_t page;
                std::memcpy(&page, f + 4, 4);
                if (page >= c_.npages)
                    s.lost(n, "a page frame past the region");
                std::memcpy(view_ + std::size_t(page) * ps_, f + msg_len, ps_);
                at += msg_len + ps_;
                continue;
            }
            if (f[0] == cas_frame || f[0] == cas_result_frame) {
                cas_frame_in(s, n, f);
                at += msg_len;
                continue;
            }
            st_.msg(f[0], false);
            if (f[0] == UDSM_BYE) {
                p.left = true;
                byes_++;
            }
            else
                s.deliver(n, f);
            at += msg_len;
        }
        p.in.erase(p.in.begin(), p.in.begin() + std::ptrdiff_t(at));
    }
}

void unix_transport::run(sink &s, int extra_fd, const std::function<void()> &on_extra)
{
    const bool busy = c_.progress == progress_kind::poll;
    for (;;) {
        std::vector<pollfd> fds;
        std::vector<unsigned> who;
        fds.push_back({stop_.fd, POLLIN, 0});
        who.push_back(0);
        if (extra_fd >= 0) {
            fds.push_back({extra_fd, POLLIN, 0});
            who.push_back(0);
        }
        for (unsigned n = 1; n <= c_.nnodes(); n++)
            if (n != c_.node && peers_[n].sock.fd >= 0 && !peers_[n].gone) {
                fds.push_back({peers_[n].sock.fd, POLLIN, 0});
                who.push_back(n);
            }
        // poll: never sleep in the kernel, ask again at once
        const int r = ::poll(fds.data(), fds.size(), busy ? 0 : -1);
        if (r < 0 && errno != EINTR)
            s.lost(0, std::string("poll: ") + std::strerror(errno));
        if (r == 0 && busy)
            std::this_thread::yield();  // a host with fewer CPUs than spinners
        if (r <= 0)
            continue;
        if (fds[0].revents)
            return;
        for (std::size_t i = 1; i < fds.size(); i++) {
            if (!fds[i].revents)
                continue;
            if (!who[i]) {
                on_extra();
                continue;
            }
            const unsigned n = who[i];
            if (drain(s, n))
                continue;
            if (!peers_[n].left)
                s.lost(n, "its connection closed");
            peers_[n].gone = true;  // it left after its last barrier
        }
    }
}

}  // namespace

std::unique_ptr<transport> make_unix_transport(const config &c, std::uint8_t *view,
                                               std::size_t page_size, stats &st)
{
    return std::make_unique<unix_transport>(c, view, page_size, st);
}

}  // namespace udsm
