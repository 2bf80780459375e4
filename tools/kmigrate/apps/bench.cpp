// SPDX-License-Identifier: GPL-2.0-only
//
// kmigrate-bench: the process `./kvlab bench migrate` migrates, built twice
// from this file: kmigrate-bench (libkmigrate: heap and stack in the arena,
// it migrates itself) and kmigrate-bench-plain (glibc's heap: what CRIU
// migrates).  Same work, same reports, so the two compare.
//
//   kmigrate-bench[-plain] --mb N --observer IP:PORT [--to DEST]
//                          [--precopy] [--no-prefetch] [--faults]
//
// It fills N MiB (operator new), then sends one UDP datagram to the
// observer (kmigrate-observe, on the source node) every HB_US while it
// waits to move: "hb SEQ HOST".  kmigrate-bench asks the kernel to
// prepare DEST and keeps beating until poll() moves it (the socket is
// closed for the freeze: descriptors do not migrate); kmigrate-bench-plain
// beats until its host name changes (CRIU restored it elsewhere).  On the
// destination it sends "resumed HOST" at once, then touches every page
// of the buffer in order ("faults" first, with --faults: the first touch
// of each page timed: median and p90), and ends with
// "touched ok=0|1 ns=NS HOST": the checksum and how long the touching
// took.  The observer's clock times them all (kvlab's bench_migrate.py).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#ifdef KMIGRATE_BENCH_ARENA
#include <kmigrate/kmigrate.hpp>
#endif

namespace {

constexpr long HB_US = 200;
constexpr std::size_t PAGE = 4096;

struct config {
    std::size_t mb = 16;
    std::string observer;
    std::string to;
    bool precopy = false;
    bool no_prefetch = false;
    bool faults = false;
};

[[noreturn]] void usage()
{
    std::fprintf(stderr, "usage: kmigrate-bench --mb N --observer IP:PORT [--to DEST] "
                         "[--precopy] [--no-prefetch] [--faults]\n");
    std::exit(2);
}

std::uint64_t now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::uint64_t(ts.tv_sec) * 1000000000ULL + std::uint64_t(ts.tv_nsec);
}

std::string host()
{
    char h[256] = {};
    gethostname(h, sizeof(h) - 1);
    return h;
}

// One datagram socket to the observer; closed around a freeze.
class beacon {
public:
    explicit beacon(const std::string &addr)
    {
        const auto colon = addr.rfind(':');
        if (colon == std::string::npos)
            usage();
        to_.sin_family = AF_INET;
        to_.sin_port = htons(static_cast<std::uint16_t>(std::atoi(addr.c_str() + colon + 1)));
        if (inet_pton(AF_INET, addr.substr(0, colon).c_str(), &to_.sin_addr) != 1)
            usage();
        open();
    }
    ~beacon() { close(); }
    beacon(const beacon &) = delete;
    beacon &operator=(const beacon &) = delete;
    void open()
    {
        if (fd_ < 0)
            fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    }
    void close()
    {
        if (fd_ >= 0)
            ::close(fd_);
        fd_ = -1;
    }
    void send(const std::string &msg) const
    {
        if (fd_ >= 0)
            ::sendto(fd_, msg.data(), msg.size(), 0, reinterpret_cast<const sockaddr *>(&to_),
                     sizeof(to_));
    }

private:
    int fd_ = -1;
    sockaddr_in to_{};
};

std::uint64_t word(std::size_t i)
{
    return (i * 0x9e3779b97f4a7c15ULL) ^ 0x6b6d6967ULL;
}

// With @times, first one pass that only reads the first word of each page,
// in order, each read timed: that read is the page's first touch (no
// other access of the buffer can be hoisted before it).  Then every word
// of the buffer, checked.
bool touch(const std::uint64_t *buf, std::size_t words, std::vector<std::uint32_t> *times)
{
    const std::size_t per_page = PAGE / sizeof(std::uint64_t);
    bool ok = true;
    if (times) {
        for (std::size_t i = 0; i < words; i += per_page) {
            const std::uint64_t t0 = now_ns();
            asm volatile("" ::: "memory");
            const std::uint64_t v = *static_cast<const volatile std::uint64_t *>(&buf[i]);
            asm volatile("" ::: "memory");
            times->push_back(static_cast<std::uint32_t>(std::min<std::uint64_t>(
                now_ns() - t0, UINT32_MAX)));
            ok &= v == word(i);
        }
    }
    for (std::size_t i = 0; i < words; i++)
        ok &= buf[i] == word(i);
    return ok;
}

