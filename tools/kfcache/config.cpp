// SPDX-License-Identifier: GPL-2.0-only
//
// kfcache server configuration (see config.hpp).
#include "config.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>

namespace kfcache {

namespace {

bool decimal(const std::string &s, unsigned long max, unsigned long *v)
{
    if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos)
        return false;
    *v = std::strtoul(s.c_str(), nullptr, 10);
    return *v <= max;
}

}  // namespace

kfc_client parse_client(const std::string &s)
{
    kfc_client c{};
    const auto slash = s.find('/');
    const std::string host = s.substr(0, slash);
    unsigned long max = 0;
    if (inet_pton(AF_INET, host.c_str(), c.addr) == 1) {
        c.family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, host.c_str(), c.addr) == 1) {
        c.family = AF_INET6;
        max = 128;
    } else {
        throw std::invalid_argument("'" + s + "' is not ADDR[/LEN] with an IPv4 or IPv6 address");
    }
    if (c.family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(reinterpret_cast<const in6_addr *>(c.addr)))
        throw std::invalid_argument("'" + s + "': name IPv4 clients as IPv4");
    unsigned long len = max;
    if (slash != std::string::npos && !decimal(s.substr(slash + 1), max, &len))
        throw std::invalid_argument("'" + s + "': LEN is a decimal prefix length, 0 to " +
                                    std::to_string(max));
    c.prefix_len = static_cast<std::uint8_t>(len);
    return c;
}

std::string client_str(const kfc_client &c)
{
    char buf[INET6_ADDRSTRLEN] = "?";
    inet_ntop(c.family, c.addr, buf, sizeof(buf));
    return std::string(buf) + "/" + std::to_string(c.prefix_len);
}

server_config parse_config(const std::string &text, const std::string &file)
{
    server_config cfg;
    std::set<std::string> names;
    bool listen = false;
    std::istringstream in(text);
    std::string raw;
    for (unsigned line = 1; std::getline(in, raw); ++line) {
        const auto where = [&](const std::string &why) {
            return std::runtime_error(file + ":" + std::to_string(line) + ": " + why);
        };
        std::istringstream l(raw.substr(0, raw.find('#')));
        std::vector<std::string> w;
        for (std::string t; l >> t;)
            w.push_back(t);
        if (w.empty())
            continue;
        const std::string &d = w[0];
        if (d == "listen") {
            unsigned long port = 0;
            if (listen)
                throw where("a second listen");
            if (w.size() != 2 && !(w.size() == 4 && w[2] == "port"))
                throw where("listen ADDRESS [port PORT]");
            in6_addr any;
            if (inet_pton(AF_INET, w[1].c_str(), &any) != 1 &&
                inet_pton(AF_INET6, w[1].c_str(), &any) != 1)
                throw where("'" + w[1] + "' is not an IP address");
            if (w.size() == 4 && (!decimal(w[3], 65535, &port) || !port))
                throw where("port: '" + w[3] + "' is not a number in [1, 65535]");
            cfg.addr = w[1];
            if (port)
                cfg.port = static_cast<std::uint16_t>(port);
            listen = true;
        } else if (d == "key" || d == "key-file") {
            if (w.size() != 2)
                throw where(d + " takes one argument");
            if (d == "key" && w[1].size() > KFC_KEY_DESC_MAX)
                throw where("key: at most " + std::to_string(KFC_KEY_DESC_MAX) + " characters");
            if (d == "key-file" && w[1][0] != '/')
                throw where("key-file: an absolute path");
            (d == "key" ? cfg.key : cfg.key_file) = w[1];
        } else if (d == "insecure") {
            if (w.size() != 1)
                throw where("insecure takes no argument");
            cfg.insecure = true;
        } else if (d == "export") {
            if (w.size() < 3 || (w.size() - 3) % 2)
                throw where("export NAME PATH [client ADDR[/LEN]]...");
            export_entry e{w[1], w[2], {}, line};
            if (e.name.size() >= KFC_NAME_MAX || e.name.find('/') != std::string::npos)
                throw where("export: '" + e.name + "' is not a name of 1 to " +
                            std::to_string(KFC_NAME_MAX - 1) + " characters without '/'");
            if (e.path[0] != '/')
                throw where("export " + e.name + ": the path must be absolute");
            if (!names.insert(e.name).second)
                throw where("export " + e.name + ": exported twice");
            for (std::size_t i = 3; i < w.size(); i += 2) {
                if (w[i] != "client")
                    throw where("export " + e.name + ": '" + w[i] + "' where client was expected");
                if (e.clients.size() == KFC_CLIENTS_MAX)
                    throw where("export " + e.name + ": at most " +
                                std::to_string(KFC_CLIENTS_MAX) + " clients");
                try {
                    e.clients.push_back(parse_client(w[i + 1]));
                } catch (const std::invalid_argument &x) {
                    throw where("export " + e.name + ": client " + x.what());
                }
            }
            cfg.exports.push_back(std::move(e));
        } else {
            throw where("unknown directive '" + d + "'");
        }
    }
    if (!listen)
        throw std::runtime_error(file + ": no listen line");
    if (cfg.insecure && (!cfg.key.empty() || !cfg.key_file.empty()))
        throw std::runtime_error(file + ": insecure excludes key and key-file");
    return cfg;
}

}  // namespace kfcache
