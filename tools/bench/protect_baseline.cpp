// SPDX-License-Identifier: GPL-2.0-only
// User-level page-protection baselines for the kmem benchmark: the time to
// revoke write access to N pages of anonymous memory, and to grant it back,
// with mprotect per page, mprotect per contiguous range, and userfaultfd
// write-protect per page.  Runs inside the guests; reports medians and p99
// in microseconds, measured side by side in one run (TCG times are only
// meaningful as ratios).
//
// Selected pages are every other page, so no two are adjacent and the
// per-page methods cannot be merged by the kernel; the per-range method is
// also timed on N adjacent pages, where it is one call.
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr std::size_t region_pages = 2048;
constexpr int sizes[] = {1, 16, 32, 256, 1024};

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::string errstr(const char *what)
{
    return std::string(what) + ": " + std::strerror(errno);
}

// An anonymous mapping, unmapped on destruction.
class Region {
public:
    explicit Region(std::size_t pages) : len_(pages * page())
    {
        void *p = mmap(nullptr, len_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            throw Error(errstr("mmap"));
        base_ = static_cast<char *>(p);
        for (std::size_t off = 0; off < len_; off += page())
            base_[off] = 1;             // populate: no fault is timed
    }
    ~Region() { munmap(base_, len_); }
    Region(const Region &) = delete;
    Region &operator=(const Region &) = delete;

    char *at(std::size_t pg) const { return base_ + pg * page(); }
    std::size_t len() const { return len_; }
    static std::size_t page() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

private:
    char *base_ = nullptr;
    std::size_t len_;
};

// A userfaultfd with write-protect mode registered on a region.
class Uffd {
public:
    explicit Uffd(const Region &r)
    {
        fd_ = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
        if (fd_ < 0)
            throw Error(errstr("userfaultfd"));
        uffdio_api api{};
        api.api = UFFD_API;
        api.features = UFFD_FEATURE_PAGEFAULT_FLAG_WP;
        if (ioctl(fd_, UFFDIO_API, &api) < 0)
            fail("UFFDIO_API (write-protect feature)");
        uffdio_register reg{};
        reg.range.start = reinterpret_cast<std::uintptr_t>(r.at(0));
        reg.range.len = r.len();
        reg.mode = UFFDIO_REGISTER_MODE_WP;
        if (ioctl(fd_, UFFDIO_REGISTER, &reg) < 0)
            fail("UFFDIO_REGISTER (write-protect mode)");
    }
    ~Uffd()
    {
        if (fd_ >= 0)
            close(fd_);
    }
    Uffd(const Uffd &) = delete;
    Uffd &operator=(const Uffd &) = delete;

