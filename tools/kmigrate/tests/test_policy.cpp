// SPDX-License-Identifier: GPL-2.0-only
//
// kmigrate serve's policy (policy.hpp): what a rule admits, what a bad
// file says, and that nothing is admitted by default.
#include "policy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>

using kmigrate::serve::authorise;
using kmigrate::serve::parse_policy;

namespace {

sockaddr_storage v4(const char *a)
{
    sockaddr_storage ss{};
    auto &s = reinterpret_cast<sockaddr_in &>(ss);
    s.sin_family = AF_INET;
    ::inet_pton(AF_INET, a, &s.sin_addr);
    return ss;
}

sockaddr_storage v6(const char *a)
{
    sockaddr_storage ss{};
    auto &s = reinterpret_cast<sockaddr_in6 &>(ss);
    s.sin6_family = AF_INET6;
    ::inet_pton(AF_INET6, a, &s.sin6_addr);
    return ss;
}

std::string parse_error(const std::string &text, bool allow_root = false)
{
    try {
        parse_policy(text, "p.conf", allow_root);
    } catch (const std::runtime_error &e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(Policy, NothingIsAdmittedByDefault)
{
    EXPECT_EQ(authorise({}, v4("10.0.0.1"), "/bin/sh"), nullptr);
    const auto rules = parse_policy("# only comments\n\n", "p.conf", false);
    EXPECT_TRUE(rules.empty());
    EXPECT_EQ(authorise(rules, v4("10.0.0.1"), "/usr/bin/app"), nullptr);
}

TEST(Policy, AddressPrefixAndExecutableBothMatch)
{
    const auto rules = parse_policy(
        "accept 10.0.2.0/24 user 1000:1000 exec /usr/bin/app /opt/x/run  # comment\n"
        "accept 10.0.3.7 user 1001:100 exec /usr/bin/app\n", "p.conf", false);
    ASSERT_EQ(rules.size(), 2u);
    const auto *r = authorise(rules, v4("10.0.2.99"), "/usr/bin/app");
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->as.uid, 1000u);
    EXPECT_EQ(r->as.gid, 1000u);
    EXPECT_EQ(r->line, 1u);
    EXPECT_NE(authorise(rules, v4("10.0.2.1"), "/opt/x/run"), nullptr);
    EXPECT_EQ(authorise(rules, v4("10.0.2.1"), "/bin/sh"), nullptr);       // not listed
    EXPECT_EQ(authorise(rules, v4("10.0.2.1"), "/usr/bin/app2"), nullptr);  // exact path
    EXPECT_EQ(authorise(rules, v4("10.0.1.255"), "/usr/bin/app"), nullptr);
    r = authorise(rules, v4("10.0.3.7"), "/usr/bin/app");
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->as.uid, 1001u);
    EXPECT_EQ(authorise(rules, v4("10.0.3.8"), "/usr/bin/app"), nullptr);  // a /32
}

TEST(Policy, PrefixesThatAreNotWholeBytes)
{
    const auto rules = parse_policy("accept 192.168.4.0/22 user 5:5 exec /a\n", "p.conf", false);
    EXPECT_NE(authorise(rules, v4("192.168.7.255"), "/a"), nullptr);
    EXPECT_EQ(authorise(rules, v4("192.168.8.0"), "/a"), nullptr);
    EXPECT_EQ(authorise(rules, v4("192.168.3.255"), "/a"), nullptr);
}

TEST(Policy, Ipv6AndMappedIpv4)
{
    const auto rules = parse_policy("accept fd00:1::/64 user 7:7 exec /a\n"
                                    "accept 10.1.0.0/16 user 8:8 exec /a\n", "p.conf", false);
    EXPECT_NE(authorise(rules, v6("fd00:1::5"), "/a"), nullptr);
    EXPECT_EQ(authorise(rules, v6("fd00:2::5"), "/a"), nullptr);
    const auto *r = authorise(rules, v6("::ffff:10.1.2.3"), "/a");
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->as.uid, 8u);
}

TEST(Policy, RootOnlyWhenAllowed)
{
    EXPECT_NE(parse_error("accept 10.0.0.0/8 user 0:0 exec /a\n").find("--allow-root"),
              std::string::npos);
    EXPECT_NE(parse_error("accept 10.0.0.0/8 user 1000:0 exec /a\n").find("--allow-root"),
              std::string::npos);
    EXPECT_EQ(parse_error("accept 10.0.0.0/8 user 0:0 exec /a\n", true), "");
}

TEST(Policy, BadRulesNameTheirLine)
{
    EXPECT_EQ(parse_error("\naccept 10.0.0.300 user 1:1 exec /a\n"),
              "p.conf:2: not an IPv4 or IPv6 address: 10.0.0.300");
    EXPECT_EQ(parse_error("accept 10.0.0.0/33 user 1:1 exec /a\n"),
              "p.conf:1: bad prefix length in 10.0.0.0/33");
    EXPECT_EQ(parse_error("accept 10.0.0.0/8 user 1:1 exec a\n"),
              "p.conf:1: not an absolute path: a");
    EXPECT_EQ(parse_error("accept 10.0.0.0/8 user x1:1 exec /a\n"),
              "p.conf:1: bad uid:gid x1:1");
    EXPECT_NE(parse_error("accept 10.0.0.0/8 user 1:1\n").find("expected: accept"),
              std::string::npos);
    EXPECT_NE(parse_error("allow 10.0.0.0/8 user 1:1 exec /a\n").find("expected: accept"),
              std::string::npos);
    EXPECT_NE(parse_error("accept 10.0.0.0/8 user no-such-user-here exec /a\n")
                  .find("no such user: no-such-user-here"),
              std::string::npos);
}
