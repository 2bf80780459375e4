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
// the region.  Allocation is collective: every node makes the same calls
// in the same order, so an array lands at the same offset everywhere.
// Bad UDSM_* values end the process (status 2); a cluster that does not
// form in UDSM_JOIN_MS throws.
class attachment {
public:
    explicit attachment(int timeout_ms = 60000);
    ~attachment();
    attachment(const attachment &) = delete;
    attachment &operator=(const attachment &) = delete;

    unsigned node() const { return node_id_; }
    unsigned nnodes() const { return nnodes_; }
    std::size_t page_size() const { return page_size_; }
    std::uint32_t npages() const { return npages_; }
    bool block_placement() const { return block_; }
    std::size_t bytes() const { return std::size_t(npages_) * page_size_; }
    std::uint8_t *base() const { return base_; }
    std::size_t page_of(const void *p) const
    {
        return (static_cast<const std::uint8_t *>(p) - base_) / page_size();
    }

    // @bytes at @align (a page when @page_aligned); throws when full.
    void *allocate(std::size_t bytes, std::size_t align, bool page_aligned = false);

    void lock(std::uint32_t id, lock_kind kind = lock_kind::kernel);
    void unlock(std::uint32_t id, lock_kind kind = lock_kind::kernel);
    void barrier_all();     // one thread of this node at a time
    status counters();

private:
    std::unique_ptr<udsm::node> n_;
    unsigned node_id_ = 0, nnodes_ = 0;
    std::uint32_t npages_ = 0;
    std::size_t page_size_ = 0;
    bool block_ = true;
    std::uint8_t *base_ = nullptr;
    std::size_t used_ = 0;
};

}  // namespace kdsm

#include <kdsm/kdsm-sync.hpp>
