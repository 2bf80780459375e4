// SPDX-License-Identifier: GPL-2.0-only
//
// malloc and friends, replaced as glibc's manual allows ("Replacing
// malloc"): once run() has an arena, every allocation of the process,
// libc's and libstdc++'s operator new included, comes from the arena's
// heap, so that it migrates.  Before, and for blocks that glibc handed out
// before, glibc's own allocator serves (its __libc_* entry points).  An
// arena that is full fails the allocation: falling back to glibc would
// give the program memory that silently does not migrate.
#include "internal.hpp"

#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

extern "C" {
void *__libc_malloc(std::size_t);
void __libc_free(void *);
void *__libc_calloc(std::size_t, std::size_t);
void *__libc_realloc(void *, std::size_t);
void *__libc_memalign(std::size_t, std::size_t);
}

namespace kmigrate::detail {

namespace {

std::atomic<heap *> active{nullptr};

inline heap *current()
{
    return active.load(std::memory_order_acquire);
}

// memalign()'s rounding: a power of two, at least 16.
std::size_t round_alignment(std::size_t a)
{
    if (a <= heap::align)
        return heap::align;
    if (a > (std::size_t(1) << 62))
        return 0;
    return std::size_t(1) << (64 - __builtin_clzll(a - 1));
}

void *aligned(std::size_t a, std::size_t n)
{
    a = round_alignment(a);
    if (!a) {
        errno = EINVAL;
        return nullptr;
    }
    heap *h = current();
    return h ? h->memalign(a, n) : __libc_memalign(a, n);
}

}  // namespace

void activate(heap *h)
{
    active.store(h, std::memory_order_release);
}

heap *active_heap()
{
    return current();
}

}  // namespace kmigrate::detail

using kmigrate::detail::current;

extern "C" {

void *malloc(std::size_t n) noexcept
{
    kmigrate::detail::heap *h = current();
    return h ? h->alloc(n) : __libc_malloc(n);
}

void free(void *p) noexcept
{
    if (!p)
        return;
    kmigrate::detail::heap *h = current();
    if (h && h->owns(p))
        h->free(p);
    else
        __libc_free(p);
}

void *calloc(std::size_t n, std::size_t m) noexcept
{
    kmigrate::detail::heap *h = current();
    if (!h)
        return __libc_calloc(n, m);
    std::size_t total;
    if (__builtin_mul_overflow(n, m, &total)) {
        errno = ENOMEM;
        return nullptr;
    }
    void *p = h->alloc(total);
    if (p)
        std::memset(p, 0, total);  // a freed and reused block is not zero
    return p;
}

void *realloc(void *p, std::size_t n) noexcept
{
    kmigrate::detail::heap *h = current();
    if (!p)
        return h ? h->alloc(n) : __libc_malloc(n);
    // a block from before the arena stays glibc's
    return h && h->owns(p) ? h->realloc(p, n) : __libc_realloc(p, n);
}

void *memalign(std::size_t alignment, std::size_t n) noexcept
{
    return kmigrate::detail::aligned(alignment, n);
}

void *aligned_alloc(std::size_t alignment, std::size_t n) noexcept
{
    if (!alignment || (alignment & (alignment - 1))) {
        errno = EINVAL;
        return nullptr;
    }
    return kmigrate::detail::aligned(alignment, n);
}

int posix_memalign(void **out, std::size_t alignment, std::size_t n) noexcept
{
    if (alignment % sizeof(void *) || (alignment & (alignment - 1)) || !alignment)
        return EINVAL;
    const int saved = errno;
    void *p = kmigrate::detail::aligned(alignment, n);
    const int err = errno;
    errno = saved;
    if (!p)
        return err;
    *out = p;
    return 0;
}

void *valloc(std::size_t n) noexcept
{
    return kmigrate::detail::aligned(static_cast<std::size_t>(::getpagesize()), n);
}

void *pvalloc(std::size_t n) noexcept
{
    const auto pg = static_cast<std::size_t>(::getpagesize());
    if (n > ~std::size_t(0) - pg) {
        errno = ENOMEM;
        return nullptr;
    }
    return kmigrate::detail::aligned(pg, n ? (n + pg - 1) & ~(pg - 1) : pg);
}

std::size_t malloc_usable_size(void *p) noexcept
{
    if (!p)
        return 0;
    kmigrate::detail::heap *h = current();
    if (h && h->owns(p))
        return h->usable(p);
    // glibc exports no __libc_ name for this one
    using fn_t = std::size_t (*)(void *);
    static std::atomic<fn_t> libc{nullptr};
    fn_t f = libc.load(std::memory_order_relaxed);
    if (!f) {
        f = reinterpret_cast<fn_t>(::dlsym(RTLD_NEXT, "malloc_usable_size"));
        if (!f)
            return 0;
        libc.store(f, std::memory_order_relaxed);
    }
    return f(p);
}

}  // extern "C"
