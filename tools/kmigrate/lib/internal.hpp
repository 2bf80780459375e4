// SPDX-License-Identifier: GPL-2.0-only
//
// libkmigrate's pieces that need no kernel, for the library, the CLI and
// the unit tests.
#pragma once

#include "heap.hpp"
#include "world.hpp"

#include <kverbs/kmigrate.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kmigrate::detail {

inline constexpr std::size_t page_size = 4096;

// Page 0 of the arena.  It migrates with the rest: the allocator's state
// is here, and every pointer in it points into the arena.
struct arena_header {
    static constexpr std::uint64_t magic_value = 0x31616e6572616d6bULL;  // "kmarena1"
    static constexpr std::uint32_t version_value = 1;

    arena_header(std::uintptr_t base, std::size_t pages, std::size_t stack_bytes)
        : va(base), npages(pages), stack_lo(base + pages * page_size - stack_bytes),
          stack_hi(base + pages * page_size),
          h(reinterpret_cast<void *>(base + page_size), reinterpret_cast<void *>(stack_lo))
    {
    }

    std::uint64_t magic = magic_value;
    std::uint32_t version = version_value;
    std::uint32_t header_size = sizeof(arena_header);
    std::uint64_t va;
    std::uint64_t npages;
    std::uint64_t stack_lo;        // [stack_lo, stack_hi): fn's stack
    std::uint64_t stack_hi;        // the arena's end
    std::uint64_t migrations = 0;
    heap h;                        // over [va + page_size, stack_lo)
};
static_assert(sizeof(arena_header) <= page_size);

// Written at the stack's lowest word; gone once the stack overflowed.
inline constexpr std::uint64_t stack_sentinel = 0x6b6d2d737461636bULL;

// The register context as the kernel carries it, opaque to it.
struct ctx_blob {
    static constexpr std::uint32_t magic_value = 0x6b6d6378;  // "kmcx"
    static constexpr std::uint16_t version_value = 1;

    std::uint32_t magic;
    std::uint16_t version;
    std::uint16_t size;            // sizeof(ctx_blob)
    std::uint64_t va;              // the arena it belongs to
    std::uint64_t npages;
    regs r;
};
static_assert(sizeof(ctx_blob) <= KMIGRATE_CTX_MAX);

struct range_list {
    kmigrate_range r[KMIGRATE_MAX_RANGES];
    unsigned n = 0;
};

// The pages a migration moves, sorted and merged: the header page, the
// heap's [heap_begin, heap_top), and the stack from sp less the 128-byte
// red zone to stack_hi.  Addresses are absolute, the result in pages of
// the arena at va.
range_list used_ranges(std::uintptr_t va, std::uintptr_t heap_begin, std::uintptr_t heap_top,
                       std::uintptr_t sp, std::uintptr_t stack_lo, std::uintptr_t stack_hi);

// "ADDR[:PORT]", "[IPv6]:PORT", "[IPv6]" or a bare IPv6 address; the port
// defaults to KMIGRATE_DEFAULT_PORT.  false with *why on error.
bool parse_dest(const std::string &s, sockaddr_storage *out, socklen_t *len, std::string *why);
// "ADDR:PORT" or "[ADDR]:PORT"; "?" if not AF_INET or AF_INET6.
std::string format_sockaddr(const void *sa, std::size_t len);

// What the destination's process must present: the main executable's GNU
// build-id, and where the library, libc, libstdc++ and the vDSO sit.
std::size_t fingerprint(std::uint8_t (&out)[KMIGRATE_FP_MAX]);

// Open file descriptors other than 0, 1, 2 and keep, with their targets.
std::vector<std::pair<int, std::string>> foreign_fds(int keep);

// The allocator behind malloc and operator new from now on; before, and
// for pointers it does not own, glibc's.
void activate(heap *h);
heap *active_heap();

}  // namespace kmigrate::detail
