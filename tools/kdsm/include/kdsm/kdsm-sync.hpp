// SPDX-License-Identifier: GPL-2.0-only
//
// The kdsm:: classes on top of an attachment: shared arrays, the
// cluster-wide mutex and barrier.  Included by <kdsm/kdsm.hpp> (libkdsm's
// or libudsm's) after its class attachment; the out-of-line members are
// in tools/kdsm/kdsm-common.cpp.
#pragma once

#include <barrier>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>

namespace kdsm {

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
// lock() throws kdsm::error (the task was killed, a bad id); in a failed
// cluster lock(), unlock() and a barrier end the process with the
// cluster's reason and exit status 3 (kdsm::exit_cluster_failed), as a
// page lost with its node does (libudsm: lock() throws there too).
// owner_died(), for the holder between lock() and unlock(): the previous
// holder died holding the lock, so the data it guards may be half
// updated (a kernel lock's EOWNERDEAD; never for a queue lock or libudsm).
class mutex {
public:
    mutex(attachment &a, std::uint32_t id, lock_kind kind = lock_kind::kernel)
        : a_(a), id_(id), kind_(kind) {}
    void lock();
    void unlock() noexcept;
    lock_kind kind() const { return kind_; }
    bool owner_died() const { return owner_died_; }

private:
    attachment &a_;
    std::uint32_t id_;
    lock_kind kind_;
    std::mutex local_;
    bool owner_died_ = false;  // under local_
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
