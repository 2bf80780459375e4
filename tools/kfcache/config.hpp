// SPDX-License-Identifier: GPL-2.0-only
//
// The kfcache server's configuration file, read by `kfcachectl load`
// (and so by kfcache-server.service), one directive a line, '#' starts a
// comment:
//
//   listen <address> [port <port>]          exactly once
//   key kverbs:<name>                       the logon key clients prove
//                                           (default kverbs:kfcache)
//   key-file <path>                         ... loaded from this file
//   insecure                                no authentication
//   export <name> <path> [client <addr>[/<len>]]...
//
// Exports are made in the file's order; a name is exported once.
#pragma once

#include <kverbs/kfcache.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kfcache {

// ADDR[/LEN] as an export's client prefix.  Throws std::invalid_argument
// saying what is wrong with @s.
kfc_client parse_client(const std::string &s);

// A client prefix as ADDR/LEN.
std::string client_str(const kfc_client &c);

struct export_entry {
    std::string name, path;
    std::vector<kfc_client> clients;
    unsigned line = 0;
};

struct server_config {
    std::string addr;
    std::uint16_t port = KFC_DEFAULT_PORT;
    std::string key, key_file;
    bool insecure = false;
    std::vector<export_entry> exports;
};

// Parse @text, the contents of @file.  Throws std::runtime_error
// "FILE:LINE: why" for the first bad line.
server_config parse_config(const std::string &text, const std::string &file);

}  // namespace kfcache
