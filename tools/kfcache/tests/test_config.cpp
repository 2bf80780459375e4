// SPDX-License-Identifier: GPL-2.0-only
//
// kfcache's configuration file (config.cpp): what it accepts and the line
// it names for what it refuses.
#include "../config.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace {

std::string refusal(const std::string &text)
{
    try {
        kfcache::parse_config(text, "f");
    } catch (const std::runtime_error &e) {
        return e.what();
    }
    return "accepted";
}

TEST(KfcacheConfig, Full)
{
    const auto c = kfcache::parse_config("# a server\n"
                                         "listen 10.0.0.1 port 18801   # here\n"
                                         "key kverbs:lab\n"
                                         "key-file /etc/kverbs/lab.key\n"
                                         "\n"
                                         "export data /srv/data client 10.0.0.0/24 client fd00::/8\n"
                                         "export all /srv/all\n",
                                         "f");
    EXPECT_EQ(c.addr, "10.0.0.1");
    EXPECT_EQ(c.port, 18801);
    EXPECT_EQ(c.key, "kverbs:lab");
    EXPECT_EQ(c.key_file, "/etc/kverbs/lab.key");
    EXPECT_FALSE(c.insecure);
    ASSERT_EQ(c.exports.size(), 2u);
    EXPECT_EQ(c.exports[0].name, "data");
    EXPECT_EQ(c.exports[0].path, "/srv/data");
    EXPECT_EQ(c.exports[0].line, 6u);
    ASSERT_EQ(c.exports[0].clients.size(), 2u);
    EXPECT_EQ(kfcache::client_str(c.exports[0].clients[0]), "10.0.0.0/24");
    EXPECT_EQ(kfcache::client_str(c.exports[0].clients[1]), "fd00::/8");
    EXPECT_TRUE(c.exports[1].clients.empty());
}

TEST(KfcacheConfig, Defaults)
{
    const auto c = kfcache::parse_config("listen ::1\ninsecure\n", "f");
    EXPECT_EQ(c.port, KFC_DEFAULT_PORT);
    EXPECT_TRUE(c.insecure);
    EXPECT_TRUE(c.exports.empty());
}

TEST(KfcacheConfig, RefusalsNameTheLine)
{
    EXPECT_EQ(refusal(""), "f: no listen line");
    EXPECT_EQ(refusal("listen 10.0.0.1\nlisten 10.0.0.2\n"), "f:2: a second listen");
    EXPECT_EQ(refusal("listen host.example\n"), "f:1: 'host.example' is not an IP address");
    EXPECT_EQ(refusal("listen 10.0.0.1 port 0\n"), "f:1: port: '0' is not a number in [1, 65535]");
    EXPECT_EQ(refusal("listen 10.0.0.1 port 65536\n"),
              "f:1: port: '65536' is not a number in [1, 65535]");
    EXPECT_EQ(refusal("listen 10.0.0.1\nexport a rel/path\n"),
              "f:2: export a: the path must be absolute");
    EXPECT_EQ(refusal("listen 10.0.0.1\nexport a /x\nexport a /y\n"), "f:3: export a: exported twice");
    EXPECT_EQ(refusal("listen 10.0.0.1\nexport a/b /x\n"),
              "f:2: export: 'a/b' is not a name of 1 to 31 characters without '/'");
    EXPECT_EQ(refusal("listen 10.0.0.1\nexport a /x client\n"),
              "f:2: export NAME PATH [client ADDR[/LEN]]...");
    EXPECT_EQ(refusal("listen 10.0.0.1\nexport a /x host 10.0.0.1\n"),
              "f:2: export a: 'host' where client was expected");
    EXPECT_EQ(refusal("listen 10.0.0.1\nexport a /x client 10.0.0.0/33\n"),
              "f:2: export a: client '10.0.0.0/33': LEN is a decimal prefix length, 0 to 32");
    EXPECT_EQ(refusal("listen 10.0.0.1\nexport a /x client ::ffff:10.0.0.1\n"),
              "f:2: export a: client '::ffff:10.0.0.1': name IPv4 clients as IPv4");
    EXPECT_EQ(refusal("listen 10.0.0.1\nkey-file lab.key\n"), "f:2: key-file: an absolute path");
    EXPECT_EQ(refusal("listen 10.0.0.1\ninsecure\nkey kverbs:x\n"),
              "f: insecure excludes key and key-file");
    EXPECT_EQ(refusal("listen 10.0.0.1\nexports a /x\n"), "f:2: unknown directive 'exports'");
}

// The example shipped with the package (tools/examples/kfcache.conf).
TEST(KfcacheConfig, TheExampleParses)
{
    std::ifstream f(KFC_EXAMPLE);
    ASSERT_TRUE(f) << KFC_EXAMPLE;
    std::stringstream text;
    text << f.rdbuf();
    const auto c = kfcache::parse_config(text.str(), KFC_EXAMPLE);
    EXPECT_EQ(c.key_file, "/etc/kverbs/kfcache.key");
    ASSERT_EQ(c.exports.size(), 1u);
    EXPECT_EQ(c.exports[0].clients.size(), 1u);
}

TEST(KfcacheConfig, SeventeenClientsAreTooMany)
{
    std::string line = "listen 10.0.0.1\nexport a /x";
    for (int i = 0; i < 17; ++i)
        line += " client 10.0.0." + std::to_string(i);
    EXPECT_EQ(refusal(line + "\n"), "f:2: export a: at most 16 clients");
}

}  // namespace
