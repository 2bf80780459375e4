// SPDX-License-Identifier: GPL-2.0-only
//
// libudsm's configuration, from the environment (the applications are
// libkdsm's, unchanged, so they cannot pass options):
//
//   UDSM_NODE       this node's id, 1..N
//   UDSM_PEERS      every node's address in node order, this one too
//                   (N = their number, 2..KDSM_MAX_NODES)
//   UDSM_PAGES      region pages (640); segv: at most half of
//                   vm.max_map_count less the maps in use (config.cpp)
//   UDSM_PLACEMENT  block | cyclic (block)
//   UDSM_PORT       rdma_cm port (18700)
//   UDSM_JOIN_MS    mesh formation deadline (60000)
//   UDSM_LEAVE_MS   leaving: how long a node waits for its peers' BYEs
//                   after its own (30000); then it ends all the same
//   UDSM_ACCESS     segv | uffd (segv)
//   UDSM_PROGRESS   block | poll (block)
//   UDSM_TRANSPORT  verbs | unix (verbs)
//   UDSM_DIR        unix: the directory of the nodes' sockets
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace udsm {

enum class access_kind { segv, uffd };
enum class progress_kind { block, poll };
enum class transport_kind { verbs, unix_socket };

struct config {
    unsigned node = 0;
    std::vector<std::string> peers;  // [i]: node i + 1
    std::uint32_t npages = 640;
    bool block = true;
    std::uint16_t port = 18700;
    std::uint32_t join_ms = 60000;
    std::uint32_t leave_ms = 30000;
    access_kind access = access_kind::segv;
    progress_kind progress = progress_kind::block;
    transport_kind transport = transport_kind::verbs;
    std::string dir;

    unsigned nnodes() const { return static_cast<unsigned>(peers.size()); }
};

// A variable with a bad value: what() names it.
class config_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The configuration from @get (a variable's value, nullptr when unset);
// throws config_error.
config parse_config(const std::function<const char *(const char *)> &get);

// From the process environment, and checked against this host (segv: the
// map count); a bad value ends the process with a message naming the
// variable, status 2.
config config_from_env();

}  // namespace udsm
