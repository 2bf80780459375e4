// SPDX-License-Identifier: GPL-2.0-only
//
// kmigrate: the operator's tool for process migration (samples/kmigrate),
// over the generic netlink family "kmigrate" and /dev/kmigrate.  start,
// stop and move need CAP_SYS_ADMIN, status CAP_NET_ADMIN.
//
//   kmigrate start [--addr ADDR] [--port PORT] [--node N]
//   kmigrate stop
//   kmigrate status [-j|--json]
//   kmigrate move PID ADDR[:PORT] [--precopy] [--no-prefetch]
//   kmigrate run [--] PROG [ARGS...]
//   kmigrate serve [--policy FILE] [--log-dir DIR] [--once] [--allow-root]
//
// `serve` is the destination's spawner: the kernel hands it each incoming
// migration with its source's address, and if a rule of the policy
// (policy.hpp; default /etc/kverbs/kmigrate-serve.conf) lets that address
// start that executable, it starts the migrating program there as the
// rule's local account (same executable, same argv, randomisation off,
// KMIGRATE_INCOMING=<id>:<token>), whose libkmigrate then takes the arena
// over.  Anything else it refuses (KMIGRATE_IOC_REFUSE): the source is
// told EACCES at once.
#include "internal.hpp"
#include "policy.hpp"

#include <kvgenl/kvgenl.hpp>
#include <kverbs/kmigrate.h>

