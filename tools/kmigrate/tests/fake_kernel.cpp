// SPDX-License-Identifier: GPL-2.0-only
//
// A stand-in for kmigrate.ko, preloaded (LD_PRELOAD) into the test
// programs so that the end-to-end tests run on a host without the module:
// /dev/kmigrate opens /dev/null, and the session's ioctls are served
// here.  An arena is a memfd.  MIGRATE writes the context, the moving
// pages and the fingerprint to a spool file and starts the destination's
// process itself (what the kernel asks `kmigrate serve` to do), so a
// migration is a copy of the used pages, pre-copy style, on one host.
//
// Like the real thing it must not allocate: MIGRATE runs while the arena,
// where malloc now lives, must stay as it was.
//
//   KMIGRATE_FAKE_DIR     the spool directory (required)
//   KMIGRATE_FAKE_FAIL    an errno that MIGRATE returns instead
//   KMIGRATE_FAKE_BAD_FP  store a wrong fingerprint: ATTACH gets EXDEV
//   KMIGRATE_FAKE_SERVE   leave the start to `kmigrate serve`: MIGRATE
//                         queues FAKE_DIR/incoming-<id>, ACCEPT takes it
//
// MOVE_TARGET answers from FAKE_DIR/move-<pid>, a struct kmigrate_move,
// consumed.  The arena's owner is the process; threads are counted from
// /proc/self/status.
#undef _FILE_OFFSET_BITS  // define open itself, not open64 under its name
#include <kverbs/kmigrate.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char **environ;

namespace {

constexpr std::uint64_t spool_magic = 0x6b6d2d66616b6531ULL;
constexpr std::size_t page = 4096;
// the token of every fake migration (the kernel's are random)
constexpr std::uint8_t fake_token[KMIGRATE_TOKEN_LEN] = {0x6b, 0x6d, 0x69, 0x67, 1, 2, 3, 4,
                                                         5, 6, 7, 8, 9, 10, 11, 12};

struct spool {
    std::uint64_t magic;
    std::uint64_t va;
    std::uint32_t npages, ctx_len, nranges, fp_len;
    std::uint8_t ctx[KMIGRATE_CTX_MAX];
    kmigrate_range ranges[KMIGRATE_MAX_RANGES];
    std::uint8_t fp[KMIGRATE_FP_MAX];
};

int session = -1;
std::uint64_t arena_va;
std::uint32_t arena_npages;
std::uint32_t incoming_id;
spool in;   // ATTACH to RESUME

int raw_open(const char *path, int flags, mode_t mode)
{
    return static_cast<int>(::syscall(SYS_openat, AT_FDCWD, path, flags, mode));
}

int real_ioctl(int fd, unsigned long req, void *arg)
{
    return static_cast<int>(::syscall(SYS_ioctl, fd, req, arg));
}

int fail(int err)
{
    errno = err;
    return -1;
}

// dir + "/" + name + number, no allocation
void spool_path(char *out, std::size_t n, const char *name, unsigned long id)
{
    const char *dir = std::getenv("KMIGRATE_FAKE_DIR");
    std::snprintf(out, n, "%s/%s%lu", dir ? dir : "/tmp", name, id);
}

bool write_all(int fd, const void *p, std::size_t n)
{
    const auto *b = static_cast<const char *>(p);
    while (n) {
        const ssize_t w = ::write(fd, b, n);
        if (w <= 0)
            return false;
        b += w;
        n -= static_cast<std::size_t>(w);
    }
    return true;
}

bool read_all(int fd, void *p, std::size_t n)
{
    auto *b = static_cast<char *>(p);
    while (n) {
        const ssize_t r = ::read(fd, b, n);
        if (r <= 0)
            return false;
        b += r;
        n -= static_cast<std::size_t>(r);
    }
    return true;
}

int threads()
{
    char buf[4096];
    const int fd = raw_open("/proc/self/status", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return 1;
    const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    if (n <= 0)
        return 1;
    buf[n] = 0;
    const char *t = std::strstr(buf, "\nThreads:");
    return t ? std::atoi(t + 9) : 1;
}

int do_create(kmigrate_create *c)
{
    if (arena_npages || !c->npages || c->npages > KMIGRATE_MAX_PAGES || c->va % page)
        return fail(EINVAL);
    const int fd = static_cast<int>(::syscall(SYS_memfd_create, "kmigrate-fake", MFD_CLOEXEC));
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(c->npages) * page) < 0)
        return -1;
    arena_va = c->va;
    arena_npages = c->npages;
    c->fd = fd;
    return 0;
}

