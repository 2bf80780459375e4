// SPDX-License-Identifier: GPL-2.0-only
//
// kvgenl: generic netlink by hand, for the control tools of kverbs'
// samples (no libnl in the test guests).  A message builder, an attribute
// parser and a socket that sends one request and collects its reply or
// the kernel's error with its extended-ack text.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kvgenl {

// A generic netlink request under construction.
class message {
public:
    message(std::uint16_t family, std::uint8_t cmd, std::uint8_t version,
            std::uint16_t flags = 0);
    void put(std::uint16_t type, const void *data, std::size_t len);
    template <typename T> void put(std::uint16_t type, T v) { put(type, &v, sizeof(v)); }
    void put_str(std::uint16_t type, const std::string &s) { put(type, s.c_str(), s.size() + 1); }
    std::size_t begin_nest(std::uint16_t type);
    void end_nest(std::size_t at);
    std::vector<std::uint8_t> &finish();

private:
    std::vector<std::uint8_t> buf_;
};

// Attributes of one level: type -> (data, len)
using attrs = std::map<std::uint16_t, std::pair<const std::uint8_t *, std::size_t>>;

attrs parse(const std::uint8_t *p, std::size_t len);
// Every attribute of one level in order, repeated types too.
std::vector<std::pair<std::uint16_t, std::pair<const std::uint8_t *, std::size_t>>>
parse_all(const std::uint8_t *p, std::size_t len);

// A string attribute, bounded by its length whether or not it ends in NUL.
std::string attr_str(const attrs &a, std::uint16_t type);

template <typename T> T attr(const attrs &a, std::uint16_t type, T dflt = T{})
{
    auto it = a.find(type);
    if (it == a.end() || it->second.second < sizeof(T))
        return dflt;
    T v;
    std::memcpy(&v, it->second.first, sizeof(T));
    return v;
}

// A sockaddr_in or sockaddr_in6 for @addr and @port; empty if @addr is
// no IP address.
std::vector<std::uint8_t> sockaddr_bytes(const std::string &addr, std::uint16_t port);

// A table for socket::attr_names() from (type, name) pairs.
inline std::vector<std::string>
names(std::initializer_list<std::pair<std::uint16_t, const char *>> l)
{
    std::vector<std::string> out;
    for (const auto &[type, name] : l) {
        if (type >= out.size())
            out.resize(type + 1u);
        out[type] = name;
    }
    return out;
}

// One NETLINK_GENERIC socket.
class socket {
public:
    socket();  // throws std::system_error
    ~socket();
    socket(const socket &) = delete;
    socket &operator=(const socket &) = delete;

    // The id of generic netlink family @name: 0 and *id, or an errno.
    int resolve(const char *name, std::uint16_t *id);
    // Join multicast group @group of family @family: 0, or an errno
    // (ENOENT: no such family or group; EPERM: the group needs a
    // capability).  Use a socket of its own for notifications: request()
    // skips them, so they would be lost.
    int subscribe(const char *family, const char *group);
    // Wait up to @timeout_ms for a notification of a joined group; 0 (its
    // attributes in @attrs), ETIMEDOUT, or an errno.
    int wait_notification(int timeout_ms, std::vector<std::uint8_t> *attrs);
    // Send @msg; collect the reply's attributes into @reply.  0 or the
    // kernel's errno, with its extended ack in last_ack().
    int request(std::vector<std::uint8_t> &msg, std::vector<std::uint8_t> *reply);
    // Send @msg as a dump request (NLM_F_DUMP) and call @each with every
    // reply message's attributes until the dump is done.  0 or the
    // kernel's errno (last_ack() as above); *@interrupted is set when a
    // part carried NLM_F_DUMP_INTR (the objects changed meanwhile).
    int dump(std::vector<std::uint8_t> &msg,
             const std::function<void(const std::uint8_t *, std::size_t)> &each,
             bool *interrupted);
    const std::string &last_ack() const { return last_ack_; }
    // The family's attribute names by type: a refusal that points at an
    // attribute of the request (NLMSGERR_ATTR_OFFS) then names it in
    // last_ack(), "... (attribute NAME)"; without a name, its number.
    void attr_names(std::vector<std::string> names) { names_ = std::move(names); }

private:
    // An NLMSG_ERROR (or a dump's NLMSG_DONE) @r: its errno, with the
    // extended ack's message in last_ack_.
    int ack_error(const void *r);
    int send(std::vector<std::uint8_t> &msg);
    // Receive until @each, called with every message (a const nlmsghdr *)
    // of sequence @seq, returns 0 or an errno (returned); -1 goes on.
    int receive(std::uint32_t seq, const std::function<int(const void *)> &each);

    // The type of the attribute at byte @off of the request sent last
    // (nested attributes searched), or -1.
    int attr_at(std::size_t off) const;

    int fd_ = -1;
    std::uint32_t seq_ = 1;
    std::string last_ack_;
    std::vector<std::uint8_t> sent_;        // the request, for attr_at()
    std::vector<std::string> names_;
};

}  // namespace kvgenl
