// SPDX-License-Identifier: GPL-2.0-only
//
// The arena's allocator (see heap.hpp).
#include "heap.hpp"

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace kmigrate::detail {

// A chunk: its header, then (free chunks only) its list links.  The user's
// block starts at `next`.
struct heap::chunk {
    std::uint64_t prev_size;   // the previous chunk's size, valid while it is free
    std::uint64_t head;        // size | in_use_bit | prev_in_use_bit
    chunk *next;
    chunk *prev;
};

namespace {

constexpr std::uint64_t in_use_bit = 1;
constexpr std::uint64_t prev_in_use_bit = 2;
constexpr std::uint64_t flag_bits = 15;

[[noreturn]] void corrupt(const char *what)
{
    static const char prefix[] = "kmigrate: heap: ";
    [[maybe_unused]] auto r = ::write(2, prefix, sizeof(prefix) - 1);
    r = ::write(2, what, std::strlen(what));
    r = ::write(2, "\n", 1);
    std::abort();
}

}  // namespace

std::size_t heap::size_of(const chunk *c)
{
    return c->head & ~flag_bits;
}

heap::chunk *heap::at(const void *c, std::ptrdiff_t off)
{
    return reinterpret_cast<chunk *>(reinterpret_cast<std::uintptr_t>(c) +
                                     static_cast<std::uintptr_t>(off));
}

heap::heap(void *begin, void *limit)
    : begin_(reinterpret_cast<std::uintptr_t>(begin)),
      top_(begin_),
      limit_(reinterpret_cast<std::uintptr_t>(limit))
{
    if ((begin_ | limit_) % align || limit_ < begin_)
        corrupt("misaligned region");
}

unsigned heap::bin_of(std::size_t size)
{
    if (size < nsmall * align)
        return static_cast<unsigned>(size / align);
    const unsigned b = 63U - static_cast<unsigned>(__builtin_clzll(size));  // >= 10
    const unsigned i = nsmall + (b - 10) * 4 + static_cast<unsigned>((size >> (b - 2)) & 3);
    return i < nbins ? i : nbins - 1;
}

std::size_t heap::chunk_size(std::size_t n)
{
    if (n > (std::size_t(1) << 62))
        return 0;
    const std::size_t s = (n + header + align - 1) & ~(align - 1);
    return s < min_chunk ? min_chunk : s;
}

void heap::lock()
{
    unsigned spins = 0;
    while (lock_.exchange(1, std::memory_order_acquire)) {
        while (lock_.load(std::memory_order_relaxed)) {
            if (++spins % 64 == 0)
                ::sched_yield();
            else
                __builtin_ia32_pause();
        }
    }
}

void heap::unlock()
{
    lock_.store(0, std::memory_order_release);
}

void heap::link(chunk *c)
{
    const unsigned i = bin_of(size_of(c));
    c->prev = nullptr;
    c->next = bins_[i];
    if (c->next)
        c->next->prev = c;
    bins_[i] = c;
    nonempty_[i / 64] |= std::uint64_t(1) << (i % 64);
}

void heap::unlink(chunk *c)
{
    const unsigned i = bin_of(size_of(c));
    if (c->prev)
        c->prev->next = c->next;
    else
        bins_[i] = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (!bins_[i])
        nonempty_[i / 64] &= ~(std::uint64_t(1) << (i % 64));
}

// c is free and in no list; its prev_in_use bit is right.  Afterwards no
// two free chunks are neighbours and the last chunk is in use.
void heap::release(chunk *c)
{
    std::size_t size = size_of(c);
    if (!(c->head & prev_in_use_bit)) {
        chunk *p = at(c, -static_cast<std::ptrdiff_t>(c->prev_size));
        unlink(p);
        size += size_of(p);
        c = p;  // whose own predecessor is in use
    }
    std::uintptr_t end = reinterpret_cast<std::uintptr_t>(c) + size;
    if (end == top_) {
        top_ = reinterpret_cast<std::uintptr_t>(c);
        return;
    }
    chunk *n = reinterpret_cast<chunk *>(end);
    if (!(n->head & in_use_bit)) {
        unlink(n);
        size += size_of(n);
        n = at(n, size_of(n));  // in use: a free chunk is never the last
    }
    c->head = size | prev_in_use_bit;
    n->prev_size = size;
    n->head &= ~prev_in_use_bit;
    link(c);
}

// c in use: give back its tail beyond size, if that makes a chunk.
void heap::shrink(chunk *c, std::size_t size)
{
    const std::size_t rest = size_of(c) - size;
    if (rest < min_chunk)
        return;
    c->head = size | (c->head & flag_bits);
    chunk *r = at(c, size);
    r->head = rest | prev_in_use_bit;
    release(r);
}

heap::chunk *heap::take(std::size_t size)
{
    unsigned i = bin_of(size);
    chunk *c = nullptr;
    if (i < nsmall) {
        c = bins_[i];  // one size per small class
    } else {
        // best fit within the class's quarter of a power of two
        for (chunk *p = bins_[i]; p; p = p->next)
            if (size_of(p) >= size && (!c || size_of(p) < size_of(c))) {
                c = p;
                if (size_of(p) == size)
                    break;
            }
    }
    // Any chunk of a higher list fits.
    for (unsigned j = i + 1; !c && j < nbins;) {
        const std::uint64_t bits = nonempty_[j / 64] & (~std::uint64_t(0) << (j % 64));
        if (bits)
            c = bins_[j / 64 * 64 + static_cast<unsigned>(__builtin_ctzll(bits))];
        else
            j = (j / 64 + 1) * 64;
    }
    if (c) {
        unlink(c);
        c->head |= in_use_bit;
        at(c, size_of(c))->head |= prev_in_use_bit;  // never top: c was free
        shrink(c, size);
        return c;
    }
    if (limit_ - top_ < size)
        return nullptr;
    c = reinterpret_cast<chunk *>(top_);
    c->head = size | in_use_bit | prev_in_use_bit;  // the last chunk was in use
    top_ += size;
    return c;
}

void *heap::alloc(std::size_t n)
{
    const std::size_t size = chunk_size(n);
    chunk *c = nullptr;
    if (size) {
        lock();
        c = take(size);
        if (c)
            in_use_ += size_of(c);
        unlock();
    }
    if (!c) {
        errno = ENOMEM;
        return nullptr;
    }
    return &c->next;
}

void heap::free_locked(void *p)
{
    chunk *c = at(p, -static_cast<std::ptrdiff_t>(header));
    const auto a = reinterpret_cast<std::uintptr_t>(c);
    if (a % align || a < begin_ || a >= top_ || !(c->head & in_use_bit) ||
        a + size_of(c) > top_)
        corrupt("free(): not a block in use");
    in_use_ -= size_of(c);
    c->head &= ~in_use_bit;
    release(c);
}

void heap::free(void *p)
{
    if (!p)
        return;
    lock();
    free_locked(p);
    unlock();
}

void *heap::realloc(void *p, std::size_t n)
{
    if (!p)
        return alloc(n);
    if (!n) {
        free(p);
        return nullptr;
    }
    const std::size_t size = chunk_size(n);
    if (!size) {
        errno = ENOMEM;
        return nullptr;
    }
    lock();
    chunk *c = at(p, -static_cast<std::ptrdiff_t>(header));
    const auto a = reinterpret_cast<std::uintptr_t>(c);
    if (a % align || a < begin_ || a >= top_ || !(c->head & in_use_bit))
        corrupt("realloc(): not a block in use");
    const std::size_t old = size_of(c);
    const std::uintptr_t end = a + old;
    bool in_place = false;
    if (size <= old) {
        in_place = true;
    } else if (end == top_) {
        // the last chunk grows into top: large buffers never need twice their size
        if (limit_ - a >= size) {
            c->head = size | (c->head & flag_bits);
            top_ = a + size;
            in_use_ += size - old;
            unlock();
            return p;
        }
    } else if (chunk *nx = reinterpret_cast<chunk *>(end);
               !(nx->head & in_use_bit) && old + size_of(nx) >= size) {
        unlink(nx);
        c->head = (old + size_of(nx)) | (c->head & flag_bits);
        at(c, size_of(c))->head |= prev_in_use_bit;
        in_place = true;
    }
    if (in_place) {
        in_use_ -= old;
        shrink(c, size);
        in_use_ += size_of(c);
        unlock();
        return p;
    }
    chunk *d = take(size);
    if (!d) {
        unlock();
        errno = ENOMEM;
        return nullptr;
    }
    in_use_ += size_of(d);
    std::memcpy(&d->next, p, old - header);
    free_locked(p);
    unlock();
    return &d->next;
}

void *heap::memalign(std::size_t alignment, std::size_t n)
{
    if (alignment <= align)
        return alloc(n);
    const std::size_t size = chunk_size(n);
    if (!size || alignment > (std::size_t(1) << 40) || (alignment & (alignment - 1))) {
        errno = ENOMEM;
        return nullptr;
    }
    lock();
    // Room for a leading free chunk of at least min_chunk before the
    // aligned block, whatever the alignment of c.
    chunk *c = take(size + alignment + min_chunk);
    if (!c) {
        unlock();
        errno = ENOMEM;
        return nullptr;
    }
    in_use_ += size_of(c);
    const auto a = reinterpret_cast<std::uintptr_t>(c);
    std::uintptr_t u = (a + header + alignment - 1) & ~(alignment - 1);
    if (u != a + header) {
        if (u - header - a < min_chunk)
            u += alignment;
        const std::size_t lead = u - header - a;
        chunk *d = reinterpret_cast<chunk *>(u - header);
        d->head = (size_of(c) - lead) | in_use_bit;
        c->head = lead | (c->head & prev_in_use_bit);
        in_use_ -= lead;
        release(c);  // sets d's prev_size, clears its prev_in_use bit
        c = d;
    }
    in_use_ -= size_of(c);
    shrink(c, size);
    in_use_ += size_of(c);
    unlock();
    return &c->next;
}

std::size_t heap::usable(const void *p) const
{
    const auto *c = reinterpret_cast<const chunk *>(static_cast<const char *>(p) - header);
    return size_of(c) - header;
}

bool heap::check(const char **why) const
{
    auto fail = [why](const char *w) {
        if (why)
            *why = w;
        return false;
    };
    if (magic_ != magic_value)
        return fail("bad magic");
    if (top_ < begin_ || top_ > limit_ || top_ % align)
        return fail("top out of bounds");
    std::size_t used = 0, nfree = 0;
    bool prev_used = true;
    const chunk *last = nullptr;
    for (std::uintptr_t a = begin_; a < top_;) {
        const auto *c = reinterpret_cast<const chunk *>(a);
        const std::size_t s = size_of(c);
        if (s < min_chunk || s % align || a + s > top_)
            return fail("chunk size out of bounds");
        if (!!(c->head & prev_in_use_bit) != prev_used)
            return fail("prev_in_use bit wrong");
        const bool u = c->head & in_use_bit;
        if (!u) {
            if (!prev_used)
                return fail("two free neighbours");
            if (a + s < top_ && reinterpret_cast<const chunk *>(a + s)->prev_size != s)
                return fail("free chunk's footer wrong");
            nfree++;
        } else {
            used += s;
        }
        prev_used = u;
        last = c;
        a += s;
    }
    if (last && !(last->head & in_use_bit))
        return fail("last chunk free");
    if (used != in_use_)
        return fail("in_use count wrong");
    std::size_t listed = 0;
    for (unsigned i = 0; i < nbins; i++) {
        if (!!bins_[i] != !!(nonempty_[i / 64] & (std::uint64_t(1) << (i % 64))))
            return fail("bitmap wrong");
        const chunk *prev = nullptr;
        for (const chunk *c = bins_[i]; c; c = c->next) {
            if (!owns(c) || reinterpret_cast<std::uintptr_t>(c) >= top_)
                return fail("listed chunk outside the heap");
            if ((c->head & in_use_bit) || bin_of(size_of(c)) != i || c->prev != prev)
                return fail("list corrupt");
            prev = c;
            if (++listed > nfree)
                return fail("more listed than free");
        }
    }
    if (listed != nfree)
        return fail("free chunk not listed");
    return true;
}

}  // namespace kmigrate::detail
