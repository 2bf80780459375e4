// SPDX-License-Identifier: GPL-2.0-only
// kping messages: build/verify agree, and every kind of corruption is caught.
#include <kvwire/kping.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace {

using kvwire::KpingError;

std::vector<std::uint8_t> msg(std::size_t size, std::uint32_t seq)
{
    std::vector<std::uint8_t> m(size);
    kvwire::kping_build(m, seq);
    return m;
}

// Reference vectors for 32-bit FNV-1a.
static_assert(kvwire::fnv1a({}) == 0x811c9dc5U);
static_assert(kvwire::fnv1a(std::array<std::uint8_t, 1>{'a'}) == 0xe40c292cU);
static_assert(kvwire::fnv1a(std::array<std::uint8_t, 6>{'f', 'o', 'o', 'b', 'a', 'r'}) ==
              0xbf9cf968U);
static_assert(kvwire::kping_pattern(0, 0) == 1 && kvwire::kping_pattern(1, 1) == 39);
static_assert(kvwire::kping_pattern(9, 40) == static_cast<std::uint8_t>(9 * 31 + 40 * 7 + 1));

TEST(Kping, BuildVerify)
{
    for (const std::size_t size : {std::size_t{16}, std::size_t{17}, std::size_t{64},
                                   std::size_t{4096}})
        for (const std::uint32_t seq : {0U, 1U, 999U, 0xffffffffU}) {
            const auto m = msg(size, seq);
            const auto c = kvwire::kping_verify(m, seq);
            EXPECT_TRUE(c.ok()) << size << "/" << seq << ": " << c.message;
        }
}

TEST(Kping, HeaderLayout)
{
    const auto m = msg(20, 0x01020304);
    const std::vector<std::uint8_t> head(m.begin(), m.begin() + 12);
    EXPECT_EQ(head, (std::vector<std::uint8_t>{0x4b, 0x50, 0x4e, 0x47, 1, 2, 3, 4, 0, 0, 0, 4}));
    EXPECT_EQ(m[16], kvwire::kping_pattern(0x01020304, 0));
}

TEST(Kping, Truncated)
{
    const auto m = msg(64, 3);
    EXPECT_EQ(kvwire::kping_verify(std::span(m).first(15), 3).error, KpingError::truncated);
    // A message cut after the header no longer matches its len.
    EXPECT_EQ(kvwire::kping_verify(std::span(m).first(40), 3).error, KpingError::len);
}

TEST(Kping, CorruptMagic)
{
    auto m = msg(64, 3);
    m[3] ^= 0xff;
    EXPECT_EQ(kvwire::kping_verify(m, 3).error, KpingError::magic);
}

TEST(Kping, WrongSeq)
{
    const auto m = msg(64, 3);
    EXPECT_EQ(kvwire::kping_verify(m, 4).error, KpingError::seq);
}

TEST(Kping, CorruptLen)
{
    auto m = msg(64, 3);
    m[11] ^= 1;
    EXPECT_EQ(kvwire::kping_verify(m, 3).error, KpingError::len);
}

TEST(Kping, CorruptPayloadCaughtByCheck)
{
    for (std::size_t i = kvwire::kping_header; i < 64; ++i) {
        auto m = msg(64, 3);
        m[i] ^= 0x10;
        EXPECT_EQ(kvwire::kping_verify(m, 3).error, KpingError::check) << i;
    }
}

TEST(Kping, CorruptCheck)
{
    auto m = msg(64, 3);
    m[15] ^= 1;
    EXPECT_EQ(kvwire::kping_verify(m, 3).error, KpingError::check);
}

// A payload with the right checksum but the wrong pattern, e.g. another
// ping's payload with its check copied along, is still refused.
TEST(Kping, WrongPatternWithMatchingCheck)
{
    auto m = msg(64, 3);
    const auto other = msg(64, 4);
    std::copy(other.begin() + 12, other.end(), m.begin() + 12);  // check + payload
    EXPECT_EQ(kvwire::kping_verify(m, 3).error, KpingError::payload);
}

} // namespace
