// SPDX-License-Identifier: GPL-2.0-only
#include "kvwire/cm.hpp"

#include "be.hpp"

#include <array>
#include <cstddef>
#include <string>
#include <utility>

namespace kvwire {

using detail::load_be16;
using detail::load_be32;
using detail::store_be16;
using detail::store_be32;

namespace {

// Field offsets come from the uapi struct so the two cannot drift apart.
constexpr std::size_t off_magic = offsetof(kverbs_cm_priv, magic);
constexpr std::size_t off_version = offsetof(kverbs_cm_priv, version);
constexpr std::size_t off_flags = offsetof(kverbs_cm_priv, flags);
constexpr std::size_t off_node = offsetof(kverbs_cm_priv, node_id);
constexpr std::size_t off_depth = offsetof(kverbs_cm_priv, depth);
constexpr std::size_t off_reserved = offsetof(kverbs_cm_priv, reserved);
constexpr std::size_t off_max_msg = offsetof(kverbs_cm_priv, max_msg);

constexpr std::size_t rej_magic = offsetof(kverbs_cm_rej, magic);
constexpr std::size_t rej_version = offsetof(kverbs_cm_rej, version);
constexpr std::size_t rej_reason = offsetof(kverbs_cm_rej, reason);

struct ReasonText {
    std::string_view name;
    std::string_view text;
};

// Same texts as kverbs/cm.c, indexed by reason.
constexpr std::array<ReasonText, KVERBS_CM_REASON_MAX> reasons{{
    {"KVERBS_CM_OK", "ok"},
    {"KVERBS_CM_ESHORT", "private data too short"},
    {"KVERBS_CM_EMAGIC", "bad magic (not a kverbs peer)"},
    {"KVERBS_CM_EVERSION", "unsupported protocol version"},
    {"KVERBS_CM_EFLAGS", "unknown flags or reserved bits set"},
    {"KVERBS_CM_ENODE", "node id 0"},
    {"KVERBS_CM_EDEPTH", "receive depth out of bounds"},
    {"KVERBS_CM_EMSG", "max message size out of bounds"},
    {"KVERBS_CM_EBUSY", "no resources to accept"},
    {"KVERBS_CM_ENOLISTEN", "not accepting connections"},
    {"KVERBS_CM_EREFUSED", "refused by the listener's client"},
    {"KVERBS_CM_EAUTH", "authentication asked for by one side only"},
}};
static_assert(KVERBS_CM_EAUTH == 11 && KVERBS_CM_REASON_MAX == 12,
              "reason table out of date with <kverbs/cm.h>");

Parsed<Priv> refuse(kverbs_cm_reason r, std::string msg)
{
    return {r, std::move(msg), {}};
}

} // namespace

PrivBytes encode(const Priv &p) noexcept
{
    PrivBytes b{};
    store_be32(b, off_magic, p.magic);
    store_be16(b, off_version, p.version);
    store_be16(b, off_flags, p.flags);
    store_be32(b, off_node, p.node_id);
    store_be16(b, off_depth, p.depth);
    store_be16(b, off_reserved, p.reserved);
    store_be32(b, off_max_msg, p.max_msg);
    return b;
}

Parsed<Priv> decode_priv(std::span<const std::uint8_t> data)
{
    if (data.size() < priv_size)
        return refuse(KVERBS_CM_ESHORT,
                      detail::strf("private data is %zu bytes, need at least %zu",
                                  data.size(), priv_size));
    Priv p;
    p.magic = load_be32(data, off_magic);
    p.version = load_be16(data, off_version);
    p.flags = load_be16(data, off_flags);
    p.node_id = load_be32(data, off_node);
    p.depth = load_be16(data, off_depth);
    p.reserved = load_be16(data, off_reserved);
    p.max_msg = load_be32(data, off_max_msg);

    if (p.magic != KVERBS_CM_MAGIC)
        return refuse(KVERBS_CM_EMAGIC, detail::strf("magic %#010x, expected %#010x",
                                                    p.magic, KVERBS_CM_MAGIC));
    if (p.version != KVERBS_CM_VERSION)
        return refuse(KVERBS_CM_EVERSION, detail::strf("version %u, expected %d",
                                                      unsigned{p.version}, KVERBS_CM_VERSION));
    if ((p.flags & ~KVERBS_CM_F_AUTH) != 0 || p.reserved != 0)
        return refuse(KVERBS_CM_EFLAGS,
                      detail::strf("flags %#06x, reserved %#06x; only flag %#x is defined",
                                   unsigned{p.flags}, unsigned{p.reserved}, KVERBS_CM_F_AUTH));
    if (p.node_id == 0)
        return refuse(KVERBS_CM_ENODE, "node id 0");
    if (p.depth < KVERBS_CM_MIN_DEPTH || p.depth > KVERBS_CM_MAX_DEPTH)
        return refuse(KVERBS_CM_EDEPTH, detail::strf("depth %u not in [%d, %d]", unsigned{p.depth},
                                                    KVERBS_CM_MIN_DEPTH, KVERBS_CM_MAX_DEPTH));
    if (p.max_msg < KVERBS_CM_MIN_MSG || p.max_msg > KVERBS_CM_MAX_MSG)
        return refuse(KVERBS_CM_EMSG, detail::strf("max_msg %u not in [%d, %u]", p.max_msg,
                                                  KVERBS_CM_MIN_MSG, KVERBS_CM_MAX_MSG));
    return {KVERBS_CM_OK, "ok", p};
}

RejBytes encode_rej(kverbs_cm_reason reason) noexcept
{
    RejBytes b{};
    store_be32(b, rej_magic, KVERBS_CM_MAGIC);
    store_be16(b, rej_version, KVERBS_CM_VERSION);
    store_be16(b, rej_reason, static_cast<std::uint16_t>(reason));
    return b;
}

std::optional<std::uint16_t> decode_rej(std::span<const std::uint8_t> data) noexcept
{
    if (data.size() < rej_size || load_be32(data, rej_magic) != KVERBS_CM_MAGIC ||
        load_be16(data, rej_version) != KVERBS_CM_VERSION)
        return std::nullopt;
    return load_be16(data, rej_reason);
}

std::string_view reason_str(unsigned reason) noexcept
{
    return reason < reasons.size() ? reasons[reason].text : "unknown reason";
}

std::string_view reason_name(unsigned reason) noexcept
{
    return reason < reasons.size() ? reasons[reason].name : "UNKNOWN";
}

} // namespace kvwire
