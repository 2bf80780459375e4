// SPDX-License-Identifier: GPL-2.0-only
//
// libkdsm: generic netlink by hand (no libnl in the guests), and the
// attachment through /dev/kdsm.
#include <kdsm/kdsm.hpp>
#include <kvgenl/kvgenl.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace kdsm {

control::control() : sock_(std::make_unique<kvgenl::socket>())
{
    const int err = sock_->resolve(KDSM_GENL_NAME, &family_);
    if (err)
        throw error(err, err == ENOENT ? "generic netlink family kdsm not found: is kdsm.ko loaded?"
                                       : "resolving the kdsm netlink family");
    // notifications of the state, on a socket of their own; without the
    // group (an older kdsm) or the capability, wait_ready() polls
    auto ntf = std::make_unique<kvgenl::socket>();
    if (!ntf->subscribe(KDSM_GENL_NAME, KDSM_MCGRP_STATE))
        ntf_ = std::move(ntf);
    sock_->attr_names(kvgenl::names({{KDSM_A_NODE, "node"},
                                     {KDSM_A_NPAGES, "npages"},
                                     {KDSM_A_PLACEMENT, "placement"},
                                     {KDSM_A_OPTIONS, "options"},
                                     {KDSM_A_PORT, "port"},
                                     {KDSM_A_PEERS, "peers"},
                                     {KDSM_A_PEER, "peer"},
                                     {KDSM_A_PEER_NODE, "peer-node"},
                                     {KDSM_A_PEER_ADDR, "peer-addr"},
                                     {KDSM_A_JOIN_MS, "join-ms"},
                                     {KDSM_A_KEY, "key"}}));
}

control::~control() = default;

int control::request(std::vector<std::uint8_t> &msg, std::vector<std::uint8_t> *reply)
{
    const int err = sock_->request(msg, reply);
    last_ack_ = sock_->last_ack();
    return err;
}

void control::create(const config &c)
{
    kvgenl::message m(family_, KDSM_CMD_CREATE, KDSM_GENL_VERSION);
    m.put<std::uint8_t>(KDSM_A_NODE, static_cast<std::uint8_t>(c.node));
    m.put<std::uint32_t>(KDSM_A_NPAGES, c.npages);
    m.put<std::uint8_t>(KDSM_A_PLACEMENT, c.block ? KDSM_PLACE_BLOCK : KDSM_PLACE_CYCLIC);
    m.put<std::uint32_t>(KDSM_A_OPTIONS, c.options);
    m.put<std::uint16_t>(KDSM_A_PORT, c.port);
    m.put<std::uint32_t>(KDSM_A_JOIN_MS, c.join_ms);
    if (!c.key.empty())
        m.put_str(KDSM_A_KEY, c.key);
    const std::size_t peers = m.begin_nest(KDSM_A_PEERS);
    for (const peer &p : c.peers) {
        const std::size_t one = m.begin_nest(KDSM_A_PEER);
        m.put<std::uint8_t>(KDSM_A_PEER_NODE, static_cast<std::uint8_t>(p.node));
        const auto sa = kvgenl::sockaddr_bytes(p.addr, c.port);
        if (sa.empty())
            throw error(EINVAL, "not an IP address: " + p.addr);
        m.put(KDSM_A_PEER_ADDR, sa.data(), sa.size());
        m.end_nest(one);
    }
    m.end_nest(peers);
    last_ack_.clear();
    const int err = request(m.finish(), nullptr);
    if (err)
        throw error(err, "create: " + (last_ack_.empty() ? std::string("refused") : last_ack_));
}

status control::get()
{
    kvgenl::message m(family_, KDSM_CMD_GET, KDSM_GENL_VERSION);
    std::vector<std::uint8_t> reply;
    const int err = request(m.finish(), &reply);
    if (err)
        throw error(err, err == EPERM ? "status: needs CAP_NET_ADMIN" : "get");
    const kvgenl::attrs a = kvgenl::parse(reply.data(), reply.size());
    status s;
    s.state = kvgenl::attr<std::uint8_t>(a, KDSM_A_STATE);
    s.node = kvgenl::attr<std::uint8_t>(a, KDSM_A_NODE);
    s.nnodes = kvgenl::attr<std::uint8_t>(a, KDSM_A_NNODES);
    s.npages = kvgenl::attr<std::uint32_t>(a, KDSM_A_NPAGES);
    s.placement = kvgenl::attr<std::uint8_t>(a, KDSM_A_PLACEMENT);
    s.options = kvgenl::attr<std::uint32_t>(a, KDSM_A_OPTIONS);
    s.error = kvgenl::attr_str(a, KDSM_A_ERROR);
    s.stats.assign(__KDSM_STAT_MAX, 0);
    if (auto it = a.find(KDSM_A_STATS); it != a.end())
        for (const auto &[type, v] : kvgenl::parse(it->second.first, it->second.second))
            if (type < __KDSM_STAT_MAX && v.second == 8)
                std::memcpy(&s.stats[type], v.first, 8);
    return s;
}

void control::remove()
{
    kvgenl::message m(family_, KDSM_CMD_DELETE, KDSM_GENL_VERSION);
    last_ack_.clear();
    const int err = request(m.finish(), nullptr);
    if (err)
        throw error(err, "delete: " + (last_ack_.empty() ? std::string("refused") : last_ack_));
}

