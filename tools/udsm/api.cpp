// SPDX-License-Identifier: GPL-2.0-only
//
// The kdsm:: API (include/kdsm/kdsm.hpp) on a udsm node.
#include <kdsm/kdsm.hpp>

#include "node.hpp"

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
                                         "events_deferred_mode"};
    static_assert(std::size(more) == __KDSM_STAT_MAX - KDSM_STAT_ATOMIC_LOCKS);
    for (unsigned i = 0; i < std::size(more); i++)
        out[more[i]] = s.stat(KDSM_STAT_ATOMIC_LOCKS + i);
    return out;
}

attachment::attachment(int timeout_ms)
{
    udsm::config c = udsm::config_from_env();
    // libkdsm's timeout bounds the wait for a formed cluster: the tighter
    if (timeout_ms > 0 && std::uint32_t(timeout_ms) < c.join_ms && !std::getenv("UDSM_JOIN_MS"))
        c.join_ms = std::uint32_t(timeout_ms);
    try {
        n_ = std::make_unique<udsm::node>(c);
    } catch (const std::runtime_error &e) {
        throw error(EHOSTDOWN, std::string("udsm: ") + e.what());
    }
    node_id_ = c.node;
    nnodes_ = c.nnodes();
    npages_ = c.npages;
    page_size_ = n_->page_size();
    block_ = c.block;
    base_ = n_->base();
}

attachment::~attachment() = default;

void *attachment::allocate(std::size_t n, std::size_t align, bool page_aligned)
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

namespace {

[[noreturn]] void no_atomic(std::uint32_t id)
{
    throw error(EOPNOTSUPP, "lock " + std::to_string(id) +
                                " (atomic): udsm offers the kernel-kind lock only");
}

}  // namespace

void attachment::lock(std::uint32_t id, lock_kind kind)
{
    if (kind == lock_kind::atomic)
        no_atomic(id);
    if (const int err = n_->eng().lock(id))
        throw error(err, "lock " + std::to_string(id) + " (kernel)");
}

void attachment::unlock(std::uint32_t id, lock_kind kind)
{
    if (kind == lock_kind::atomic)
        no_atomic(id);
    if (const int err = n_->eng().unlock(id))
        throw error(err, "unlock " + std::to_string(id) + " (kernel)");
}

void attachment::barrier_all()
{
    if (const int err = n_->eng().barrier())
        throw error(err, "barrier");
}

status attachment::counters()
{
    status s;
    s.state = KDSM_STATE_READY;
    s.node = node_id_;
    s.nnodes = nnodes_;
    s.npages = npages_;
    s.placement = block_ ? KDSM_PLACE_BLOCK : KDSM_PLACE_CYCLIC;
    s.options = 0;
    s.stats = n_->counters().snapshot();
    return s;
}

void mutex::lock()
{
    local_.lock();
    try {
        a_.lock(id_, kind_);
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
        std::fprintf(stderr, "kdsm: %s\n", e.what());
        std::_Exit(3);
    }
    local_.unlock();
}

void barrier::completion::operator()() noexcept
{
    try {
        b->a_.barrier_all();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "kdsm: %s\n", e.what());
        std::_Exit(3);
    }
}

}  // namespace kdsm
