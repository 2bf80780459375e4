// SPDX-License-Identifier: GPL-2.0-only
//
// The part of the kdsm:: API that does not depend on what serves it:
// errors, lock kinds, the status and its counters.  Included by
// <kdsm/kdsm.hpp>, libkdsm's (tools/kdsm) or libudsm's (tools/udsm);
// defined in tools/kdsm/kdsm-common.cpp, built into both.
#pragma once

#include <kverbs/kdsm.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <system_error>
#include <vector>

namespace kdsm {

// The exit status of a process whose cluster failed under it (a lost node,
// this node leaving): libkdsm prints "kdsm: cluster failed: <reason>" and
// exits with it, whether the program met the loss at a lock, a barrier
// or a page that was only on the lost node (SIGBUS).  Documentation/
// kdsm.rst, "Failure".
inline constexpr int exit_cluster_failed = 3;

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

// The region as this process sees it, whichever library serves it: its
// geometry and the collective allocator (kdsm-common.cpp).  Each
// library's attachment is a region.  Allocation is collective: every
// node makes the same calls in the same order, so an array lands at the
// same offset everywhere.
class region {
public:
    region(const region &) = delete;
    region &operator=(const region &) = delete;

    unsigned node() const { return node_; }
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

protected:
    region() = default;
    ~region() = default;
    // Once, when the library has mapped the region at @base.
    void mapped(unsigned node, unsigned nnodes, std::uint32_t npages, std::size_t page_size,
                bool block, std::uint8_t *base)
    {
        node_ = node;
        nnodes_ = nnodes;
        npages_ = npages;
        page_size_ = page_size;
        block_ = block;
        base_ = base;
    }

private:
    unsigned node_ = 0, nnodes_ = 0;
    std::uint32_t npages_ = 0;
    std::size_t page_size_ = 0;
    bool block_ = true;
    std::uint8_t *base_ = nullptr;
    std::size_t used_ = 0;
};

}  // namespace kdsm
