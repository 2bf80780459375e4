// SPDX-License-Identifier: GPL-2.0-only
//
// Sleeping on a 32-bit word until another thread changes it: the
// faulting thread's wait for its page's grant.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace udsm {

// futex(2) op codes (FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE): the values
// of <linux/futex.h>, which this header may not include (engine-pri.hpp)
inline constexpr int futex_wait_private = 0 | 128;
inline constexpr int futex_wake_private = 1 | 128;

// Sleep while *@w == @old (a spurious return is harmless: callers re-check).
inline void futex_wait(std::atomic<std::uint32_t> *w, std::uint32_t old)
{
    static_assert(sizeof(*w) == sizeof(std::uint32_t));
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t *>(w), futex_wait_private, old, nullptr,
              nullptr, 0);
}

inline void futex_wake_all(std::atomic<std::uint32_t> *w)
{
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t *>(w), futex_wake_private, INT_MAX,
              nullptr, nullptr, 0);
}

}  // namespace udsm
