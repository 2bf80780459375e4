// SPDX-License-Identifier: GPL-2.0-only
// kvwire's private-data codec must refuse exactly what kverbs.ko refuses.
#include <kvwire/cm.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace {

using kvwire::Priv;

Priv valid() { return kvwire::make_priv(7, 16, 4096); }

kverbs_cm_reason reason_of(const Priv &p)
{
    const auto b = kvwire::encode(p);
    return kvwire::decode_priv(b).reason;
}

TEST(Priv, RoundTrip)
{
    const Priv p = kvwire::make_priv(0x01020304, KVERBS_CM_MAX_DEPTH, KVERBS_CM_MAX_MSG);
    const auto b = kvwire::encode(p);
    const auto r = kvwire::decode_priv(b);
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.value, p);
}

TEST(Priv, WireLayoutIsBigEndian)
{
    const auto b = kvwire::encode(kvwire::make_priv(0x01020304, 0x0506, 0x0708090a));
    const std::vector<std::uint8_t> want{0x4b, 0x56, 0x52, 0x4d,  // "KVRM"
                                         0x00, 0x03, 0x00, 0x00,  // version 3, flags
                                         0x01, 0x02, 0x03, 0x04,  // node_id
                                         0x05, 0x06, 0x00, 0x00,  // depth, reserved
                                         0x07, 0x08, 0x09, 0x0a}; // max_msg
    EXPECT_EQ(std::vector<std::uint8_t>(b.begin(), b.end()), want);
}

TEST(Priv, ShortBuffer)
{
    const auto b = kvwire::encode(valid());
    for (std::size_t len = 0; len < b.size(); ++len)
        EXPECT_EQ(kvwire::decode_priv(std::span(b).first(len)).reason, KVERBS_CM_ESHORT) << len;
    EXPECT_EQ(kvwire::decode_priv({}).reason, KVERBS_CM_ESHORT);
}

TEST(Priv, ZeroPaddingTolerated)
{
    const auto b = kvwire::encode(valid());
    for (std::size_t len = b.size(); len <= KVERBS_CM_PRIV_MAX; ++len) {
        std::vector<std::uint8_t> padded(len, 0);
        std::copy(b.begin(), b.end(), padded.begin());
        const auto r = kvwire::decode_priv(padded);
        ASSERT_TRUE(r.ok()) << len << ": " << r.message;
        EXPECT_EQ(r.value, valid());
    }
}

TEST(Priv, BadMagic)
{
    Priv p = valid();
    p.magic = 0x4b56524e;
    EXPECT_EQ(reason_of(p), KVERBS_CM_EMAGIC);
    p.magic = 0;
    EXPECT_EQ(reason_of(p), KVERBS_CM_EMAGIC);
}

TEST(Priv, BadVersion)
{
    Priv p = valid();
    p.version = 0;
    EXPECT_EQ(reason_of(p), KVERBS_CM_EVERSION);
    p.version = KVERBS_CM_VERSION + 1;
    EXPECT_EQ(reason_of(p), KVERBS_CM_EVERSION);
}

TEST(Priv, UnknownFlagsAndReservedRefused)
{
    for (const std::uint16_t v : {0x0002, 0x8000, 0xffff}) {
        Priv p = valid();
        p.flags = v;
        EXPECT_EQ(reason_of(p), KVERBS_CM_EFLAGS);
    }
    for (const std::uint16_t v : {0x0001, 0x8000, 0xffff}) {
        Priv p = valid();
        p.reserved = v;
        EXPECT_EQ(reason_of(p), KVERBS_CM_EFLAGS);
    }
}

// The authentication offer is the one defined flag; whether the two sides
// agree on it is the peer's check, not the announcement's.
TEST(Priv, AuthFlagAccepted)
{
    Priv p = valid();
    p.flags = KVERBS_CM_F_AUTH;
    EXPECT_EQ(reason_of(p), KVERBS_CM_OK);
}

TEST(Priv, NodeZero)
{
    Priv p = valid();
    p.node_id = 0;
    EXPECT_EQ(reason_of(p), KVERBS_CM_ENODE);
}

