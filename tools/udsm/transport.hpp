// SPDX-License-Identifier: GPL-2.0-only
//
// A transport carries the protocol's 32-byte messages and its page data
// between the nodes of a full mesh, one connection per pair:
//
//   verbs  RC queue pairs (rdma_cm), the page RDMA-written into the
//          peer's engine view, then the message on the same QP
//   unix   a stream socket per pair, nodes as processes of one host; the
//          page travels on the socket ahead of the message
//
// Per peer, what one node sends arrives in order, a page before the
// message sent after it: that is all the protocol asks (engine.cpp).
// Both count messages (stats::msg) and page bytes written.
#pragma once

#include "config.hpp"
#include "stats.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace udsm {

constexpr std::size_t msg_len = 32;

// Wire types the transports handle themselves (proto.h's numbering;
// engine.cpp checks): HELLO is kdsm's; BYE is libudsm's own, after kdsm's
// control types (KDSM_CTL_END, the one per-type counter slot left): the
// sender leaves after its last barrier, and its connection closing next
// is no failure.
enum : std::uint8_t { UDSM_HELLO = KDSM_WIRE_CTL_FIRST, UDSM_BYE = 31 };

// Where the progress thread hands what arrives.
class sink {
public:
    // a message from @from (not a page: that landed already); the
    // transport's own (HELLO, BYE) it keeps
    virtual void deliver(unsigned from, const std::uint8_t *msg) = 0;
    // the cluster failed: node @node is lost; ends the process
    [[noreturn]] virtual void lost(unsigned node, const std::string &why) = 0;
    // our compare-and-swap on lock @id's word completed: @raw was there
    // (slot @px: as the manager's helper)
    virtual void cas_done(std::uint32_t id, bool px, std::uint64_t raw) = 0;

protected:
    ~sink() = default;
};

class transport {
public:
    virtual ~transport() = default;
    // Where a failed send reports the peer lost (from form() on).
    void bind(sink &s) { sink_ = &s; }
    // Connect the mesh by the config's deadline; throws std::runtime_error.
    virtual void form() = 0;
    // Thread-safe per peer; callers keep their own order (the engine's lock).
    virtual void send(unsigned to, const void *msg) = 0;
    // This node's engine-view copy of @page into @to's, ahead of the next
    // send() to @to.
    virtual void write_page(unsigned to, std::uint32_t page) = 0;
    // The progress thread's body until stop(): deliver to @s; when
    // @extra_fd (-1: none) is readable, @on_extra().
    virtual void run(sink &s, int extra_fd, const std::function<void()> &on_extra) = 0;
    virtual void stop() = 0;
    // After the last barrier: BYE to every peer, flushed.
    virtual void leave() = 0;
    // The cluster failed: @msg (an ABORT) to every peer still there,
    // best effort and briefly, before this process ends.
    virtual void abort_all(const void *msg) = 0;
    // Compare-and-swap lock @id's word (word id / nnodes of the lock
    // words) at node @to, @cmp -> @swap, into our result slot @px (one in
    // flight per slot); the result comes to sink::cas_done() in the
    // progress thread.  false: no atomics on the way to @to.
    virtual bool cas(unsigned to, std::uint32_t id, bool px, std::uint8_t cmp,
                     std::uint8_t swap) = 0;

protected:
    sink *sink_ = nullptr;
};

// @view: the engine view, @page_size bytes per page.
std::unique_ptr<transport> make_unix_transport(const config &c, std::uint8_t *view,
                                               std::size_t page_size, stats &st);
std::unique_ptr<transport> make_verbs_transport(const config &c, std::uint8_t *view,
                                                std::size_t page_size, stats &st);

}  // namespace udsm
