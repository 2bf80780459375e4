// SPDX-License-Identifier: GPL-2.0-only
#include "kvwire/kmsg.hpp"

#include "be.hpp"

#include <algorithm>
#include <limits>

namespace kvwire {

using detail::load_be16;
using detail::load_be32;
using detail::store_be16;
using detail::store_be32;

namespace {
constexpr std::size_t off_type = offsetof(kmsg_hdr, type);
constexpr std::size_t off_flags = offsetof(kmsg_hdr, flags);
constexpr std::size_t off_credits = offsetof(kmsg_hdr, credits);
constexpr std::size_t off_seq = offsetof(kmsg_hdr, seq);
constexpr std::size_t off_len = offsetof(kmsg_hdr, len);
constexpr std::size_t off_reserved = offsetof(kmsg_hdr, reserved);
} // namespace

void kmsg_put(std::span<std::uint8_t> buf, const KmsgHeader &h) noexcept
{
    buf[off_type] = h.type;
    buf[off_flags] = h.flags;
    store_be16(buf, off_credits, h.credits);
    store_be32(buf, off_seq, h.seq);
    store_be32(buf, off_len, h.len);
    store_be32(buf, off_reserved, h.reserved);
}

KmsgParse kmsg_parse(std::span<const std::uint8_t> msg, std::uint32_t seq, std::uint32_t max_len)
{
    KmsgParse r;
    if (msg.size() < kmsg_header) {
        r.error = detail::strf("%zu bytes, shorter than the header", msg.size());
        return r;
    }
    auto &h = r.hdr;
    h.type = msg[off_type];
    h.flags = msg[off_flags];
    h.credits = load_be16(msg, off_credits);
    h.seq = load_be32(msg, off_seq);
    h.len = load_be32(msg, off_len);
    h.reserved = load_be32(msg, off_reserved);
    if (h.type != KMSG_TYPE_DATA && h.type != KMSG_TYPE_CREDIT)
        r.error = detail::strf("unknown type %u", unsigned{h.type});
    else if (h.flags != 0 || h.reserved != 0)
        r.error = "unknown flags or reserved bits";
    else if (h.len != msg.size() - kmsg_header || h.len > max_len)
        r.error = detail::strf("len %u, %zu payload bytes received", h.len,
                               msg.size() - kmsg_header);
    else if (h.type == KMSG_TYPE_CREDIT && (h.len != 0 || h.credits == 0))
        r.error = "bad credit message";
    else if (h.seq != seq)
        r.error = detail::strf("seq %u, expected %u", h.seq, seq);
    return r;
}

bool KmsgCredits::take(std::uint16_t &grant) noexcept
{
    if (avail_ == 0 || (avail_ == 1 && ungranted_ == 0))
        return false;
    --avail_;
    grant = static_cast<std::uint16_t>(
        std::min<std::uint32_t>(ungranted_, std::numeric_limits<std::uint16_t>::max()));
    ungranted_ -= grant;
    return true;
}

bool KmsgCredits::receive(std::uint32_t grant) noexcept
{
    if (grant > limit_ - avail_)
        return false;
    avail_ += grant;
    return true;
}

} // namespace kvwire