#include <fcntl.h>
#include <grp.h>
#include <kvcli/json.hpp>
#include <kvcli/key.hpp>
#include <kvcli/kvcli.hpp>

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace {

using kmigrate::detail::format_sockaddr;

constexpr const char *usage_text =
    "usage: kmigrate start [--addr ADDR] [--port PORT] [--node N]\n"
    "                      [--key kverbs:NAME] [--key-file FILE | --insecure]\n"
    "       kmigrate stop\n"
    "       kmigrate status [-j|--json]\n"
    "       kmigrate move PID ADDR[:PORT] [--precopy] [--no-prefetch]\n"
    "       kmigrate run [--] PROG [ARGS...]\n"
    "       kmigrate serve [--policy FILE] [--log-dir DIR] [--once] [--allow-root]\n"
    "       kmigrate -h|--help | -V|--version\n"
    "  --key: a logon key in your keyrings (keyctl add logon kverbs:NAME SECRET @u),\n"
    "         the same secret on every node: peers prove it both ways;\n"
    "         default " KMIGRATE_DEFAULT_KEY "\n"
    "  --key-file: the key's secret from FILE (mode 0600, 16 to 64 bytes), loaded\n"
    "         into this process's keyring, as a service needs\n"
    "  --insecure: no authentication: the policy's addresses are all that\n"
    "         stands between any host and serve's programs\n"
    "exit status: 0 ok, 1 failure, 2 usage error\n";

[[noreturn]] void usage(const std::string &why = "")
{
    kvcli::usage_error("kmigrate", usage_text, why);
}

[[noreturn]] void fail(int err, const std::string &what, const std::string &ack = "")
{
    std::fprintf(stderr, "kmigrate: %s: %s%s%s\n", what.c_str(), std::strerror(err),
                 ack.empty() ? "" : ": ", ack.c_str());
    std::exit(1);
}

unsigned long number(const char *opt, const char *s, unsigned long max)
{
    return kvcli::number("kmigrate", usage_text, opt, s, 0, max);
}

class ctl {
public:
    ctl()
    {
        const int err = sock_.resolve(KMIGRATE_GENL_NAME, &family_);
        if (err)
            fail(err, "generic netlink family " KMIGRATE_GENL_NAME,
                 err == ENOENT ? "is kmigrate.ko loaded?" : "");
        sock_.attr_names(kvgenl::names({{KMIGRATE_A_ADDR, "addr"}, {KMIGRATE_A_NODE, "node"},
                                        {KMIGRATE_A_PID, "pid"}, {KMIGRATE_A_MODE, "mode"},
                                        {KMIGRATE_A_FLAGS, "flags"}, {KMIGRATE_A_KEY, "key"}}));
    }
    kvgenl::message msg(std::uint8_t cmd)
    {
        return kvgenl::message(family_, cmd, KMIGRATE_GENL_VERSION);
    }
    // @cap: what an EPERM without the kernel's message means
    // The request's error, 0 or errno, with ack() its extended ack.
    int try_run(kvgenl::message &m) { return sock_.request(m.finish(), nullptr); }
    std::string ack() const { return sock_.last_ack(); }
    void run(kvgenl::message &m, const char *what, std::vector<std::uint8_t> *reply = nullptr,
             const char *cap = "needs CAP_SYS_ADMIN")
    {
        const int err = sock_.request(m.finish(), reply);
        if (err)
            fail(err, what, sock_.last_ack().empty() && err == EPERM ? cap : sock_.last_ack());
    }

private:
    kvgenl::socket sock_;
    std::uint16_t family_ = 0;
};

// ---- start, stop, move ----------------------------------------------------

int start(int argc, char **argv)
{
    std::string addr = "0.0.0.0";
    unsigned long port = KMIGRATE_DEFAULT_PORT, node = 0;
    std::string key, key_file;
    bool insecure = false;
    for (int i = 2; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--insecure") {
            insecure = true;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        if (a == "--addr")
            addr = argv[++i];
        else if (a == "--port")
            port = number("--port", argv[++i], 65535);
        else if (a == "--node")
            node = number("--node", argv[++i], UINT32_MAX);
        else if (a == "--key") {
            key = argv[++i];
            if (key.empty() || key.size() > KMIGRATE_KEY_DESC_MAX)
                usage("--key: 1 to " + std::to_string(KMIGRATE_KEY_DESC_MAX) + " characters");
        } else if (a == "--key-file")
            key_file = argv[++i];
        else
            usage("unknown option " + a);
    }
    if (!port)
        usage("--port: 1 to 65535");
    if (insecure && !key_file.empty())
        usage("--key-file and --insecure exclude each other");
    const auto sa = kvgenl::sockaddr_bytes(addr, static_cast<std::uint16_t>(port));
    if (sa.empty())
        fail(EINVAL, "start", "not an IP address: " + addr);
    ctl c;
    auto m = c.msg(KMIGRATE_CMD_START);
    m.put(KMIGRATE_A_ADDR, sa.data(), sa.size());
    if (node)
        m.put<std::uint32_t>(KMIGRATE_A_NODE, static_cast<std::uint32_t>(node));
    const std::string use = kvcli::key_choice("kmigrate", usage_text, key, insecure,
                                              KMIGRATE_DEFAULT_KEY);
    if (!key_file.empty())
        if (const std::string why = kvcli::load_key_file(use, key_file); !why.empty())
            fail(ENOKEY, "start", why);
    if (!use.empty())
        m.put_str(KMIGRATE_A_KEY, use);
    if (const int err = c.try_run(m)) {
        const std::string ack = c.ack().empty() && err == EPERM ? "needs CAP_SYS_ADMIN" : c.ack();
        std::fprintf(stderr, "kmigrate: start: %s%s%s\n", std::strerror(err),
                     ack.empty() ? "" : ": ", ack.c_str());
        if (key_file.empty())
            kvcli::key_hint("kmigrate", key, KMIGRATE_DEFAULT_KEY, ack);
        return kvcli::exit_failure;
    }
    return 0;
}

int move(int argc, char **argv)
{
    if (argc < 4)
        usage();
    const auto pid = static_cast<std::uint32_t>(number("PID", argv[2], INT32_MAX));
    sockaddr_storage ss;
    socklen_t len;
    std::string why;
    if (!pid || !kmigrate::detail::parse_dest(argv[3], &ss, &len, &why))
        fail(EINVAL, "move", why.empty() ? "bad pid" : why);
    std::uint32_t mode = KMIGRATE_MODE_POSTCOPY, flags = 0;
    for (int i = 4; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--precopy")
            mode = KMIGRATE_MODE_PRECOPY;
        else if (a == "--no-prefetch")
            flags |= KMIGRATE_F_NO_PREFETCH;
        else
            usage();
    }
    ctl c;
    auto m = c.msg(KMIGRATE_CMD_MOVE);
    m.put<std::uint32_t>(KMIGRATE_A_PID, pid);
    m.put(KMIGRATE_A_ADDR, &ss, len);
    m.put<std::uint32_t>(KMIGRATE_A_MODE, mode);
    m.put<std::uint32_t>(KMIGRATE_A_FLAGS, flags);
    c.run(m, "move");
    return 0;
}

// ---- status ---------------------------------------------------------------

const char *const state_names[] = {"local", "preparing", "frozen", "incoming",
                                   "pulling", "arrived", "lost"};
const char *const stat_names[KMIGRATE_S_MAX + 1] = {
    nullptr, "out", "out_done", "out_resumed", "in", "in_done", "in_lost",
    "fault_pages", "prefetch_pages", "reads", "malformed", "downtime_ns", "total_ns",
    "in_refused", "expired",
};

struct arena_info {
    std::uint32_t pid = 0, state = 0, npages = 0, mode = 0, todo = 0;
    std::uint64_t va = 0, faults = 0, prefetched = 0, fault_ns = 0, downtime_ns = 0, total_ns = 0;
    std::string peer;  // empty: none
};

std::string state_name(std::uint32_t s)
{
    return s < std::size(state_names) ? state_names[s] : "state" + std::to_string(s);
}

std::string mode_name(std::uint32_t m)
{
    return m == KMIGRATE_MODE_POSTCOPY ? "postcopy"
           : m == KMIGRATE_MODE_PRECOPY ? "precopy"
                                        : "mode" + std::to_string(m);
}

std::string ms(std::uint64_t ns)
{
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3f", static_cast<double>(ns) / 1e6);
    return buf;
}

int status(bool json)
{
    ctl c;
    auto m = c.msg(KMIGRATE_CMD_GET);
    std::vector<std::uint8_t> reply;
    c.run(m, "status", &reply, "needs CAP_NET_ADMIN");
    const auto a = kvgenl::parse(reply.data(), reply.size());
    const bool running = kvgenl::attr<std::uint8_t>(a, KMIGRATE_A_RUNNING);
    const auto node = kvgenl::attr<std::uint32_t>(a, KMIGRATE_A_NODE);
    std::string addr;
    if (auto it = a.find(KMIGRATE_A_ADDR); it != a.end())
        addr = format_sockaddr(it->second.first, it->second.second);
    std::vector<arena_info> arenas;
    for (const auto &[type, v] : kvgenl::parse_all(reply.data(), reply.size())) {
        if (type != KMIGRATE_A_ARENA)
            continue;
        const auto r = kvgenl::parse(v.first, v.second);
        arena_info i;
        i.pid = kvgenl::attr<std::uint32_t>(r, KMIGRATE_R_PID);
        i.state = kvgenl::attr<std::uint32_t>(r, KMIGRATE_R_STATE);
        i.npages = kvgenl::attr<std::uint32_t>(r, KMIGRATE_R_NPAGES);
        i.va = kvgenl::attr<std::uint64_t>(r, KMIGRATE_R_VA);
        i.mode = kvgenl::attr<std::uint32_t>(r, KMIGRATE_R_MODE);
        i.todo = kvgenl::attr<std::uint32_t>(r, KMIGRATE_R_TODO);
        i.faults = kvgenl::attr<std::uint64_t>(r, KMIGRATE_R_FAULTS);
        i.prefetched = kvgenl::attr<std::uint64_t>(r, KMIGRATE_R_PREFETCHED);
        i.fault_ns = kvgenl::attr<std::uint64_t>(r, KMIGRATE_R_FAULT_NS);
        i.downtime_ns = kvgenl::attr<std::uint64_t>(r, KMIGRATE_R_DOWNTIME_NS);
        i.total_ns = kvgenl::attr<std::uint64_t>(r, KMIGRATE_R_TOTAL_NS);
        if (auto it = r.find(KMIGRATE_R_PEER); it != r.end() && it->second.second)
            i.peer = format_sockaddr(it->second.first, it->second.second);
        arenas.push_back(std::move(i));
    }
    std::vector<std::pair<const char *, std::uint64_t>> stats;
    if (auto it = a.find(KMIGRATE_A_STATS); it != a.end())
        for (const auto &[type, v] : kvgenl::parse_all(it->second.first, it->second.second))
            if (type >= 1 && type <= KMIGRATE_S_MAX && v.second == 8) {
                std::uint64_t n;
                std::memcpy(&n, v.first, 8);
                stats.emplace_back(stat_names[type], n);
            }

    if (json) {
        kvcli::json j = {{"running", running}, {"node", node}};
        j["addr"] = addr.empty() ? kvcli::json() : kvcli::json(addr);
        kvcli::json ar = kvcli::json::array();
        for (const auto &i : arenas)
            ar.push_back({{"pid", i.pid},
                          {"state", state_name(i.state)},
                          {"npages", i.npages},
                          {"va", i.va},
                          {"peer", i.peer.empty() ? kvcli::json() : kvcli::json(i.peer)},
                          {"mode", mode_name(i.mode)},
                          {"todo", i.todo},
                          {"faults", i.faults},
                          {"prefetched", i.prefetched},
                          {"fault_ns", i.fault_ns},
                          {"downtime_ns", i.downtime_ns},
                          {"total_ns", i.total_ns}});
        j["arenas"] = ar;
        kvcli::json st = kvcli::json::object();
        for (const auto &[name, v] : stats)
            st[name] = v;
        j["stats"] = st;
        kvcli::print_json(j);
        return 0;
    }
    if (running)
        std::printf("kmigrate running on %s, node %u\n", addr.empty() ? "?" : addr.c_str(), node);
    else
        std::printf("kmigrate stopped\n");
    if (!arenas.empty()) {
        std::printf("%-8s %-9s %8s %-14s %-8s %-22s %8s %10s %10s %10s %11s %10s\n", "PID",
                    "STATE", "PAGES", "VA", "MODE", "PEER", "TODO", "FAULTS", "PREFETCHED",
                    "FAULT_MS", "DOWNTIME_MS", "TOTAL_MS");
        for (const auto &i : arenas)
            std::printf("%-8u %-9s %8u %#-14" PRIx64 " %-8s %-22s %8u %10" PRIu64 " %10" PRIu64
                        " %10s %11s %10s\n",
                        i.pid, state_name(i.state).c_str(), i.npages, i.va,
                        mode_name(i.mode).c_str(), i.peer.empty() ? "-" : i.peer.c_str(), i.todo,
                        i.faults, i.prefetched, ms(i.fault_ns).c_str(), ms(i.downtime_ns).c_str(),
                        ms(i.total_ns).c_str());
    }
    for (const auto &[name, v] : stats)
        std::printf("%s %" PRIu64 "\n", name, v);
    return 0;
}

// ---- run ------------------------------------------------------------------

int run(int argc, char **argv)
{
    int i = 2;
    if (i < argc && !std::strcmp(argv[i], "--"))
        i++;
    if (i >= argc)
        usage();
    const int p = ::personality(0xffffffff);
    if (p == -1 || ::personality(static_cast<unsigned long>(p) | ADDR_NO_RANDOMIZE) == -1)
        fail(errno, "personality(ADDR_NO_RANDOMIZE)");
    ::execvp(argv[i], argv + i);
    std::fprintf(stderr, "kmigrate: %s: %s\n", argv[i], std::strerror(errno));
    return 127;
}

// ---- serve ----------------------------------------------------------------

// Children still running, for the SIGCHLD handler's report.  Changed only
// with SIGCHLD blocked.
struct child {
    pid_t pid;
    std::uint32_t id;
};
child children[1024];
volatile sig_atomic_t once_pid;        // --once: the child to wait for
volatile sig_atomic_t once_status = -1;

// Async-signal-safe: a line from literal pieces and numbers.
class line {
public:
    line &operator<<(const char *s)
    {
        while (*s && n_ < sizeof(buf_) - 1)
            buf_[n_++] = *s++;
        return *this;
    }
    line &operator<<(long v)
    {
        char d[24];
        int k = 0;
        const bool neg = v < 0;
        unsigned long u = neg ? 0UL - static_cast<unsigned long>(v) : static_cast<unsigned long>(v);
        do
            d[k++] = static_cast<char>('0' + u % 10);
        while (u /= 10);
        if (neg)
            d[k++] = '-';
        while (k && n_ < sizeof(buf_) - 1)
            buf_[n_++] = d[--k];
        return *this;
    }
    void out()
    {
        buf_[n_++] = '\n';
        for (std::size_t at = 0; at < n_;) {
            const ssize_t w = ::write(1, buf_ + at, n_ - at);
            if (w <= 0 && errno != EINTR)
                break;
            if (w > 0)
                at += static_cast<std::size_t>(w);
        }
        n_ = 0;
    }

private:
    char buf_[4200];
    std::size_t n_ = 0;
};

void on_child(int)
{
    const int saved = errno;
    int st;
    pid_t pid;
    while ((pid = ::waitpid(-1, &st, WNOHANG)) > 0) {
        line l;
        l << "id ";
        bool known = false;
        for (child &c : children)
            if (c.pid == pid) {
                l << static_cast<long>(c.id);
                c.pid = 0;
                known = true;
                break;
            }
        if (!known)
            l << "?";
        l << " pid " << static_cast<long>(pid);
        if (WIFSIGNALED(st))
            l << " killed by signal " << static_cast<long>(WTERMSIG(st));
        else
            l << " exited status " << static_cast<long>(WEXITSTATUS(st));
        l.out();
        if (pid == once_pid)
            once_status = st;
    }
    errno = saved;
}

void make_dirs(const std::string &dir)
{
    for (std::size_t at = 1; at <= dir.size(); at++)
        if (at == dir.size() || dir[at] == '/')
            if (::mkdir(dir.substr(0, at).c_str(), 0755) < 0 && errno != EEXIST)
                fail(errno, "creating " + dir.substr(0, at));
}

// In the child: become the migrating process, as @as.
[[noreturn]] void start_child(const kmigrate_incoming &in, const kmigrate::serve::account &as,
                              const std::string &log, char **args, const sigset_t &mask)
{
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGCHLD, &dfl, nullptr);
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || null < 0) {
        std::fprintf(stderr, "kmigrate: id %u: %s: %s\n", in.id, out < 0 ? log.c_str() : "/dev/null",
                     std::strerror(errno));
        ::_exit(127);
    }
    ::dup2(null, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    const auto die = [&](const char *what) {
        std::fprintf(stderr, "kmigrate serve: id %u: %s: %s\n", in.id, what, std::strerror(errno));
        ::_exit(127);
    };
    // The policy's account, never anything the source said; the log is
    // the account's.  Not root: load_policy() let only this account in.
    if (::geteuid() == 0) {
        if (::fchown(out, as.uid, as.gid) < 0)
            die("chown log");
        if (!as.name.empty() ? ::initgroups(as.name.c_str(), as.gid) < 0
                             : ::setgroups(1, &as.gid) < 0)
            die("setting the supplementary groups");
        if (::setgid(as.gid) < 0)
            die("setgid");
        if (::setuid(as.uid) < 0)
            die("setuid");
    }
    const int p = ::personality(0xffffffff);
    if (p == -1 || ::personality(static_cast<unsigned long>(p) | ADDR_NO_RANDOMIZE) == -1)
        die("personality(ADDR_NO_RANDOMIZE)");
    char incoming[16 + 2 * KMIGRATE_TOKEN_LEN];
    int at = std::snprintf(incoming, sizeof(incoming), "%u:", in.id);
    for (unsigned i = 0; i < KMIGRATE_TOKEN_LEN; i++)
        at += std::snprintf(incoming + at, sizeof(incoming) - static_cast<std::size_t>(at),
                            "%02x", in.token[i]);
    if (::setenv("KMIGRATE_INCOMING", incoming, 1) < 0)
        die("setenv");
    ::execv(in.path, args);
    die(in.path);
    ::_exit(127);  // not reached: die() ends the child
}

