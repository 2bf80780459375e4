// SPDX-License-Identifier: GPL-2.0-only
#include "kvwire/auth.hpp"

#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>
#include <string_view>
#include <vector>

namespace kvwire {

namespace {

// kverbs/auth.c's labels.
constexpr std::string_view label_server = "kverbs-auth-1 server";
constexpr std::string_view label_client = "kverbs-auth-1 client";

} // namespace

void auth_addr(const sockaddr *sa, std::span<std::uint8_t, auth_addr_len> out) noexcept
{
    std::memset(out.data(), 0, out.size());
    if (sa->sa_family == AF_INET) {
        const auto *in = reinterpret_cast<const sockaddr_in *>(sa);
        out[10] = 0xff;
        out[11] = 0xff;
        std::memcpy(out.data() + 12, &in->sin_addr, 4);
        std::memcpy(out.data() + 16, &in->sin_port, 2);
    } else if (sa->sa_family == AF_INET6) {
        const auto *in6 = reinterpret_cast<const sockaddr_in6 *>(sa);
        std::memcpy(out.data(), &in6->sin6_addr, 16);
        std::memcpy(out.data() + 16, &in6->sin6_port, 2);
    }
}

bool auth_proof(std::span<const std::uint8_t> key, bool server, const AuthInput &in, Proof &out)
{
    const std::string_view label = server ? label_server : label_client;
    std::vector<std::uint8_t> msg(label.begin(), label.end());
    auto add = [&msg](std::span<const std::uint8_t> s) { msg.insert(msg.end(), s.begin(), s.end()); };
    add(in.nc);
    add(in.ns);
    add(in.client);
    add(in.server);
    add(in.client_addr);
    add(in.server_addr);
    std::uint8_t md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), md,
              &len) ||
        len < out.size())
        return false;
    std::memcpy(out.data(), md, out.size());
    OPENSSL_cleanse(md, sizeof(md));
    return true;
}

bool proof_equal(const Proof &a, const Proof &b) noexcept
{
    return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

} // namespace kvwire
