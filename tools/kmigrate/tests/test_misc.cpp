// SPDX-License-Identifier: GPL-2.0-only
//
// Page ranges, destination addresses, the fingerprint, the descriptor
// check.
#include "internal.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/personality.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

using namespace kmigrate::detail;

constexpr std::uintptr_t va = 0x6b6d00000000UL;
constexpr std::uintptr_t npages = 1024;             // 4 MiB
constexpr std::uintptr_t stack_lo = va + (1024 - 256) * page_size;  // 1 MiB stack
constexpr std::uintptr_t stack_hi = va + npages * page_size;

std::string str(const range_list &l)
{
    std::string s;
    for (unsigned i = 0; i < l.n; i++)
        s += "[" + std::to_string(l.r[i].first) + "+" + std::to_string(l.r[i].count) + ")";
    return s;
}

TEST(Ranges, EmptyHeapIsHeaderAndStack)
{
    const auto l = used_ranges(va, va + page_size, va + page_size, stack_hi - 1000, stack_lo, stack_hi);
    EXPECT_EQ(str(l), "[0+1)[1023+1)");
}

TEST(Ranges, HeapJoinsTheHeaderPage)
{
    // heap top inside page 3: pages 1..3 are used
    const auto l = used_ranges(va, va + page_size, va + 3 * page_size + 16, stack_hi - 8192 - 200,
                               stack_lo, stack_hi);
    EXPECT_EQ(str(l), "[0+4)[1021+3)");
}

TEST(Ranges, RedZoneReachesThePageBelow)
{
    // sp 64 bytes into page 1000: the red zone reaches into page 999
    const auto l = used_ranges(va, va + page_size, va + page_size, va + 1000 * page_size + 64,
                               stack_lo, stack_hi);
    EXPECT_EQ(str(l), "[0+1)[999+25)");
    const auto m = used_ranges(va, va + page_size, va + page_size, va + 1000 * page_size + 128,
                               stack_lo, stack_hi);
    EXPECT_EQ(str(m), "[0+1)[1000+24)");
}

TEST(Ranges, FullHeapMeetsTheStack)
{
    // the heap up to stack_lo, the stack in use to its bottom: one range
    const auto l = used_ranges(va, va + page_size, stack_lo, stack_lo + 64, stack_lo, stack_hi);
    EXPECT_EQ(str(l), "[0+1024)");
}

TEST(Ranges, NeverMoreThanTheKernelTakes)
{
    for (std::uintptr_t top = va + page_size; top <= stack_lo; top += 4096 * 37 + 16)
        for (std::uintptr_t sp = stack_lo; sp < stack_hi; sp += 4096 * 13 + 8) {
            const auto l = used_ranges(va, va + page_size, top, sp, stack_lo, stack_hi);
            ASSERT_GE(l.n, 1U);
            ASSERT_LE(l.n, static_cast<unsigned>(KMIGRATE_MAX_RANGES));
            for (unsigned i = 0; i < l.n; i++) {
                ASSERT_GT(l.r[i].count, 0U);
                if (i) {  // sorted, disjoint, not touching
                    ASSERT_GT(l.r[i].first, l.r[i - 1].first + l.r[i - 1].count);
                }
            }
            ASSERT_EQ(l.r[l.n - 1].first + l.r[l.n - 1].count, npages);
        }
}

