// SPDX-License-Identifier: GPL-2.0-only
//
// kverbs rdma_cm private data (uapi <kverbs/cm.h>) for user space.
//
// decode_priv() refuses exactly what the kernel's kverbs_cm_priv_parse()
// refuses, in the same order, with the same reason, so a user-level peer and
// the tests agree with kverbs.ko on every malformed announcement.
#pragma once

#include <kverbs/cm.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kvwire {

// Every field of struct kverbs_cm_priv in host order.  Defaults are a valid
// header; encode() writes fields verbatim so callers can also build invalid
// announcements on purpose (negative tests).
struct Priv {
    std::uint32_t magic = KVERBS_CM_MAGIC;
    std::uint16_t version = KVERBS_CM_VERSION;
    std::uint16_t flags = 0;
    std::uint32_t node_id = 0;
    std::uint16_t depth = 0;
    std::uint16_t reserved = 0;
    std::uint32_t max_msg = 0;

    friend bool operator==(const Priv &, const Priv &) = default;
};

inline constexpr std::size_t priv_size = sizeof(kverbs_cm_priv);
inline constexpr std::size_t rej_size = sizeof(kverbs_cm_rej);
static_assert(priv_size == 20 && priv_size <= KVERBS_CM_PRIV_MAX);
static_assert(rej_size == 8);

using PrivBytes = std::array<std::uint8_t, priv_size>;
using RejBytes = std::array<std::uint8_t, rej_size>;

// A validation outcome: reason == KVERBS_CM_OK iff value is meaningful.
// message says what was wrong in terms a user can act on.
template <class T>
struct Parsed {
    kverbs_cm_reason reason = KVERBS_CM_OK;
    std::string message;
    T value{};

    [[nodiscard]] bool ok() const noexcept { return reason == KVERBS_CM_OK; }
    explicit operator bool() const noexcept { return ok(); }
};

// A valid announcement of this side's parameters.
[[nodiscard]] constexpr Priv make_priv(std::uint32_t node_id, std::uint16_t depth,
                                       std::uint32_t max_msg) noexcept
{
    Priv p;
    p.node_id = node_id;
    p.depth = depth;
    p.max_msg = max_msg;
    return p;
}

[[nodiscard]] PrivBytes encode(const Priv &p) noexcept;

// Validates a received announcement.  Bytes past priv_size are ignored: the
// CM zero-pads private data (to 56 bytes on a REQ, more on a REP).
[[nodiscard]] Parsed<Priv> decode_priv(std::span<const std::uint8_t> data);

[[nodiscard]] RejBytes encode_rej(kverbs_cm_reason reason) noexcept;

// The raw reason of a kverbs reject, or nullopt when the private data is not
// a kverbs reject (too short, foreign magic or version).  The value comes
// from the peer and may be >= KVERBS_CM_REASON_MAX.
[[nodiscard]] std::optional<std::uint16_t>
decode_rej(std::span<const std::uint8_t> data) noexcept;

// Kernel's text for a reason ("bad magic (not a kverbs peer)"), and the
// symbolic name ("KVERBS_CM_EMAGIC"); "unknown reason"/"UNKNOWN" out of range.
[[nodiscard]] std::string_view reason_str(unsigned reason) noexcept;
[[nodiscard]] std::string_view reason_name(unsigned reason) noexcept;

} // namespace kvwire
