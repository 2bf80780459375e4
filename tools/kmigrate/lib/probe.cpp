// SPDX-License-Identifier: GPL-2.0-only
//
// What libkmigrate looks at in its own process: the fingerprint that the
// destination's process must match, and the open file descriptors.
#include "internal.hpp"

#include <kmigrate/kmigrate.hpp>

#include <dirent.h>
#include <elf.h>
#include <link.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>

namespace kmigrate::detail {

namespace {

struct fp_walk {
    std::uint8_t build_id[40];
    std::size_t build_id_len = 0;
    std::uint64_t map_hash = 0xcbf29ce484222325ULL;  // FNV-1a of the loaded objects
    bool first = true;
};

void fnv(std::uint64_t &h, const void *p, std::size_t n)
{
    const auto *b = static_cast<const std::uint8_t *>(p);
    for (std::size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
}

int on_object(dl_phdr_info *info, std::size_t, void *data)
{
    auto *w = static_cast<fp_walk *>(data);
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    fnv(w->map_hash, name, std::strlen(name) + 1);
    fnv(w->map_hash, &info->dlpi_addr, sizeof(info->dlpi_addr));
    if (!w->first)
        return 0;
    w->first = false;  // the main program comes first
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_NOTE)
            continue;
        auto p = info->dlpi_addr + ph.p_vaddr;
        const auto end = p + ph.p_memsz;
        const std::uintptr_t al = ph.p_align > 4 ? ph.p_align : 4;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto *n = reinterpret_cast<const ElfW(Nhdr) *>(p);
            const std::uintptr_t name_at = p + sizeof(*n);
            const std::uintptr_t desc_at = (name_at + n->n_namesz + al - 1) & ~(al - 1);
            const std::uintptr_t next = (desc_at + n->n_descsz + al - 1) & ~(al - 1);
            if (desc_at + n->n_descsz > end)
                break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
                !std::memcmp(reinterpret_cast<const void *>(name_at), "GNU", 4)) {
                w->build_id_len = n->n_descsz < sizeof(w->build_id) ? n->n_descsz
                                                                     : sizeof(w->build_id);
                std::memcpy(w->build_id, reinterpret_cast<const void *>(desc_at), w->build_id_len);
                return 0;
            }
            p = next;
        }
    }
    return 0;
}

}  // namespace

std::size_t fingerprint(std::uint8_t (&out)[KMIGRATE_FP_MAX])
{
    fp_walk w;
    dl_iterate_phdr(on_object, &w);
    // Addresses through volatile: what the dynamic linker resolved, not a
    // constant the compiler folded.
    int (*volatile lib)(int, char **, int (*)(int, char **), const options &) = &kmigrate::run;
    ssize_t (*volatile libc)(int, const void *, std::size_t) = &::write;
    void (*volatile libstdcxx)() noexcept = &std::terminate;
    const std::uint64_t words[] = {
        reinterpret_cast<std::uint64_t>(lib),
        reinterpret_cast<std::uint64_t>(libc),
        reinterpret_cast<std::uint64_t>(libstdcxx),
        getauxval(AT_SYSINFO_EHDR),
        w.map_hash,
    };
    static_assert(2 + sizeof(w.build_id) + sizeof(words) <= KMIGRATE_FP_MAX);
    std::size_t n = 0;
    out[n++] = 1;  // this layout's version
    out[n++] = static_cast<std::uint8_t>(w.build_id_len);
    std::memcpy(out + n, w.build_id, w.build_id_len);
    n += w.build_id_len;
    std::memcpy(out + n, words, sizeof(words));
    return n + sizeof(words);
}

std::vector<std::pair<int, std::string>> foreign_fds(int keep)
{
    std::vector<std::pair<int, std::string>> out;
    DIR *d = ::opendir("/proc/self/fd");
    if (!d)
        return out;
    const int self = ::dirfd(d);
    while (const dirent *e = ::readdir(d)) {
        char *end;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (*end || end == e->d_name || fd == self || fd == keep || (fd >= 0 && fd <= 2))
            continue;
        char target[4096];
        const std::string link = std::string("/proc/self/fd/") + e->d_name;
        const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
        out.emplace_back(static_cast<int>(fd), n > 0 ? std::string(target, static_cast<std::size_t>(n)) : "?");
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace kmigrate::detail
