// SPDX-License-Identifier: GPL-2.0-only
//
// libkdsm: generic netlink by hand (no libnl in the guests), and the
// attachment through /dev/kdsm.
#include <kdsm/kdsm.hpp>

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

namespace {

constexpr std::size_t align4(std::size_t n) { return (n + 3) & ~std::size_t(3); }

// A netlink message under construction.
class nlmsg {
public:
    nlmsg(std::uint16_t type, std::uint8_t cmd, std::uint16_t flags)
    {
        buf_.resize(NLMSG_HDRLEN + GENL_HDRLEN);
        auto *h = reinterpret_cast<nlmsghdr *>(buf_.data());
        h->nlmsg_type = type;
        h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        auto *g = reinterpret_cast<genlmsghdr *>(buf_.data() + NLMSG_HDRLEN);
        g->cmd = cmd;
        g->version = KDSM_GENL_VERSION;
    }
    void put(std::uint16_t type, const void *data, std::size_t len)
    {
        const std::size_t at = buf_.size();
        buf_.resize(at + align4(NLA_HDRLEN + len));
        auto *a = reinterpret_cast<nlattr *>(buf_.data() + at);
        a->nla_type = type;
        a->nla_len = static_cast<std::uint16_t>(NLA_HDRLEN + len);
        std::memcpy(buf_.data() + at + NLA_HDRLEN, data, len);
    }
    template <typename T> void put(std::uint16_t type, T v) { put(type, &v, sizeof(v)); }
    void put_str(std::uint16_t type, const std::string &s) { put(type, s.c_str(), s.size() + 1); }
    std::size_t begin_nest(std::uint16_t type)
    {
        const std::size_t at = buf_.size();
        put(type, nullptr, 0);
        reinterpret_cast<nlattr *>(buf_.data() + at)->nla_type = type | NLA_F_NESTED;
        return at;
    }
    void end_nest(std::size_t at)
    {
        reinterpret_cast<nlattr *>(buf_.data() + at)->nla_len =
            static_cast<std::uint16_t>(buf_.size() - at);
    }
    std::vector<std::uint8_t> &finish()
    {
        reinterpret_cast<nlmsghdr *>(buf_.data())->nlmsg_len =
            static_cast<std::uint32_t>(buf_.size());
        return buf_;
    }

private:
    std::vector<std::uint8_t> buf_;
};

// Attributes of one level: type -> (data, len)
using attrs = std::map<std::uint16_t, std::pair<const std::uint8_t *, std::size_t>>;

attrs parse(const std::uint8_t *p, std::size_t len)
{
    attrs out;
    while (len >= NLA_HDRLEN) {
        const auto *a = reinterpret_cast<const nlattr *>(p);
        if (a->nla_len < NLA_HDRLEN || a->nla_len > len)
            break;
        out[a->nla_type & NLA_TYPE_MASK] = {p + NLA_HDRLEN, a->nla_len - NLA_HDRLEN};
        const std::size_t step = align4(a->nla_len);
        if (step >= len)
            break;
        p += step;
        len -= step;
    }
    return out;
}

// A string attribute, bounded by its length whether or not it ends in NUL.
std::string attr_str(const attrs &a, std::uint16_t type)
{
    auto it = a.find(type);
    if (it == a.end())
        return {};
    const char *p = reinterpret_cast<const char *>(it->second.first);
    return std::string(p, strnlen(p, it->second.second));
}

template <typename T> T attr(const attrs &a, std::uint16_t type, T dflt = T{})
{
    auto it = a.find(type);
    if (it == a.end() || it->second.second < sizeof(T))
        return dflt;
    T v;
    std::memcpy(&v, it->second.first, sizeof(T));
    return v;
}

std::vector<std::uint8_t> sockaddr_bytes(const std::string &addr, std::uint16_t port)
{
    std::vector<std::uint8_t> out;
    sockaddr_in in{};
    sockaddr_in6 in6{};
    if (inet_pton(AF_INET, addr.c_str(), &in.sin_addr) == 1) {
        in.sin_family = AF_INET;
        in.sin_port = htons(port);
        out.resize(sizeof(in));
        std::memcpy(out.data(), &in, sizeof(in));
    } else if (inet_pton(AF_INET6, addr.c_str(), &in6.sin6_addr) == 1) {
        in6.sin6_family = AF_INET6;
        in6.sin6_port = htons(port);
        out.resize(sizeof(in6));
        std::memcpy(out.data(), &in6, sizeof(in6));
    } else {
        throw error(EINVAL, "not an IP address: " + addr);
    }
    return out;
}

}  // namespace

