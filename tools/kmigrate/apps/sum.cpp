// SPDX-License-Identifier: GPL-2.0-only
//
// kmigrate-sum: data that must survive migration, and a checksum of it.
//
//   kmigrate-sum --mb N [--to A1,A2,...] [--wait-move] [--touch-delay-us U]
//                [--precopy] [--no-prefetch]
//
// Builds N MiB through operator new, small malloc'd blocks, a std::map of
// std::strings, a std::string, and recursion with locals on the arena's
// stack; prints
//   kmigrate-sum: before sum=<hex> arena_sum=<hex> host=<hostname>
// migrates to each --to address in turn (at the bottom of the recursion),
//   kmigrate-sum: hop <i> ret=<r> host=<hostname>
// or with --wait-move waits for `kmigrate move` (printing "waiting pid=P"
// first), then re-reads everything, page by page in address order,
// sleeping U microseconds between pages if asked:
//   kmigrate-sum: after sum=<hex> ok=<0|1> host=<hostname>
// sum depends on N only, so lines from different nodes compare; arena_sum
// (the heap's bytes, allocator state included) is for information.
#include <kmigrate/kmigrate.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

struct config {
    std::size_t mb = 16;
    std::vector<std::string> to;
    bool wait_move = false;
    unsigned long delay_us = 0;
    kmigrate::mode mode = kmigrate::mode::postcopy;
    unsigned flags = 0;
};

[[noreturn]] void usage()
{
    std::fprintf(stderr, "usage: kmigrate-sum --mb N [--to A1,A2,...] [--wait-move] "
                         "[--touch-delay-us U] [--precopy] [--no-prefetch]\n");
    std::exit(2);
}

unsigned long number(const char *s)
{
    char *end;
    errno = 0;
    const unsigned long v = std::strtoul(s, &end, 10);
    if (errno || !*s || *end)
        usage();
    return v;
}

config parse(int argc, char **argv)
{
    config c;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto next = [&]() -> const char * {
            if (i + 1 >= argc)
                usage();
            return argv[++i];
        };
        if (a == "--mb") {
            c.mb = number(next());
        } else if (a == "--to") {
            const std::string list = next();
            for (std::size_t at = 0; at <= list.size();) {
                const std::size_t comma = std::min(list.find(',', at), list.size());
                if (comma > at)
                    c.to.push_back(list.substr(at, comma - at));
                at = comma + 1;
            }
        } else if (a == "--wait-move") {
            c.wait_move = true;
        } else if (a == "--touch-delay-us") {
            c.delay_us = number(next());
        } else if (a == "--precopy") {
            c.mode = kmigrate::mode::precopy;
        } else if (a == "--no-prefetch") {
            c.flags |= kmigrate::no_prefetch;
        } else {
            usage();
        }
    }
    if (!c.mb || c.mb > 900)
        usage();
    return c;
}

std::uint64_t mix(std::uint64_t x)  // splitmix64's finaliser
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Order-dependent: the same values in the same order give the same sum.
struct hasher {
    std::uint64_t h = 0x6b6d2d73756d0001ULL;
    void add(std::uint64_t v) { h = (h ^ v) * 0x100000001b3ULL + (h >> 29); }
    void add(const void *p, std::size_t n)
    {
        const auto *b = static_cast<const unsigned char *>(p);
        for (std::size_t i = 0; i < n; i++)
            add(b[i]);
    }
};

constexpr unsigned nsmall = 2000;
constexpr unsigned nmap = 600;
constexpr unsigned depth = 48;

struct data {
    std::uint64_t *big = nullptr;
    std::size_t words = 0;
    std::vector<unsigned char *> small;   // nullptr where freed
    std::vector<std::size_t> small_len;
    std::map<int, std::string> map;
    std::string text;
};

std::size_t small_len(unsigned i)
{
    return 1 + (i * 37U) % 700;
}

unsigned char small_byte(unsigned i, std::size_t j)
{
    return static_cast<unsigned char>(i * 131U + j * 7U + 3U);
}

std::string map_value(int k)
{
    std::string s(static_cast<std::size_t>(20 + k % 50), 'a');
    for (std::size_t j = 0; j < s.size(); j++)
        s[j] = static_cast<char>('a' + (static_cast<std::size_t>(k) + j) % 26);
    return s;
}

void build(data &d, std::size_t mb)
{
    d.words = mb * (1UL << 20) / sizeof(std::uint64_t);
    d.big = new std::uint64_t[d.words];
    for (std::size_t i = 0; i < d.words; i++)
        d.big[i] = mix(i);
    // freeing and resizing some, so that free lists and coalescing travel too
    for (unsigned i = 0; i < nsmall; i++) {
        auto *p = static_cast<unsigned char *>(std::malloc(small_len(i)));
        if (!p) {
            std::perror("kmigrate-sum: malloc");
            std::exit(1);
        }
        d.small.push_back(p);
        d.small_len.push_back(small_len(i));
    }
    for (unsigned i = 0; i < nsmall; i += 3) {
        std::free(d.small[i]);
        d.small[i] = nullptr;
    }
    for (unsigned i = 1; i < nsmall; i += 5) {
        d.small_len[i] *= 2;
        d.small[i] = static_cast<unsigned char *>(std::realloc(d.small[i], d.small_len[i]));
        if (!d.small[i]) {
            std::perror("kmigrate-sum: realloc");
            std::exit(1);
        }
    }
    for (unsigned i = 0; i < nsmall; i++)
        for (std::size_t j = 0; d.small[i] && j < d.small_len[i]; j++)
            d.small[i][j] = small_byte(i, j);
    for (unsigned k = 0; k < nmap; k++)
        d.map.emplace(static_cast<int>(k * 7), map_value(static_cast<int>(k * 7)));
    for (unsigned j = 0; j < 10000; j++)
        d.text += static_cast<char>(' ' + (j * 13) % 95);
}