// What PREPARE gave and FREEZE adds, as the module keeps them
struct migration {
    std::uint64_t ctx, ranges, path, args, fp;
    std::uint32_t ctx_len, nranges, path_len, args_len, fp_len;
};
struct prepared {
    bool pending;
    kmigrate_prepare p;
    char path[KMIGRATE_PATH_MAX];
    char args[KMIGRATE_ARGS_MAX];
    std::uint8_t fp[KMIGRATE_FP_MAX];
};
prepared prep;

// The preparation "ends" at once: the process is signalled, as the module
// signals it when its background preparation ends.
int do_prepare(const kmigrate_prepare *p)
{
    if (!arena_npages || !p->fp_len || p->fp_len > KMIGRATE_FP_MAX || p->path_len < 2 ||
        p->path_len > KMIGRATE_PATH_MAX || !p->args_len || p->args_len > KMIGRATE_ARGS_MAX)
        return fail(EINVAL);
    if (prep.pending)
        return fail(EBUSY);
    prep.pending = true;
    prep.p = *p;
    std::memcpy(prep.path, reinterpret_cast<const void *>(p->path), p->path_len);
    std::memcpy(prep.args, reinterpret_cast<const void *>(p->args), p->args_len);
    std::memcpy(prep.fp, reinterpret_cast<const void *>(p->fp), p->fp_len);
    ::kill(::getpid(), KMIGRATE_SIGNAL);
    return 0;
}

int do_migrate(const migration *m);

int do_freeze(const kmigrate_freeze *f)
{
    if (!prep.pending || !f->ctx_len || f->ctx_len > KMIGRATE_CTX_MAX || !f->nranges ||
        f->nranges > KMIGRATE_MAX_RANGES)
        return fail(EINVAL);
    if (const char *e = std::getenv("KMIGRATE_FAKE_FAIL")) {
        // the preparation's error, told once
        prep.pending = false;
        return fail(std::atoi(e));
    }
    if (threads() > 1)
        return fail(EBUSY);
    prep.pending = false;
    const migration m = {f->ctx, f->ranges, reinterpret_cast<std::uintptr_t>(prep.path),
                         reinterpret_cast<std::uintptr_t>(prep.args),
                         reinterpret_cast<std::uintptr_t>(prep.fp), f->ctx_len, f->nranges,
                         prep.p.path_len, prep.p.args_len, prep.p.fp_len};
    return do_migrate(&m);
}

