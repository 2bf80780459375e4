// SPDX-License-Identifier: GPL-2.0-only
//
// libkmigrate: the arena, run(), migrate(), poll(), and the destination's
// side of a migration.
#include "internal.hpp"

#include <kmigrate/kmigrate.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kmigrate {

namespace {

using namespace detail;

constexpr const char reexec_marker[] = "KMIGRATE_REEXEC";

// This process's own state.  None of it migrates: the destination's
// process computes the same from the same executable and argv.
struct process_state {
    bool started = false;
    bool verbose = false;
    // /dev/kmigrate, open until the process ends: its release ends the arena
    int session = -1;
    arena_header *hdr = nullptr;
    char exe[KMIGRATE_PATH_MAX];
    std::uint32_t exe_len = 0;          // with the NUL; 0: it did not fit
    char args[KMIGRATE_ARGS_MAX];
    std::uint32_t args_len = 0;         // 0: argv did not fit
    std::uint8_t fp[KMIGRATE_FP_MAX];
    std::uint32_t fp_len = 0;
};
process_state g;

// The migration in flight.  In the process's memory, not the arena's:
// the kernel reads it while the arena must stay untouched.
struct request {
    ctx_blob blob;
    std::uint32_t freeze_flags;  // KMIGRATE_FREEZE_WAIT, or 0 from poll()
    bool preparing;              // PREPARE went; FREEZE has not answered
    char dest_text[64];
};
request req;

// leave()'s values: the world resumed on the destination, or on the
// source with failed_base + errno
enum : long { resumed_there = 1, failed_base = 2 };

volatile std::sig_atomic_t move_requested;
std::string last_err;

void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char *fmt, ...)
{
    std::va_list ap;
    va_start(ap, fmt);
    std::fputs("kmigrate: ", stderr);
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
    va_end(ap);
}

int fail(int err, std::string why)
{
    last_err = std::move(why);
    return -err;
}

std::string device_error(int err)
{
    return std::string(KMIGRATE_DEV ": ") + std::strerror(err) +
           (err == ENOENT || err == ENODEV || err == ENXIO ? " (is kmigrate.ko loaded?)" : "");
}

void on_move_signal(int)
{
    move_requested = 1;
}

// Code, libraries, stack and heap at the same addresses on every node:
// re-execute once with ADDR_NO_RANDOMIZE unless it is set.
bool randomisation_off(char **argv)
{
    const int p = ::personality(0xffffffff);
    if (p == -1) {
        say("personality: %s", std::strerror(errno));
        return false;
    }
    if (p & ADDR_NO_RANDOMIZE) {
        ::unsetenv(reexec_marker);
        return true;
    }
    if (std::getenv(reexec_marker)) {
        say("address space randomisation is still on after re-executing with "
            "ADDR_NO_RANDOMIZE; is it forbidden here?");
        return false;
    }
    if (::personality(static_cast<unsigned long>(p) | ADDR_NO_RANDOMIZE) == -1) {
        say("personality(ADDR_NO_RANDOMIZE): %s", std::strerror(errno));
        return false;
    }
    ::setenv(reexec_marker, "1", 1);
    ::execv("/proc/self/exe", argv);
    say("re-executing /proc/self/exe without randomisation: %s", std::strerror(errno));
    return false;
}

void remember_program(int argc, char **argv)
{
    char path[PATH_MAX];
    if (::realpath("/proc/self/exe", path)) {
        const std::size_t n = std::strlen(path) + 1;
        if (n <= sizeof(g.exe)) {
            std::memcpy(g.exe, path, n);
            g.exe_len = static_cast<std::uint32_t>(n);
        }
    }
    std::size_t at = 0;
    for (int i = 0; i < argc; i++) {
        const std::size_t n = std::strlen(argv[i]) + 1;
        if (at + n > sizeof(g.args)) {
            at = 0;
            break;
        }
        std::memcpy(g.args + at, argv[i], n);
        at += n;
    }
    g.args_len = static_cast<std::uint32_t>(at);
}

