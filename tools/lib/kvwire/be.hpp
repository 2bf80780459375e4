// SPDX-License-Identifier: GPL-2.0-only
// Big-endian field access at a byte offset; no alignment assumed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace kvwire::detail {

constexpr std::uint16_t load_be16(std::span<const std::uint8_t> b, std::size_t off) noexcept
{
    return static_cast<std::uint16_t>((b[off] << 8) | b[off + 1]);
}

constexpr std::uint32_t load_be32(std::span<const std::uint8_t> b, std::size_t off) noexcept
{
    return (std::uint32_t{b[off]} << 24) | (std::uint32_t{b[off + 1]} << 16) |
           (std::uint32_t{b[off + 2]} << 8) | std::uint32_t{b[off + 3]};
}

constexpr void store_be16(std::span<std::uint8_t> b, std::size_t off, std::uint16_t v) noexcept
{
    b[off] = static_cast<std::uint8_t>(v >> 8);
    b[off + 1] = static_cast<std::uint8_t>(v);
}

constexpr void store_be32(std::span<std::uint8_t> b, std::size_t off, std::uint32_t v) noexcept
{
    for (std::size_t i = 0; i < 4; ++i)
        b[off + i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}

} // namespace kvwire::detail

#include <cstdarg>
#include <cstdio>
#include <string>

namespace kvwire::detail {

// printf into a std::string (libstdc++ 12 has no <format>).
[[gnu::format(printf, 1, 2)]] inline std::string strf(const char *fmt, ...)
{
    std::va_list ap;
    va_start(ap, fmt);
    std::va_list ap2;
    va_copy(ap2, ap);
    const int n = std::vsnprintf(nullptr, 0, fmt, ap);
    va_end(ap);
    std::string s(n > 0 ? static_cast<std::size_t>(n) : 0U, '\0');
    std::vsnprintf(s.data(), s.size() + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

} // namespace kvwire::detail