int do_migrate(const migration *m)
{
    static spool s;
    s = {};
    s.magic = spool_magic;
    s.va = arena_va;
    s.npages = arena_npages;
    s.ctx_len = m->ctx_len;
    s.nranges = m->nranges;
    s.fp_len = m->fp_len;
    std::memcpy(s.ctx, reinterpret_cast<const void *>(m->ctx), m->ctx_len);
    std::memcpy(s.ranges, reinterpret_cast<const void *>(m->ranges),
                m->nranges * sizeof(kmigrate_range));
    std::memcpy(s.fp, reinterpret_cast<const void *>(m->fp), m->fp_len);
    if (std::getenv("KMIGRATE_FAKE_BAD_FP"))
        s.fp[s.fp_len - 1] ^= 1;
    std::uint32_t end = 0;
    for (unsigned i = 0; i < s.nranges; i++) {
        const kmigrate_range &r = s.ranges[i];
        if (!r.count || r.first < end || r.first + r.count > s.npages)
            return fail(EINVAL);
        end = r.first + r.count;
    }
    const auto id = static_cast<unsigned long>(::getpid());
    char path[512];
    spool_path(path, sizeof(path), "mig-", id);
    const int fd = raw_open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    bool ok = write_all(fd, &s, sizeof(s));
    for (unsigned i = 0; ok && i < s.nranges; i++)
        ok = write_all(fd, reinterpret_cast<const void *>(s.va + s.ranges[i].first * page),
                       s.ranges[i].count * page);
    ::close(fd);
    if (!ok)
        return fail(EIO);

    if (std::getenv("KMIGRATE_FAKE_SERVE")) {
        static kmigrate_incoming q;
        q = {};
        q.id = static_cast<std::uint32_t>(id);
        std::memcpy(q.token, fake_token, sizeof(q.token));
        auto &peer = reinterpret_cast<sockaddr_in &>(q.peer);
        peer.sin_family = AF_INET;
        peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        q.path_len = m->path_len;
        q.args_len = m->args_len;
        std::memcpy(q.path, reinterpret_cast<const void *>(m->path), m->path_len);
        std::memcpy(q.args, reinterpret_cast<const void *>(m->args), m->args_len);
        char tmp[512], done[512];
        spool_path(tmp, sizeof(tmp), ".incoming-", id);
        spool_path(done, sizeof(done), "incoming-", id);
        const int qfd = raw_open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (qfd < 0)
            return -1;
        ok = write_all(qfd, &q, sizeof(q));
        ::close(qfd);
        return ok && ::rename(tmp, done) == 0 ? 0 : fail(EIO);
    }

    // what `kmigrate serve` does, without allocating
    static char exe[KMIGRATE_PATH_MAX];
    static char args[KMIGRATE_ARGS_MAX];
    static char *argv[256];
    static char *envp[1024];
    static char incoming[96];
    std::memcpy(exe, reinterpret_cast<const void *>(m->path), m->path_len);
    std::memcpy(args, reinterpret_cast<const void *>(m->args), m->args_len);
    unsigned argc = 0;
    for (std::size_t at = 0; at < m->args_len && argc < 255; at += std::strlen(args + at) + 1)
        argv[argc++] = args + at;
    argv[argc] = nullptr;
    unsigned envc = 0;
    int at = std::snprintf(incoming, sizeof(incoming), "KMIGRATE_INCOMING=%lu:", id);
    for (unsigned i = 0; i < KMIGRATE_TOKEN_LEN; i++)
        at += std::snprintf(incoming + at, sizeof(incoming) - static_cast<std::size_t>(at),
                            "%02x", fake_token[i]);
    envp[envc++] = incoming;
    for (char **e = environ; *e && envc < 1023; e++)
        if (std::strncmp(*e, "KMIGRATE_INCOMING=", 18))
            envp[envc++] = *e;
    envp[envc] = nullptr;
    const pid_t pid = static_cast<pid_t>(::syscall(SYS_fork));
    if (pid < 0)
        return -1;
    if (pid == 0) {
        ::personality(ADDR_NO_RANDOMIZE);
        ::execve(exe, argv, envp);
        ::_exit(127);
    }
    return 0;
}

int do_attach(kmigrate_attach *a)
{
    if (std::memcmp(a->token, fake_token, sizeof(a->token)))
        return fail(EPERM);
    char path[512];
    spool_path(path, sizeof(path), "mig-", a->id);
    const int fd = raw_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return fail(ENOENT);
    if (!read_all(fd, &in, sizeof(in)) || in.magic != spool_magic) {
        ::close(fd);
        return fail(EIO);
    }
    if (a->fp_len != in.fp_len ||
        std::memcmp(reinterpret_cast<const void *>(a->fp), in.fp, in.fp_len)) {
        ::close(fd);
        return fail(EXDEV);
    }
    const int mfd = static_cast<int>(::syscall(SYS_memfd_create, "kmigrate-fake", MFD_CLOEXEC));
    if (mfd < 0 || ::ftruncate(mfd, static_cast<off_t>(in.npages) * page) < 0) {
        ::close(fd);
        return -1;
    }
    static char buf[64 * page];
    for (unsigned i = 0; i < in.nranges; i++)
        for (std::uint32_t p = 0; p < in.ranges[i].count; p += 64) {
            const std::uint32_t n = in.ranges[i].count - p < 64 ? in.ranges[i].count - p : 64;
            if (!read_all(fd, buf, n * page) ||
                ::pwrite(mfd, buf, n * page, static_cast<off_t>(in.ranges[i].first + p) * page) !=
                    static_cast<ssize_t>(n * page)) {
                ::close(fd);
                ::close(mfd);
                return fail(EIO);
            }
        }
    ::close(fd);
    ::unlink(path);
    incoming_id = a->id;
    arena_va = in.va;
    arena_npages = in.npages;
    a->fd = mfd;
    a->va = in.va;
    a->npages = in.npages;
    return 0;
}