std::string parsed(const std::string &s)
{
    sockaddr_storage ss;
    socklen_t len = 0;
    std::string why;
    if (!parse_dest(s, &ss, &len, &why))
        return "error";
    EXPECT_EQ(len, ss.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    return format_sockaddr(&ss, len);
}

TEST(Dest, Accepted)
{
    EXPECT_EQ(parsed("10.0.0.2"), "10.0.0.2:18900");
    EXPECT_EQ(parsed("10.0.0.2:1234"), "10.0.0.2:1234");
    EXPECT_EQ(parsed("[fe80::1]:99"), "[fe80::1]:99");
    EXPECT_EQ(parsed("[::1]"), "[::1]:18900");
    EXPECT_EQ(parsed("fd00::2"), "[fd00::2]:18900");
    EXPECT_EQ(parsed("::ffff:10.0.0.1"), "[::ffff:10.0.0.1]:18900");
    EXPECT_EQ(parsed("1.2.3.4:65535"), "1.2.3.4:65535");
}

TEST(Dest, Refused)
{
    for (const char *s : {"", "10.0.0.2:", "10.0.0.2:0", "10.0.0.2:65536", "10.0.0.2:-1",
                          "10.0.0.2: 5", "10.0.0.2:12a", "host.example", "host.example:5",
                          "[::1", "[::1]x", "[::1]:", "[10.0.0.2]:5", "10.0.0.256", ":5"}) {
        sockaddr_storage ss;
        socklen_t len;
        std::string why;
        EXPECT_FALSE(parse_dest(s, &ss, &len, &why)) << s;
        EXPECT_FALSE(why.empty()) << s;
    }
}

TEST(Dest, FormatsWhatTheKernelReports)
{
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(7);
    inet_pton(AF_INET, "192.168.1.9", &in.sin_addr);
    EXPECT_EQ(format_sockaddr(&in, sizeof(in)), "192.168.1.9:7");
    EXPECT_EQ(format_sockaddr(&in, 4), "?");
}

std::string hex(const std::uint8_t *p, std::size_t n)
{
    std::string s;
    char b[3];
    for (std::size_t i = 0; i < n; i++) {
        std::snprintf(b, sizeof(b), "%02x", p[i]);
        s += b;
    }
    return s;
}

TEST(Fingerprint, StableInAProcessAndCarriesTheBuildId)
{
    std::uint8_t a[KMIGRATE_FP_MAX], b[KMIGRATE_FP_MAX];
    const std::size_t na = fingerprint(a), nb = fingerprint(b);
    ASSERT_EQ(na, nb);
    EXPECT_EQ(hex(a, na), hex(b, nb));
    EXPECT_LE(na, static_cast<std::size_t>(KMIGRATE_FP_MAX));
    EXPECT_EQ(a[0], 1);        // layout version
    EXPECT_EQ(a[1], 20);       // ld's default build-id: SHA-1
    EXPECT_EQ(na, 2U + 20U + 5U * 8U);
}

// The fingerprint of a fresh process running this test binary.
std::string fresh_fingerprint(bool randomise)
{
    int pipefd[2];
    if (::pipe(pipefd) < 0)
        return "pipe failed";
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(pipefd[1], 1);
        const int p = ::personality(0xffffffff);
        ::personality(randomise ? (static_cast<unsigned long>(p) & ~ADDR_NO_RANDOMIZE)
                                : (static_cast<unsigned long>(p) | ADDR_NO_RANDOMIZE));
        ::setenv("KMIGRATE_TEST_PRINT_FP", "1", 1);
        char *argv[] = {const_cast<char *>("kmigrate-tests"), nullptr};
        ::execv("/proc/self/exe", argv);
        ::_exit(127);
    }
    ::close(pipefd[1]);
    std::string out;
    char buf[512];
    ssize_t n;
    while ((n = ::read(pipefd[0], buf, sizeof(buf))) > 0)
        out.append(buf, static_cast<std::size_t>(n));
    ::close(pipefd[0]);
    int st;
    ::waitpid(pid, &st, 0);
    return out;
}

TEST(Fingerprint, SameAcrossProcessesWithoutRandomisation)
{
    const std::string a = fresh_fingerprint(false), b = fresh_fingerprint(false);
    ASSERT_GT(a.size(), 2 * (2U + 20U));
    EXPECT_EQ(a, b);
}

TEST(Fingerprint, DiffersWhenLibrariesMove)
{
    std::ifstream f("/proc/sys/kernel/randomize_va_space");
    int level = 0;
    if (!(f >> level) || level == 0)
        GTEST_SKIP() << "address space randomisation is off on this host";
    const std::string a = fresh_fingerprint(true), b = fresh_fingerprint(true);
    ASSERT_GT(a.size(), 2 * (2U + 20U));
    EXPECT_NE(a, b);
    EXPECT_EQ(a.substr(0, 2 * 22), b.substr(0, 2 * 22));  // the same build-id
}

TEST(Fds, OnlyStrayDescriptorsAreReported)
{
    const auto before = foreign_fds(-1);
    char path[] = "/tmp/kmigrate-test.XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    const auto during = foreign_fds(-1);
    ASSERT_EQ(during.size(), before.size() + 1);
    bool found = false;
    for (const auto &[n, target] : during)
        if (n == fd) {
            EXPECT_EQ(target, path);
            found = true;
        }
    EXPECT_TRUE(found);
    EXPECT_EQ(foreign_fds(fd).size(), before.size());  // the session's is allowed
    ::close(fd);
    ::unlink(path);
    EXPECT_EQ(foreign_fds(-1).size(), before.size());
    for (const auto &[n, target] : before)
        EXPECT_GT(n, 2);
}

}  // namespace