void install_move_signal()
{
    struct sigaction sa {};
    sa.sa_handler = on_move_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(KMIGRATE_SIGNAL, &sa, nullptr);
}

// Map the arena's descriptor at va; the descriptor is closed either way.
bool map_arena(int fd, std::uintptr_t va, std::size_t npages, std::string *why)
{
    const std::size_t bytes = npages * page_size;
    void *m = ::mmap(reinterpret_cast<void *>(va), bytes, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
    const int err = errno;
    ::close(fd);
    if (m == MAP_FAILED) {
        char buf[160];
        std::snprintf(buf, sizeof(buf), "mapping the arena at %#lx: %s%s",
                      static_cast<unsigned long>(va), std::strerror(err),
                      err == EEXIST ? " (something else is mapped there: choose another "
                                      "options.va)"
                                    : "");
        *why = buf;
        return false;
    }
    if (m != reinterpret_cast<void *>(va)) {  // a kernel without MAP_FIXED_NOREPLACE
        ::munmap(m, bytes);
        *why = "the kernel did not map the arena at its address";
        return false;
    }
    return true;
}

struct entry {
    int (*fn)(int, char **);
    int argc;
    char **argv;
};

int enter(void *p)
{
    const auto *e = static_cast<const entry *>(p);
    return e->fn(e->argc, e->argv);
}

int start(int argc, char **argv, int (*fn)(int, char **), const options &o)
{
    std::size_t bytes = o.arena_bytes;
    if (const char *mb = std::getenv("KMIGRATE_ARENA_MB")) {
        char *end;
        errno = 0;
        const unsigned long v = std::strtoul(mb, &end, 10);
        if (errno || *end || !v || v > (KMIGRATE_MAX_PAGES * page_size >> 20)) {
            say("KMIGRATE_ARENA_MB=%s: want 1..%zu", mb, KMIGRATE_MAX_PAGES * page_size >> 20);
            return 1;
        }
        bytes = v << 20;
    }
    bytes = (bytes + page_size - 1) & ~(page_size - 1);
    const std::size_t stack = (o.stack_bytes + page_size - 1) & ~(page_size - 1);
    const std::size_t npages = bytes / page_size;
    if (!o.va || o.va % page_size) {
        say("options.va %#lx is not a page address", static_cast<unsigned long>(o.va));
        return 1;
    }
    if (npages > KMIGRATE_MAX_PAGES) {
        say("an arena of %zu MiB is more than the %zu MiB the kernel allows", bytes >> 20,
            KMIGRATE_MAX_PAGES * page_size >> 20);
        return 1;
    }
    if (stack < 16 * page_size || bytes < stack + 16 * page_size) {
        say("an arena of %zu KiB with a stack of %zu KiB leaves no heap", bytes >> 10, stack >> 10);
        return 1;
    }
    g.session = ::open(KMIGRATE_DEV, O_RDWR | O_CLOEXEC);
    if (g.session < 0) {
        say("%s", device_error(errno).c_str());
        return 1;
    }
    kmigrate_create c{};
    c.va = o.va;
    c.npages = static_cast<std::uint32_t>(npages);
    if (::ioctl(g.session, KMIGRATE_IOC_CREATE, &c) < 0) {
        say("creating an arena of %zu MiB: %s", bytes >> 20, std::strerror(errno));
        return 1;
    }
    std::string why;
    if (!map_arena(c.fd, o.va, npages, &why)) {
        say("%s", why.c_str());
        return 1;
    }
    g.hdr = new (reinterpret_cast<void *>(o.va)) arena_header(o.va, npages, stack);
    *reinterpret_cast<std::uint64_t *>(g.hdr->stack_lo) = stack_sentinel;
    activate(&g.hdr->h);

    // fn's arguments in the arena: the process's own argv lies on its
    // stack, elsewhere in the destination's process
    auto **av = static_cast<char **>(std::malloc((static_cast<std::size_t>(argc) + 1) * sizeof(char *)));
    auto *e = static_cast<entry *>(std::malloc(sizeof(entry)));
    if (!av || !e) {
        say("the arena has no room for argv");
        return 1;
    }
    for (int i = 0; i < argc; i++)
        if (!(av[i] = ::strdup(argv[i]))) {
            say("the arena has no room for argv");
            return 1;
        }
    av[argc] = nullptr;
    *e = {fn, argc, av};
    // The arena's canary is born from this process's; it travels in the
    // contexts of the arena's stack.
    return run_on_stack(reinterpret_cast<void *>(g.hdr->stack_hi), current_canary(), enter, e);
}

[[noreturn]] void incoming_failed(unsigned long id, const std::string &why)
{
    say("incoming migration %lu: %s", id, why.c_str());
    std::exit(1);
}

// KMIGRATE_INCOMING=<id>:<token in hex>, as kmigrate serve sets it.
bool parse_incoming(const char *s, unsigned long *id, std::uint8_t *token)
{
    char *end;
    errno = 0;
    *id = std::strtoul(s, &end, 10);
    if (errno || end == s || *end != ':' || *id > UINT32_MAX)
        return false;
    s = end + 1;
    for (unsigned i = 0; i < KMIGRATE_TOKEN_LEN; i++) {
        unsigned v;
        if (!std::isxdigit(static_cast<unsigned char>(s[2 * i])) ||
            !std::isxdigit(static_cast<unsigned char>(s[2 * i + 1])) ||
            std::sscanf(s + 2 * i, "%2x", &v) != 1)
            return false;
        token[i] = static_cast<std::uint8_t>(v);
    }
    return s[2 * KMIGRATE_TOKEN_LEN] == '\0';
}

int incoming(const char *idstr)
{
    unsigned long id;
    kmigrate_attach a{};
    if (!parse_incoming(idstr, &id, a.token)) {
        say("KMIGRATE_INCOMING is no migration id and token");
        std::exit(1);
    }
    // not for the program's children, and the token not left readable in
    // /proc/<pid>/environ (unsetenv does not touch the original block)
    ::explicit_bzero(const_cast<char *>(idstr), std::strlen(idstr));
    ::unsetenv("KMIGRATE_INCOMING");
    g.session = ::open(KMIGRATE_DEV, O_RDWR | O_CLOEXEC);
    if (g.session < 0)
        incoming_failed(id, device_error(errno));
    a.id = static_cast<std::uint32_t>(id);
    a.fp = reinterpret_cast<std::uintptr_t>(g.fp);
    a.fp_len = g.fp_len;
    if (::ioctl(g.session, KMIGRATE_IOC_ATTACH, &a) < 0)
        incoming_failed(id, errno == EXDEV
                                ? "attach: this executable or its libraries differ from the "
                                  "source's (fingerprint mismatch)"
                            : errno == EPERM
                                ? "attach: refused (not the process kmigrate serve started)"
                                : std::string("attach: ") + std::strerror(errno));
    std::string why;
    if (!a.npages || a.npages > KMIGRATE_MAX_PAGES || a.va % page_size)
        incoming_failed(id, "attach: the kernel gave a bad arena geometry");
    if (!map_arena(a.fd, a.va, a.npages, &why))
        incoming_failed(id, why);

    alignas(16) std::uint8_t buf[KMIGRATE_CTX_MAX] = {};
    kmigrate_resume r{};
    r.ctx = reinterpret_cast<std::uintptr_t>(buf);
    int rc;
    do
        rc = ::ioctl(g.session, KMIGRATE_IOC_RESUME, &r);
    while (rc < 0 && errno == EINTR);
    if (rc < 0)
        incoming_failed(id, std::string("resume: ") + std::strerror(errno));
    ctx_blob b;
    if (r.ctx_len != sizeof(b))
        incoming_failed(id, "resume: the context has the wrong size (another libkmigrate?)");
    std::memcpy(&b, buf, sizeof(b));
    // page 0 arrives here, the first page the new process touches
    auto *h = reinterpret_cast<arena_header *>(a.va);
    if (b.magic != ctx_blob::magic_value || b.version != ctx_blob::version_value ||
        b.size != sizeof(b) || b.va != a.va || b.npages != a.npages)
        incoming_failed(id, "resume: the context is not this library's, or not for this arena");
    if (h->magic != arena_header::magic_value || h->version != arena_header::version_value ||
        h->header_size != sizeof(arena_header) || h->va != a.va || h->npages != a.npages)
        incoming_failed(id, "the arena's header is not this library's");
    if (b.r.rsp < h->stack_lo || b.r.rsp >= h->stack_hi)
        incoming_failed(id, "the context's stack is not the arena's");
    // The sentinel's page did not move (no live stack there); it was
    // intact when the source left.
    *reinterpret_cast<std::uint64_t *>(h->stack_lo) = stack_sentinel;
    g.hdr = h;
    activate(&h->h);
    if (g.verbose)
        say("incoming migration %lu: resuming %s", id, g.exe);
    return adopt(&b.r, resumed_there);
}

std::string threads_text()
{
    std::string tids;
    unsigned n = 0;
    if (DIR *d = ::opendir("/proc/self/task")) {
        const std::string self = std::to_string(::gettid());
        while (const dirent *e = ::readdir(d))
            if (e->d_name[0] != '.' && self != e->d_name) {
                tids += (n++ ? ", " : "") + std::string(e->d_name);
            }
        ::closedir(d);
    }
    return n ? " (thread" + std::string(n > 1 ? "s " : " ") + tids + ")" : "";
}

std::string explain(int err, const std::string &dest)
{
    switch (err) {
    case EBUSY:
        return "another thread runs" + threads_text() +
               ": threads do not migrate, and the kernel moves single-threaded processes only";
    case EHOSTDOWN:
        return "the destination " + dest +
               " failed after the freeze: the process resumed here from the freeze point";
    case EXDEV:
        return "the destination's executable or libraries differ from this node's "
               "(fingerprint mismatch)";
    case EACCES:
        return "the destination " + dest +
               " refused it: no rule of its kmigrate serve policy lets this node start "
               "this executable there";
    case ECONNREFUSED:
    case ECONNRESET:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ETIMEDOUT:
        return "cannot migrate to " + dest + ": " + std::strerror(err) +
               " (do `kmigrate start` and `kmigrate serve` run there?)";
    default:
        return "migrating to " + dest + ": " + std::strerror(err);
    }
}

// On this process's own stack, the arena left alone: hand the arena to
// the kernel.  Success ends this process; failure resumes the arena.
[[noreturn]] void migrate_native(void *)
{
    const arena_header *h = g.hdr;
    const range_list ranges = used_ranges(h->va, h->h.begin(), h->h.top(), req.blob.r.rsp,
                                          h->stack_lo, h->stack_hi);
    kmigrate_freeze f{};
    f.ctx = reinterpret_cast<std::uintptr_t>(&req.blob);
    f.ctx_len = sizeof(req.blob);
    f.ranges = reinterpret_cast<std::uintptr_t>(ranges.r);
    f.nranges = ranges.n;
    f.flags = req.freeze_flags;
    // the wait is killable only: EINTR means the process is dying anyway
    const int rc = ::ioctl(g.session, KMIGRATE_IOC_FREEZE, &f);
    if (!rc) {
        if (g.verbose) {
            // no stdio: it may allocate, and the arena is gone
            char line[sizeof(req.dest_text) + 32] = "kmigrate: moved to ";
            std::strcat(line, req.dest_text);  // NUL-terminated within its array
            std::strcat(line, "\n");
            [[maybe_unused]] const auto n = ::write(2, line, std::strlen(line));
        }
        ::_exit(0);
    }
    kmigrate_ctx_jump(&req.blob.r, failed_base + errno);
}

// What every migration needs of the process, checked before PREPARE and
// again before the freeze (a descriptor may be opened in between).
int movable()
{
    if (!g.hdr)
        return fail(EINVAL, "migrate() outside kmigrate::run()");
    if (!on_arena())
        return fail(EINVAL, "migrate() must run on the arena's stack: call it from the "
                            "function given to kmigrate::run()");
    if (!g.exe_len)
        return fail(ENAMETOOLONG, "the executable's path is unknown (deleted?) or longer "
                                  "than KMIGRATE_PATH_MAX");
    if (!g.args_len)
        return fail(E2BIG, "the arguments are longer than KMIGRATE_ARGS_MAX bytes");
    if (*reinterpret_cast<const std::uint64_t *>(g.hdr->stack_lo) != stack_sentinel)
        return fail(EFAULT, "the arena's stack has overflowed (options.stack_bytes)");
    if (const auto fds = foreign_fds(g.session); !fds.empty()) {
        std::string s;
        for (const auto &[fd, target] : fds)
            s += (s.empty() ? "" : ", ") + ("fd " + std::to_string(fd)) + " (" + target + ")";
        return fail(EBADF, s + (fds.size() > 1 ? " are" : " is") +
                               " open: file descriptors do not migrate");
    }
    return 0;
}

// PREPARE: the kernel gets dest ready in the background.
int prepare_to(const sockaddr_storage &dest, socklen_t len, std::uint32_t mode,
               std::uint32_t flags)
{
    last_err.clear();
    if (mode > KMIGRATE_MODE_PRECOPY || (flags & ~std::uint32_t(KMIGRATE_F_NO_PREFETCH)))
        return fail(EINVAL, "bad mode or flags");
    if (req.preparing)
        return fail(EBUSY, std::string("a migration to ") + req.dest_text + " is under way");
    if (const int err = movable())
        return err;
    const std::string text = format_sockaddr(&dest, len);
    kmigrate_prepare p{};
    static_assert(sizeof(p.dest) >= sizeof(dest));
    std::memcpy(&p.dest, &dest, len);
    p.mode = mode;
    p.flags = flags;
    p.path = reinterpret_cast<std::uintptr_t>(g.exe);
    p.path_len = g.exe_len;
    p.args = reinterpret_cast<std::uintptr_t>(g.args);
    p.args_len = g.args_len;
    p.fp = reinterpret_cast<std::uintptr_t>(g.fp);
    p.fp_len = g.fp_len;
    if (::ioctl(g.session, KMIGRATE_IOC_PREPARE, &p) < 0)
        return fail(errno, explain(errno, text));
    req.preparing = true;
    std::snprintf(req.dest_text, sizeof(req.dest_text), "%s", text.c_str());
    return 0;
}

// FREEZE: migrate now if prepared (waiting for it with @wait); -EAGAIN
// while the preparation runs without @wait.
int freeze(bool wait)
{
    last_err.clear();
    if (!req.preparing)
        return fail(EINVAL, "nothing prepared: call kmigrate::prepare() first");
    if (const int err = movable())
        return err;
    req.freeze_flags = wait ? KMIGRATE_FREEZE_WAIT : 0;
    req.blob.magic = ctx_blob::magic_value;
    req.blob.version = ctx_blob::version_value;
    req.blob.size = sizeof(ctx_blob);
    req.blob.va = g.hdr->va;
    req.blob.npages = g.hdr->npages;
    // what the source printed is out before the process may end
    std::fflush(nullptr);
    const long v = leave(&req.blob.r, migrate_native, nullptr);
    if (v == resumed_there) {
        req.preparing = false;
        g.hdr->migrations++;
        return 0;
    }
    const int err = static_cast<int>(v - failed_base);
    if (err == EAGAIN)
        return fail(EAGAIN, std::string("the migration to ") + req.dest_text +
                                " is still being prepared");
    if (err != EBUSY && err != EINTR)
        req.preparing = false;  // told once: nothing is prepared any more
    return fail(err, explain(err, req.dest_text));
}

bool parse(const std::string &dest, sockaddr_storage *ss, socklen_t *len)
{
    std::string why;
    if (parse_dest(dest, ss, len, &why))
        return true;
    fail(EINVAL, why);
    return false;
}

}  // namespace

