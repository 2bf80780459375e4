// SPDX-License-Identifier: GPL-2.0-only
//
// --key-file FILE: a start command's peers' key from a file rather than
// from the caller's keyrings.  The kernel finds a domain's logon key when
// the domain is created, in the keyrings of the task that creates it
// (kverbs/auth.c), and keeps only a transform made from it.  A service
// does not share the keyring an operator added a key to (systemd gives
// each unit a session keyring of its own), so the tools can load the key
// themselves: the file's bytes, exactly (a trailing newline included:
// write it with printf '%s', or load it on the peers with keyctl padd),
// become a logon key in the tool's process keyring, which the kernel
// searches and which goes with the process.  The file must be a regular
// file of the caller (or root) that neither group nor others may read or
// write, as ssh requires of a private key.
#pragma once

#include <fcntl.h>
#include <keyutils.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace kvcli {

// Logon key payloads kverbs accepts (KVERBS_AUTH_KEY_MIN..MAX).
inline constexpr std::size_t key_min = 16, key_max = 64;

// Load @path as the logon key @desc into this process's keyring.  Returns
// an empty string, or why not (naming the file).
inline std::string load_key_file(const std::string &desc, const std::string &path)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return "--key-file " + path + ": " + std::strerror(errno);
    struct stat st {};
    std::string why;
    std::vector<char> buf(key_max + 1);
    ssize_t n = -1;
    if (::fstat(fd, &st) || !S_ISREG(st.st_mode))
        why = "not a regular file";
    else if (st.st_uid != ::geteuid() && st.st_uid != 0)
        why = "owned by another user";
    else if (st.st_mode & (S_IRWXG | S_IRWXO))
        why = "group or others may access it (chmod 600)";
    else if ((n = ::read(fd, buf.data(), buf.size())) < 0)
        why = std::strerror(errno);
    else if (static_cast<std::size_t>(n) > key_max)
        why = "the secret is longer than 64 bytes";
    else if (static_cast<std::size_t>(n) < key_min)
        why = "the secret has " + std::to_string(n) + " bytes, fewer than 16";
    ::close(fd);
    if (why.empty() && add_key("logon", desc.c_str(), buf.data(), static_cast<std::size_t>(n),
                               KEY_SPEC_PROCESS_KEYRING) < 0)
        why = std::string("adding the key ") + desc + ": " + std::strerror(errno);
    explicit_bzero(buf.data(), buf.size());
    return why.empty() ? why : "--key-file " + path + ": " + why;
}

} // namespace kvcli
