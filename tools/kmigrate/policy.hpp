// SPDX-License-Identifier: GPL-2.0-only
//
// kmigrate serve's policy: which sources may start which executables on
// this node, and as which local account.  Nothing of it comes from the
// wire: a migration names only its executable and arguments, and the
// kernel adds the address its connection came from.
//
// The file, one rule a line ('#' starts a comment):
//
//   accept <address>[/<prefix>] user <name | uid:gid> exec <path>...
//
// A migration runs when a rule's prefix holds its source's address and
// the rule lists its executable (the exact absolute path); the first such
// rule gives the account.  No rule, no file: every migration is refused.
// An account whose uid or gid is 0 is refused when the file is read,
// unless the caller allows root.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kmigrate::serve {

struct account {
    uid_t uid = 0;
    gid_t gid = 0;
    std::string name;  // empty for uid:gid (then the only group is gid)
};

struct rule {
    int family = AF_UNSPEC;      // AF_INET or AF_INET6
    std::uint8_t addr[16] = {};  // network byte order
    unsigned prefix = 0;         // bits
    account as;
    std::vector<std::string> execs;
    unsigned line = 0;
};

// Parse @text (the file's contents; @file names it in errors).  Throws
// std::runtime_error naming the file and line of the first bad rule.
std::vector<rule> parse_policy(const std::string &text, const std::string &file,
                               bool allow_root);

// The rule that lets @peer start @path, or nullptr.
const rule *authorise(const std::vector<rule> &rules, const sockaddr_storage &peer,
                      const std::string &path);

}  // namespace kmigrate::serve
