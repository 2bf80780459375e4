// SPDX-License-Identifier: GPL-2.0-only
// User-level page-protection baselines for the kvmem benchmark: the time to
// revoke write access to N pages of anonymous memory, and to grant it back,
// with mprotect per page, mprotect per contiguous range, and userfaultfd
// write-protect per page.  Runs inside the guests; reports medians and p99
// per batch in microseconds, measured side by side in one run (TCG times are
// only meaningful as ratios).
//
// Selections, both deterministic:
//   scattered  every other page (0, 2, 4, ...), so no two selected pages are
//              adjacent and neither the kernel nor our range coalescing can
//              merge them: per-range equals per-page there;
//   adjacent   pages 0..N-1, which per-range coalesces into one call.
//
// Behaviour is checked as well as timed, once per N and method, after all
// timing: after a revoke every selected page (mprotect: the write raises
// SIGSEGV) or the last one (uffd-wp: a second thread's write is held and
// reported as a write-protect fault) must stop a write, an unselected
// neighbour must not, and after a grant the write must go through.  A failed
// check exits 1 and nothing is printed.
#include "stats.hpp"

#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;

constexpr std::size_t region_pages = 2048;
constexpr std::size_t sizes[] = {1, 16, 32, 256, 1024};
// The scattered selection of the largest N (pages 0, 2, ..., 2N-2) leaves
// page 2N-1 unselected, which the checks rely on.
static_assert(2 * sizes[std::size(sizes) - 1] <= region_pages);

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::string errstr(const char *what)
{
    return std::string(what) + ": " + std::strerror(errno);
}

std::size_t page_size()
{
    static const auto pg = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return pg;
}

template <class F>
class ScopeExit {
public:
    explicit ScopeExit(F f) : f_(std::move(f)) {}
    ~ScopeExit() { f_(); }
    ScopeExit(const ScopeExit &) = delete;
    ScopeExit &operator=(const ScopeExit &) = delete;

private:
    F f_;
};

