// SPDX-License-Identifier: GPL-2.0-only
//
// The engine's state, shared by engine.cpp (pages) and sync.cpp (locks
// and barriers).  Includes the kernel's proto.h: only translation units
// built with the shim include this.
//
// Locking: core::mu guards everything below but the counters and the
// grant words; every action runs under it (sends included, so one node's
// messages to a peer leave in event order).  A faulting thread sleeps on
// its page's grant word (futex) without it; lock and barrier waiters on
// sync_cv.
#pragma once

#include "engine.hpp"

extern "C" {
#include "proto.h"
}

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace udsm {

// One event's actions and the messages it sends itself (at most one
// outstanding, as in the kernel: every transition sends its own node at
// most one message).
struct event {
    std::uint32_t page = 0;
    int nacts = 0, iact = 0;
    kdsm_act acts[KDSM_MAX_ACTS];
    struct self_msg {
        std::uint8_t from;
        kdsm_msg m;
    };
    std::array<self_msg, 2> self{};
    unsigned nself = 0, iself = 0;
};

struct lockwait {
    bool waiting = false;  // a thread of ours waits for the grant
    bool held = false;     // granted to this node
};

struct lockmgr {
    std::uint8_t holder = 0;  // 0: free
    std::uint8_t nq = 0;
    std::array<std::uint8_t, KDSM_MAX_NODES> q{};
};

// The queue lock at this node (qlock.cpp): @q its place in the queue;
// as the helper of the lock's manager, @px_*: the one CAS it asked for.
struct ql {
    kdsm_qlock q{};
    int err = 0;  // for the waiting thread: EOPNOTSUPP
    std::uint8_t px_state = 0, px_cmp = 0, px_swap = 0, px_old = 0, px_code = 0;
};

struct core {
    core(const config &c, transport &t, protector &p, stats &st);

    kdsm_geo geo{};
    transport &tr;
    protector &pr;
    stats &st;
    std::mutex mu;

    // the page protocol, per page
    std::vector<kdsm_page> pg;
    std::vector<kdsm_home> home;  // meaningful at the page's home
    std::vector<std::array<std::uint8_t, KDSM_MAX_NODES>> homeq;  // node | type << 4
    std::vector<std::uint8_t> homeq_len;
    std::vector<std::uint64_t> fault_t0;  // ns, while a fault is pending
    // bumped at every grant of the page; faulting threads sleep on it
    std::unique_ptr<std::atomic<std::uint32_t>[]> grant_word;

    // locks and barriers (sync.cpp)
    std::condition_variable sync_cv;
    std::vector<lockwait> lw;
    std::vector<lockmgr> lm;
    std::uint32_t bar_gen = 0, bar_passed = 0, mgr_gen = 0;
    bool bar_busy = false;
    std::uint8_t mgr_entered = 0;
    std::vector<ql> qls;  // KDSM_MAX_LOCKS

    // under mu: send @s to @to (a peer) or apply it here
    void send_sig(std::uint8_t to, std::uint8_t type, std::uint32_t id, std::uint32_t gen);
    int sync_apply(std::uint8_t from, const kdsm_sig &s);
    // qlock.cpp
    bool qlock_busy(std::uint32_t id) const;
    int qlock_recv(std::uint8_t from, const kdsm_sig &s);
    void cas_done(std::uint32_t id, bool px, std::uint64_t raw);
    [[noreturn]] void die(const std::string &why);
};

std::uint64_t now_ns();

}  // namespace udsm