    void protect(char *addr, std::size_t len, bool wp) const
    {
        uffdio_writeprotect w{};
        w.range.start = reinterpret_cast<std::uintptr_t>(addr);
        w.range.len = len;
        w.mode = wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0;
        if (ioctl(fd_, UFFDIO_WRITEPROTECT, &w) < 0)
            throw Error(errstr("UFFDIO_WRITEPROTECT"));
    }

private:
    [[noreturn]] void fail(const char *what)
    {
        const std::string msg = errstr(what);
        close(fd_);
        fd_ = -1;
        throw Error(msg);
    }
    int fd_ = -1;
};

struct Stat {
    double median_us, p99_us;
};

Stat summarize(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return {v[v.size() / 2], v[(v.size() - 1) * 99 / 100]};
}

// Time op(true) (revoke) and op(false) (grant), alternating, reps times.
std::pair<Stat, Stat> measure(int reps, const std::function<void(bool)> &op)
{
    using clock = std::chrono::steady_clock;
    std::vector<double> revoke, grant;
    for (int i = 0; i < reps; ++i) {
        for (bool rv : {true, false}) {
            const auto t0 = clock::now();
            op(rv);
            const std::chrono::duration<double, std::micro> d = clock::now() - t0;
            (rv ? revoke : grant).push_back(d.count());
        }
    }
    return {summarize(std::move(revoke)), summarize(std::move(grant))};
}

// True when a write to addr faults (checked in a child, so the parent's
// state is untouched).
bool write_faults(char *addr)
{
    const pid_t pid = fork();
    if (pid < 0)
        throw Error(errstr("fork"));
    if (pid == 0) {
        *static_cast<volatile char *>(addr) = 2;
        _exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0)
        throw Error(errstr("waitpid"));
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

struct Row {
    std::string method;
    int pages;
    std::string op;
    std::optional<Stat> stat;
    std::string why;            // when unavailable
};

void mprotect_or_throw(char *addr, std::size_t len, int prot)
{
    if (mprotect(addr, len, prot) < 0)
        throw Error(errstr("mprotect"));
}

void add_pair(std::vector<Row> &rows, const std::string &m, int n,
              const std::pair<Stat, Stat> &s)
{
    rows.push_back({m, n, "revoke", s.first, {}});
    rows.push_back({m, n, "grant", s.second, {}});
}

std::string json(const std::vector<Row> &rows, int reps)
{
    utsname u{};
    uname(&u);
    std::string out = "{\n  \"kernel\": \"" + std::string(u.release) +
                      "\",\n  \"page_size\": " + std::to_string(Region::page()) +
                      ",\n  \"reps\": " + std::to_string(reps) + ",\n  \"series\": [\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const Row &r = rows[i];
        char buf[256];
        if (r.stat)
            std::snprintf(buf, sizeof(buf),
                          "    {\"method\": \"%s\", \"pages\": %d, \"op\": \"%s\", "
                          "\"median_us\": %.3f, \"p99_us\": %.3f}",
                          r.method.c_str(), r.pages, r.op.c_str(), r.stat->median_us,
                          r.stat->p99_us);
        else
            std::snprintf(buf, sizeof(buf),
                          "    {\"method\": \"%s\", \"pages\": %d, \"op\": \"%s\", "
                          "\"unavailable\": \"%s\"}",
                          r.method.c_str(), r.pages, r.op.c_str(), r.why.c_str());
        out += buf;
        out += i + 1 < rows.size() ? ",\n" : "\n";
    }
    return out + "  ]\n}\n";
}

int run(int reps, const char *json_path)
{
    const std::size_t pg = Region::page();
    std::vector<Row> rows;
    Region region(region_pages);
    std::optional<Uffd> uffd;
    std::string uffd_why;
    try {
        uffd.emplace(region);
    } catch (const Error &e) {
        uffd_why = e.what();
        std::fprintf(stderr, "protect-baseline: userfaultfd write-protect unavailable: %s\n",
                     uffd_why.c_str());
    }

    for (const int n : sizes) {
        // Every other page: N scattered, never adjacent.
        std::vector<char *> pages;
        for (int i = 0; i < n; ++i)
            pages.push_back(region.at(static_cast<std::size_t>(2 * i)));

        add_pair(rows, "mprotect_per_page", n, measure(reps, [&](bool revoke) {
                     for (char *p : pages)
                         mprotect_or_throw(p, pg, revoke ? PROT_READ : PROT_READ | PROT_WRITE);
                 }));
        // Semantics check: revoked pages fault on write, granted ones do not.
        for (char *p : pages)
            mprotect_or_throw(p, pg, PROT_READ);
        if (!write_faults(pages.back()))
            throw Error("mprotect revoke did not stop a write");
        for (char *p : pages)
            mprotect_or_throw(p, pg, PROT_READ | PROT_WRITE);
        if (write_faults(pages.back()))
            throw Error("mprotect grant did not restore writes");

        add_pair(rows, "mprotect_contiguous_range", n, measure(reps, [&](bool revoke) {
                     mprotect_or_throw(region.at(0), static_cast<std::size_t>(n) * pg,
                                       revoke ? PROT_READ : PROT_READ | PROT_WRITE);
                 }));

        if (uffd) {
            add_pair(rows, "uffd_wp_per_page", n, measure(reps, [&](bool revoke) {
                         for (char *p : pages)
                             uffd->protect(p, pg, revoke);
                     }));
        } else {
            rows.push_back({"uffd_wp_per_page", n, "revoke", std::nullopt, uffd_why});
            rows.push_back({"uffd_wp_per_page", n, "grant", std::nullopt, uffd_why});
        }
    }

    std::printf("%-26s %6s %-7s %12s %12s\n", "method", "pages", "op", "median_us", "p99_us");
    for (const Row &r : rows) {
        if (r.stat)
            std::printf("%-26s %6d %-7s %12.2f %12.2f\n", r.method.c_str(), r.pages,
                        r.op.c_str(), r.stat->median_us, r.stat->p99_us);
        else
            std::printf("%-26s %6d %-7s %25s\n", r.method.c_str(), r.pages, r.op.c_str(),
                        "unavailable");
    }
    if (json_path) {
        std::ofstream f(json_path);
        f << json(rows, reps);
        if (!f)
            throw Error(std::string("cannot write ") + json_path);
    }
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    int reps = 200;
    const char *json_path = nullptr;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--reps" && i + 1 < argc) {
            reps = std::atoi(argv[++i]);
        } else if (a == "--json" && i + 1 < argc) {
            json_path = argv[++i];
        } else {
            std::fprintf(stderr, "usage: %s [--reps N] [--json FILE]\n", argv[0]);
            return a == "--help" ? 0 : 1;
        }
    }
    if (reps < 1 || reps > 100000) {
        std::fprintf(stderr, "protect-baseline: --reps must be 1..100000\n");
        return 1;
    }
    try {
        return run(reps, json_path);
    } catch (const Error &e) {
        std::fprintf(stderr, "protect-baseline: %s\n", e.what());
        return 1;
    }
}
