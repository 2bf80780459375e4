// SPDX-License-Identifier: GPL-2.0-only
//
// The arena's allocator on a plain anonymous mapping.
#include "heap.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <random>
#include <stdexcept>
#include <vector>

namespace {

using kmigrate::detail::heap;

// A heap whose object sits in the first page of its own mapping, the
// blocks after it, as in an arena.
class region {
public:
    explicit region(std::size_t bytes) : len_(bytes)
    {
        mem_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (mem_ == MAP_FAILED)
            throw std::runtime_error("mmap");
        auto *b = static_cast<char *>(mem_);
        h_ = new (mem_) heap(b + 4096, b + bytes);
    }
    ~region() { ::munmap(mem_, len_); }
    region(const region &) = delete;
    region &operator=(const region &) = delete;
    heap &h() { return *h_; }

private:
    std::size_t len_;
    void *mem_;
    heap *h_;
};

::testing::AssertionResult sound(const heap &h)
{
    const char *why = "";
    if (h.check(&why))
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << why;
}

unsigned char pattern(std::uint64_t seed, std::size_t i)
{
    return static_cast<unsigned char>((seed * 2654435761U + i * 40503U) >> 7);
}

void fill(void *p, std::size_t n, std::uint64_t seed)
{
    auto *b = static_cast<unsigned char *>(p);
    for (std::size_t i = 0; i < n; i++)
        b[i] = pattern(seed, i);
}

bool intact(const void *p, std::size_t n, std::uint64_t seed)
{
    const auto *b = static_cast<const unsigned char *>(p);
    for (std::size_t i = 0; i < n; i++)
        if (b[i] != pattern(seed, i))
            return false;
    return true;
}

TEST(Heap, AllocFreeAlignmentAndAccounting)
{
    region r(1 << 20);
    heap &h = r.h();
    std::vector<void *> ps;
    for (std::size_t n : {0UL, 1UL, 15UL, 16UL, 17UL, 100UL, 1000UL, 5000UL}) {
        void *p = h.alloc(n);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0U);
        EXPECT_TRUE(h.owns(p));
        EXPECT_GE(h.usable(p), n);
        fill(p, n, n);
        ps.push_back(p);
    }
    EXPECT_GT(h.in_use(), 6000U);
    EXPECT_TRUE(sound(h));
    for (void *p : ps)
        h.free(p);
    EXPECT_EQ(h.in_use(), 0U);
    EXPECT_EQ(h.top(), h.begin());  // everything went back to top
    EXPECT_TRUE(sound(h));
}

TEST(Heap, NeighboursCoalesce)
{
    region r(1 << 20);
    heap &h = r.h();
    void *a = h.alloc(1000), *b = h.alloc(2000), *c = h.alloc(3000);
    void *guard = h.alloc(16);  // keeps a..c from top
    h.free(a);
    h.free(c);
    EXPECT_TRUE(sound(h));
    h.free(b);  // joins both neighbours
    EXPECT_TRUE(sound(h));
    // one free chunk where a, b and c were: a block of their size fits at a
    void *all = h.alloc(1000 + 2000 + 3000 + 2 * heap::header);
    EXPECT_EQ(all, a);
    h.free(all);
    h.free(guard);
    EXPECT_EQ(h.top(), h.begin());
    EXPECT_TRUE(sound(h));
}

TEST(Heap, LastBlockReturnsToTop)
{
    region r(1 << 20);
    heap &h = r.h();
    void *a = h.alloc(100);
    const std::uintptr_t after_a = h.top();
    void *b = h.alloc(100000);
    h.free(b);
    EXPECT_EQ(h.top(), after_a);
    void *c = h.alloc(50);
    h.free(a);           // a free chunk below c
    h.free(c);           // c joins it and both return to top
    EXPECT_EQ(h.top(), h.begin());
    EXPECT_TRUE(sound(h));
}