TEST(Priv, DepthBounds)
{
    Priv p = valid();
    p.depth = 0;
    EXPECT_EQ(reason_of(p), KVERBS_CM_EDEPTH);
    p.depth = KVERBS_CM_MAX_DEPTH + 1;
    EXPECT_EQ(reason_of(p), KVERBS_CM_EDEPTH);
    p.depth = 0xffff;
    EXPECT_EQ(reason_of(p), KVERBS_CM_EDEPTH);
    p.depth = KVERBS_CM_MIN_DEPTH;
    EXPECT_EQ(reason_of(p), KVERBS_CM_OK);
    p.depth = KVERBS_CM_MAX_DEPTH;
    EXPECT_EQ(reason_of(p), KVERBS_CM_OK);
}

TEST(Priv, MaxMsgBounds)
{
    Priv p = valid();
    for (const std::uint32_t bad : {0U, KVERBS_CM_MIN_MSG - 1U, KVERBS_CM_MAX_MSG + 1U, 0xffffffffU}) {
        p.max_msg = bad;
        EXPECT_EQ(reason_of(p), KVERBS_CM_EMSG) << bad;
    }
    for (const std::uint32_t good : {std::uint32_t{KVERBS_CM_MIN_MSG}, KVERBS_CM_MAX_MSG}) {
        p.max_msg = good;
        EXPECT_EQ(reason_of(p), KVERBS_CM_OK) << good;
    }
}

// The kernel reports the first failing check; so must we.
TEST(Priv, FirstFailureWins)
{
    Priv p = valid();
    p.version = 9;
    p.node_id = 0;
    p.depth = 0;
    EXPECT_EQ(reason_of(p), KVERBS_CM_EVERSION);
    p = valid();
    p.node_id = 0;
    p.max_msg = 0;
    EXPECT_EQ(reason_of(p), KVERBS_CM_ENODE);
}

TEST(Priv, RefusalCarriesMessage)
{
    Priv p = valid();
    p.depth = 5000;
    const auto b = kvwire::encode(p);
    const auto r = kvwire::decode_priv(b);
    EXPECT_FALSE(r);
    EXPECT_NE(r.message.find("5000"), std::string::npos) << r.message;
}

TEST(Rej, RoundTripEveryReason)
{
    for (unsigned r = KVERBS_CM_OK; r < KVERBS_CM_REASON_MAX; ++r) {
        const auto b = kvwire::encode_rej(static_cast<kverbs_cm_reason>(r));
        EXPECT_EQ(kvwire::decode_rej(b), r);
    }
}

TEST(Rej, ForeignOrShortIsNotKverbs)
{
    auto b = kvwire::encode_rej(KVERBS_CM_EMAGIC);
    EXPECT_FALSE(kvwire::decode_rej(std::span(b).first(kvwire::rej_size - 1)));
    EXPECT_FALSE(kvwire::decode_rej({}));
    auto foreign = b;
    foreign[0] ^= 1;
    EXPECT_FALSE(kvwire::decode_rej(foreign));
    foreign = b;
    foreign[5] = KVERBS_CM_VERSION + 1;  // version
    EXPECT_FALSE(kvwire::decode_rej(foreign));
    // IB CM REJ private data is zero padded to 148 bytes.
    std::vector<std::uint8_t> padded(148, 0);
    std::copy(b.begin(), b.end(), padded.begin());
    EXPECT_EQ(kvwire::decode_rej(padded), KVERBS_CM_EMAGIC);
}

TEST(Reason, Strings)
{
    EXPECT_EQ(kvwire::reason_name(KVERBS_CM_EDEPTH), "KVERBS_CM_EDEPTH");
    EXPECT_EQ(kvwire::reason_str(KVERBS_CM_EMAGIC), "bad magic (not a kverbs peer)");
    EXPECT_EQ(kvwire::reason_str(KVERBS_CM_REASON_MAX), "unknown reason");
    EXPECT_EQ(kvwire::reason_name(0xffff), "UNKNOWN");
    for (unsigned r = 0; r < KVERBS_CM_REASON_MAX; ++r)
        EXPECT_FALSE(kvwire::reason_str(r).empty());
}

} // namespace
