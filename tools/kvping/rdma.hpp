// SPDX-License-Identifier: GPL-2.0-only
//
// Owning handles for the librdmacm/libibverbs objects kvping uses, and the
// timed waits on their event channels.  Declare handles in dependency order
// (channel, id, pd, comp channel, cq, mrs, qp): members are destroyed in
// reverse, which is the only order the verbs accept.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace kvping {

// A runtime failure; main() prints it and exits 1.
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Throws Error("<what>: <strerror(errno)>").
[[noreturn]] void throw_errno(const std::string &what);
// Same for calls that return the error number (ibv_post_*, ibv_req_notify_cq).
[[noreturn]] void throw_err(const std::string &what, int err);

template <auto Destroy>
struct Deleter {
    template <class T>
    void operator()(T *p) const noexcept
    {
        static_cast<void>(Destroy(p));
    }
};

using EventChannel = std::unique_ptr<rdma_event_channel, Deleter<rdma_destroy_event_channel>>;
using CmId = std::unique_ptr<rdma_cm_id, Deleter<rdma_destroy_id>>;
using CmEvent = std::unique_ptr<rdma_cm_event, Deleter<rdma_ack_cm_event>>;
using Pd = std::unique_ptr<ibv_pd, Deleter<ibv_dealloc_pd>>;
using CompChannel = std::unique_ptr<ibv_comp_channel, Deleter<ibv_destroy_comp_channel>>;
// Every CQ event is acked as soon as it is taken, so destroy never blocks.
using Cq = std::unique_ptr<ibv_cq, Deleter<ibv_destroy_cq>>;
using Mr = std::unique_ptr<ibv_mr, Deleter<ibv_dereg_mr>>;

// The QP rdma_create_qp() attached to an id; destroyed before the id.
class Qp {
public:
    Qp() = default;
    Qp(rdma_cm_id *id, ibv_pd *pd, ibv_qp_init_attr &attr);
    Qp(const Qp &) = delete;
    Qp &operator=(const Qp &) = delete;
    Qp(Qp &&other) noexcept : id_(std::exchange(other.id_, nullptr)) {}
    Qp &operator=(Qp &&other) noexcept;
    ~Qp() { reset(); }

    [[nodiscard]] ibv_qp *get() const noexcept { return id_ ? id_->qp : nullptr; }

private:
    void reset() noexcept;
    rdma_cm_id *id_ = nullptr;
};

// An established connection; disconnects (flushing the QP) on destruction.
class Connection {
public:
    Connection() = default;
    explicit Connection(rdma_cm_id *id) noexcept : id_(id) {}
    Connection(const Connection &) = delete;
    Connection &operator=(const Connection &) = delete;
    Connection(Connection &&other) noexcept : id_(std::exchange(other.id_, nullptr)) {}
    Connection &operator=(Connection &&other) noexcept;
    ~Connection() { reset(); }

private:
    void reset() noexcept;
    rdma_cm_id *id_ = nullptr;
};

// Next CM event, or Error naming `waiting_for` after `timeout`.
[[nodiscard]] CmEvent next_cm_event(rdma_event_channel &ch, std::chrono::milliseconds timeout,
                                    const std::string &waiting_for);
// The next CM event, or an empty CmEvent if none comes within timeout.
CmEvent poll_cm_event(rdma_event_channel &ch, std::chrono::milliseconds timeout);

// Blocks until `cq` signals on `cc`, acks the event and re-arms the CQ, so
// the CQ is armed before every poll that may come up empty.  Error on timeout.
void wait_cq(ibv_comp_channel &cc, ibv_cq &cq, std::chrono::milliseconds timeout);

} // namespace kvping