int run(int argc, char **argv, int (*fn)(int, char **), const options &o)
{
    if (g.started) {
        say("kmigrate::run() runs once per process");
        return 1;
    }
    g.started = true;
    const char *v = std::getenv("KMIGRATE_VERBOSE");
    g.verbose = v && *v && std::strcmp(v, "0");
    if (!randomisation_off(argv))
        return 1;
    remember_program(argc, argv);
    g.fp_len = static_cast<std::uint32_t>(fingerprint(g.fp));
    install_move_signal();
    if (const char *in = std::getenv("KMIGRATE_INCOMING"))
        return incoming(in);
    return start(argc, argv, fn, o);
}

int prepare(const std::string &dest, mode m, unsigned flags)
{
    sockaddr_storage ss;
    socklen_t len;
    if (!parse(dest, &ss, &len))
        return -EINVAL;
    return prepare_to(ss, len, static_cast<std::uint32_t>(m), flags);
}

int migrate(const std::string &dest, mode m, unsigned flags)
{
    if (const int err = prepare(dest, m, flags))
        return err;
    return freeze(true);
}

bool poll()
{
    if (!move_requested)
        return false;
    move_requested = 0;
    if (!g.hdr)
        return false;
    kmigrate_move mv{};
    if (::ioctl(g.session, KMIGRATE_IOC_MOVE_TARGET, &mv) == 0) {
        sockaddr_storage ss{};
        std::memcpy(&ss, &mv.dest, sizeof(ss));
        const socklen_t len = ss.ss_family == AF_INET    ? sizeof(sockaddr_in)
                              : ss.ss_family == AF_INET6 ? sizeof(sockaddr_in6)
                                                         : 0;
        if (!len) {
            fail(EAFNOSUPPORT, "the requested destination is no IP address");
            say("%s", last_err.c_str());
        } else if (prepare_to(ss, len, mv.mode, mv.flags) < 0) {
            say("the requested move failed: %s", last_err.c_str());
        }
        // the preparation's end signals again
        return false;
    }
    if (errno != ENOENT) {
        fail(errno, std::string("asking where to move: ") + std::strerror(errno));
        say("%s", last_err.c_str());
        return false;
    }
    if (!req.preparing)
        return false;
    const int err = freeze(false);
    if (err && err != -EAGAIN)
        say("the requested move failed: %s", last_err.c_str());
    return err == 0;
}

bool pending()
{
    return move_requested;
}

const std::string &last_error()
{
    return last_err;
}

bool on_arena()
{
    if (!g.hdr)
        return false;
    const std::uintptr_t sp = current_sp();
    return sp >= g.hdr->stack_lo && sp < g.hdr->stack_hi;
}

std::size_t heap_bytes()
{
    return g.hdr ? g.hdr->h.in_use() : 0;
}

std::pair<std::uintptr_t, std::uintptr_t> arena_range()
{
    if (!g.hdr)
        return {0, 0};
    return {g.hdr->va, g.hdr->stack_hi};
}

std::pair<std::uintptr_t, std::uintptr_t> heap_range()
{
    if (!g.hdr)
        return {0, 0};
    return {g.hdr->h.begin(), g.hdr->h.top()};
}

unsigned migrations()
{
    return g.hdr ? static_cast<unsigned>(g.hdr->migrations) : 0;
}

}  // namespace kmigrate
