// SPDX-License-Identifier: GPL-2.0-only
//
// kmigrate serve's policy file: parsing and matching (policy.hpp).
#include "policy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace kmigrate::serve {

namespace {

[[noreturn]] void bad(const std::string &file, unsigned line, const std::string &why)
{
    throw std::runtime_error(file + ":" + std::to_string(line) + ": " + why);
}

bool parse_uint(const std::string &s, unsigned long max, unsigned long *out)
{
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
        return false;
    errno = 0;
    *out = std::strtoul(s.c_str(), nullptr, 10);
    return !errno && *out <= max;
}

void parse_prefix(const std::string &s, rule *r, const std::string &file, unsigned line)
{
    const std::size_t slash = s.find('/');
    const std::string addr = s.substr(0, slash);
    unsigned max;
    if (::inet_pton(AF_INET, addr.c_str(), r->addr) == 1) {
        r->family = AF_INET;
        max = 32;
    } else if (::inet_pton(AF_INET6, addr.c_str(), r->addr) == 1) {
        r->family = AF_INET6;
        max = 128;
    } else {
        bad(file, line, "not an IPv4 or IPv6 address: " + addr);
    }
    unsigned long bits = max;
    if (slash != std::string::npos && !parse_uint(s.substr(slash + 1), max, &bits))
        bad(file, line, "bad prefix length in " + s);
    r->prefix = static_cast<unsigned>(bits);
}

account parse_account(const std::string &s, const std::string &file, unsigned line)
{
    account a;
    const std::size_t colon = s.find(':');
    if (colon != std::string::npos) {
        unsigned long u, g;
        if (!parse_uint(s.substr(0, colon), 0xfffffffeUL, &u) ||
            !parse_uint(s.substr(colon + 1), 0xfffffffeUL, &g))
            bad(file, line, "bad uid:gid " + s);
        a.uid = static_cast<uid_t>(u);
        a.gid = static_cast<gid_t>(g);
        return a;
    }
    const passwd *pw = ::getpwnam(s.c_str());
    if (!pw)
        bad(file, line, "no such user: " + s);
    a.uid = pw->pw_uid;
    a.gid = pw->pw_gid;
    a.name = s;
    return a;
}

bool in_prefix(const rule &r, const std::uint8_t *addr)
{
    const unsigned whole = r.prefix / 8, rest = r.prefix % 8;
    if (std::memcmp(r.addr, addr, whole))
        return false;
    if (!rest)
        return true;
    const std::uint8_t mask = static_cast<std::uint8_t>(0xff00 >> rest);
    return (r.addr[whole] & mask) == (addr[whole] & mask);
}

}  // namespace

std::vector<rule> parse_policy(const std::string &text, const std::string &file,
                               bool allow_root)
{
    std::vector<rule> rules;
    std::istringstream in(text);
    std::string raw;
    unsigned line = 0;
    while (std::getline(in, raw)) {
        line++;
        raw = raw.substr(0, raw.find('#'));
        std::istringstream words(raw);
        std::vector<std::string> w;
        for (std::string x; words >> x;)
            w.push_back(x);
        if (w.empty())
            continue;
        if (w.size() < 6 || w[0] != "accept" || w[2] != "user" || w[4] != "exec")
            bad(file, line, "expected: accept ADDRESS[/PREFIX] user NAME|UID:GID exec PATH...");
        rule r;
        r.line = line;
        parse_prefix(w[1], &r, file, line);
        r.as = parse_account(w[3], file, line);
        if ((r.as.uid == 0 || r.as.gid == 0) && !allow_root)
            bad(file, line, "runs programs as root (uid or gid 0): allowed only with "
                            "kmigrate serve --allow-root");
        for (std::size_t i = 5; i < w.size(); i++) {
            if (w[i][0] != '/')
                bad(file, line, "not an absolute path: " + w[i]);
            r.execs.push_back(w[i]);
        }
        rules.push_back(std::move(r));
    }
    return rules;
}

const rule *authorise(const std::vector<rule> &rules, const sockaddr_storage &peer,
                      const std::string &path)
{
    const std::uint8_t *addr;
    int family = peer.ss_family;
    std::uint8_t mapped[4];
    if (family == AF_INET) {
        addr = reinterpret_cast<const std::uint8_t *>(
            &reinterpret_cast<const sockaddr_in &>(peer).sin_addr);
    } else if (family == AF_INET6) {
        const auto &a6 = reinterpret_cast<const sockaddr_in6 &>(peer).sin6_addr;
        addr = a6.s6_addr;
        if (IN6_IS_ADDR_V4MAPPED(&a6)) {  // an IPv4 peer on a dual-stack listener
            std::memcpy(mapped, a6.s6_addr + 12, 4);
            addr = mapped;
            family = AF_INET;
        }
    } else {
        return nullptr;
    }
    for (const rule &r : rules) {
        if (r.family != family || !in_prefix(r, addr))
            continue;
        for (const std::string &e : r.execs)
            if (e == path)
                return &r;
    }
    return nullptr;
}

}  // namespace kmigrate::serve
