// SPDX-License-Identifier: GPL-2.0-only
//
// kfcachectl: the operator's tool for the kfcache server (generic netlink
// family "kfcache_srv").  Changes need CAP_NET_ADMIN.
//
//   kfcachectl start ADDRESS [--port PORT] [--key kverbs:NAME] [--key-file F | --insecure]
//   kfcachectl load FILE
//   kfcachectl export NAME PATH [--client ADDR[/LEN]]...
//   kfcachectl unexport NAME
//   kfcachectl status [-s|--stats] [-j|--json]
//   kfcachectl stop
//
// Clients then mount:  mount -t kfcache ADDRESS:/NAME DIR [-o port=PORT]
// (every client proves the server's key: kverbs:kfcache unless -o key=
// names another; a server started --insecure takes mounts -o insecure)
#include "config.hpp"

#include <kvcli/json.hpp>
#include <kvcli/key.hpp>
#include <kvcli/kvcli.hpp>
#include <kvgenl/kvgenl.hpp>
#include <kverbs/kfcache.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

namespace {

#define KFC_CONFIG "/etc/kverbs/kfcache.conf"

constexpr const char *usage_text =
    "usage: kfcachectl start ADDRESS [--port PORT] [--key kverbs:NAME]\n"
    "                        [--key-file FILE | --insecure]\n"
    "       kfcachectl load [FILE]\n"
    "       kfcachectl export NAME PATH [--client ADDR[/LEN]]...\n"
    "       kfcachectl unexport NAME\n"
    "       kfcachectl status [-s|--stats] [-j|--json]\n"
    "       kfcachectl stop\n"
    "       kfcachectl -h|--help | -V|--version\n"
    "  --key: a logon key in your keyrings (keyctl add logon kverbs:NAME SECRET @u)\n"
    "         that every client proves (mount -o key=...); default " KFC_DEFAULT_KEY "\n"
    "  --key-file: the key's secret from FILE (mode 0600, 16 to 64 bytes), loaded\n"
    "         into this process's keyring, as a service needs\n"
    "  --insecure: no authentication: any host may mount (mount -o insecure)\n"
    "  load: start and export as FILE says (default " KFC_CONFIG "; see\n"
    "         kfcachectl(8)); nothing stays started if a step fails\n"
    "  --client: only hosts of this address prefix may mount the export (up to 16;\n"
    "         none: every client that proves the server's key)\n"
    "  --json: one JSON object, counters included\n"
    "exit status: 0 ok, 1 failure, 2 usage error\n";

[[noreturn]] void usage(const std::string &why = "")
{
    kvcli::usage_error("kfcachectl", usage_text, why);
}

[[noreturn]] void fail(int err, const std::string &what, const std::string &ack)
{
    std::fprintf(stderr, "kfcachectl: %s: %s%s%s\n", what.c_str(), std::strerror(err),
                 ack.empty() ? "" : ": ", ack.c_str());
    std::exit(1);
}

const char *const stat_names[KFC_S_MAX + 1] = {
    nullptr, "clients", "requests", "reads", "pages", "softirq", "deferred",
    "malformed", "errors", "handles", "unmounted", "refused",
};

// A socket address attribute as (address, port).
std::pair<std::string, std::uint16_t> addr_port(const std::uint8_t *p, std::size_t len)
{
    char buf[INET6_ADDRSTRLEN] = "?";
    std::uint16_t port = 0;
    if (len == sizeof(sockaddr_in)) {
        sockaddr_in in;
        std::memcpy(&in, p, sizeof(in));
        inet_ntop(AF_INET, &in.sin_addr, buf, sizeof(buf));
        port = ntohs(in.sin_port);
    } else if (len == sizeof(sockaddr_in6)) {
        sockaddr_in6 in6;
        std::memcpy(&in6, p, sizeof(in6));
        inet_ntop(AF_INET6, &in6.sin6_addr, buf, sizeof(buf));
        port = ntohs(in6.sin6_port);
    }
    return {buf, port};
}

class ctl {
public:
    ctl()
    {
        const int err = sock_.resolve(KFC_GENL_NAME, &family_);
        if (err)
            fail(err, "generic netlink family " KFC_GENL_NAME,
                 err == ENOENT ? "is kfcache_srv.ko loaded?" : "");
        sock_.attr_names(kvgenl::names({{KFC_A_ADDR, "addr"}, {KFC_A_NAME, "name"},
                                        {KFC_A_PATH, "path"}, {KFC_A_KEY, "key"},
                                        {KFC_A_CLIENTS, "clients"}}));
    }
    kvgenl::message msg(std::uint8_t cmd) { return kvgenl::message(family_, cmd, KFC_GENL_VERSION); }
    void run(kvgenl::message &m, const char *what, std::vector<std::uint8_t> *reply = nullptr)
    {
        const int err = sock_.request(m.finish(), reply);
        if (err)
            fail(err, what, sock_.last_ack());
    }
    void dump(kvgenl::message &m, const char *what,
              const std::function<void(const std::uint8_t *, std::size_t)> &each, bool *changed)
    {
        const int err = sock_.dump(m.finish(), each, changed);
        if (err)
            fail(err, what, sock_.last_ack());
    }
    // The request's error, 0 or errno, with ack() its extended ack.
    int try_run(kvgenl::message &m) { return sock_.request(m.finish(), nullptr); }
    std::string ack() const { return sock_.last_ack(); }

private:
    kvgenl::socket sock_;
    std::uint16_t family_ = 0;
};

// The server as the kernel reports it (KFC_CMD_GET).
struct export_info {
    std::string name, path;
    std::vector<std::string> clients;
};

struct server_status {
    bool running = false;
    std::string addr;
    std::uint16_t port = 0;
    std::vector<export_info> exports;
    std::vector<std::pair<const char *, std::uint64_t>> stats;
};

export_info parse_export(const std::uint8_t *p, std::size_t len)
{
    const auto e = kvgenl::parse(p, len);
    export_info x{kvgenl::attr_str(e, KFC_A_NAME), kvgenl::attr_str(e, KFC_A_PATH), {}};
    if (auto it = e.find(KFC_A_CLIENTS); it != e.end())
        for (std::size_t off = 0; off + sizeof(kfc_client) <= it->second.second;
             off += sizeof(kfc_client)) {
            kfc_client cl;
            std::memcpy(&cl, it->second.first + off, sizeof(cl));
            x.clients.push_back(kfcache::client_str(cl));
        }
    return x;
}

server_status get_status()
{
    ctl c;
    auto m = c.msg(KFC_CMD_GET);
    std::vector<std::uint8_t> reply;
    c.run(m, "status", &reply);
    server_status st;
    const auto a = kvgenl::parse(reply.data(), reply.size());
    st.running = kvgenl::attr<std::uint8_t>(a, KFC_A_RUNNING);
    if (auto it = a.find(KFC_A_ADDR); st.running && it != a.end())
        std::tie(st.addr, st.port) = addr_port(it->second.first, it->second.second);
    if (auto it = a.find(KFC_A_STATS); it != a.end())
        for (const auto &[type, v] : kvgenl::parse_all(it->second.first, it->second.second))
            if (type >= 1 && type <= KFC_S_MAX && v.second == 8) {
                std::uint64_t n;
                std::memcpy(&n, v.first, 8);
                st.stats.emplace_back(stat_names[type], n);
            }
    // The exports, a dump: taken again (a few times) if they changed
    // while it ran, so the list is one moment's.
    for (int tries = 0;; ++tries) {
        bool changed = false;
        st.exports.clear();
        auto d = c.msg(KFC_CMD_EXPORT_GET);
        c.dump(d, "status: the exports",
               [&](const std::uint8_t *p, std::size_t len) {
                   st.exports.push_back(parse_export(p, len));
               },
               &changed);
        if (!changed)
            break;
        if (tries == 4)
            fail(EAGAIN, "status: the exports", "they kept changing during the listing");
    }
    return st;
}

void status_json(const server_status &st)
{
    kvcli::json j = {{"running", st.running}};
    j["address"] = st.addr.empty() ? kvcli::json() : kvcli::json(st.addr);
    j["port"] = st.addr.empty() ? kvcli::json() : kvcli::json(st.port);
    kvcli::json ex = kvcli::json::array();
    for (const auto &x : st.exports)
        ex.push_back({{"name", x.name}, {"path", x.path}, {"clients", x.clients}});
    j["exports"] = ex;
    kvcli::json s = kvcli::json::object();
    for (const auto &[name, v] : st.stats)
        s[name] = v;
    j["stats"] = s;
    kvcli::print_json(j);
}

int status(int argc, char **argv)
{
    bool stats = false, json = false;
    kvcli::flags("kfcachectl", usage_text, argc, argv, 2,
                 {{"-s", "--stats", &stats}, {"-j", "--json", &json}});
    const server_status st = get_status();
    if (json) {
        status_json(st);
        return 0;
    }
    std::printf("server %s", st.running ? "running" : "stopped");
    if (!st.addr.empty())
        std::printf(" on %s port %u", st.addr.c_str(), st.port);
    std::printf("\n");
    for (const auto &x : st.exports) {
        std::printf("export %s %s", x.name.c_str(), x.path.c_str());
        const char *sep = " clients ";
        for (const auto &cl : x.clients) {
            std::printf("%s%s", sep, cl.c_str());
            sep = ",";
        }
        std::printf("\n");
    }
    if (stats)
        for (const auto &[name, v] : st.stats)
            std::printf("%s %llu\n", name, static_cast<unsigned long long>(v));
    return 0;
}

// What START sends: the address and the key's description, the key
// loaded from the key-file if one is given.  Exits on a bad address or
// key-file, before anything changed.
struct start_args {
    std::vector<std::uint8_t> addr;
    std::string key;
};

start_args prepare_start(const kfcache::server_config &cfg)
{
    start_args a{kvgenl::sockaddr_bytes(cfg.addr, cfg.port), {}};
    if (a.addr.empty())
        fail(EINVAL, "start", "not an IP address: " + cfg.addr);
    a.key = kvcli::key_choice("kfcachectl", usage_text, cfg.key, cfg.insecure, KFC_DEFAULT_KEY);
    if (!cfg.key_file.empty())
        if (const std::string why = kvcli::load_key_file(a.key, cfg.key_file); !why.empty())
            fail(ENOKEY, "start", why);
    return a;
}

// START: 0, or 1 with the reason printed.
int start(const kfcache::server_config &cfg, const start_args &a)
{
    ctl c;
    auto m = c.msg(KFC_CMD_START);
    m.put(KFC_A_ADDR, a.addr.data(), a.addr.size());
    if (!a.key.empty())
        m.put_str(KFC_A_KEY, a.key);
    if (const int err = c.try_run(m)) {
        const std::string ack = c.ack();
        std::fprintf(stderr, "kfcachectl: start: %s%s%s\n", std::strerror(err),
                     ack.empty() ? "" : ": ", ack.c_str());
        if (cfg.key_file.empty())
            kvcli::key_hint("kfcachectl", cfg.key, KFC_DEFAULT_KEY, ack);
        return kvcli::exit_failure;
    }
    return 0;
}

// EXPORT @e: 0 or the kernel's errno (c.ack() says why).
int add_export(ctl &c, const kfcache::export_entry &e)
{
    auto m = c.msg(KFC_CMD_EXPORT);
    m.put_str(KFC_A_NAME, e.name);
    m.put_str(KFC_A_PATH, e.path);
    if (!e.clients.empty())
        m.put(KFC_A_CLIENTS, e.clients.data(), e.clients.size() * sizeof(kfc_client));
    return c.try_run(m);
}

// load FILE: the server as the file says.  Refused while the server
// runs, or (before anything changes) for a bad address or key-file;
// exports left from before are removed (the file is the whole list), then
// START and every EXPORT, all or nothing: after a failed export, the ones
// made are removed and the server stopped again.
int load(const std::string &file)
{
    std::ifstream f(file);
    if (!f)
        fail(errno ? errno : ENOENT, "load", file);
    std::stringstream text;
    text << f.rdbuf();
    kfcache::server_config cfg;
    try {
        cfg = kfcache::parse_config(text.str(), file);
    } catch (const std::runtime_error &x) {
        std::fprintf(stderr, "kfcachectl: %s\n", x.what());
        return kvcli::exit_failure;
    }
    const server_status now = get_status();
    if (now.running)
        fail(EBUSY, "load", "the server is running (kfcachectl stop first)");
    const start_args args = prepare_start(cfg);  // nothing changed if it fails
    ctl c;
    const auto unexport = [&c](const std::string &name) {
        auto m = c.msg(KFC_CMD_UNEXPORT);
        m.put_str(KFC_A_NAME, name);
        return c.try_run(m);
    };
    for (const auto &x : now.exports)
        if (const int err = unexport(x.name))
            fail(err, "load: removing the old export " + x.name, c.ack());
    if (const int ret = start(cfg, args))
        return ret;
    for (std::size_t i = 0; i < cfg.exports.size(); ++i) {
        const auto &e = cfg.exports[i];
        if (const int err = add_export(c, e)) {
            const std::string ack = c.ack();
            for (std::size_t j = 0; j < i; ++j)
                unexport(cfg.exports[j].name);
            auto stop = c.msg(KFC_CMD_STOP);
            c.try_run(stop);
            fail(err, file + ":" + std::to_string(e.line) + ": export " + e.name,
                 ack + (ack.empty() ? "" : "; ") + "nothing stays started");
        }
    }
    return 0;
}

}  // namespace