// An anonymous mapping, every page populated (so no fault is ever timed),
// unmapped on destruction.
class Region {
public:
    explicit Region(std::size_t pages) : len_(pages * page_size())
    {
        void *p = mmap(nullptr, len_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            throw Error(errstr("mmap"));
        base_ = static_cast<char *>(p);
        for (std::size_t off = 0; off < len_; off += page_size())
            base_[off] = 1;
    }
    ~Region() { munmap(base_, len_); }
    Region(const Region &) = delete;
    Region &operator=(const Region &) = delete;

    char *at(std::size_t pg) const { return base_ + pg * page_size(); }
    std::size_t len() const { return len_; }

private:
    char *base_ = nullptr;
    std::size_t len_;
};

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd()
    {
        if (fd_ >= 0)
            close(fd_);
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

// A userfaultfd with write-protect mode registered on a whole region.
class Uffd {
public:
    explicit Uffd(const Region &r) : fd_(open_uffd())
    {
        uffdio_api api{};
        api.api = UFFD_API;
        api.features = UFFD_FEATURE_PAGEFAULT_FLAG_WP;
        if (ioctl(fd_.get(), UFFDIO_API, &api) < 0)
            throw Error(errstr("UFFDIO_API with UFFD_FEATURE_PAGEFAULT_FLAG_WP"));
        if (!(api.features & UFFD_FEATURE_PAGEFAULT_FLAG_WP))
            throw Error("UFFDIO_API: kernel lacks UFFD_FEATURE_PAGEFAULT_FLAG_WP");
        uffdio_register reg{};
        reg.range.start = reinterpret_cast<std::uintptr_t>(r.at(0));
        reg.range.len = r.len();
        reg.mode = UFFDIO_REGISTER_MODE_WP;
        if (ioctl(fd_.get(), UFFDIO_REGISTER, &reg) < 0)
            throw Error(errstr("UFFDIO_REGISTER with UFFDIO_REGISTER_MODE_WP"));
        if (!(reg.ioctls & (std::uint64_t{1} << _UFFDIO_WRITEPROTECT)))
            throw Error("UFFDIO_REGISTER: UFFDIO_WRITEPROTECT not offered on anonymous memory");
    }

    // Clearing write-protection (wp false) also wakes any thread blocked on
    // the range.
    void protect(char *addr, std::size_t len, bool wp) const
    {
        if (!try_protect(addr, len, wp))
            throw Error(errstr("UFFDIO_WRITEPROTECT"));
    }
    bool try_protect(char *addr, std::size_t len, bool wp) const noexcept
    {
        uffdio_writeprotect w{};
        w.range.start = reinterpret_cast<std::uintptr_t>(addr);
        w.range.len = len;
        w.mode = wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0;
        return ioctl(fd_.get(), UFFDIO_WRITEPROTECT, &w) == 0;
    }
    int fd() const { return fd_.get(); }

    // The only mode this reports: with vm.unprivileged_userfaultfd=0 a
    // process without CAP_SYS_PTRACE needs UFFD_USER_MODE_ONLY, which still
    // covers user-mode writes, the only ones we make.
    static inline const char *mode = "";

private:
    static int open_uffd()
    {
        int fd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
        mode = "";
        if (fd < 0 && errno == EPERM) {
            fd = static_cast<int>(syscall(SYS_userfaultfd,
                                          O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
            mode = " (UFFD_USER_MODE_ONLY)";
        }
        if (fd < 0)
            throw Error(errstr("userfaultfd(2)"));
        return fd;
    }
    Fd fd_;
};

// ---- write probes ---------------------------------------------------------

sigjmp_buf probe_env;
volatile std::sig_atomic_t probe_armed = 0;

extern "C" void on_segv(int sig, siginfo_t *, void *)
{
    if (probe_armed) {
        probe_armed = 0;
        siglongjmp(probe_env, 1);
    }
    // A fault outside a probe is a bug: die of it as usual.
    signal(sig, SIG_DFL);
}

class SegvHandler {
public:
    SegvHandler()
    {
        struct sigaction sa {};
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGSEGV, &sa, &old_) < 0)
            throw Error(errstr("sigaction"));
    }
    ~SegvHandler() { sigaction(SIGSEGV, &old_, nullptr); }
    SegvHandler(const SegvHandler &) = delete;
    SegvHandler &operator=(const SegvHandler &) = delete;

private:
    struct sigaction old_ {};
};

// True when a write to addr raises SIGSEGV.  In-process, unlike a forked
// child: a fork would leave the region copy-on-write shared and change what
// later measurements time.  Must not be used on a uffd-wp protected page
// (the write would block, not fault).
bool write_faults(char *addr)
{
    const SegvHandler h;
    if (sigsetjmp(probe_env, 1) != 0)
        return true;
    probe_armed = 1;
    *static_cast<volatile char *>(addr) = 2;
    probe_armed = 0;
    return false;
}

// Writes to page from another thread.  Returns true when the write was held
// and reported as a write-protect fault on page; false when it completed
// without any report.  Throws on anything else.  The page is left writable.
bool write_blocks(const Uffd &u, char *page)
{
    std::atomic<bool> done{false};
    std::thread writer([&] {
        *static_cast<volatile char *>(page) = 3;
        done = true;
    });
    // Joining must not hang whatever happens here: clearing write-protection
    // releases a held writer.
    const ScopeExit release([&] {
        u.try_protect(page, page_size(), false);
        writer.join();
    });

    const auto deadline = std::chrono::steady_clock::now() + 2s;
    while (!done) {
        pollfd p{u.fd(), POLLIN, 0};
        const int r = poll(&p, 1, 10);
        if (r < 0 && errno != EINTR)
            throw Error(errstr("poll(userfaultfd)"));
        if (r > 0) {
            uffd_msg msg{};
            if (read(u.fd(), &msg, sizeof(msg)) != static_cast<ssize_t>(sizeof(msg)))
                throw Error(errstr("read(userfaultfd)"));
            const auto addr = static_cast<std::uintptr_t>(msg.arg.pagefault.address);
            const auto start = reinterpret_cast<std::uintptr_t>(page);
            if (msg.event != UFFD_EVENT_PAGEFAULT ||
                !(msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP) ||
                addr < start || addr >= start + page_size())
                throw Error("userfaultfd reported an unexpected event");
            if (done)
                throw Error("userfaultfd reported a write that was not held");
            return true;
        }
        if (std::chrono::steady_clock::now() > deadline)
            throw Error("a write was neither completed nor reported within 2 s");
    }
    return false;
}

// ---- measurement ------------------------------------------------------------

using kvbench::Stat;
using kvbench::summarize;

// Times op(true) (revoke) and op(false) (grant), alternating, reps times;
// ends granted.
std::pair<Stat, Stat> measure(int reps, const std::function<void(bool)> &op)
{
    using clock = std::chrono::steady_clock;
    std::vector<double> revoke, grant;
    revoke.reserve(static_cast<std::size_t>(reps));
    grant.reserve(static_cast<std::size_t>(reps));
    for (int i = 0; i < reps; ++i) {
        for (const bool rv : {true, false}) {
            const auto t0 = clock::now();
            op(rv);
            const std::chrono::duration<double, std::micro> d = clock::now() - t0;
            (rv ? revoke : grant).push_back(d.count());
        }
    }
    return {summarize(std::move(revoke)), summarize(std::move(grant))};
}

struct Range {
    char *addr;
    std::size_t len;
};

// Selected page indices (ascending) as maximal runs of adjacent pages.
std::vector<Range> coalesce(const Region &r, const std::vector<std::size_t> &pages)
{
    std::vector<Range> out;
    for (std::size_t i = 0; i < pages.size();) {
        std::size_t j = i + 1;
        while (j < pages.size() && pages[j] == pages[j - 1] + 1)
            ++j;
        out.push_back({r.at(pages[i]), (j - i) * page_size()});
        i = j;
    }
    return out;
}

void mprotect_or_throw(char *addr, std::size_t len, bool revoke)
{
    if (mprotect(addr, len, revoke ? PROT_READ : PROT_READ | PROT_WRITE) < 0)
        throw Error(errstr("mprotect"));
}

struct Row {
    std::string method;
    std::string selection;
    std::size_t pages;
    std::string op;
    std::optional<Stat> stat;
    std::string why;            // when stat is empty
};

void add_pair(std::vector<Row> &rows, const char *method, const char *sel, std::size_t n,
              const std::pair<Stat, Stat> &s)
{
    rows.push_back({method, sel, n, "revoke", s.first, {}});
    rows.push_back({method, sel, n, "grant", s.second, {}});
}

void check(bool ok, const std::string &what, std::size_t n)
{
    if (!ok)
        throw Error("verification failed, N=" + std::to_string(n) + ": " + what);
}

// Revokes with op, then: every selected page must fault on write and the
// page after the last selected one (never selected) must not; grants again
// and every selected page must take a write.
void verify_mprotect(const char *method, const Region &r, const std::vector<std::size_t> &pages,
                     const std::function<void(bool)> &op)
{
    const std::size_t n = pages.size();
    op(true);
    for (const std::size_t pg : pages)
        check(write_faults(r.at(pg)), std::string(method) + " revoke left a page writable", n);
    check(!write_faults(r.at(pages.back() + 1)),
          std::string(method) + " revoke reached an unselected page", n);
    op(false);
    for (const std::size_t pg : pages)
        check(!write_faults(r.at(pg)), std::string(method) + " grant left a page read-only", n);
}

// Same for uffd-wp, on the last selected page only (each probe is a thread).
void verify_uffd(const Uffd &u, const Region &r, const std::vector<std::size_t> &pages,
                 const std::function<void(bool)> &op)
{
    const std::size_t n = pages.size();
    char *last = r.at(pages.back());
    op(true);
    check(write_blocks(u, last), "uffd_wp revoke did not hold and report a write", n);
    check(!write_blocks(u, r.at(pages.back() + 1)),
          "uffd_wp revoke reached an unselected page", n);
    op(false);
    check(!write_blocks(u, last), "uffd_wp grant left a page write-protected", n);
    check(*last == 3, "a released uffd_wp write was lost", n);
}

// ---- output -----------------------------------------------------------------

std::string json_string(std::string_view s)
{
    std::string out = "\"";
    for (const char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
            out += buf;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::string fixed3(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3f", v);
    return buf;
}

std::string json(const std::vector<Row> &rows, int reps)
{
    utsname u{};
    uname(&u);
    std::string out = "{\n  \"kernel\": " + json_string(u.release) +
                      ",\n  \"page_size\": " + std::to_string(page_size()) +
                      ",\n  \"reps\": " + std::to_string(reps) + ",\n  \"series\": [\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const Row &r = rows[i];
        out += "    {\"method\": " + json_string(r.method) +
               ", \"selection\": " + json_string(r.selection) +
               ", \"pages\": " + std::to_string(r.pages) + ", \"op\": " + json_string(r.op);
        if (r.stat)
            out += ", \"median_us\": " + fixed3(r.stat->median_us) +
                   ", \"p99_us\": " + fixed3(r.stat->p99_us) + "}";
        else
            out += ", \"unavailable\": " + json_string(r.why) + "}";
        out += i + 1 < rows.size() ? ",\n" : "\n";
    }
    return out + "  ]\n}\n";
}

void print_table(const std::vector<Row> &rows)
{
    std::printf("%-20s %-9s %5s %-6s %11s %11s\n", "method", "selection", "pages", "op",
                "median_us", "p99_us");
    for (const Row &r : rows) {
        std::printf("%-20s %-9s %5zu %-6s ", r.method.c_str(), r.selection.c_str(), r.pages,
                    r.op.c_str());
        if (r.stat)
            std::printf("%11.2f %11.2f\n", r.stat->median_us, r.stat->p99_us);
        else
            std::printf("unavailable: %s\n", r.why.c_str());
    }
}

int run(int reps, const std::string &json_path)
{
    const std::size_t pg = page_size();
    std::vector<Row> rows;
    const Region region(region_pages);
    std::optional<Uffd> uffd;
    std::string uffd_why;
    try {
        uffd.emplace(region);
        if (*Uffd::mode)
            std::fprintf(stderr, "protect-baseline: userfaultfd opened%s\n", Uffd::mode);
    } catch (const Error &e) {
        uffd_why = e.what();
        std::fprintf(stderr, "protect-baseline: userfaultfd write-protect unavailable: %s\n",
                     uffd_why.c_str());
    }

    // Checks run after all timing: the SIGSEGV probes and the writer threads
    // must not change the state (page-table entries, the CPUs the mm has run
    // on) that later series would time.
    std::vector<std::function<void()>> checks;
    for (const std::size_t n : sizes) {
        std::vector<std::size_t> scattered, adjacent;
        for (std::size_t i = 0; i < n; ++i) {
            scattered.push_back(2 * i);
            adjacent.push_back(i);
        }

        const auto per_page = [&region, pg, scattered](bool revoke) {
            for (const std::size_t p : scattered)
                mprotect_or_throw(region.at(p), pg, revoke);
        };
        add_pair(rows, "mprotect_per_page", "scattered", n, measure(reps, per_page));
        checks.push_back([&region, scattered, per_page] {
            verify_mprotect("mprotect_per_page", region, scattered, per_page);
        });

        for (const auto &[sel, pages] : {std::pair{"scattered", scattered},
                                         std::pair{"adjacent", adjacent}}) {
            const auto per_range = [ranges = coalesce(region, pages)](bool revoke) {
                for (const Range &r : ranges)
                    mprotect_or_throw(r.addr, r.len, revoke);
            };
            add_pair(rows, "mprotect_per_range", sel, n, measure(reps, per_range));
            checks.push_back([&region, pages, per_range] {
                verify_mprotect("mprotect_per_range", region, pages, per_range);
            });
        }

        if (uffd) {
            const auto wp = [&region, &uffd, pg, scattered](bool revoke) {
                for (const std::size_t p : scattered)
                    uffd->protect(region.at(p), pg, revoke);
            };
            add_pair(rows, "uffd_wp_per_page", "scattered", n, measure(reps, wp));
            checks.push_back([&region, &uffd, scattered, wp] {
                verify_uffd(*uffd, region, scattered, wp);
            });
        } else {
            rows.push_back({"uffd_wp_per_page", "scattered", n, "revoke", std::nullopt, uffd_why});
            rows.push_back({"uffd_wp_per_page", "scattered", n, "grant", std::nullopt, uffd_why});
        }
    }
    for (const auto &c : checks)
        c();

    print_table(rows);
    if (!json_path.empty()) {
        std::ofstream f(json_path);
        f << json(rows, reps);
        f.close();
        if (!f)
            throw Error("cannot write " + json_path);
    }
    return 0;
}

void usage(std::FILE *out, const char *argv0)
{
    std::fprintf(out,
        "usage: %s [--reps N] [--json FILE]\n"
        "  --reps N     revoke/grant repetitions per series (default 200, 1..100000)\n"
        "  --json FILE  also write the results as JSON\n"
        "exit status: 0 ok, 1 a behaviour check failed or an error\n",
        argv0);
}

} // namespace

int main(int argc, char **argv)
{
    int reps = 200;
    std::string json_path;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--reps" && i + 1 < argc) {
            const std::string_view v = argv[++i];
            const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), reps);
            if (ec != std::errc{} || end != v.data() + v.size() || reps < 1 || reps > 100000) {
                std::fprintf(stderr, "protect-baseline: --reps must be a number in 1..100000\n");
                return 1;
            }
        } else if (a == "--json" && i + 1 < argc) {
            json_path = argv[++i];
        } else if (a == "--help" || a == "-h") {
            usage(stdout, argv[0]);
            return 0;
        } else {
            usage(stderr, argv[0]);
            return 1;
        }
    }
    try {
        return run(reps, json_path);
    } catch (const Error &e) {
        std::fprintf(stderr, "protect-baseline: %s\n", e.what());
        return 1;
    }
}
