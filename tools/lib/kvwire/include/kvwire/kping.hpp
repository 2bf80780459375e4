// SPDX-License-Identifier: GPL-2.0-only
//
// kping messages (uapi <kverbs/kping.h>): header + a payload whose every
// byte is a function of (seq, index), so an echo is verified without a copy.
#pragma once

// struct kping_msg ends in a flexible array member, which ISO C++ lacks; the
// layout is plain C and only its size and offsets are used here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include <kverbs/kping.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace kvwire {

inline constexpr std::size_t kping_header = sizeof(kping_msg);
static_assert(kping_header == 16);

[[nodiscard]] constexpr std::uint8_t kping_pattern(std::uint32_t seq,
                                                   std::uint32_t i) noexcept
{
    return static_cast<std::uint8_t>(seq * 31U + i * 7U + 1U);
}

// 32-bit FNV-1a, the kping check.
[[nodiscard]] constexpr std::uint32_t fnv1a(std::span<const std::uint8_t> data) noexcept
{
    std::uint32_t h = KPING_FNV_BASIS;
    for (const std::uint8_t b : data) {
        h ^= b;
        h *= KPING_FNV_PRIME;
    }
    return h;
}

// Fills all of msg (header + msg.size() - kping_header payload bytes).
// Precondition: msg.size() >= kping_header.
void kping_build(std::span<std::uint8_t> msg, std::uint32_t seq) noexcept;

enum class KpingError { ok, truncated, magic, seq, len, check, payload };

struct KpingCheck {
    KpingError error = KpingError::ok;
    std::string message;

    [[nodiscard]] bool ok() const noexcept { return error == KpingError::ok; }
    explicit operator bool() const noexcept { return ok(); }
};

// Verifies a received message of exactly msg.size() bytes as ping seq: the
// header's len must account for every byte received.
[[nodiscard]] KpingCheck kping_verify(std::span<const std::uint8_t> msg,
                                      std::uint32_t seq);

} // namespace kvwire
