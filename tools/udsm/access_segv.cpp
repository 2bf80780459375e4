// SPDX-License-Identifier: GPL-2.0-only
//
// Access control by SIGSEGV: the application view's protection is the
// protocol's, set by mprotect (which completes the TLB shootdown before
// it returns, so a revoke is in force before the page's data leaves).  A
// fault in the region runs the engine in the faulting thread: it sends
// the request itself and sleeps on the page's futex until the grant
// (engine::fault); then the access runs again.  A fault outside the
// region goes to the action installed before ours (a sanitizer's, a
// runtime's); with none, the default is restored and the handler returns,
// so the access faults again and the process dies as it would have.
//
// Signal safety.  The handler runs code that is not async-signal-safe:
// engine::fault() takes the engine's mutex, sleeps on a futex, mprotects,
// and sends through the transport (its send mutexes; verbs may poll the
// send CQ); its error paths format std::strings, fprintf and _Exit.  That
// is sound only because SIGSEGV here is synchronous, raised by an access
// to the application view, and so interrupts the faulting thread at that
// access and nowhere else: the invariant is that no code holds a lock the
// handler takes (the engine's and transports' mutexes, malloc's, stdio's)
// while it touches the application view.  libudsm keeps it (the engine
// and the transports touch only the engine view, and the handler path
// does not allocate: the verbs CAS list is reserved at its bound), but a
// program can break it: fwrite() or printf("%s") straight from DSM memory
// holds stdio's FILE lock while it copies, and a fault there whose error
// path writes to stderr deadlocks.  Copy out of DSM memory first.
// SIGSEGV stays blocked while the handler sleeps for the grant, so an
// application signal handler that touches DSM memory then kills the
// process: such handlers must not touch it.
#include "node.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace udsm {

namespace {

struct target {
    std::uint8_t *app;
    std::size_t bytes, ps;
    // set by attach() before the handler is installed, cleared by
    // ~segv_access (before the engine is destroyed: ~node) after it is
    // uninstalled
    std::atomic<engine *> eng;
};
// one node per process
target the;
// the SIGSEGV action before ours, for faults outside the region
struct sigaction old_segv;

// Write access: the page fault's error code (x86: bit 1); elsewhere the
// page's protection says it, costing a read fault first on a write to
// an invalid page.
bool is_write(void *uctx, [[maybe_unused]] engine &e, [[maybe_unused]] std::uint32_t page)
{
#if defined(__x86_64__)
    const auto *uc = static_cast<const ucontext_t *>(uctx);
    return uc->uc_mcontext.gregs[REG_ERR] & 2;
#else
    (void)uctx;
    return e.current(page) == prot::read;
#endif
}

void on_segv(int sig, siginfo_t *si, void *uctx)
{
    auto *a = static_cast<std::uint8_t *>(si->si_addr);
    engine *e = the.eng.load(std::memory_order_acquire);
    if (!e || a < the.app || a >= the.app + the.bytes) {
        // not ours: the earlier handler, or the earlier disposition
        // (default, or ignored, which the kernel turns into the default
        // for a fault) for the access's second fault
        if ((old_segv.sa_flags & SA_SIGINFO) && old_segv.sa_sigaction)
            old_segv.sa_sigaction(sig, si, uctx);
        else if (!(old_segv.sa_flags & SA_SIGINFO) && old_segv.sa_handler != SIG_DFL &&
                 old_segv.sa_handler != SIG_IGN)
            old_segv.sa_handler(sig);
        else
            ::sigaction(sig, &old_segv, nullptr);
        return;
    }
    const auto page = static_cast<std::uint32_t>((a - the.app) / the.ps);
    const int saved = errno;
    e->fault(page, is_write(uctx, *e, page));
    errno = saved;
}

class segv_access final : public access {
public:
    segv_access(std::uint8_t *app, std::size_t page_size, std::uint32_t npages)
        : app_(app), ps_(page_size)
    {
        the.app = app;
        the.bytes = std::size_t(npages) * page_size;
        the.ps = page_size;
        the.eng = nullptr;
    }
    ~segv_access() override
    {
        if (the.eng.load())
            ::sigaction(SIGSEGV, &old_segv, nullptr);
        the.eng = nullptr;
    }
    // the pages @e homes open RW; then the handler is installed
    void attach(engine &e) override;
    void set(std::uint32_t page, prot p) override;

private:
    std::uint8_t *app_;
    std::size_t ps_;
};

void segv_access::attach(engine &e)
{
    const std::uint32_t npages = static_cast<std::uint32_t>(the.bytes / ps_);
    // the pages this node homes start RW (runs of them at once)
    std::uint32_t run = 0;
    for (std::uint32_t p = 0; p <= npages; p++) {
        if (p < npages && e.current(p) == prot::rw)
            continue;
        if (p > run && ::mprotect(app_ + std::size_t(run) * ps_, std::size_t(p - run) * ps_,
                                  PROT_READ | PROT_WRITE)) {
            std::perror("udsm: mprotect");
            std::_Exit(3);
        }
        run = p + 1;
    }
    the.eng = &e;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGSEGV, &sa, &old_segv);
}

void segv_access::set(std::uint32_t page, prot p)
{
    const int flags = p == prot::rw ? PROT_READ | PROT_WRITE : p == prot::read ? PROT_READ : PROT_NONE;
    if (::mprotect(app_ + std::size_t(page) * ps_, ps_, flags)) {
        std::fprintf(stderr, "udsm: mprotect of page %u: %s\n", page, std::strerror(errno));
        std::_Exit(3);
    }
}

}  // namespace

std::unique_ptr<access> make_segv_access(std::uint8_t *app, std::size_t page_size,
                                         std::uint32_t npages)
{
    return std::make_unique<segv_access>(app, page_size, npages);
}

}  // namespace udsm
