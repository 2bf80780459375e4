// SPDX-License-Identifier: GPL-2.0-only
//
// The arena's allocator.  Everything it knows lives in the heap object and
// in the blocks themselves, both inside the arena, so that the allocator
// migrates with the data: absolute pointers stay valid because the arena
// has the same address on every node.
//
// Blocks ("chunks") carry boundary tags: a 16-byte header (the previous
// chunk's size when that one is free, then this chunk's size and flags),
// so neighbours coalesce on free.  Free chunks sit in segregated lists:
// one per 16-byte size class below 1 KiB (exact fit), then four per power
// of two (best fit within the list, else the first chunk of the next
// non-empty list, split), with a bitmap of the non-empty lists.  Above the last chunk is the
// untouched rest of the heap ("top"), from which fresh chunks are cut;
// a freed last chunk returns to it, so [begin, top) is all that is used.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace kmigrate::detail {

class heap {
public:
    static constexpr std::size_t header = 16;    // bytes before every block
    static constexpr std::size_t align = 16;     // of every block
    static constexpr std::size_t min_chunk = 32;
    static constexpr std::uint32_t magic_value = 0x6b6d6870;  // "kmhp"

    // A heap over [begin, limit), both 16-byte aligned, the object itself
    // outside that range.
    heap(void *begin, void *limit);
    heap(const heap &) = delete;
    heap &operator=(const heap &) = delete;

    // malloc, free, realloc, memalign semantics; nullptr and errno ENOMEM
    // when the heap is full.  free() of a pointer that is no block aborts.
    void *alloc(std::size_t n);
    void free(void *p);
    void *realloc(void *p, std::size_t n);
    void *memalign(std::size_t alignment, std::size_t n);  // power of two
    std::size_t usable(const void *p) const;

    bool owns(const void *p) const
    {
        const auto a = reinterpret_cast<std::uintptr_t>(p);
        return a >= begin_ && a < limit_;
    }
    std::uintptr_t begin() const { return begin_; }
    std::uintptr_t top() const { return top_; }
    std::uintptr_t limit() const { return limit_; }
    std::size_t in_use() const { return in_use_; }

    // Walk every chunk and list; false (and *why) if an invariant fails.
    bool check(const char **why = nullptr) const;

    // For fork: held across it so the child's copy is consistent.
    void lock();
    void unlock();

private:
    struct chunk;
    static constexpr unsigned nsmall = 64;                 // 16-byte classes
    static constexpr unsigned nbins = nsmall + 4 * 22;     // up to 2^31
    static constexpr unsigned nwords = (nbins + 63) / 64;

    static std::size_t size_of(const chunk *c);
    static chunk *at(const void *c, std::ptrdiff_t off);  // c + off bytes
    static unsigned bin_of(std::size_t size);
    static std::size_t chunk_size(std::size_t n);  // 0 on overflow

    chunk *take(std::size_t size);          // a free or fresh chunk, in use
    void shrink(chunk *c, std::size_t size);
    void release(chunk *c);                 // coalesce, then list or top
    void link(chunk *c);
    void unlink(chunk *c);
    void free_locked(void *p);

    std::uint32_t magic_ = magic_value;
    std::atomic<std::uint32_t> lock_{0};
    std::uintptr_t begin_;
    std::uintptr_t top_;       // [begin_, top_) holds chunks; the last is in use
    std::uintptr_t limit_;
    std::size_t in_use_ = 0;   // bytes of chunks in use, headers included
    std::uint64_t nonempty_[nwords] = {};
    chunk *bins_[nbins] = {};
};

}  // namespace kmigrate::detail