control::control()
{
    fd_ = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
    if (fd_ < 0)
        throw error(errno, "netlink socket");
    const int one = 1;  // the kernel's reason for a refusal
    ::setsockopt(fd_, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
    nlmsg m(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 0);
    m.put_str(CTRL_ATTR_FAMILY_NAME, KDSM_GENL_NAME);
    std::vector<std::uint8_t> reply;
    const int err = request(m.finish(), &reply);
    if (err) {
        ::close(fd_);
        throw error(err, err == ENOENT ? "generic netlink family kdsm not found: is kdsm.ko loaded?"
                                       : "resolving the kdsm netlink family");
    }
    const attrs a = parse(reply.data(), reply.size());
    family_ = attr<std::uint16_t>(a, CTRL_ATTR_FAMILY_ID);
    if (!family_) {
        ::close(fd_);
        throw error(EPROTO, "the kdsm netlink family has no id");
    }
}

control::~control()
{
    if (fd_ >= 0)
        ::close(fd_);
}

// Send @msg, collect the reply's attributes into @reply; return the
// kernel's errno (and print its extended ack, if any).
int control::request(std::vector<std::uint8_t> &msg, std::vector<std::uint8_t> *reply)
{
    auto *h = reinterpret_cast<nlmsghdr *>(msg.data());
    h->nlmsg_seq = seq_++;
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    if (::sendto(fd_, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) < 0)
        return errno;
    std::vector<std::uint8_t> buf(65536);
    for (;;) {
        // MSG_TRUNC: the real length, so a cut reply is an error
        const ssize_t n = ::recv(fd_, buf.data(), buf.size(), MSG_TRUNC);
        if (n < 0)
            return errno;
        if (static_cast<std::size_t>(n) > buf.size())
            return EMSGSIZE;
        std::size_t len = static_cast<std::size_t>(n);
        // NLMSG_OK: the header and nlmsg_len both lie within @len
        for (auto *r = reinterpret_cast<nlmsghdr *>(buf.data()); NLMSG_OK(r, len);
             r = NLMSG_NEXT(r, len)) {
            if (r->nlmsg_seq != h->nlmsg_seq)
                continue;
            const std::size_t payload = r->nlmsg_len - NLMSG_HDRLEN;
            if (r->nlmsg_type == NLMSG_ERROR) {
                if (payload < sizeof(nlmsgerr))
                    return EPROTO;
                const auto *e = static_cast<const nlmsgerr *>(NLMSG_DATA(r));
                if (e->error && (r->nlmsg_flags & NLM_F_ACK_TLVS)) {
                    // the request echoed or capped, then the TLVs
                    std::size_t off = sizeof(*e);
                    if (!(r->nlmsg_flags & NLM_F_CAPPED) && e->msg.nlmsg_len >= NLMSG_HDRLEN)
                        off += e->msg.nlmsg_len - NLMSG_HDRLEN;
                    if (off <= payload) {
                        const auto *p = static_cast<const std::uint8_t *>(NLMSG_DATA(r)) + off;
                        last_ack_ = attr_str(parse(p, payload - off), NLMSGERR_ATTR_MSG);
                    }
                }
                return -e->error;
            }
            if (reply) {
                if (payload < GENL_HDRLEN)
                    return EPROTO;
                const auto *p = static_cast<const std::uint8_t *>(NLMSG_DATA(r)) + GENL_HDRLEN;
                reply->assign(p, p + (payload - GENL_HDRLEN));
            }
        }
    }
}

void control::create(const config &c)
{
    nlmsg m(family_, KDSM_CMD_CREATE, 0);
    m.put<std::uint8_t>(KDSM_A_NODE, static_cast<std::uint8_t>(c.node));
    m.put<std::uint32_t>(KDSM_A_NPAGES, c.npages);
    m.put<std::uint8_t>(KDSM_A_PLACEMENT, c.block ? KDSM_PLACE_BLOCK : KDSM_PLACE_CYCLIC);
    m.put<std::uint32_t>(KDSM_A_OPTIONS, c.options);
    m.put<std::uint16_t>(KDSM_A_PORT, c.port);
    m.put<std::uint32_t>(KDSM_A_JOIN_MS, c.join_ms);
    const std::size_t peers = m.begin_nest(KDSM_A_PEERS);
    for (const peer &p : c.peers) {
        const std::size_t one = m.begin_nest(KDSM_A_PEER);
        m.put<std::uint8_t>(KDSM_A_PEER_NODE, static_cast<std::uint8_t>(p.node));
        const auto sa = sockaddr_bytes(p.addr, c.port);
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
    nlmsg m(family_, KDSM_CMD_GET, 0);
    std::vector<std::uint8_t> reply;
    const int err = request(m.finish(), &reply);
    if (err)
        throw error(err, "get");
    const attrs a = parse(reply.data(), reply.size());
    status s;
    s.state = attr<std::uint8_t>(a, KDSM_A_STATE);
    s.node = attr<std::uint8_t>(a, KDSM_A_NODE);
    s.nnodes = attr<std::uint8_t>(a, KDSM_A_NNODES);
    s.npages = attr<std::uint32_t>(a, KDSM_A_NPAGES);
    s.placement = attr<std::uint8_t>(a, KDSM_A_PLACEMENT);
    s.options = attr<std::uint32_t>(a, KDSM_A_OPTIONS);
    s.error = attr_str(a, KDSM_A_ERROR);
    s.stats.assign(__KDSM_STAT_MAX, 0);
    if (auto it = a.find(KDSM_A_STATS); it != a.end())
        for (const auto &[type, v] : parse(it->second.first, it->second.second))
            if (type < __KDSM_STAT_MAX && v.second == 8)
                std::memcpy(&s.stats[type], v.first, 8);
    return s;
}

void control::remove()
{
    nlmsg m(family_, KDSM_CMD_DELETE, 0);
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
        if (std::chrono::steady_clock::now() > end)
            throw error(ETIMEDOUT, "cluster not ready in time");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
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
}

attachment::~attachment()
{
    if (base())
        ::munmap(base(), bytes());
    if (fd_ >= 0)
        ::close(fd_);
}

namespace {

kdsm_lock_arg lock_arg(std::uint32_t id, lock_kind kind)
{
    return kdsm_lock_arg{id, kind == lock_kind::atomic ? std::uint32_t(KDSM_LOCK_ATOMIC) : 0};
}

}  // namespace

void attachment::lock(std::uint32_t id, lock_kind kind)
{
    kdsm_lock_arg a = lock_arg(id, kind);
    if (::ioctl(fd_, KDSM_IOC_LOCK, &a) < 0)
        throw error(errno, std::string("lock ") + std::to_string(id) + " (" +
                               lock_kind_name(kind) + ")");
}

void attachment::unlock(std::uint32_t id, lock_kind kind)
{
    kdsm_lock_arg a = lock_arg(id, kind);
    if (::ioctl(fd_, KDSM_IOC_UNLOCK, &a) < 0)
        throw error(errno, std::string("unlock ") + std::to_string(id) + " (" +
                               lock_kind_name(kind) + ")");
}

void attachment::barrier_all()
{
    if (::ioctl(fd_, KDSM_IOC_BARRIER) < 0)
        throw error(errno, "barrier");
}

status attachment::counters()
{
    if (!ctl_)
        ctl_.emplace();
    return ctl_->get();
}

}  // namespace kdsm
