// SPDX-License-Identifier: GPL-2.0-only
//
// What every kverbs command-line tool does the same way (kdsmctl,
// kfcachectl, kmigrate, kvping):
//   --help, -h   usage on stdout, exit 0;
//   --version, -V  "<tool> (kverbs) <version>" on stdout, exit 0;
//   status -j/--json: one JSON object on stdout (kvcli/json.hpp);
//   a usage error: what is wrong, then the usage, on stderr, exit 2;
//   any other failure: a message on stderr, exit 1 (or the tool's own
//   documented codes above 2).
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

#ifndef KVERBS_VERSION
#error "meson.build defines KVERBS_VERSION"
#endif

namespace kvcli {

inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;
inline constexpr int exit_usage = 2;

// --help/-h or --version as the tool's first or second argument (after a
// subcommand): answer it and exit.  Arguments after those two belong to
// the subcommand (kmigrate run PROG --help runs PROG with --help).
inline void standard_options(int argc, char **argv, const char *tool, const char *usage)
{
    for (int i = 1; i < argc && i <= 2; ++i) {
        if (!std::strcmp(argv[i], "--"))
            return;
        if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
            std::fputs(usage, stdout);
            std::exit(exit_ok);
        }
        if (!std::strcmp(argv[i], "--version") || !std::strcmp(argv[i], "-V")) {
            std::printf("%s (kverbs) %s\n", tool, KVERBS_VERSION);
            std::exit(exit_ok);
        }
    }
}

// A usage error: @why (if any), then the usage, on stderr; exit 2.
[[noreturn]] inline void usage_error(const char *tool, const char *usage,
                                     const std::string &why = "")
{
    if (!why.empty())
        std::fprintf(stderr, "%s: %s\n", tool, why.c_str());
    std::fputs(usage, stderr);
    std::exit(exit_usage);
}

// A subcommand's switches: each has a short and a long spelling.
struct flag {
    const char *short_name;
    const char *long_name;
    bool *set;
};

// argv[@from..] as switches of @fl, or a usage error that names the
// first argument that is none of them.
inline void flags(const char *tool, const char *usage, int argc, char **argv, int from,
                  std::initializer_list<flag> fl)
{
    for (int i = from; i < argc; ++i) {
        bool known = false;
        for (const auto &f : fl)
            if (!std::strcmp(argv[i], f.short_name) || !std::strcmp(argv[i], f.long_name)) {
                *f.set = true;
                known = true;
            }
        if (!known)
            usage_error(tool, usage, std::string("unknown option ") + argv[i]);
    }
}

// The whole of @s as a number in [@lo, @hi] (decimal, or 0x hex), or a
// usage error that names @opt and the range.
inline unsigned long number(const char *tool, const char *usage, const char *opt,
                            const char *s, unsigned long lo, unsigned long hi)
{
    char *end = nullptr;
    errno = 0;
    const unsigned long v = std::strtoul(s, &end, 0);
    if (errno || !*s || *end || *s == '-' || v < lo || v > hi)
        usage_error(tool, usage, std::string(opt) + ": '" + s + "' is not a number in [" +
                                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
}

// Peers are authenticated by default: a tool that starts a listener uses
// its sample's default key description unless told --key DESC, or told
// --insecure to run without one.  @key and @insecure are what was given;
// returns the description to send (empty: none).
inline std::string key_choice(const char *tool, const char *usage, const std::string &key,
                              bool insecure, const char *default_key)
{
    if (insecure && !key.empty())
        usage_error(tool, usage, "--key and --insecure exclude each other");
    return insecure ? std::string() : key.empty() ? std::string(default_key) : key;
}

// After a failure that names the key: say how to provide the default one.
inline void key_hint(const char *tool, const std::string &given, const char *default_key,
                     const std::string &what)
{
    if (!given.empty() || what.find("logon key") == std::string::npos)
        return;
    std::fprintf(stderr,
                 "%s: peers are authenticated by default with the logon key %s: add it on\n"
                 "every node (keyctl add logon %s SECRET @u, 16 to 64 bytes) or give its\n"
                 "secret with --key-file FILE, name another with --key, or run without\n"
                 "authentication with --insecure\n",
                 tool, default_key, default_key);
}

} // namespace kvcli
