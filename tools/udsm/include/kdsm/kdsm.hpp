// SPDX-License-Identifier: GPL-2.0-only
//
// libudsm's kdsm:: API: the drop-in for tools/kdsm/include/kdsm/kdsm.hpp
// that the applications of tools/kdsm/apps build against unchanged
// (udsm-<app>).  The same classes and counters, served by a user-level
// DSM running the kernel's protocol (tools/udsm, Documentation/udsm.rst)
// instead of kdsm.ko; the cluster comes from the UDSM_* environment
// variables instead of kdsmctl.
//
//   kdsm::attachment  this process joins the cluster and maps the region;
//                   the collective allocator places shared arrays at the
//                   same offset on every node
//   kdsm::shared_array<T>, kdsm::mutex, kdsm::barrier
//   kdsm::lock_kind  kernel (messages to the lock's manager) or atomic (the
//                   queue lock on the transport's compare-and-swap)
//
// Errors are kdsm::error: the message and the errno.
#pragma once

#include <kdsm/kdsm-types.hpp>
#include <kverbs/kdsm.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace udsm {
class node;
}

namespace kdsm {

// This process's node of the cluster (one per process) and its view of
// the region (kdsm-types.hpp: geometry, collective allocator).
// Bad UDSM_* values end the process (status 2); a cluster that does not
// form in UDSM_JOIN_MS throws.
class attachment : public region {
public:
    explicit attachment(int timeout_ms = 60000);
    ~attachment();
    attachment(const attachment &) = delete;
    attachment &operator=(const attachment &) = delete;

    // false: a holder's death ends its node and the cluster here
    bool lock(std::uint32_t id, lock_kind kind = lock_kind::kernel);
    void unlock(std::uint32_t id, lock_kind kind = lock_kind::kernel);
    void barrier_all();     // one thread of this node at a time
    status counters();
    // libudsm has no failed state: a lost peer ends the process at once
    unsigned state() const { return KDSM_STATE_READY; }

private:
    std::unique_ptr<udsm::node> n_;
};

}  // namespace kdsm

#include <kdsm/kdsm-sync.hpp>