TEST(Heap, SizeClassesReuseExactBlocks)
{
    region r(4 << 20);
    heap &h = r.h();
    std::vector<void *> keep, freed;
    for (std::size_t n = 16; n <= 4096; n += 48) {
        freed.push_back(h.alloc(n));
        keep.push_back(h.alloc(16));  // no coalescing between them
    }
    for (void *p : freed)
        h.free(p);
    EXPECT_TRUE(sound(h));
    const std::uintptr_t top = h.top();
    std::size_t i = 0;
    for (std::size_t n = 16; n <= 4096; n += 48, i++)
        EXPECT_EQ(h.alloc(n), freed[i]) << n;  // each size finds its own block
    EXPECT_EQ(h.top(), top);
    EXPECT_TRUE(sound(h));
}

TEST(Heap, ReallocInPlaceAndMoving)
{
    region r(8 << 20);
    heap &h = r.h();
    // at the end of the heap: grows into top, same address
    void *p = h.alloc(1000);
    fill(p, 1000, 1);
    void *q = h.realloc(p, 1 << 20);
    EXPECT_EQ(q, p);
    EXPECT_TRUE(intact(q, 1000, 1));
    // shrinks in place, the tail returns
    const std::size_t used = h.in_use();
    q = h.realloc(q, 500);
    EXPECT_EQ(q, p);
    EXPECT_LT(h.in_use(), used);
    EXPECT_TRUE(intact(q, 500, 1));
    // grows into a free neighbour
    void *a = h.alloc(1000);
    void *b = h.alloc(5000);
    void *c = h.alloc(16);
    h.free(b);
    fill(a, 1000, 2);
    EXPECT_EQ(h.realloc(a, 5000), a);
    EXPECT_TRUE(intact(a, 1000, 2));
    EXPECT_TRUE(sound(h));
    // must move: the content follows
    void *m = h.realloc(a, 100000);
    EXPECT_NE(m, a);
    EXPECT_TRUE(intact(m, 1000, 2));
    EXPECT_TRUE(sound(h));
    EXPECT_EQ(h.realloc(nullptr, 10) != nullptr, true);
    EXPECT_EQ(h.realloc(c, 0), nullptr);  // frees, as glibc
    EXPECT_TRUE(sound(h));
}

TEST(Heap, Memalign)
{
    region r(64 << 20);
    heap &h = r.h();
    std::vector<std::pair<void *, std::size_t>> ps;
    for (std::size_t a = 16; a <= (1 << 21); a <<= 1)
        for (std::size_t n : {1UL, 24UL, 4096UL, 100000UL}) {
            void *p = h.memalign(a, n);
            ASSERT_NE(p, nullptr);
            EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % a, 0U) << a;
            fill(p, n, a + n);
            ps.emplace_back(p, n);
            ASSERT_TRUE(sound(h)) << a << " " << n;
            void *filler = h.alloc(a / 3);  // vary the next block's alignment
            ps.emplace_back(filler, 0);
        }
    for (auto &[p, n] : ps)
        h.free(p);
    EXPECT_EQ(h.in_use(), 0U);
    EXPECT_EQ(h.top(), h.begin());
    EXPECT_TRUE(sound(h));
}

TEST(Heap, ExhaustionFailsCleanly)
{
    region r(1 << 20);
    heap &h = r.h();
    std::vector<void *> ps;
    for (;;) {
        errno = 0;
        void *p = h.alloc(1000);
        if (!p) {
            EXPECT_EQ(errno, ENOMEM);
            break;
        }
        ps.push_back(p);
    }
    EXPECT_GT(ps.size(), 900U);  // 1 MiB less a page, in blocks of 1016
    EXPECT_LE(h.limit() - h.top(), 1016U);
    EXPECT_EQ(h.alloc(1 << 20), nullptr);
    EXPECT_EQ(h.alloc(~std::size_t(0)), nullptr);
    EXPECT_EQ(h.memalign(4096, 1 << 20), nullptr);
    void *last = ps.back();
    EXPECT_EQ(h.realloc(last, 1 << 20), nullptr);  // the old block stays
    EXPECT_TRUE(h.owns(last));
    EXPECT_TRUE(sound(h));
    for (void *p : ps)
        h.free(p);
    EXPECT_EQ(h.top(), h.begin());
    // all of it again, in one block
    void *all = h.alloc(h.limit() - h.begin() - heap::header);
    EXPECT_NE(all, nullptr);
    h.free(all);
    EXPECT_TRUE(sound(h));
}

