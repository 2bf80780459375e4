// SPDX-License-Identifier: GPL-2.0-only
#include <kvwire/kvmsg.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace {

std::vector<std::uint8_t> msg(const kvwire::KvmsgHeader &h, std::size_t payload)
{
    std::vector<std::uint8_t> b(kvwire::kvmsg_header + payload, 0xa5);
    kvwire::kvmsg_put(b, h);
    return b;
}

TEST(Kvmsg, RoundTrip)
{
    const auto b = msg({.type = KVMSG_TYPE_DATA, .credits = 3, .seq = 7, .len = 10}, 10);
    const auto r = kvwire::kvmsg_parse(b, 7, 4096);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.hdr.credits, 3);
    EXPECT_EQ(r.hdr.len, 10U);
    // Big endian on the wire.
    EXPECT_EQ(b[4], 0);
    EXPECT_EQ(b[7], 7);
}

TEST(Kvmsg, RejectsEachViolation)
{
    using H = kvwire::KvmsgHeader;
    EXPECT_FALSE(kvwire::kvmsg_parse(std::vector<std::uint8_t>(15), 0, 4096).ok());
    EXPECT_FALSE(kvwire::kvmsg_parse(msg(H{.type = 3, .len = 0}, 0), 0, 4096).ok());
    EXPECT_FALSE(kvwire::kvmsg_parse(msg(H{.flags = 1, .len = 0}, 0), 0, 4096).ok());
    EXPECT_FALSE(kvwire::kvmsg_parse(msg(H{.len = 0, .reserved = 1}, 0), 0, 4096).ok());
    EXPECT_FALSE(kvwire::kvmsg_parse(msg(H{.len = 5}, 4), 0, 4096).ok());
    EXPECT_FALSE(kvwire::kvmsg_parse(msg(H{.len = 100}, 100), 0, 64).ok());
    EXPECT_FALSE(kvwire::kvmsg_parse(msg(H{.type = KVMSG_TYPE_CREDIT, .len = 0}, 0), 0, 64).ok());
    EXPECT_FALSE(kvwire::kvmsg_parse(msg(H{.type = KVMSG_TYPE_CREDIT, .credits = 1, .len = 1}, 1),
                                    0, 64).ok());
    EXPECT_FALSE(kvwire::kvmsg_parse(msg(H{.seq = 2, .len = 0}, 0), 1, 64).ok());
    EXPECT_TRUE(kvwire::kvmsg_parse(msg(H{.type = KVMSG_TYPE_CREDIT, .credits = 1, .len = 0}, 0),
                                   0, 64).ok());
}

TEST(Kvmsg, LastCreditOnlyWithAGrant)
{
    kvwire::KvmsgCredits c(2);
    std::uint16_t g = 9;
    ASSERT_TRUE(c.take(g));
    EXPECT_EQ(g, 0);
    EXPECT_FALSE(c.take(g));  // last credit, nothing to grant
    c.reposted();
    ASSERT_TRUE(c.take(g));
    EXPECT_EQ(g, 1);
    EXPECT_EQ(c.avail(), 0U);
    EXPECT_FALSE(c.receive(3));  // more than the peer's depth
    EXPECT_TRUE(c.receive(2));
}

} // namespace