int main(int argc, char **argv)
try {
    kvcli::standard_options(argc, argv, "kfcachectl", usage_text);
    if (argc < 2)
        usage();
    const std::string cmd = argv[1];
    if (cmd == "start") {
        if (argc < 3)
            usage();
        kfcache::server_config cfg;
        cfg.addr = argv[2];
        for (int i = 3; i < argc; i += 2) {
            const std::string opt = argv[i];
            if (opt == "--insecure") {
                cfg.insecure = true;
                --i;
                continue;
            }
            if (i + 1 >= argc)
                usage(opt + " needs a value");
            if (opt == "--port")
                cfg.port = static_cast<std::uint16_t>(
                    kvcli::number("kfcachectl", usage_text, "--port", argv[i + 1], 1, 65535));
            else if (opt == "--key" && *argv[i + 1] &&
                     std::strlen(argv[i + 1]) <= KFC_KEY_DESC_MAX)
                cfg.key = argv[i + 1];
            else if (opt == "--key-file")
                cfg.key_file = argv[i + 1];
            else
                usage(opt == "--key" ? "--key: 1 to 255 characters" : "unknown option " + opt);
        }
        if (cfg.insecure && !cfg.key_file.empty())
            usage("--key-file and --insecure exclude each other");
        return start(cfg, prepare_start(cfg));
    } else if (cmd == "load" && argc <= 3) {
        return load(argc == 3 ? argv[2] : KFC_CONFIG);
    } else if (cmd == "stop" && argc == 2) {
        ctl c;
        auto m = c.msg(KFC_CMD_STOP);
        c.run(m, "stop");
    } else if (cmd == "export" && argc >= 4) {
        kfcache::export_entry e{argv[2], argv[3], {}, 0};
        for (int i = 4; i < argc; i += 2) {
            if (std::string(argv[i]) != "--client" || i + 1 >= argc)
                usage(std::string("export: unknown option or missing value: ") + argv[i]);
            if (e.clients.size() == KFC_CLIENTS_MAX)
                usage("--client: at most " + std::to_string(KFC_CLIENTS_MAX) + " per export");
            try {
                e.clients.push_back(kfcache::parse_client(argv[i + 1]));
            } catch (const std::invalid_argument &x) {
                usage(std::string("--client: ") + x.what());
            }
        }
        ctl c;
        if (const int err = add_export(c, e))
            fail(err, "export", c.ack());
    } else if (cmd == "unexport" && argc == 3) {
        ctl c;
        auto m = c.msg(KFC_CMD_UNEXPORT);
        m.put_str(KFC_A_NAME, argv[2]);
        c.run(m, "unexport");
    } else if (cmd == "status") {
        return status(argc, argv);
    } else {
        usage();
    }
    return 0;
} catch (const std::system_error &e) {
    std::fprintf(stderr, "kfcachectl: %s\n", e.what());
    return 1;
}
