// SPDX-License-Identifier: GPL-2.0-only
//
// kdsmctl: the operator's tool for kdsm clusters (generic netlink).
//
//   kdsmctl create --node N --pages P --peer 1=ADDR --peer 2=ADDR ...
//                  [--block] [--port PORT] [--join-ms MS] [--fetch-read]
//                  [--defer-to highpri|normal|fifo] [--mode K|T|S] [--weak]
//                  [--key kverbs:NAME] [--key-file F | --insecure] [--wait]
//   kdsmctl status [-s|--stats] [-j|--json]
//   kdsmctl delete
//   kdsmctl monitor [-j|--json]
#include <kdsm/kdsm.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <string>

#include <kvcli/json.hpp>
#include <kvcli/key.hpp>
#include <kvcli/kvcli.hpp>

namespace {

constexpr const char *usage_text =
    "usage: kdsmctl create --node N --pages P --peer ID=ADDR... [--block]\n"
    "                      [--port PORT] [--join-ms MS] [--fetch-read] [--weak]\n"
    "                      [--defer-to highpri|normal|fifo] [--mode K|T|S]\n"
    "                      [--key kverbs:NAME] [--key-file FILE | --insecure]\n"
    "                      [--wait]\n"
    "  --key: a logon key in your keyrings, the same secret on every node\n"
    "         (keyctl add logon kverbs:NAME SECRET @u): members prove it;\n"
    "         default " KDSM_DEFAULT_KEY "\n"
    "  --key-file: the key's secret from FILE (mode 0600, 16 to 64 bytes), loaded\n"
    "         into this process's keyring, as a service needs\n"
    "  --insecure: no authentication: any host that can use a member's\n"
    "         listed address may join\n"
    "       kdsmctl status [-s|--stats] [-j|--json]\n"
    "       kdsmctl delete\n"
    "       kdsmctl monitor [-j|--json]\n"
    "       kdsmctl -h|--help | -V|--version\n"
    "  --json: one JSON object, counters included (monitor: one a line)\n"
    "  monitor: print this node's state as it changes, until interrupted\n"
    "exit status: 0 ok, 1 failure, 2 usage error\n";

[[noreturn]] void usage(const std::string &why = "")
{
    kvcli::usage_error("kdsmctl", usage_text, why);
}

unsigned long number(const char *opt, const char *s, unsigned long hi)
{
    return kvcli::number("kdsmctl", usage_text, opt, s, 0, hi);
}

int create(int argc, char **argv)
{
    kdsm::config c;
    bool wait = false, insecure = false;
    std::string key_file;
    for (int i = 2; i < argc; i++) {
        const std::string a = argv[i];
        auto next = [&]() -> const char * {
            if (i + 1 >= argc)
                usage();
            return argv[++i];
        };
        if (a == "--node") {
            // a node id is a u8 on the wire; the kernel says which are valid
            c.node = static_cast<unsigned>(number("--node", next(), UINT8_MAX));
        } else if (a == "--pages") {
            c.npages = static_cast<std::uint32_t>(number("--pages", next(), UINT32_MAX));
        } else if (a == "--peer") {
            const std::string p = next();
            const auto eq = p.find('=');
            if (eq == std::string::npos)
                usage("--peer: '" + p + "' is not ID=ADDR");
            c.peers.push_back({static_cast<unsigned>(number("--peer ID", p.substr(0, eq).c_str(),
                                                            UINT8_MAX)),
                               p.substr(eq + 1)});
        } else if (a == "--block") {
            c.block = true;
        } else if (a == "--port") {
            c.port = static_cast<std::uint16_t>(number("--port", next(), 65535));
        } else if (a == "--join-ms") {
            c.join_ms = static_cast<std::uint32_t>(number("--join-ms", next(), UINT32_MAX));
        } else if (a == "--fetch-read") {
            c.options |= KDSM_OPT_FETCH_READ;
        } else if (a == "--defer-to") {
            const std::string t = next();
            // two different targets reach the kernel, which refuses them
            if (t == "normal")
                c.options |= KDSM_OPT_DEFER_NORMAL;
            else if (t == "fifo")
                c.options |= KDSM_OPT_DEFER_FIFO;
            else if (t != "highpri")
                usage();
        } else if (a == "--mode") {
            const std::string m = next();
            c.options &= ~(KDSM_OPT_MODE_TASK | KDSM_OPT_MODE_SIM);
            if (m == "T")
                c.options |= KDSM_OPT_MODE_TASK;
            else if (m == "S")
                c.options |= KDSM_OPT_MODE_SIM;
            else if (m != "K")
                usage();
        } else if (a == "--weak") {
            c.options |= KDSM_OPT_WEAK;
        } else if (a == "--key") {
            c.key = next();
            if (c.key.empty() || c.key.size() > KDSM_KEY_DESC_MAX)
                usage("--key: 1 to " + std::to_string(KDSM_KEY_DESC_MAX) + " characters");
        } else if (a == "--key-file") {
            key_file = next();
        } else if (a == "--insecure") {
            insecure = true;
        } else if (a == "--wait") {
            wait = true;
        } else {
            usage();
        }
    }
    const std::string given = c.key;
    c.key = kvcli::key_choice("kdsmctl", usage_text, c.key, insecure, KDSM_DEFAULT_KEY);
    if (insecure && !key_file.empty())
        usage("--key-file and --insecure exclude each other");
    if (!key_file.empty())
        if (const std::string why = kvcli::load_key_file(c.key, key_file); !why.empty()) {
            std::fprintf(stderr, "kdsmctl: create: %s\n", why.c_str());
            return kvcli::exit_failure;
        }
    kdsm::control ctl;
    try {
        ctl.create(c);
    } catch (const kdsm::error &e) {
        std::fprintf(stderr, "kdsmctl: %s\n", e.what());
        if (key_file.empty())
            kvcli::key_hint("kdsmctl", given, KDSM_DEFAULT_KEY, e.what());
        return kvcli::exit_failure;
    }
    if (wait) {
        const kdsm::status s = ctl.wait_ready(static_cast<int>(c.join_ms) + 5000);
        std::printf("node %u of %u: ready, %u pages\n", s.node, s.nnodes, s.npages);
    }
    return 0;
}

const char *placement_name(const kdsm::status &s)
{
    return s.placement == KDSM_PLACE_BLOCK ? "block" : "cyclic";
}

void status_json(const kdsm::status &s)
{
    kvcli::json j = {{"state", kdsm::status::state_name(s.state)}};
    if (s.state != KDSM_STATE_NONE) {
        j["node"] = s.node;
        j["nodes"] = s.nnodes;
        j["pages"] = s.npages;
        j["placement"] = placement_name(s);
        j["options"] = s.options;
        j["error"] = s.error.empty() ? kvcli::json() : kvcli::json(s.error);
        kvcli::json st = kvcli::json::object();
        for (const auto &[name, v] : kdsm::named_stats(s))
            st[name] = v;
        j["stats"] = st;
    }
    kvcli::print_json(j);
}

int status(int argc, char **argv)
{
    bool stats = false, json = false;
    kvcli::flags("kdsmctl", usage_text, argc, argv, 2,
                 {{"-s", "--stats", &stats}, {"-j", "--json", &json}});
    kdsm::control ctl;
    const kdsm::status s = ctl.get();
    if (json) {
        status_json(s);
        return 0;
    }
    std::printf("state %s\n", kdsm::status::state_name(s.state));
    if (s.state == KDSM_STATE_NONE)
        return 0;
    std::printf("node %u of %u\npages %u\nplacement %s\noptions %#x\n", s.node, s.nnodes,
                s.npages, placement_name(s), s.options);
    if (!s.error.empty())
        std::printf("error %s\n", s.error.c_str());
    if (stats)
        for (const auto &[name, v] : kdsm::named_stats(s))
            std::printf("%s %llu\n", name.c_str(), static_cast<unsigned long long>(v));
    return 0;
}

void print_state(const kdsm::status &s, bool json)
{
    if (json) {
        kvcli::json j = {{"state", kdsm::status::state_name(s.state)}};
        if (s.state != KDSM_STATE_NONE)
            j["node"] = s.node;
        if (!s.error.empty())
            j["error"] = s.error;
        std::puts(j.dump(-1, ' ', false, kvcli::json::error_handler_t::replace).c_str());
    } else {
        std::printf("state %s", kdsm::status::state_name(s.state));
        if (s.state != KDSM_STATE_NONE)
            std::printf(" node %u", s.node);
        if (!s.error.empty())
            std::printf(" error %s", s.error.c_str());
        std::printf("\n");
    }
    std::fflush(stdout);
}

// monitor: the state now (once subscribed, so no change falls between),
// then one line (or JSON object) per state notification, until a signal
// ends the process.
int monitor(int argc, char **argv)
{
    bool json = false;
    kvcli::flags("kdsmctl", usage_text, argc, argv, 2, {{"-j", "--json", &json}});
    kdsm::control ctl;
    kdsm::status s;
    if (ctl.next_state(0, &s))  // refuses at once without notifications
        print_state(s, json);
    print_state(ctl.get(), json);
    for (;;)
        if (ctl.next_state(60 * 60 * 1000, &s))
            print_state(s, json);
}

}  // namespace

int main(int argc, char **argv)
{
    kvcli::standard_options(argc, argv, "kdsmctl", usage_text);
    if (argc < 2)
        usage();
    try {
        const std::string cmd = argv[1];
        if (cmd == "create")
            return create(argc, argv);
        if (cmd == "status")
            return status(argc, argv);
        if (cmd == "monitor")
            return monitor(argc, argv);
        if (cmd == "delete" && argc == 2) {
            kdsm::control().remove();
            return 0;
        }
        usage();
    } catch (const kdsm::error &e) {
        std::fprintf(stderr, "kdsmctl: %s\n", e.what());
        return 1;
    }
}