TEST(Heap, LargeBlocksNeedNoDoubleSpace)
{
    // 300 MiB in a 512 MiB heap, then grown to 450 MiB in place; the pages
    // in between are never touched
    region r(512UL << 20);
    heap &h = r.h();
    auto *p = static_cast<char *>(h.alloc(300UL << 20));
    ASSERT_NE(p, nullptr);
    p[0] = 1;
    p[(300UL << 20) - 1] = 2;
    auto *q = static_cast<char *>(h.realloc(p, 450UL << 20));
    ASSERT_EQ(q, p);
    EXPECT_EQ(q[0], 1);
    EXPECT_EQ(q[(300UL << 20) - 1], 2);
    EXPECT_EQ(h.alloc(100UL << 20), nullptr);
    h.free(q);
    void *a = h.memalign(1 << 21, 400UL << 20);
    EXPECT_NE(a, nullptr);
    h.free(a);
    EXPECT_EQ(h.top(), h.begin());
    EXPECT_TRUE(sound(h));
}

TEST(Heap, RandomStressKeepsContentAndInvariants)
{
    region r(64 << 20);
    heap &h = r.h();
    struct block {
        void *p;
        std::size_t n;
        std::uint64_t seed;
    };
    std::vector<block> live;
    std::mt19937_64 rng(12345);
    auto size = [&rng]() -> std::size_t {
        const unsigned k = rng() % 100;
        if (k < 70)
            return rng() % 512;
        if (k < 97)
            return rng() % 65536;
        return rng() % (2 << 20);
    };
    std::uint64_t seed = 0;
    unsigned failures = 0;
    for (unsigned op = 0; op < 200000; op++) {
        const unsigned k = rng() % 100;
        if (k < 45 || live.empty()) {
            const std::size_t n = size();
            void *p = h.alloc(n);
            if (!p) {
                failures++;
                continue;
            }
            fill(p, n, ++seed);
            live.push_back({p, n, seed});
        } else if (k < 80) {
            const std::size_t i = rng() % live.size();
            ASSERT_TRUE(intact(live[i].p, live[i].n, live[i].seed)) << "op " << op;
            h.free(live[i].p);
            live[i] = live.back();
            live.pop_back();
        } else if (k < 95) {
            block &b = live[rng() % live.size()];
            const std::size_t n = size();
            void *p = h.realloc(b.p, n);
            if (!p && n) {
                failures++;
                ASSERT_TRUE(intact(b.p, b.n, b.seed));
                continue;
            }
            ASSERT_TRUE(intact(p, std::min(n, b.n), b.seed)) << "op " << op;
            b.p = p;
            b.n = n;
            b.seed = ++seed;
            fill(p, n, seed);
            if (!n) {
                b = live.back();
                live.pop_back();
            }
        } else {
            const std::size_t a = std::size_t(32) << (rng() % 10);
            const std::size_t n = size();
            void *p = h.memalign(a, n);
            if (!p) {
                failures++;
                continue;
            }
            ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % a, 0U);
            fill(p, n, ++seed);
            live.push_back({p, n, seed});
        }
        if (op % 2000 == 0) {
            ASSERT_TRUE(sound(h)) << "op " << op;
        }
    }
    ASSERT_TRUE(sound(h));
    for (const block &b : live) {
        ASSERT_TRUE(intact(b.p, b.n, b.seed));
        h.free(b.p);
    }
    EXPECT_EQ(h.in_use(), 0U);
    EXPECT_EQ(h.top(), h.begin());
    EXPECT_TRUE(sound(h));
    RecordProperty("failed_allocations", static_cast<int>(failures));
}

TEST(HeapDeathTest, DoubleFreeAborts)
{
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    region r(1 << 20);
    heap &h = r.h();
    void *p = h.alloc(100);
    h.alloc(100);
    h.free(p);
    EXPECT_DEATH(h.free(p), "not a block in use");
}

}  // namespace
