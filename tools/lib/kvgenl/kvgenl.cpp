// SPDX-License-Identifier: GPL-2.0-only
//
// kvgenl: generic netlink by hand (see kvgenl.hpp).
#include <kvgenl/kvgenl.hpp>

#include <arpa/inet.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <system_error>

namespace kvgenl {

namespace {

constexpr std::size_t align4(std::size_t n) { return (n + 3) & ~std::size_t(3); }

}  // namespace

message::message(std::uint16_t family, std::uint8_t cmd, std::uint8_t version,
                 std::uint16_t flags)
{
    buf_.resize(NLMSG_HDRLEN + GENL_HDRLEN);
    auto *h = reinterpret_cast<nlmsghdr *>(buf_.data());
    h->nlmsg_type = family;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    auto *g = reinterpret_cast<genlmsghdr *>(buf_.data() + NLMSG_HDRLEN);
    g->cmd = cmd;
    g->version = version;
}

void message::put(std::uint16_t type, const void *data, std::size_t len)
{
    const std::size_t at = buf_.size();
    buf_.resize(at + align4(NLA_HDRLEN + len));
    auto *a = reinterpret_cast<nlattr *>(buf_.data() + at);
    a->nla_type = type;
    a->nla_len = static_cast<std::uint16_t>(NLA_HDRLEN + len);
    if (len)
        std::memcpy(buf_.data() + at + NLA_HDRLEN, data, len);
}

std::size_t message::begin_nest(std::uint16_t type)
{
    const std::size_t at = buf_.size();
    put(type, nullptr, 0);
    reinterpret_cast<nlattr *>(buf_.data() + at)->nla_type = type | NLA_F_NESTED;
    return at;
}

void message::end_nest(std::size_t at)
{
    reinterpret_cast<nlattr *>(buf_.data() + at)->nla_len =
        static_cast<std::uint16_t>(buf_.size() - at);
}

std::vector<std::uint8_t> &message::finish()
{
    reinterpret_cast<nlmsghdr *>(buf_.data())->nlmsg_len =
        static_cast<std::uint32_t>(buf_.size());
    return buf_;
}

std::vector<std::pair<std::uint16_t, std::pair<const std::uint8_t *, std::size_t>>>
parse_all(const std::uint8_t *p, std::size_t len)
{
    std::vector<std::pair<std::uint16_t, std::pair<const std::uint8_t *, std::size_t>>> out;
    while (len >= NLA_HDRLEN) {
        const auto *a = reinterpret_cast<const nlattr *>(p);
        if (a->nla_len < NLA_HDRLEN || a->nla_len > len)
            break;
        out.push_back({static_cast<std::uint16_t>(a->nla_type & NLA_TYPE_MASK),
                       {p + NLA_HDRLEN, a->nla_len - NLA_HDRLEN}});
        const std::size_t step = align4(a->nla_len);
        if (step >= len)
            break;
        p += step;
        len -= step;
    }
    return out;
}

attrs parse(const std::uint8_t *p, std::size_t len)
{
    attrs out;
    for (const auto &[type, v] : parse_all(p, len))
        out[type] = v;
    return out;
}

std::string attr_str(const attrs &a, std::uint16_t type)
{
    auto it = a.find(type);
    if (it == a.end())
        return {};
    const char *p = reinterpret_cast<const char *>(it->second.first);
    return std::string(p, strnlen(p, it->second.second));
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
    }
    return out;
}

