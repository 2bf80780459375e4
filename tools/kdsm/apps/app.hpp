// SPDX-License-Identifier: GPL-2.0-only
//
// What every kdsm application shares: options, the threads of this node,
// and the report line (time, faults, messages, softirq share).
#pragma once

#include <kdsm/kdsm.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace app {

struct options {
    unsigned threads = 1;
    std::size_t size = 0;
    unsigned iters = 0;
    std::string test;
    bool same_page = false;
    bool expect_violations = false;
    unsigned lock = 1;         // litmus hold/take/unlock-race: the lock id
    unsigned hold_ms = 1000;   // litmus hold: how long
    kdsm::lock_kind kind = kdsm::lock_kind::kernel;  // litmus lock tests: --kind
};

inline options parse(int argc, char **argv, std::size_t size, unsigned iters)
{
    options o;
    o.size = size;
    o.iters = iters;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto next = [&]() -> const char * {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s: %s needs a value\n", argv[0], a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--threads")
            o.threads = static_cast<unsigned>(std::strtoul(next(), nullptr, 0));
        else if (a == "--size")
            o.size = std::strtoul(next(), nullptr, 0);
        else if (a == "--iters")
            o.iters = static_cast<unsigned>(std::strtoul(next(), nullptr, 0));
        else if (a == "--test")
            o.test = next();
        else if (a == "--same-page")
            o.same_page = true;
        else if (a == "--expect-violations")
            o.expect_violations = true;
        else if (a == "--lock")
            o.lock = static_cast<unsigned>(std::strtoul(next(), nullptr, 0));
        else if (a == "--hold-ms")
            o.hold_ms = static_cast<unsigned>(std::strtoul(next(), nullptr, 0));
        else if (a == "--kind") {
            const std::string k = next();
            try {
                o.kind = kdsm::parse_lock_kind(k);
            } catch (const kdsm::error &e) {
                std::fprintf(stderr, "%s: --kind: %s\n", argv[0], e.what());
                std::exit(2);
            }
        }
        else {
            std::fprintf(stderr, "%s: unknown option %s\n", argv[0], a.c_str());
            std::exit(2);
        }
    }
    if (!o.threads || o.threads > 64) {
        std::fprintf(stderr, "%s: --threads must be 1..64\n", argv[0]);
        std::exit(2);
    }
    return o;
}

// Run @fn(t) on @n threads of this node and join them.  A kdsm::error in
// one (a lock in a failed cluster) ends the process with status 2: the
// others may wait in a barrier for ever.
inline void run_threads(unsigned n, const std::function<void(unsigned)> &fn)
{
    std::vector<std::jthread> ts;
    for (unsigned t = 0; t < n; t++)
        ts.emplace_back([&fn, t] {
            try {
                fn(t);
            } catch (const kdsm::error &e) {
                std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, e.what());
                std::_Exit(2);
            }
        });
}

// An array split in blocks of @per elements over the workers, each block
// padded to whole pages, so that a page has one writer.
template <typename T>
struct slices {
    std::size_t per, stride;
    kdsm::shared_array<T> a;

    slices(kdsm::attachment &dsm, std::size_t n, unsigned workers)
        : per((n + workers - 1) / workers),
          stride((per * sizeof(T) + dsm.page_size() - 1) / dsm.page_size() * dsm.page_size() /
                 sizeof(T)),
          a(dsm, workers * stride) {}
    T &operator[](std::size_t i) { return a[i / per * stride + i % per]; }
};

inline double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The counters' change over a run, as one line.
inline void report(const char *name, const kdsm::status &a, const kdsm::status &b,
                   double secs, bool ok)
{
    auto d = [&](unsigned id) { return b.stat(id) - a.stat(id); };
    const std::uint64_t soft = d(KDSM_STAT_EV_SOFTIRQ);
    // kdsm's own deferrals (DEFER_NS); kvmsg's (NOMEM) count for the share
    const std::uint64_t queued = d(KDSM_STAT_EV_DEFER_ZAP) + d(KDSM_STAT_EV_DEFER_NOBUF) +
                                 d(KDSM_STAT_EV_DEFER_ORDER) + d(KDSM_STAT_EV_DEFER_MODE);
    const std::uint64_t deferred = queued + d(KDSM_STAT_EV_DEFER_NOMEM);
    const std::uint64_t faults = d(KDSM_STAT_READ_FAULTS) + d(KDSM_STAT_WRITE_FAULTS);
    const std::uint64_t wakes = d(KDSM_STAT_DEFER_WAKES);
    auto mean_us = [](std::uint64_t ns, std::uint64_t n) { return n ? ns / 1e3 / n : 0.0; };
    std::printf("%s: node %u: %s time %.3f s read_faults %llu write_faults %llu msgs_tx %llu "
                "events_softirq %llu deferred zap %llu nobuf %llu order %llu "
                "softirq_share %.1f%% fault_us %.0f deferred_us %.0f wakes %llu wake_us %.0f\n",
                name, b.node, ok ? "check ok" : "CHECK FAILED", secs,
                static_cast<unsigned long long>(d(KDSM_STAT_READ_FAULTS)),
                static_cast<unsigned long long>(d(KDSM_STAT_WRITE_FAULTS)),
                static_cast<unsigned long long>(d(KDSM_STAT_MSGS_TX)),
                static_cast<unsigned long long>(soft),
                static_cast<unsigned long long>(d(KDSM_STAT_EV_DEFER_ZAP)),
                static_cast<unsigned long long>(d(KDSM_STAT_EV_DEFER_NOBUF)),
                static_cast<unsigned long long>(d(KDSM_STAT_EV_DEFER_ORDER)),
                soft + deferred ? 100.0 * double(soft) / double(soft + deferred) : 100.0,
                mean_us(d(KDSM_STAT_FAULT_NS), faults), mean_us(d(KDSM_STAT_DEFER_NS), queued),
                static_cast<unsigned long long>(wakes), mean_us(d(KDSM_STAT_DEFER_WAKE_NS), wakes));
    std::fflush(stdout);
}

// The epilogue of every application: the report line, then a barrier so
// that no node leaves (unmapping its pages) before node 1 has read the
// result; the exit code.
inline int finish(const char *name, kdsm::attachment &dsm, const kdsm::status &before,
                  const kdsm::status &after, double secs, bool ok)
{
    report(name, before, after, secs, ok);
    dsm.barrier_all();
    return ok ? 0 : 1;
}

}  // namespace app
