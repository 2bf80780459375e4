// SPDX-License-Identifier: GPL-2.0-only
//
// kverbs peer authentication for user space (Documentation/security.rst):
// the proofs both sides of a keyed connection exchange, computed exactly as
// kverbs/auth.c does, so a user-level peer that holds the key can connect
// to a keyed kverbs domain (and the tests can play one).
//
// A proof is the first KVERBS_CM_PROOF_LEN bytes of
//   HMAC-SHA256(key, label || nc || ns || client || server || caddr || saddr)
// with label "kverbs-auth-1 server" or "kverbs-auth-1 client", the two
// nonces, both announcements as they travelled (struct kverbs_cm_priv,
// flags included) and both addresses as auth_addr() writes them.
#pragma once

#include <kverbs/cm.h>

#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace kvwire {

inline constexpr std::size_t auth_addr_len = 18;  // IPv6 (or v4-mapped) + port
using Proof = std::array<std::uint8_t, KVERBS_CM_PROOF_LEN>;
using Nonce = std::array<std::uint8_t, KVERBS_CM_NONCE_LEN>;

// One connection as both sides see it.
struct AuthInput {
    Nonce nc{};  // the connecting side's
    Nonce ns{};  // the accepting side's
    std::array<std::uint8_t, sizeof(kverbs_cm_priv)> client{};
    std::array<std::uint8_t, sizeof(kverbs_cm_priv)> server{};
    std::array<std::uint8_t, auth_addr_len> client_addr{};
    std::array<std::uint8_t, auth_addr_len> server_addr{};
};

// @sa (AF_INET or AF_INET6, with its port) as the proofs take it.
void auth_addr(const sockaddr *sa, std::span<std::uint8_t, auth_addr_len> out) noexcept;

// The accepting (@server) or connecting side's proof, keyed with @key.
// Returns false if the crypto library failed.
[[nodiscard]] bool auth_proof(std::span<const std::uint8_t> key, bool server,
                              const AuthInput &in, Proof &out);

// Constant-time comparison of two proofs.
[[nodiscard]] bool proof_equal(const Proof &a, const Proof &b) noexcept;

} // namespace kvwire