int work(int argc, char **argv)
{
    config c;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (++i >= argc)
                usage();
            return argv[i];
        };
        if (a == "--mb")
            c.mb = std::strtoul(next().c_str(), nullptr, 10);
        else if (a == "--observer")
            c.observer = next();
        else if (a == "--to")
            c.to = next();
        else if (a == "--precopy")
            c.precopy = true;
        else if (a == "--no-prefetch")
            c.no_prefetch = true;
        else if (a == "--faults")
            c.faults = true;
        else
            usage();
    }
    if (!c.mb || c.observer.empty())
        usage();
    const std::size_t words = (c.mb << 20) / sizeof(std::uint64_t);
    auto *buf = new std::uint64_t[words];
    for (std::size_t i = 0; i < words; i++)
        buf[i] = word(i);
    const std::string here = host();
    beacon b(c.observer);
    b.send("ready " + std::to_string(getpid()) + " " + here);

    std::uint64_t seq = 0, next_hb = now_ns();
#ifdef KMIGRATE_BENCH_ARENA
    if (c.to.empty())
        usage();
    // prepare() checks the descriptors too: none but 0, 1, 2 may be open
    b.close();
    const int err = kmigrate::prepare(c.to, c.precopy ? kmigrate::mode::precopy
                                                      : kmigrate::mode::postcopy,
                                      c.no_prefetch ? kmigrate::no_prefetch : 0);
    b.open();
    if (err) {
        b.send("failed " + kmigrate::last_error());
        std::fprintf(stderr, "kmigrate-bench: %s\n", kmigrate::last_error().c_str());
        return 1;
    }
    for (;;) {
        const std::uint64_t t = now_ns();
        if (t >= next_hb) {
            b.send("hb " + std::to_string(seq++) + " " + here);
            next_hb = t + HB_US * 1000;
        }
        if (kmigrate::pending()) {
            b.send("hb " + std::to_string(seq++) + " " + here);
            b.close();
            const bool moved = kmigrate::poll();
            b.open();
            if (moved)
                break;
            if (!kmigrate::last_error().empty() &&
                kmigrate::last_error().find("still being prepared") == std::string::npos) {
                b.send("failed " + kmigrate::last_error());
                std::fprintf(stderr, "kmigrate-bench: %s\n", kmigrate::last_error().c_str());
                return 1;
            }
        }
    }
#else
    // CRIU moves this process from outside: beat until the host changes.
    for (;;) {
        const std::uint64_t t = now_ns();
        if (t >= next_hb) {
            if (host() != here)
                break;
            b.send("hb " + std::to_string(seq++) + " " + here);
            next_hb = t + HB_US * 1000;
        }
    }
#endif
    const std::string there = host();
    b.send("resumed " + there);
    std::vector<std::uint32_t> times;
    if (c.faults)
        times.reserve(words / (PAGE / sizeof(std::uint64_t)) + 1);
    const std::uint64_t t0 = now_ns();
    const bool ok = touch(buf, words, c.faults ? &times : nullptr);
    const std::uint64_t took = now_ns() - t0;
    if (c.faults && !times.empty()) {
        std::sort(times.begin(), times.end());
        b.send("faults n=" + std::to_string(times.size()) +
               " median_ns=" + std::to_string(times[times.size() / 2]) +
               " p90_ns=" + std::to_string(times[times.size() * 9 / 10]) + " " + there);
    }
    b.send("touched ok=" + std::to_string(ok) + " ns=" + std::to_string(took) + " " + there);
    std::printf("kmigrate-bench: %s -> %s ok=%d touch_ns=%" PRIu64 "\n", here.c_str(),
                there.c_str(), ok, took);
    delete[] buf;
    return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv)
{
#ifdef KMIGRATE_BENCH_ARENA
    kmigrate::options o;
    // the buffer, 1/16 more for the allocator and small blocks, and 8 MiB
    std::size_t mb = 16;
    for (int i = 1; i + 1 < argc; i++)
        if (!std::strcmp(argv[i], "--mb"))
            mb = std::strtoul(argv[i + 1], nullptr, 10);
    o.arena_bytes = (mb + mb / 16 + 8) << 20;
    return kmigrate::run(argc, argv, work, o);
#else
    return work(argc, argv);
#endif
}
