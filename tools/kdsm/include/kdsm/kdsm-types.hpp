// SPDX-License-Identifier: GPL-2.0-only
//
// The part of the kdsm:: API that does not depend on what serves it:
// errors, lock kinds, the status and its counters.  Included by
// <kdsm/kdsm.hpp>, libkdsm's (tools/kdsm) or libudsm's (tools/udsm);
// defined in tools/kdsm/kdsm-common.cpp, built into both.
#pragma once

#include <kverbs/kdsm.h>

#include <cstdint>
#include <map>
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

}  // namespace kdsm
