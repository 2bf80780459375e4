// SPDX-License-Identifier: GPL-2.0-only
//
// libkdsm: the C++ side of kdsm, the sequential-consistency DSM
// (samples/kdsm).  One process per node attaches to the node's cluster
// and maps the shared region; its threads share it.
//
//   kdsm::control   the generic netlink family: create, status, delete
//   kdsm::attachment  this process's mapping of the region, and the
//                   collective allocator that places shared arrays at the
//                   same offset on every node
//   kdsm::shared_array<T>, kdsm::mutex, kdsm::barrier
//   kdsm::lock_kind  which lock a mutex is: the kernel lock (messages to
//                   the lock's manager) or the queue lock on RDMA atomics
//
// Errors are kdsm::error: the message and the errno.
#pragma once

#include <kdsm/kdsm-types.hpp>
#include <kverbs/kdsm.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvgenl {
class socket;
}

namespace kdsm {

struct peer {
    unsigned node;
    std::string addr;       // IPv4 or IPv6 literal
};

struct config {
    unsigned node = 0;
    std::uint32_t npages = 0;
    bool block = false;     // block placement, else cyclic
    std::uint32_t options = 0;
    std::uint16_t port = KDSM_DEFAULT_PORT;
    std::uint32_t join_ms = 60000;
    std::vector<peer> peers;  // every node, this one too
    std::string key;          // logon key every member proves; empty: none
};

// The generic netlink family "kdsm".
class control {
public:
    control();
    ~control();
    control(const control &) = delete;
    control &operator=(const control &) = delete;

    void create(const config &c);    // CAP_NET_ADMIN
    status get();
    void remove();                   // CAP_NET_ADMIN
    // Until READY (returned) or FAILED (throws with the reason): woken by
    // the family's state notifications, joined here at construction (so
    // none is missed between create() and this); a kernel without them
    // is polled every 50 ms.
    status wait_ready(int timeout_ms);
    // The next state notification within @timeout_ms: true and @s (state,
    // node, error only), false at the deadline.  Throws when this kernel
    // sends none or the socket failed (ENOBUFS: notifications were lost).
    bool next_state(int timeout_ms, status *s);

private:
    int request(std::vector<std::uint8_t> &msg, std::vector<std::uint8_t> *reply);
    std::unique_ptr<kvgenl::socket> sock_;  // kvgenl: private to the library
    std::unique_ptr<kvgenl::socket> ntf_;   // KDSM_MCGRP_STATE, or none
    std::uint16_t family_ = 0;
    std::string last_ack_;  // the kernel's extended ack message
};

// This process's view of the region (kdsm-types.hpp: geometry,
// collective allocator), mapped from /dev/kdsm.
class attachment : public region {
public:
    explicit attachment(int timeout_ms = 60000);
    ~attachment();
    attachment(const attachment &) = delete;
    attachment &operator=(const attachment &) = delete;

    // A failed cluster (EHOSTDOWN) ends the process as a lost page does:
    // "kdsm: cluster failed: <reason>", status exit_cluster_failed.
    // lock() returns true when it took a kernel lock whose previous holder
    // died holding it (EOWNERDEAD, Documentation/kdsm.rst "Robust locks").
    bool lock(std::uint32_t id, lock_kind kind = lock_kind::kernel);
    void unlock(std::uint32_t id, lock_kind kind = lock_kind::kernel);
    void barrier_all();     // one thread of this node at a time
    status counters();      // KDSM_CMD_GET: CAP_NET_ADMIN
    unsigned state() const; // KDSM_STATE_*, for anyone attached (KDSM_IOC_STATE)

private:
    // failure.cpp: SIGBUS on this region, and EHOSTDOWN, end the process
    // with the cluster's reason.
    void watch_lost_pages();
    void unwatch_lost_pages() noexcept;
    void exit_if_failed(int err) const;

    int fd_ = -1;
    std::optional<control> ctl_;
};

}  // namespace kdsm

#include <kdsm/kdsm-sync.hpp>
