// SPDX-License-Identifier: GPL-2.0-only
#include "kvwire/kvmsg.hpp"

#include "be.hpp"

#include <algorithm>
#include <limits>

namespace kvwire {

using detail::load_be16;
using detail::load_be32;
using detail::store_be16;
using detail::store_be32;

namespace {
constexpr std::size_t off_type = offsetof(kvmsg_hdr, type);
constexpr std::size_t off_flags = offsetof(kvmsg_hdr, flags);
constexpr std::size_t off_credits = offsetof(kvmsg_hdr, credits);
constexpr std::size_t off_seq = offsetof(kvmsg_hdr, seq);
constexpr std::size_t off_len = offsetof(kvmsg_hdr, len);
constexpr std::size_t off_reserved = offsetof(kvmsg_hdr, reserved);
} // namespace

void kvmsg_put(std::span<std::uint8_t> buf, const KvmsgHeader &h) noexcept
{
    buf[off_type] = h.type;
    buf[off_flags] = h.flags;
    store_be16(buf, off_credits, h.credits);
    store_be32(buf, off_seq, h.seq);
    store_be32(buf, off_len, h.len);
    store_be32(buf, off_reserved, h.reserved);
}

KvmsgParse kvmsg_parse(std::span<const std::uint8_t> msg, std::uint32_t seq, std::uint32_t max_len)
{
    KvmsgParse r;
    if (msg.size() < kvmsg_header) {
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
    if (h.type != KVMSG_TYPE_DATA && h.type != KVMSG_TYPE_CREDIT)
        r.error = detail::strf("unknown type %u", unsigned{h.type});
    else if (h.flags != 0 || h.reserved != 0)
        r.error = "unknown flags or reserved bits";
    else if (h.len != msg.size() - kvmsg_header || h.len > max_len)
        r.error = detail::strf("len %u, %zu payload bytes received", h.len,
                               msg.size() - kvmsg_header);
    else if (h.type == KVMSG_TYPE_CREDIT && (h.len != 0 || h.credits == 0))
        r.error = "bad credit message";
    else if (h.seq != seq)
        r.error = detail::strf("seq %u, expected %u", h.seq, seq);
    return r;
}

bool KvmsgCredits::take(std::uint16_t &grant) noexcept
{
    if (avail_ == 0 || (avail_ == 1 && ungranted_ == 0))
        return false;
    --avail_;
    grant = static_cast<std::uint16_t>(
        std::min<std::uint32_t>(ungranted_, std::numeric_limits<std::uint16_t>::max()));
    ungranted_ -= grant;
    return true;
}

bool KvmsgCredits::receive(std::uint32_t grant) noexcept
{
    if (grant > limit_ - avail_)
        return false;
    avail_ += grant;
    return true;
}

} // namespace kvwire
