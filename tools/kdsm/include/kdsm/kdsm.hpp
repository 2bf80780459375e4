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

#include <kverbs/kdsm.h>

#include <barrier>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

namespace kdsm {

class error : public std::system_error {
public:
    error(int err, const std::string &what)
        : std::system_error(err, std::generic_category(), what) {}
    int errnum() const { return code().value(); }
};

// Documentation/kdsm.rst, "Locks": how to choose.  A node uses a lock id
// as one kind at a time (EBUSY); on other nodes the other kind of the same
// id is another lock.
enum class lock_kind { kernel, atomic };

// "kernel" or "atomic"; throws kdsm::error (EINVAL) for anything else.
lock_kind parse_lock_kind(const std::string &s);
const char *lock_kind_name(lock_kind k);

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
};

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

// Counters by name, as the debugfs file shows them.
std::map<std::string, std::uint64_t> named_stats(const status &s);

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
    // Poll until READY (returned) or FAILED (throws with the reason).
    status wait_ready(int timeout_ms);

private:
    int request(std::vector<std::uint8_t> &msg, std::vector<std::uint8_t> *reply);
    int fd_ = -1;
    std::uint16_t family_ = 0;
    std::uint32_t seq_ = 1;
    std::string last_ack_;  // the kernel's extended ack message
};

// This process's view of the region.  Allocation is collective: every
// node makes the same calls in the same order, so an array lands at the
// same offset everywhere.
class attachment {
public:
    explicit attachment(int timeout_ms = 60000);
    ~attachment();
    attachment(const attachment &) = delete;
    attachment &operator=(const attachment &) = delete;

    unsigned node() const { return info_.node; }
    unsigned nnodes() const { return info_.nnodes; }
    std::size_t page_size() const { return info_.page_size; }
    std::uint32_t npages() const { return info_.npages; }
    bool block_placement() const { return info_.placement == KDSM_PLACE_BLOCK; }
    std::size_t bytes() const { return std::size_t(info_.npages) * info_.page_size; }
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
    status counters();      // KDSM_CMD_GET

private:
    int fd_ = -1;
    std::uint8_t *base_ = nullptr;
    std::size_t used_ = 0;
    kdsm_info info_{};
    std::optional<control> ctl_;
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
// the kernel (KDSM_IOC_LOCK), so the kernel sees one request per node, for
// the kernel lock or the queue lock (@kind).  EOPNOTSUPP from lock(): no
// RDMA atomics on the way to the queue lock's word.
// lock() throws kdsm::error (the cluster failed, or the task was killed);
// unlock() cannot fail but in a failed cluster, and then ends the process
// (exit status 3), as a barrier that cannot complete does.
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
// local thread to arrive enters the kernel barrier for the node.
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