status control::wait_ready(int timeout_ms)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        status s = get();
        if (s.state == KDSM_STATE_READY)
            return s;
        if (s.state == KDSM_STATE_FAILED)
            throw error(EHOSTDOWN, "cluster failed: " + s.error);
        if (s.state == KDSM_STATE_NONE)
            throw error(ENOENT, "this node is in no cluster");
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            end - std::chrono::steady_clock::now());
        if (left.count() <= 0)
            throw error(ETIMEDOUT, "cluster not ready in time");
        if (!ntf_) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            continue;
        }
        // a notification, the deadline or lost notifications (ENOBUFS):
        // ask again; another error: poll from now on
        const int err = ntf_->wait_notification(static_cast<int>(left.count()), nullptr);
        if (err && err != ETIMEDOUT && err != ENOBUFS)
            ntf_.reset();
    }
}

bool control::next_state(int timeout_ms, status *s)
{
    if (!ntf_)
        throw error(EOPNOTSUPP, "no state notifications (kdsm.ko without the "
                                "group " KDSM_MCGRP_STATE ", or no CAP_NET_ADMIN)");
    std::vector<std::uint8_t> attrs;
    const int err = ntf_->wait_notification(timeout_ms, &attrs);
    if (err == ETIMEDOUT)
        return false;
    if (err)
        throw error(err, "state notifications");
    const kvgenl::attrs a = kvgenl::parse(attrs.data(), attrs.size());
    *s = status{};
    s->state = kvgenl::attr<std::uint8_t>(a, KDSM_A_STATE);
    s->node = kvgenl::attr<std::uint8_t>(a, KDSM_A_NODE);
    s->error = kvgenl::attr_str(a, KDSM_A_ERROR);
    return true;
}

attachment::attachment(int timeout_ms)
{
    const int dev = ::open("/dev/kdsm", O_RDWR | O_CLOEXEC);
    if (dev < 0)
        throw error(errno, "open /dev/kdsm (is kdsm.ko loaded?)");
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    int err = 0;
    for (;;) {
        fd_ = ::ioctl(dev, KDSM_IOC_ATTACH);
        err = fd_ < 0 ? errno : 0;
        if (fd_ >= 0 || err != EAGAIN || std::chrono::steady_clock::now() > end)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kdsm_info info{};
    if (fd_ >= 0 && ::ioctl(dev, KDSM_IOC_INFO, &info) < 0) {
        err = errno;
        ::close(fd_);
        fd_ = -1;
    }
    ::close(dev);
    if (fd_ < 0)
        throw error(err, err == ENOENT ? "attach: this node is in no cluster"
                         : err == EHOSTDOWN ? "attach: the cluster failed (kdsmctl status)"
                                            : "attach");
    void *p = ::mmap(nullptr, std::size_t(info.npages) * info.page_size, PROT_READ | PROT_WRITE,
                     MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) {
        const int e = errno;
        ::close(fd_);
        throw error(e, "mmap the region");
    }
    mapped(info.node, info.nnodes, info.npages, info.page_size,
           info.placement == KDSM_PLACE_BLOCK, static_cast<std::uint8_t *>(p));
    try {
        watch_lost_pages();
    } catch (...) {
        ::munmap(p, bytes());
        ::close(fd_);
        throw;
    }
}

attachment::~attachment()
{
    unwatch_lost_pages();
    if (base())
        ::munmap(base(), bytes());
    if (fd_ >= 0)
        ::close(fd_);
}

namespace {

kdsm_lock_arg lock_arg(std::uint32_t id, lock_kind kind, std::uint32_t flags = 0)
{
    return kdsm_lock_arg{id, flags | (kind == lock_kind::atomic ? KDSM_LOCK_ATOMIC : 0u)};
}

}  // namespace

bool attachment::lock(std::uint32_t id, lock_kind kind)
{
    // robust: a holder's death is reported (EOWNERDEAD), not an error
    kdsm_lock_arg a = lock_arg(id, kind, KDSM_LOCK_ROBUST);
    if (::ioctl(fd_, KDSM_IOC_LOCK, &a) < 0) {
        const int err = errno;
        if (err == EOWNERDEAD)
            return true;  // held; its previous holder died holding it
        exit_if_failed(err);
        throw error(err, std::string("lock ") + std::to_string(id) + " (" +
                               lock_kind_name(kind) + ")");
    }
    return false;
}

void attachment::unlock(std::uint32_t id, lock_kind kind)
{
    kdsm_lock_arg a = lock_arg(id, kind);
    if (::ioctl(fd_, KDSM_IOC_UNLOCK, &a) < 0) {
        const int err = errno;
        exit_if_failed(err);
        throw error(err, std::string("unlock ") + std::to_string(id) + " (" +
                               lock_kind_name(kind) + ")");
    }
}

void attachment::barrier_all()
{
    if (::ioctl(fd_, KDSM_IOC_BARRIER) < 0) {
        const int err = errno;
        exit_if_failed(err);
        throw error(err, "barrier");
    }
}

status attachment::counters()
{
    if (!ctl_)
        ctl_.emplace();
    return ctl_->get();
}

}  // namespace kdsm
