// SPDX-License-Identifier: GPL-2.0-only
#include "rdma.hpp"

#include <poll.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace kvping {

void throw_errno(const std::string &what)
{
    throw_err(what, errno);
}

void throw_err(const std::string &what, int err)
{
    throw Error(what + ": " + std::strerror(err));
}

Qp::Qp(rdma_cm_id *id, ibv_pd *pd, ibv_qp_init_attr &attr)
{
    if (rdma_create_qp(id, pd, &attr) != 0)
        throw_errno("rdma_create_qp");
    id_ = id;
}

Qp &Qp::operator=(Qp &&other) noexcept
{
    if (this != &other) {
        reset();
        id_ = std::exchange(other.id_, nullptr);
    }
    return *this;
}

void Qp::reset() noexcept
{
    if (id_ != nullptr)
        rdma_destroy_qp(std::exchange(id_, nullptr));
}

Connection &Connection::operator=(Connection &&other) noexcept
{
    if (this != &other) {
        reset();
        id_ = std::exchange(other.id_, nullptr);
    }
    return *this;
}

void Connection::reset() noexcept
{
    if (id_ != nullptr)
        static_cast<void>(rdma_disconnect(std::exchange(id_, nullptr)));
}

namespace {

// Waits until fd is readable; false on timeout.  The deadline survives EINTR.
bool wait_readable(int fd, std::chrono::milliseconds timeout)
{
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + timeout;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - clock::now());
        pollfd pfd{fd, POLLIN, 0};
        const int n = ::poll(&pfd, 1, left.count() > 0 ? static_cast<int>(left.count()) : 0);
        if (n > 0)
            return true;
        if (n == 0)
            return false;
        if (errno != EINTR)
            throw_errno("poll");
    }
}

} // namespace

CmEvent next_cm_event(rdma_event_channel &ch, std::chrono::milliseconds timeout,
                      const std::string &waiting_for)
{
    if (!wait_readable(ch.fd, timeout))
        throw Error("timed out after " + std::to_string(timeout.count()) +
                    " ms waiting for " + waiting_for);
    rdma_cm_event *ev = nullptr;
    if (rdma_get_cm_event(&ch, &ev) != 0)
        throw_errno("rdma_get_cm_event");
    return CmEvent(ev);
}

CmEvent poll_cm_event(rdma_event_channel &ch, std::chrono::milliseconds timeout)
{
    if (!wait_readable(ch.fd, timeout))
        return CmEvent(nullptr);
    rdma_cm_event *ev = nullptr;
    if (rdma_get_cm_event(&ch, &ev) != 0)
        throw_errno("rdma_get_cm_event");
    return CmEvent(ev);
}

void wait_cq(ibv_comp_channel &cc, ibv_cq &cq, std::chrono::milliseconds timeout)
{
    if (!wait_readable(cc.fd, timeout))
        throw Error("timed out after " + std::to_string(timeout.count()) +
                    " ms waiting for a completion");
    ibv_cq *ev_cq = nullptr;
    void *ctx = nullptr;
    if (ibv_get_cq_event(&cc, &ev_cq, &ctx) != 0)
        throw_errno("ibv_get_cq_event");
    ibv_ack_cq_events(ev_cq, 1);
    if (ev_cq != &cq)
        throw Error("completion event for an unknown CQ");
    if (const int err = ibv_req_notify_cq(&cq, 0); err != 0)
        throw_err("ibv_req_notify_cq", err);
}

} // namespace kvping
