// SPDX-License-Identifier: GPL-2.0-only
//
// The kdsm:: API's members that do not depend on what serves it
// (kdsm-types.hpp, kdsm-sync.hpp, and the collective allocator of either
// attachment): built into libkdsm and, against its own <kdsm/kdsm.hpp>,
// into libudsm (tools/udsm).
#include <kdsm/kdsm.hpp>

#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace kdsm {

const char *status::state_name(unsigned s)
{
    switch (s) {
    case KDSM_STATE_NONE: return "none";
    case KDSM_STATE_FORMING: return "forming";
    case KDSM_STATE_READY: return "ready";
    case KDSM_STATE_FAILED: return "failed";
    }
    return "?";
}

lock_kind parse_lock_kind(const std::string &s)
{
    if (s == "kernel")
        return lock_kind::kernel;
    if (s == "atomic")
        return lock_kind::atomic;
    throw error(EINVAL, "lock kind " + s + ": kernel or atomic");
}

const char *lock_kind_name(lock_kind k)
{
    return k == lock_kind::atomic ? "atomic" : "kernel";
}

std::map<std::string, std::uint64_t> named_stats(const status &s)
{
    static const char *const names[] = {
        nullptr, "read_faults", "write_faults", "upgrades", "msgs_tx", "msgs_rx",
        "invalidations", "rdma_write_bytes", "rdma_read_bytes", "events_softirq",
        "events_deferred_zap", "events_deferred_nobuf", "events_deferred_order",
        "events_deferred_nomem", "softirq_ns", "deferred_ns", "malformed", "locks",
        "barriers", "fault_ns",
    };
    static_assert(std::size(names) == KDSM_STAT_FAULT_HIST);
    std::map<std::string, std::uint64_t> out;
    for (unsigned i = 1; i < KDSM_STAT_FAULT_HIST; i++)
        out[names[i]] = s.stat(i);
    for (unsigned i = 0; i < KDSM_HIST_BUCKETS; i++)
        out["fault_us_" + std::to_string(1u << i)] = s.stat(KDSM_STAT_FAULT_HIST + i);
    static const char *const more[] = {"atomic_locks", "atomic_ops", "cas_retries",
                                         "defer_wakes", "defer_wake_ns",
                                         "events_deferred_mode", "locks_owner_dead"};
    static_assert(std::size(more) == __KDSM_STAT_MAX - KDSM_STAT_ATOMIC_LOCKS);
    for (unsigned i = 0; i < std::size(more); i++)
        out[more[i]] = s.stat(KDSM_STAT_ATOMIC_LOCKS + i);
    return out;
}

void *region::allocate(std::size_t n, std::size_t align, bool page_aligned)
{
    if (page_aligned)
        align = page_size();
    if (!align)
        align = alignof(std::max_align_t);
    const std::size_t at = (used_ + align - 1) / align * align;
    if (at > bytes() || n > bytes() - at)
        throw error(ENOMEM, "region full: " + std::to_string(at + n) + " of " +
                                std::to_string(bytes()) + " bytes");
    used_ = at + n;
    return base_ + at;
}

void mutex::lock()
{
    local_.lock();
    try {
        owner_died_ = a_.lock(id_, kind_);
    } catch (...) {
        local_.unlock();
        throw;
    }
}

void mutex::unlock() noexcept
{
    try {
        a_.unlock(id_, kind_);
    } catch (const std::exception &e) {
        // Only a failed cluster refuses an unlock (EHOSTDOWN): the data
        // the lock guards is gone with it, so stop rather than go on.
        // (libkdsm's attachment ends the process itself with the
        // cluster's reason before this; libudsm's throws.)
        std::fprintf(stderr, "kdsm: %s\n", e.what());
        std::_Exit(3);
    }
    owner_died_ = false;
    local_.unlock();
}

void barrier::completion::operator()() noexcept
{
    try {
        b->a_.barrier_all();
    } catch (const std::exception &e) {
        // A barrier that cannot complete leaves SC undefined: stop.
        std::fprintf(stderr, "kdsm: %s\n", e.what());
        std::_Exit(3);
    }
}

}  // namespace kdsm
