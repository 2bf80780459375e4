// SPDX-License-Identifier: GPL-2.0-only
//
// Command-line number parsing shared by kvping and the benchmark tools.
#pragma once

#include "rdma.hpp"

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvping {

// The whole of s as a number in [lo, hi], or Error naming the option.
template <class T>
T parse_num(std::string_view opt, std::string_view s, T lo, T hi)
{
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size() || v < lo || v > hi)
        throw Error(std::string(opt) + ": '" + std::string(s) + "' is not a number in [" +
                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<T>(v);
}

} // namespace kvping
