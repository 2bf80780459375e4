// SPDX-License-Identifier: GPL-2.0-only
//
// kmigrate-observe: one clock for a migration that spans two nodes.
//
//   kmigrate-observe listen PORT TIMEOUT_S   # on the source
//   kmigrate-observe echo PORT               # on the destination
//   kmigrate-observe rtt IP:PORT COUNT       # on the source
//   kmigrate-observe now                     # CLOCK_MONOTONIC, ns
//
// listen: prints "T_NS MESSAGE" for every datagram kmigrate-bench sends,
// T_NS on this node's CLOCK_MONOTONIC at arrival, until a "touched" or
// "failed" message or TIMEOUT_S.  echo: sends every datagram back.  rtt:
// COUNT round trips to an echo, one at a time; prints "min_ns=... 
// median_ns=...": the one-way delay of a datagram from the destination is
// taken as min/2 (bench_migrate.py subtracts it from the downtime).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

std::uint64_t now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::uint64_t(ts.tv_sec) * 1000000000ULL + std::uint64_t(ts.tv_nsec);
}

[[noreturn]] void usage()
{
    std::fprintf(stderr, "usage: kmigrate-observe listen PORT TIMEOUT_S | echo PORT | "
                         "rtt IP:PORT COUNT | now\n");
    std::exit(2);
}

// An owned descriptor.
class fd {
public:
    explicit fd(int v) : v_(v) {}
    ~fd()
    {
        if (v_ >= 0)
            ::close(v_);
    }
    fd(const fd &) = delete;
    fd &operator=(const fd &) = delete;
    int get() const { return v_; }

private:
    int v_;
};

int bound_socket(unsigned port)
{
    const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (s < 0 || ::bind(s, reinterpret_cast<sockaddr *>(&a), sizeof(a)) < 0) {
        std::perror("kmigrate-observe: bind");
        std::exit(1);
    }
    return s;
}

int listen_mode(unsigned port, unsigned timeout_s)
{
    fd s(bound_socket(port));
    const std::uint64_t end = now_ns() + std::uint64_t(timeout_s) * 1000000000ULL;
    std::vector<std::pair<std::uint64_t, std::string>> got;
    got.reserve(1 << 16);
    char buf[512];
    // the source's beats stop at the freeze; everything is printed at the end
    for (;;) {
        const std::uint64_t t = now_ns();
        if (t >= end)
            break;
        pollfd p = {s.get(), POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(std::min<std::uint64_t>((end - t) / 1000000 + 1,
                                                                   1000))) <= 0)
            continue;
        const ssize_t n = ::recv(s.get(), buf, sizeof(buf) - 1, 0);
        const std::uint64_t at = now_ns();
        if (n <= 0)
            continue;
        buf[n] = 0;
        got.emplace_back(at, buf);
        if (!std::strncmp(buf, "touched", 7) || !std::strncmp(buf, "failed", 6))
            break;
    }
    for (const auto &[t, m] : got)
        std::printf("%" PRIu64 " %s\n", t, m.c_str());
    return 0;
}

int echo_mode(unsigned port)
{
    fd s(bound_socket(port));
    char buf[512];
    for (;;) {
        sockaddr_in from{};
        socklen_t len = sizeof(from);
        const ssize_t n = ::recvfrom(s.get(), buf, sizeof(buf), 0,
                                     reinterpret_cast<sockaddr *>(&from), &len);
        if (n > 0)
            ::sendto(s.get(), buf, static_cast<std::size_t>(n), 0,
                     reinterpret_cast<sockaddr *>(&from), len);
    }
}

int rtt_mode(const std::string &addr, unsigned count)
{
    const auto colon = addr.rfind(':');
    sockaddr_in to{};
    to.sin_family = AF_INET;
    if (colon == std::string::npos ||
        inet_pton(AF_INET, addr.substr(0, colon).c_str(), &to.sin_addr) != 1)
        usage();
    to.sin_port = htons(static_cast<std::uint16_t>(std::atoi(addr.c_str() + colon + 1)));
    fd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    std::vector<std::uint64_t> rtt;
    char buf[64];
    for (unsigned i = 0; i < count; i++) {
        const std::uint64_t t0 = now_ns();
        ::sendto(s.get(), "ping", 4, 0, reinterpret_cast<sockaddr *>(&to), sizeof(to));
        pollfd p = {s.get(), POLLIN, 0};
        if (::poll(&p, 1, 1000) <= 0 || ::recv(s.get(), buf, sizeof(buf), 0) <= 0)
            continue;
        rtt.push_back(now_ns() - t0);
    }
    if (rtt.empty()) {
        std::fprintf(stderr, "kmigrate-observe: no echo from %s\n", addr.c_str());
        return 1;
    }
    std::sort(rtt.begin(), rtt.end());
    std::printf("min_ns=%" PRIu64 " median_ns=%" PRIu64 " n=%zu\n", rtt.front(),
                rtt[rtt.size() / 2], rtt.size());
    return 0;
}

}  // namespace

int main(int argc, char **argv)
{
    if (argc == 4 && !std::strcmp(argv[1], "listen"))
        return listen_mode(static_cast<unsigned>(std::atoi(argv[2])),
                           static_cast<unsigned>(std::atoi(argv[3])));
    if (argc == 3 && !std::strcmp(argv[1], "echo"))
        return echo_mode(static_cast<unsigned>(std::atoi(argv[2])));
    if (argc == 2 && !std::strcmp(argv[1], "now")) {
        std::printf("%" PRIu64 "\n", now_ns());
        return 0;
    }
    if (argc == 4 && !std::strcmp(argv[1], "rtt"))
        return rtt_mode(argv[2], static_cast<unsigned>(std::atoi(argv[3])));
    usage();
}
