// SPDX-License-Identifier: GPL-2.0-only
//
// The replaced malloc: before activate() glibc serves, after it the heap
// serves everything, libc's and libstdc++'s allocations included, while
// glibc's earlier blocks stay glibc's.  The heap stays active for the rest
// of the process (as an arena does), so this is one test.
#include "internal.hpp"

#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace {

using kmigrate::detail::heap;

struct alignas(256) wide {
    char c[300];
};

template <typename T> std::uintptr_t addr(T *p)
{
    return reinterpret_cast<std::uintptr_t>(p);
}

// Opaque to the optimiser: it may not drop a malloc/free pair around it.
template <typename T> T *keep(T *p)
{
    asm volatile("" : "+r"(p) : : "memory");
    return p;
}

TEST(Interpose, TheArenaServesEverythingOnceActive)
{
    ASSERT_EQ(kmigrate::detail::active_heap(), nullptr);
    void *old_block = keep(std::malloc(100));
    char *old_str = keep(::strdup("before"));
    auto old_vec = std::make_unique<std::vector<int>>(1000, 1);

    const std::size_t bytes = 256UL << 20;
    void *mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    auto *h = new (mem) heap(static_cast<char *>(mem) + 4096, static_cast<char *>(mem) + bytes);
    EXPECT_FALSE(h->owns(old_block));
    kmigrate::detail::activate(h);

    void *p = keep(std::malloc(100));
    EXPECT_TRUE(h->owns(p));
    auto *ints = keep(new int[10]);
    EXPECT_TRUE(h->owns(ints));
    std::string s(1000, 'x');
    EXPECT_TRUE(h->owns(s.data()));
    char *dup = keep(::strdup("libc allocates too"));
    EXPECT_TRUE(h->owns(dup));
    auto *w = keep(new wide);
    EXPECT_TRUE(h->owns(w));
    EXPECT_EQ(addr(w) % 256, 0U);

    void *pm = nullptr;
    EXPECT_EQ(::posix_memalign(&pm, 4096, 10), 0);
    EXPECT_TRUE(h->owns(pm));
    EXPECT_EQ(addr(pm) % 4096, 0U);
    EXPECT_EQ(::posix_memalign(&pm, 24, 10), EINVAL);
    void *aa = keep(std::aligned_alloc(64, 128));
    void *ma = keep(::memalign(100, 10));  // rounded up to 128
    void *va = keep(::valloc(10));
    void *pv = keep(::pvalloc(5000));
    const std::pair<void *, std::size_t> want[] = {{aa, 64}, {ma, 128}, {va, 4096}, {pv, 4096}};
    for (const auto &[q, a] : want) {
        EXPECT_TRUE(h->owns(q));
        EXPECT_EQ(addr(q) % a, 0U);
    }
    EXPECT_GE(::malloc_usable_size(pv), 8192U);
    EXPECT_GE(::malloc_usable_size(p), 100U);
    EXPECT_GE(::malloc_usable_size(old_block), 100U);  // glibc's answer

    // calloc of a reused block is zero
    auto *dirty = static_cast<unsigned char *>(keep(std::malloc(4000)));
    std::memset(dirty, 0xff, 4000);
    std::free(dirty);
    auto *clean = static_cast<unsigned char *>(keep(std::calloc(1, 4000)));
    ASSERT_TRUE(h->owns(clean));
    for (unsigned i = 0; i < 4000; i++)
        ASSERT_EQ(clean[i], 0) << i;
    volatile std::size_t many = ~std::size_t(0) / 2;
    EXPECT_EQ(std::calloc(many, 4), nullptr);

    // glibc's blocks stay glibc's
    char *grown = keep(static_cast<char *>(std::realloc(old_str, 10000)));
    ASSERT_NE(grown, nullptr);
    EXPECT_FALSE(h->owns(grown));
    EXPECT_STREQ(grown, "before");
    std::free(grown);
    std::free(old_block);
    old_vec.reset();

    // a full arena fails: no silent fallback to memory that would not migrate
    errno = 0;
    EXPECT_EQ(keep(std::malloc(1UL << 40)), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    EXPECT_THROW(keep(new char[1UL << 40]), std::bad_alloc);

    for (void *q : {p, static_cast<void *>(dup), aa, ma, va, pv, pm, static_cast<void *>(clean)})
        std::free(q);
    delete[] ints;
    delete w;
    const char *why = "";
    EXPECT_TRUE(h->check(&why)) << why;
}

}  // namespace
