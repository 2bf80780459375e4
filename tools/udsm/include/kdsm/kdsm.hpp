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
//   kdsm::lock_kind  kernel (messages to the lock's manager); atomic (the
//                   queue lock on RDMA atomics) is not offered: EOPNOTSUPP
//
// Errors are kdsm::error: the message and the errno.
#pragma once

#include <kverbs/kdsm.h>

#include <barrier>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <system_error>
#include <vector>

namespace udsm {
class node;
}

namespace kdsm {

class error : public std::system_error {
public:
    error(int err, const std::string &what)
        : std::system_error(err, std::generic_category(), what) {}
    int errnum() const { return code().value(); }
};

enum class lock_kind { kernel, atomic };

// "kernel" or "atomic"; throws kdsm::error (EINVAL) for anything else.
lock_kind parse_lock_kind(const std::string &s);
const char *lock_kind_name(lock_kind k);

struct status {
    unsigned state = KDSM_STATE_NONE;
    unsigned node = 0, nnodes = 0;
    std::uint32_t npages = 0;
    unsigned placement = 0;
    std::uint32_t options = 0;
    std::string error;
    std::vector<std::uint64_t> stats;  // by enum kdsm_stat

    std::uint64_t stat(unsigned id) const { return id < stats.size() ? stats[id] : 0; }
    static const char *state_name(unsigned s);
};

// Counters by name, as kdsm's debugfs file shows them.
std::map<std::string, std::uint64_t> named_stats(const status &s);

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

template <typename T>
class shared_array {
public:
    shared_array(attachment &a, std::size_t n, bool page_aligned = true)
        : p_(static_cast<T *>(a.allocate(bytes(n), alignof(T), page_aligned))), n_(n) {}
    T &operator[](std::size_t i) { return p_[i]; }
    const T &operator[](std::size_t i) const { return p_[i]; }
    T *data() { return p_; }
    std::size_t size() const { return n_; }
    std::span<T> span() { return {p_, n_}; }
    T *begin() { return p_; }
    T *end() { return p_ + n_; }

private:
    static std::size_t bytes(std::size_t n)
    {
        if (n > SIZE_MAX / sizeof(T))
            throw error(ENOMEM, "shared_array of " + std::to_string(n) + " elements");
        return n * sizeof(T);
    }
    T *p_;
    std::size_t n_;
};

// A cluster-wide lock: this node's threads queue locally, then one asks
// the lock's manager, so it sees one request per node.  lock() throws
// kdsm::error (EOPNOTSUPP for lock_kind::atomic); unlock() cannot fail.
class mutex {
public:
    mutex(attachment &a, std::uint32_t id, lock_kind kind = lock_kind::kernel)
        : a_(a), id_(id), kind_(kind) {}
    void lock();
    void unlock() noexcept;
    lock_kind kind() const { return kind_; }

private:
    attachment &a_;
    std::uint32_t id_;
    lock_kind kind_;
    std::mutex local_;
};

// A cluster-wide barrier for @threads threads on every node: the last
// local thread to arrive enters the cluster's barrier for the node.
class barrier {
public:
    barrier(attachment &a, std::ptrdiff_t threads)
        : a_(a), local_(threads, completion{this}) {}
    void arrive_and_wait() { local_.arrive_and_wait(); }

private:
    struct completion {
        barrier *b;
        void operator()() noexcept;
    };
    attachment &a_;
    std::barrier<completion> local_;
};

}  // namespace kdsm