socket::socket()
{
    fd_ = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
    if (fd_ < 0)
        throw std::system_error(errno, std::generic_category(), "netlink socket");
    const int one = 1;  // the kernel's reason for a refusal
    ::setsockopt(fd_, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
}

socket::~socket()
{
    if (fd_ >= 0)
        ::close(fd_);
}

int socket::resolve(const char *name, std::uint16_t *id)
{
    message m(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1);
    m.put_str(CTRL_ATTR_FAMILY_NAME, name);
    std::vector<std::uint8_t> reply;
    const int err = request(m.finish(), &reply);
    if (err)
        return err;
    *id = attr<std::uint16_t>(parse(reply.data(), reply.size()), CTRL_ATTR_FAMILY_ID);
    return *id ? 0 : EPROTO;
}

int socket::subscribe(const char *family, const char *group)
{
    message m(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1);
    m.put_str(CTRL_ATTR_FAMILY_NAME, family);
    std::vector<std::uint8_t> reply;
    if (const int err = request(m.finish(), &reply))
        return err;
    const attrs a = parse(reply.data(), reply.size());
    const auto groups = a.find(CTRL_ATTR_MCAST_GROUPS);
    if (groups == a.end())
        return ENOENT;
    for (const auto &[index, g] : parse_all(groups->second.first, groups->second.second)) {
        const attrs one = parse(g.first, g.second);
        if (attr_str(one, CTRL_ATTR_MCAST_GRP_NAME) != group)
            continue;
        const auto id = attr<std::uint32_t>(one, CTRL_ATTR_MCAST_GRP_ID);
        if (::setsockopt(fd_, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &id, sizeof(id)) < 0)
            return errno;
        return 0;
    }
    return ENOENT;
}

int socket::wait_notification(int timeout_ms, std::vector<std::uint8_t> *attrs)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::vector<std::uint8_t> buf(65536);
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            end - std::chrono::steady_clock::now());
        if (left.count() <= 0)
            return ETIMEDOUT;
        pollfd p{fd_, POLLIN, 0};
        const int n = ::poll(&p, 1, static_cast<int>(left.count()));
        if (n < 0 && errno != EINTR)
            return errno;
        if (n <= 0)
            continue;
        const ssize_t got = ::recv(fd_, buf.data(), buf.size(), MSG_TRUNC | MSG_DONTWAIT);
        if (got < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            return errno;  // ENOBUFS: notifications were lost; the caller asks again
        }
        if (static_cast<std::size_t>(got) > buf.size())
            return EMSGSIZE;
        std::size_t len = static_cast<std::size_t>(got);
        for (auto *r = reinterpret_cast<nlmsghdr *>(buf.data()); NLMSG_OK(r, len);
             r = NLMSG_NEXT(r, len)) {
            // a notification: sequence 0, from the kernel
            const std::size_t payload = r->nlmsg_len - NLMSG_HDRLEN;
            if (r->nlmsg_seq || r->nlmsg_type < NLMSG_MIN_TYPE || payload < GENL_HDRLEN)
                continue;
            if (attrs) {
                const auto *d = static_cast<const std::uint8_t *>(NLMSG_DATA(r)) + GENL_HDRLEN;
                attrs->assign(d, d + (payload - GENL_HDRLEN));
            }
            return 0;
        }
    }
}

int socket::send(std::vector<std::uint8_t> &msg)
{
    last_ack_.clear();
    reinterpret_cast<nlmsghdr *>(msg.data())->nlmsg_seq = seq_++;
    sent_ = msg;
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    if (::sendto(fd_, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) < 0)
        return errno;
    return 0;
}

int socket::ack_error(const void *msg)
{
    const auto *r = static_cast<const nlmsghdr *>(msg);
    const std::size_t payload = r->nlmsg_len - NLMSG_HDRLEN;
    // NLMSG_DONE carries the error alone, NLMSG_ERROR a struct nlmsgerr
    if (payload < (r->nlmsg_type == NLMSG_DONE ? sizeof(int) : sizeof(nlmsgerr)))
        return EPROTO;
    const auto *e = static_cast<const nlmsgerr *>(NLMSG_DATA(r));
    if (e->error && (r->nlmsg_flags & NLM_F_ACK_TLVS)) {
        // NLMSG_ERROR: the request echoed or capped, then the TLVs;
        // NLMSG_DONE: the TLVs after the error
        std::size_t off = r->nlmsg_type == NLMSG_DONE ? sizeof(int) : sizeof(*e);
        if (r->nlmsg_type == NLMSG_ERROR && !(r->nlmsg_flags & NLM_F_CAPPED) &&
            e->msg.nlmsg_len >= NLMSG_HDRLEN)
            off += NLMSG_ALIGN(e->msg.nlmsg_len) - NLMSG_HDRLEN;
        if (off <= payload) {
            const auto *p = static_cast<const std::uint8_t *>(NLMSG_DATA(r)) + off;
            const auto tlv = parse(p, payload - off);
            last_ack_ = attr_str(tlv, NLMSGERR_ATTR_MSG);
            if (tlv.count(NLMSGERR_ATTR_OFFS)) {
                const int type = attr_at(attr<std::uint32_t>(tlv, NLMSGERR_ATTR_OFFS));
                if (type >= 0) {
                    const auto t = static_cast<std::size_t>(type);
                    last_ack_ += (last_ack_.empty() ? "(attribute " : " (attribute ") +
                                 (t < names_.size() && !names_[t].empty()
                                      ? names_[t]
                                      : std::to_string(type)) +
                                 ")";
                }
            }
        }
    }
    return -e->error;
}

