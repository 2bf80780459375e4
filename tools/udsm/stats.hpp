// SPDX-License-Identifier: GPL-2.0-only
//
// This node's counters, by enum kdsm_stat (include/uapi/kverbs/kdsm.h),
// with the kernel's meaning.  Every event runs in process context (the
// progress thread or the faulting one), so peer events count as
// KDSM_STAT_EV_DEFER_MODE, none as softirq.  Relaxed atomics: a reader
// sums nothing, it copies.
#pragma once

#include <kverbs/kdsm.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

namespace udsm {

class stats {
public:
    void add(unsigned id, std::uint64_t n = 1) { v_[id].fetch_add(n, std::memory_order_relaxed); }
    // a message of wire type @type left (@tx) or arrived; self-addressed
    // ones are not messages
    void msg(std::uint8_t type, bool tx)
    {
        add(tx ? KDSM_STAT_MSGS_TX : KDSM_STAT_MSGS_RX);
        if (tx && type < 32)
            add(KDSM_STAT_MSG_TYPE + type);
    }
    // a fault answered after @ns: the sum and the log2-us histogram
    void fault_done(std::uint64_t ns)
    {
        const std::uint64_t us = ns / 1000;
        unsigned b = us ? 63u - unsigned(__builtin_clzll(us)) : 0;
        add(KDSM_STAT_FAULT_NS, ns);
        add(KDSM_STAT_FAULT_HIST + (b < KDSM_HIST_BUCKETS ? b : KDSM_HIST_BUCKETS - 1));
    }
    std::vector<std::uint64_t> snapshot() const
    {
        std::vector<std::uint64_t> out(__KDSM_STAT_MAX);
        for (unsigned i = 0; i < __KDSM_STAT_MAX; i++)
            out[i] = v_[i].load(std::memory_order_relaxed);
        return out;
    }

private:
    std::array<std::atomic<std::uint64_t>, __KDSM_STAT_MAX> v_{};
};

}  // namespace udsm
