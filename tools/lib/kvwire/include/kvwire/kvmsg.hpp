// SPDX-License-Identifier: GPL-2.0-only
//
// kvmsg message headers (uapi <kverbs/kvmsg.h>) and the credit rule, so a
// user-space peer speaks to kverbs endpoints exactly as the kernel does.
#pragma once

#include <kverbs/kvmsg.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace kvwire {

inline constexpr std::size_t kvmsg_header = sizeof(kvmsg_hdr);
static_assert(kvmsg_header == 16);

struct KvmsgHeader {
    std::uint8_t type = KVMSG_TYPE_DATA;
    std::uint8_t flags = 0;
    std::uint16_t credits = 0;
    std::uint32_t seq = 0;
    std::uint32_t len = 0;
    std::uint32_t reserved = 0;
};

// Writes h into the first kvmsg_header bytes of buf.
void kvmsg_put(std::span<std::uint8_t> buf, const KvmsgHeader &h) noexcept;

struct KvmsgParse {
    KvmsgHeader hdr;
    std::string error;  // empty when the header is valid

    [[nodiscard]] bool ok() const noexcept { return error.empty(); }
};

// Validates a received message of msg.size() bytes the way the kernel does
// (kmsg/wire.c): type, flags, reserved, len against the bytes received and
// max_len, the credit-message rules and the expected sequence number.
[[nodiscard]] KvmsgParse kvmsg_parse(std::span<const std::uint8_t> msg, std::uint32_t seq,
                                   std::uint32_t max_len);

// Sender-side credits (see uapi <kverbs/kvmsg.h>).
class KvmsgCredits {
public:
    explicit KvmsgCredits(std::uint32_t peer_depth) noexcept
        : avail_(peer_depth), limit_(peer_depth) {}

    // Spends a credit for a message about to go; false if none may be spent
    // (the last one only goes with a grant).  grant receives the credits the
    // message returns.
    [[nodiscard]] bool take(std::uint16_t &grant) noexcept;
    // Applies a received grant; false if the peer over-granted.
    [[nodiscard]] bool receive(std::uint32_t grant) noexcept;
    void reposted() noexcept { ++ungranted_; }
    [[nodiscard]] std::uint32_t avail() const noexcept { return avail_; }

private:
    std::uint32_t avail_;
    std::uint32_t limit_;
    std::uint32_t ungranted_ = 0;
};

} // namespace kvwire
