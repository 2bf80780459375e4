// SPDX-License-Identifier: GPL-2.0-only
//
// Destination addresses, for migrate() and kmigrate(1).
#include "internal.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace kmigrate::detail {

bool parse_dest(const std::string &s, sockaddr_storage *out, socklen_t *len, std::string *why)
{
    std::string host = s, port;
    if (!s.empty() && s[0] == '[') {
        const auto close = s.find(']');
        const std::string rest = close == std::string::npos ? "" : s.substr(close + 1);
        if (close == std::string::npos || (!rest.empty() && (rest[0] != ':' || rest.size() == 1))) {
            *why = "bad address \"" + s + "\": expected [IPv6] or [IPv6]:PORT";
            return false;
        }
        host = s.substr(1, close - 1);
        if (!rest.empty())
            port = rest.substr(1);
    } else if (const auto colon = s.find(':');
               colon != std::string::npos && s.find(':', colon + 1) == std::string::npos) {
        host = s.substr(0, colon);   // one colon: IPv4:PORT; more: bare IPv6
        port = s.substr(colon + 1);
        if (port.empty()) {
            *why = "bad address \"" + s + "\": empty port";
            return false;
        }
    }
    unsigned long p = KMIGRATE_DEFAULT_PORT;
    if (!port.empty()) {
        char *end;
        errno = 0;
        p = std::strtoul(port.c_str(), &end, 10);
        if (errno || *end || !p || p > 65535 || port[0] < '0' || port[0] > '9') {
            *why = "bad port \"" + port + "\" in \"" + s + "\"";
            return false;
        }
    }
    std::memset(out, 0, sizeof(*out));
    auto *in = reinterpret_cast<sockaddr_in *>(out);
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(out);
    if (s[0] != '[' && inet_pton(AF_INET, host.c_str(), &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons(static_cast<std::uint16_t>(p));
        *len = sizeof(*in);
        return true;
    }
    if (inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(static_cast<std::uint16_t>(p));
        *len = sizeof(*in6);
        return true;
    }
    *why = "bad address \"" + s + "\": not an IPv4 or IPv6 address (ADDR[:PORT], [IPv6]:PORT)";
    return false;
}

std::string format_sockaddr(const void *sa, std::size_t len)
{
    char buf[INET6_ADDRSTRLEN] = "?";
    sockaddr_storage ss{};
    std::memcpy(&ss, sa, len < sizeof(ss) ? len : sizeof(ss));
    if (ss.ss_family == AF_INET && len >= sizeof(sockaddr_in)) {
        const auto *in = reinterpret_cast<const sockaddr_in *>(&ss);
        inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
        return std::string(buf) + ":" + std::to_string(ntohs(in->sin_port));
    }
    if (ss.ss_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
        const auto *in6 = reinterpret_cast<const sockaddr_in6 *>(&ss);
        inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
        return "[" + std::string(buf) + "]:" + std::to_string(ntohs(in6->sin6_port));
    }
    return "?";
}

}  // namespace kmigrate::detail
