// SPDX-License-Identifier: GPL-2.0-only
//
// Access control by SIGSEGV: the application view's protection is the
// protocol's, set by mprotect (which completes the TLB shootdown before
// it returns, so a revoke is in force before the page's data leaves).  A
// fault in the region runs the engine in the faulting thread: it sends
// the request itself and sleeps on the page's futex until the grant
// (engine::fault); then the access runs again.  A fault outside the
// region restores the default action and returns, so the access faults
// again and the process dies as it would have.
//
// The handler takes the engine's lock: safe because no thread touches the
// application view while holding it (the engine uses its own view).
#include "node.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace udsm {

namespace {

struct target {
    std::uint8_t *app;
    std::size_t bytes, ps;
    engine *eng;
};
// set once, before the handler is installed; one node per process
target the;

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
    if (!the.eng || a < the.app || a >= the.app + the.bytes) {
        ::signal(sig, SIG_DFL);
        return;
    }
    const auto page = static_cast<std::uint32_t>((a - the.app) / the.ps);
    const int saved = errno;
    the.eng->fault(page, is_write(uctx, *the.eng, page));
    errno = saved;
}

class segv_access final : public access {
public:
    segv_access(std::uint8_t *app, std::size_t page_size, std::uint32_t npages)
        : app_(app), ps_(page_size)
    {
        the = target{app, std::size_t(npages) * page_size, page_size, nullptr};
    }
    ~segv_access() override
    {
        ::signal(SIGSEGV, SIG_DFL);
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
    ::sigaction(SIGSEGV, &sa, nullptr);
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