int do_resume(kmigrate_resume *r)
{
    if (!incoming_id)
        return fail(EINVAL);
    std::memcpy(reinterpret_cast<void *>(r->ctx), in.ctx, in.ctx_len);
    r->ctx_len = in.ctx_len;
    return 0;
}

// Blocks until a migration is queued; a signal interrupts it.
int do_accept(kmigrate_incoming *q)
{
    const char *dir = std::getenv("KMIGRATE_FAKE_DIR");
    for (;;) {
        DIR *d = ::opendir(dir ? dir : "/tmp");
        if (!d)
            return -1;
        char path[512] = "";
        while (const dirent *e = ::readdir(d))
            if (!std::strncmp(e->d_name, "incoming-", 9)) {
                std::snprintf(path, sizeof(path), "%s/%s", dir ? dir : "/tmp", e->d_name);
                break;
            }
        ::closedir(d);
        if (*path) {
            const int fd = raw_open(path, O_RDONLY | O_CLOEXEC, 0);
            const bool ok = fd >= 0 && read_all(fd, q, sizeof(*q));
            if (fd >= 0)
                ::close(fd);
            ::unlink(path);
            return ok ? 0 : fail(EIO);
        }
        if (::usleep(20000) < 0)
            return -1;  // EINTR, as the kernel's wait
    }
}

int do_move_target(kmigrate_move *mv)
{
    char path[512];
    spool_path(path, sizeof(path), "move-", static_cast<unsigned long>(::getpid()));
    const int fd = raw_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return fail(ENOENT);
    const bool ok = read_all(fd, mv, sizeof(*mv));
    ::close(fd);
    ::unlink(path);
    return ok ? 0 : fail(EIO);
}

int open_any(const char *path, int flags, va_list ap)
{
    const mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, mode_t) : 0;
    if (!std::strcmp(path, KMIGRATE_DEV)) {
        const int fd = raw_open("/dev/null", O_RDWR | (flags & O_CLOEXEC), 0);
        if (fd >= 0)
            session = fd;
        return fd;
    }
    return raw_open(path, flags, mode);
}

}  // namespace

extern "C" {

int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    const int fd = open_any(path, flags, ap);
    va_end(ap);
    return fd;
}

int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    const int fd = open_any(path, flags, ap);
    va_end(ap);
    return fd;
}

int ioctl(int fd, unsigned long req, ...) noexcept
{
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (fd != session || session < 0)
        return real_ioctl(fd, req, arg);
    switch (req) {
    case KMIGRATE_IOC_CREATE:
        return do_create(static_cast<kmigrate_create *>(arg));
    case KMIGRATE_IOC_PREPARE:
        return do_prepare(static_cast<const kmigrate_prepare *>(arg));
    case KMIGRATE_IOC_FREEZE:
        return do_freeze(static_cast<const kmigrate_freeze *>(arg));
    case KMIGRATE_IOC_ATTACH:
        return do_attach(static_cast<kmigrate_attach *>(arg));
    case KMIGRATE_IOC_RESUME:
        return do_resume(static_cast<kmigrate_resume *>(arg));
    case KMIGRATE_IOC_ACCEPT:
        return do_accept(static_cast<kmigrate_incoming *>(arg));
    case KMIGRATE_IOC_MOVE_TARGET:
        return do_move_target(static_cast<kmigrate_move *>(arg));
    case KMIGRATE_IOC_REFUSE:
        return 0;  // the fake source does not wait for READY
    default:
        return fail(ENOTTY);
    }
}

}  // extern "C"
