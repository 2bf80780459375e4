// SPDX-License-Identifier: GPL-2.0-only
//
// The kdsm:: API (include/kdsm/kdsm.hpp) on a udsm node.
#include <kdsm/kdsm.hpp>

#include "node.hpp"

#include <cstdio>
#include <cstdlib>

namespace kdsm {

attachment::attachment(int timeout_ms)
{
    udsm::config c = udsm::config_from_env();
    // libkdsm's timeout bounds the wait for a formed cluster: the tighter
    if (timeout_ms > 0 && std::uint32_t(timeout_ms) < c.join_ms && !std::getenv("UDSM_JOIN_MS"))
        c.join_ms = std::uint32_t(timeout_ms);
    try {
        n_ = std::make_unique<udsm::node>(c);
    } catch (const std::runtime_error &e) {
        throw error(EHOSTDOWN, std::string("udsm: ") + e.what());
    }
    mapped(c.node, c.nnodes(), c.npages, n_->page_size(), c.block, n_->base());
}

attachment::~attachment() = default;

bool attachment::lock(std::uint32_t id, lock_kind kind)
{
    udsm::engine &e = n_->eng();
    if (const int err = kind == lock_kind::atomic ? e.qlock(id) : e.lock(id))
        throw error(err, "lock " + std::to_string(id) + " (" + lock_kind_name(kind) + ")");
    return false;
}

void attachment::unlock(std::uint32_t id, lock_kind kind)
{
    udsm::engine &e = n_->eng();
    if (const int err = kind == lock_kind::atomic ? e.qunlock(id) : e.unlock(id))
        throw error(err, "unlock " + std::to_string(id) + " (" + lock_kind_name(kind) + ")");
}

void attachment::barrier_all()
{
    if (const int err = n_->eng().barrier())
        throw error(err, "barrier");
}

status attachment::counters()
{
    status s;
    s.state = KDSM_STATE_READY;
    s.node = node();
    s.nnodes = nnodes();
    s.npages = npages();
    s.placement = block_placement() ? KDSM_PLACE_BLOCK : KDSM_PLACE_CYCLIC;
    s.options = 0;
    s.stats = n_->counters().snapshot();
    return s;
}

}  // namespace kdsm