// The sum of the data, and whether every value is what build() wrote;
// the big buffer page by page, pausing delay_us between pages.
std::uint64_t sum(const data &d, unsigned long delay_us, bool *ok)
{
    hasher h;
    constexpr std::size_t per_page = 4096 / sizeof(std::uint64_t);
    for (std::size_t i = 0; i < d.words; i++) {
        if (delay_us && i % per_page == 0 && i)
            ::usleep(static_cast<useconds_t>(delay_us));
        h.add(d.big[i]);
        if (d.big[i] != mix(i))
            *ok = false;
    }
    for (unsigned i = 0; i < nsmall; i++) {
        if (!d.small[i]) {
            h.add(0);
            continue;
        }
        h.add(d.small[i], d.small_len[i]);
        for (std::size_t j = 0; j < d.small_len[i]; j++)
            if (d.small[i][j] != small_byte(i, j))
                *ok = false;
    }
    for (const auto &[k, v] : d.map) {
        h.add(static_cast<std::uint64_t>(k));
        h.add(v.data(), v.size());
        if (v != map_value(k))
            *ok = false;
    }
    if (d.map.size() != nmap)
        *ok = false;
    h.add(d.text.data(), d.text.size());
    return h.h;
}

std::uint64_t local_value(unsigned level, unsigned j)
{
    return mix((static_cast<std::uint64_t>(level) << 32) | j);
}

// What the recursion's locals sum to, without recursing.
std::uint64_t stack_expected()
{
    hasher h;
    for (unsigned level = depth; level-- > 0;)
        for (unsigned j = 0; j < 32; j++)
            h.add(local_value(level, j));
    return h.h;
}

char host[256];

const char *hostname()
{
    if (::gethostname(host, sizeof(host) - 1) < 0)
        std::strcpy(host, "?");
    return host;
}

void hops(const config &c)
{
    if (c.wait_move) {
        std::printf("kmigrate-sum: waiting pid=%d host=%s\n", static_cast<int>(::getpid()),
                    hostname());
        std::fflush(stdout);
        while (!kmigrate::poll())
            ::usleep(10000);
        std::printf("kmigrate-sum: hop 1 ret=0 host=%s\n", hostname());
        std::fflush(stdout);
        return;
    }
    for (std::size_t i = 0; i < c.to.size(); i++) {
        const int r = kmigrate::migrate(c.to[i], c.mode, c.flags);
        std::printf("kmigrate-sum: hop %zu ret=%d host=%s\n", i + 1, r, hostname());
        if (r < 0)
            std::fprintf(stderr, "kmigrate-sum: hop %zu to %s: %s\n", i + 1, c.to[i].c_str(),
                         kmigrate::last_error().c_str());
        std::fflush(stdout);
    }
}

// Locals on the arena's stack at every level; the hops happen at the
// bottom, and each level checks its locals on the way back.
void descend(unsigned level, const config &c, hasher &h, bool *ok)
{
    std::uint64_t local[32];
    for (unsigned j = 0; j < 32; j++)
        local[j] = local_value(level, j);
    asm volatile("" : : "r"(local) : "memory");  // in memory, across the hops
    if (level + 1 < depth)
        descend(level + 1, c, h, ok);
    else
        hops(c);
    asm volatile("" : : "r"(local) : "memory");
    for (unsigned j = 0; j < 32; j++) {
        h.add(local[j]);
        if (local[j] != local_value(level, j))
            *ok = false;
    }
}

int work(int argc, char **argv)
{
    const config c = parse(argc, argv);
    data d;
    build(d, c.mb);
    bool ok = true;
    hasher before;
    before.add(sum(d, 0, &ok));
    before.add(stack_expected());
    hasher arena;
    const auto [hb, ht] = kmigrate::heap_range();
    for (std::uintptr_t a = hb; a + 8 <= ht; a += 8)
        arena.add(*reinterpret_cast<const std::uint64_t *>(a));
    std::printf("kmigrate-sum: before sum=%016" PRIx64 " arena_sum=%016" PRIx64 " host=%s\n",
                before.h, arena.h, hostname());
    std::fflush(stdout);

    hasher stack;
    descend(0, c, stack, &ok);
    hasher after;
    after.add(sum(d, c.delay_us, &ok));
    after.add(stack.h);
    ok = ok && after.h == before.h;
    std::printf("kmigrate-sum: after sum=%016" PRIx64 " ok=%d host=%s\n", after.h, ok ? 1 : 0,
                hostname());
    std::fflush(stdout);
    return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv)
{
    const config c = parse(argc, argv);
    kmigrate::options o;
    o.arena_bytes = std::min<std::size_t>((c.mb + 64) << 20, 1UL << 30);
    return kmigrate::run(argc, argv, work, o);
}