// Tell the kernel (and so the source, with READY(@err)) that @in will not
// run, and log why.
void refuse(int dev, const kmigrate_incoming &in, int err, const std::string &why)
{
    line l;
    l << "id " << static_cast<long>(in.id) << " refused: " << why.c_str();
    l.out();
    kmigrate_refuse r{in.id, static_cast<std::uint32_t>(err)};
    if (::ioctl(dev, KMIGRATE_IOC_REFUSE, &r) < 0 && errno != ENOENT)
        fail(errno, "refusing a migration (REFUSE)");
}

std::vector<kmigrate::serve::rule> load_policy(const std::string &file, bool allow_root)
{
    std::ifstream f(file);
    if (!f) {
        if (errno != ENOENT)
            fail(errno, "reading the policy " + file);
        std::fprintf(stderr, "kmigrate serve: no policy %s: every migration will be refused\n",
                     file.c_str());
        return {};
    }
    std::ostringstream text;
    text << f.rdbuf();
    try {
        return kmigrate::serve::parse_policy(text.str(), file, allow_root);
    } catch (const std::runtime_error &e) {
        std::fprintf(stderr, "kmigrate serve: %s\n", e.what());
        std::exit(1);
    }
}

int serve(int argc, char **argv)
{
    std::string dir = "/var/log/kmigrate", policy = "/etc/kverbs/kmigrate-serve.conf";
    bool once = false, allow_root = false;
    for (int i = 2; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--log-dir" && i + 1 < argc)
            dir = argv[++i];
        else if (a == "--policy" && i + 1 < argc)
            policy = argv[++i];
        else if (a == "--once")
            once = true;
        else if (a == "--allow-root")
            allow_root = true;
        else
            usage();
    }
    const std::vector<kmigrate::serve::rule> rules = load_policy(policy, allow_root);
    if (::geteuid() != 0)
        for (const auto &r : rules)
            if (r.as.uid != ::geteuid() || r.as.gid != ::getegid())
                fail(EPERM, policy + ":" + std::to_string(r.line) +
                                ": another account than this one: kmigrate serve runs as root");
    const int dev = ::open(KMIGRATE_DEV, O_RDWR | O_CLOEXEC);
    if (dev < 0)
        fail(errno, KMIGRATE_DEV, errno == ENOENT ? "is kmigrate.ko loaded?" : "");
    make_dirs(dir);

    // Reaped in the handler, so that no exit waits for the next
    // migration; no SA_RESTART, so a blocked ACCEPT sees it too.
    struct sigaction sa {};
    sa.sa_handler = on_child;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGCHLD, &sa, nullptr);
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    ::sigprocmask(SIG_SETMASK, nullptr, &old);
    sigdelset(&old, SIGCHLD);

    for (;;) {
        kmigrate_incoming in{};
        if (::ioctl(dev, KMIGRATE_IOC_ACCEPT, &in) < 0) {
            if (errno == EINTR)
                continue;
            fail(errno, "waiting for a migration (ACCEPT)");
        }
        if (in.path_len < 2 || in.path_len > sizeof(in.path) || in.path[in.path_len - 1] ||
            in.path[0] != '/' || !in.args_len || in.args_len > sizeof(in.args) ||
            in.args[in.args_len - 1]) {
            refuse(dev, in, EINVAL, "malformed path or arguments");
            if (once)
                return 1;
            continue;
        }
        sockaddr_storage peer{};
        std::memcpy(&peer, &in.peer, sizeof(peer));
        const std::string from = format_sockaddr(&peer, sizeof(peer));
        const kmigrate::serve::rule *rule = kmigrate::serve::authorise(rules, peer, in.path);
        if (!rule) {
            refuse(dev, in, EACCES, "no rule of " + policy + " lets " + from + " start " +
                                        in.path);
            if (once)
                return 1;
            continue;
        }
        std::vector<char *> args;
        for (std::size_t at = 0; at < in.args_len; at += std::strlen(in.args + at) + 1)
            args.push_back(in.args + at);
        args.push_back(nullptr);
        const std::string log = dir + "/" + std::to_string(in.id) + ".log";

        ::sigprocmask(SIG_BLOCK, &chld, nullptr);
        const pid_t pid = ::fork();
        if (pid == 0)
            start_child(in, rule->as, log, args.data(), old);
        if (pid < 0) {
            const int err = errno;
            ::sigprocmask(SIG_SETMASK, &old, nullptr);
            refuse(dev, in, EAGAIN, std::string("fork failed: ") + std::strerror(err));
            if (once)
                return 1;
            continue;
        }
        for (child &c : children)
            if (!c.pid) {
                c = {pid, in.id};
                break;
            }
        if (once)
            once_pid = pid;
        line l;
        l << "id " << static_cast<long>(in.id) << " pid " << static_cast<long>(pid)
          << " started " << in.path << " from " << from.c_str() << " as uid "
          << static_cast<long>(rule->as.uid) << " (rule at line " << static_cast<long>(rule->line)
          << ") log " << log.c_str();
        l.out();
        if (once) {
            while (once_status < 0)
                ::sigsuspend(&old);
            ::sigprocmask(SIG_SETMASK, &old, nullptr);
            const int st = once_status;
            return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
        }
        ::sigprocmask(SIG_SETMASK, &old, nullptr);
    }
}

}  // namespace

int main(int argc, char **argv)
try {
    kvcli::standard_options(argc, argv, "kmigrate", usage_text);
    if (argc < 2)
        usage();
    const std::string cmd = argv[1];
    if (cmd == "start")
        return start(argc, argv);
    if (cmd == "stop" && argc == 2) {
        ctl c;
        auto m = c.msg(KMIGRATE_CMD_STOP);
        c.run(m, "stop");
        return 0;
    }
    if (cmd == "status") {
        bool json = false;
        kvcli::flags("kmigrate", usage_text, argc, argv, 2, {{"-j", "--json", &json}});
        return status(json);
    }
    if (cmd == "move")
        return move(argc, argv);
    if (cmd == "run")
        return run(argc, argv);
    if (cmd == "serve")
        return serve(argc, argv);
    usage();
} catch (const std::system_error &e) {
    std::fprintf(stderr, "kmigrate: %s\n", e.what());
    return 1;
}