int socket::attr_at(std::size_t off) const
{
    std::size_t pos = NLMSG_HDRLEN + GENL_HDRLEN, end = sent_.size();
    while (pos + NLA_HDRLEN <= end) {
        nlattr a;
        std::memcpy(&a, sent_.data() + pos, sizeof(a));
        if (a.nla_len < NLA_HDRLEN || pos + a.nla_len > end)
            return -1;
        if (off == pos || (off > pos && off < pos + a.nla_len && !(a.nla_type & NLA_F_NESTED)))
            return a.nla_type & NLA_TYPE_MASK;
        if (off > pos && off < pos + a.nla_len) {  // inside a nest
            end = pos + a.nla_len;
            pos += NLA_HDRLEN;
            continue;
        }
        pos += align4(a.nla_len);
    }
    return -1;
}

int socket::receive(std::uint32_t seq, const std::function<int(const void *)> &each)
{
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
            if (r->nlmsg_seq != seq)
                continue;
            if (const int ret = each(r); ret >= 0)
                return ret;
        }
    }
}

namespace {

// @r's generic netlink payload (after the genlmsghdr), or false.
bool genl_payload(const nlmsghdr *r, const std::uint8_t **p, std::size_t *len)
{
    const std::size_t payload = r->nlmsg_len - NLMSG_HDRLEN;
    if (payload < GENL_HDRLEN)
        return false;
    *p = static_cast<const std::uint8_t *>(NLMSG_DATA(r)) + GENL_HDRLEN;
    *len = payload - GENL_HDRLEN;
    return true;
}

}  // namespace

int socket::request(std::vector<std::uint8_t> &msg, std::vector<std::uint8_t> *reply)
{
    if (const int err = send(msg))
        return err;
    return receive(reinterpret_cast<nlmsghdr *>(msg.data())->nlmsg_seq, [&](const void *m) {
        const auto *r = static_cast<const nlmsghdr *>(m);
        if (r->nlmsg_type == NLMSG_ERROR)
            return ack_error(r);
        const std::uint8_t *p;
        std::size_t len;
        if (!reply)
            return -1;
        if (!genl_payload(r, &p, &len))
            return EPROTO;
        reply->assign(p, p + len);
        return -1;  // the ack follows
    });
}

int socket::dump(std::vector<std::uint8_t> &msg,
                 const std::function<void(const std::uint8_t *, std::size_t)> &each,
                 bool *interrupted)
{
    auto *h = reinterpret_cast<nlmsghdr *>(msg.data());
    h->nlmsg_flags = (h->nlmsg_flags & ~NLM_F_ACK) | NLM_F_DUMP;
    if (const int err = send(msg))
        return err;
    *interrupted = false;
    return receive(h->nlmsg_seq, [&](const void *m) {
        const auto *r = static_cast<const nlmsghdr *>(m);
        if (r->nlmsg_flags & NLM_F_DUMP_INTR)
            *interrupted = true;
        if (r->nlmsg_type == NLMSG_ERROR || r->nlmsg_type == NLMSG_DONE)
            return ack_error(r);
        const std::uint8_t *p;
        std::size_t len;
        if (!genl_payload(r, &p, &len))
            return EPROTO;
        each(p, len);
        return -1;
    });
}

}  // namespace kvgenl
