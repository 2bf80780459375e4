// SPDX-License-Identifier: GPL-2.0-only
#include "kvwire/kping.hpp"

#include "be.hpp"

#include <cstddef>

namespace kvwire {

using detail::load_be32;
using detail::store_be32;

namespace {
constexpr std::size_t off_magic = offsetof(kping_msg, magic);
constexpr std::size_t off_seq = offsetof(kping_msg, seq);
constexpr std::size_t off_len = offsetof(kping_msg, len);
constexpr std::size_t off_check = offsetof(kping_msg, check);
} // namespace

void kping_build(std::span<std::uint8_t> msg, std::uint32_t seq) noexcept
{
    const auto payload = msg.subspan(kping_header);
    for (std::size_t i = 0; i < payload.size(); ++i)
        payload[i] = kping_pattern(seq, static_cast<std::uint32_t>(i));
    store_be32(msg, off_magic, KPING_MAGIC);
    store_be32(msg, off_seq, seq);
    store_be32(msg, off_len, static_cast<std::uint32_t>(payload.size()));
    store_be32(msg, off_check, fnv1a(payload));
}

KpingCheck kping_verify(std::span<const std::uint8_t> msg, std::uint32_t seq)
{
    if (msg.size() < kping_header)
        return {KpingError::truncated,
                detail::strf("%zu bytes, shorter than the %zu-byte header", msg.size(), kping_header)};
    if (const auto m = load_be32(msg, off_magic); m != KPING_MAGIC)
        return {KpingError::magic, detail::strf("magic %#010x, expected %#010x", m, KPING_MAGIC)};
    if (const auto s = load_be32(msg, off_seq); s != seq)
        return {KpingError::seq, detail::strf("seq %u, expected %u", s, seq)};
    const auto payload = msg.subspan(kping_header);
    if (const auto l = load_be32(msg, off_len); l != payload.size())
        return {KpingError::len, detail::strf("len %u, but %zu payload bytes received", l,
                                             payload.size())};
    if (const auto c = load_be32(msg, off_check), want = fnv1a(payload); c != want)
        return {KpingError::check, detail::strf("check %#010x, payload hashes to %#010x", c,
                                               want)};
    for (std::size_t i = 0; i < payload.size(); ++i)
        if (payload[i] != kping_pattern(seq, static_cast<std::uint32_t>(i)))
            return {KpingError::payload, detail::strf("payload byte %zu is %#04x, expected %#04x",
                                                     i, unsigned{payload[i]},
                                                     unsigned{kping_pattern(seq, static_cast<std::uint32_t>(i))})};
    return {};
}

} // namespace kvwire
