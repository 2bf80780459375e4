// SPDX-License-Identifier: GPL-2.0-only
//
// UDSM_* environment variables; see config.hpp.
#include "config.hpp"

#include <kverbs/kdsm.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace udsm {

namespace {

// An unsigned decimal in [lo, hi], whole string.
std::uint64_t number(const char *var, const char *s, std::uint64_t lo, std::uint64_t hi)
{
    char *end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(s, &end, 10);
    if (!*s || *s == '-' || *s == '+' || *end || errno || v < lo || v > hi)
        throw config_error(std::string(var) + "=" + s + ": not a number in " +
                           std::to_string(lo) + ".." + std::to_string(hi));
    return v;
}

template <typename T>
T choice(const char *var, const char *s, std::initializer_list<std::pair<const char *, T>> opts)
{
    std::string names;
    for (const auto &[name, v] : opts) {
        if (std::string(s) == name)
            return v;
        names += names.empty() ? name : std::string(" or ") + name;
    }
    throw config_error(std::string(var) + "=" + s + ": must be " + names);
}

std::vector<std::string> split(const std::string &s)
{
    std::vector<std::string> out;
    std::size_t at = 0;
    for (;;) {
        const std::size_t comma = s.find(',', at);
        out.push_back(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
        if (comma == std::string::npos)
            return out;
        at = comma + 1;
    }
}

// segv: every run of pages with one protection is a VMA of its own, so
// the region can need one map per page (alternate pages READ and NONE),
// and mprotect fails with ENOMEM past vm.max_map_count.  The region gets
// at most half of that count, less the maps this process has already;
// the other half is left to the application (thread stacks, malloc
// arenas).  uffd changes no VMA: no limit.  An unreadable count: none.
void check_map_count(const config &c)
{
    if (c.access != access_kind::segv)
        return;
    std::uint64_t max = 0;
    if (!(std::ifstream("/proc/sys/vm/max_map_count") >> max))
        return;
    std::uint64_t used = 0;
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);)
        used++;
    const std::uint64_t limit = max / 2 > used ? max / 2 - used : 0;
    if (c.npages > limit)
        throw config_error("UDSM_PAGES=" + std::to_string(c.npages) +
                           ": more than UDSM_ACCESS=segv can protect page by page: at most " +
                           std::to_string(limit) + " pages (half of vm.max_map_count " +
                           std::to_string(max) + ", less the " + std::to_string(used) +
                           " maps in use); use UDSM_ACCESS=uffd, or raise vm.max_map_count");
}

}  // namespace

config parse_config(const std::function<const char *(const char *)> &get)
{
    config c;
    const char *peers = get("UDSM_PEERS");
    if (!peers || !*peers)
        throw config_error("UDSM_PEERS: not set (every node's address, comma-separated, in "
                           "node order)");
    c.peers = split(peers);
    for (const std::string &p : c.peers)
        if (p.empty())
            throw config_error(std::string("UDSM_PEERS=") + peers + ": an empty address");
    if (c.peers.size() < 2 || c.peers.size() > KDSM_MAX_NODES)
        throw config_error(std::string("UDSM_PEERS=") + peers + ": 2.." +
                           std::to_string(KDSM_MAX_NODES) + " nodes");
    const char *node = get("UDSM_NODE");
    if (!node)
        throw config_error("UDSM_NODE: not set (this node's id, 1.." +
                           std::to_string(c.nnodes()) + ")");
    c.node = static_cast<unsigned>(number("UDSM_NODE", node, 1, c.nnodes()));
    if (const char *v = get("UDSM_PAGES"))
        c.npages = static_cast<std::uint32_t>(number("UDSM_PAGES", v, c.nnodes(), 1u << 20));
    if (const char *v = get("UDSM_PLACEMENT"))
        c.block = choice<bool>("UDSM_PLACEMENT", v, {{"block", true}, {"cyclic", false}});
    if (const char *v = get("UDSM_PORT"))
        c.port = static_cast<std::uint16_t>(number("UDSM_PORT", v, 1, 65535));
    if (const char *v = get("UDSM_JOIN_MS"))
        c.join_ms = static_cast<std::uint32_t>(number("UDSM_JOIN_MS", v, 1, 3600000));
    if (const char *v = get("UDSM_LEAVE_MS"))
        c.leave_ms = static_cast<std::uint32_t>(number("UDSM_LEAVE_MS", v, 0, 3600000));
    if (const char *v = get("UDSM_ACCESS"))
        c.access = choice<access_kind>("UDSM_ACCESS", v,
                                       {{"segv", access_kind::segv}, {"uffd", access_kind::uffd}});
    if (const char *v = get("UDSM_PROGRESS"))
        c.progress = choice<progress_kind>(
            "UDSM_PROGRESS", v, {{"block", progress_kind::block}, {"poll", progress_kind::poll}});
    if (const char *v = get("UDSM_TRANSPORT"))
        c.transport = choice<transport_kind>(
            "UDSM_TRANSPORT", v,
            {{"verbs", transport_kind::verbs}, {"unix", transport_kind::unix_socket}});
    if (const char *v = get("UDSM_DIR"))
        c.dir = v;
    if (c.transport == transport_kind::unix_socket && c.dir.empty())
        throw config_error("UDSM_DIR: not set (UDSM_TRANSPORT=unix needs the directory of the "
                           "nodes' sockets)");
    return c;
}

config config_from_env()
{
    try {
        config c = parse_config([](const char *var) { return std::getenv(var); });
        check_map_count(c);
        return c;
    } catch (const config_error &e) {
        std::fprintf(stderr, "udsm: %s\n", e.what());
        std::exit(2);
    }
}

}  // namespace udsm
