// SPDX-License-Identifier: GPL-2.0-only
//
// A node lost under a running program: one report and one exit status,
// whichever way the program meets the loss first.
//
// Once a cluster fails at this node (Documentation/kdsm.rst, "Failure"),
// an access to a page this node does not hold gets SIGBUS, and locks and
// barriers return EHOSTDOWN.  Which of the two a running program meets
// first is a race between its threads and the kernel's detection of the
// loss.  libkdsm ends both the same way: "kdsm: cluster failed: <reason>"
// on stderr, the reason being the cluster's own (KDSM_A_ERROR, as
// `kdsmctl status` prints it), and exit status kdsm::exit_cluster_failed.
//
// The SIGBUS handler is async-signal-safe: a fixed table of attached
// regions (an entry is filled before its mapping is used and emptied
// before it is unmapped), one ioctl (KDSM_IOC_STATE, which never waits for
// the cluster), write(2) and _exit(2).  A SIGBUS outside every region goes
// to the disposition that was in place before the first attachment.
#include <kdsm/kdsm.hpp>

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace kdsm {

namespace {

// Attachments at once in one process: one per cluster a node has, and a
// node has one; the rest is room for a program that attaches again
// before its previous attachment is gone.
constexpr unsigned max_regions = 8;

struct region_slot {
    std::atomic<std::uintptr_t> base{0};  // 0: free; published last
    std::atomic<std::size_t> bytes{0};
    std::atomic<int> fd{-1};
};

region_slot slots[max_regions];
static_assert(std::atomic<std::uintptr_t>::is_always_lock_free &&
              std::atomic<std::size_t>::is_always_lock_free &&
              std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
              "the signal handler reads these");
// The first thread to report; any other (a SIGBUS on a second thread, an
// EHOSTDOWN meanwhile) waits for the exit, so one report is printed.
std::atomic<bool> reporting{false};
struct sigaction previous;  // written once, before the handler is installed
std::once_flag installed;

void say(const char *s)
{
    ssize_t left = static_cast<ssize_t>(std::strlen(s));
    while (left > 0) {
        const ssize_t n = ::write(STDERR_FILENO, s, static_cast<std::size_t>(left));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        s += n;
        left -= n;
    }
}

// The report and the exit; async-signal-safe.  @fd: the region descriptor.
[[noreturn]] void report_and_exit(int fd)
{
    kdsm_state_arg st{};
    const int saved = errno;

    if (reporting.exchange(true))
        for (;;)
            ::pause();
    const int ret = ::ioctl(fd, KDSM_IOC_STATE, &st);
    if (ret == 0 && st.state == KDSM_STATE_FAILED) {
        st.error[sizeof(st.error) - 1] = '\0';
        say("kdsm: cluster failed: ");
        say(st.error[0] ? st.error : "(no reason recorded)");
        say("\n");
    } else if (ret < 0 && errno == ENODEV) {
        say("kdsm: cluster failed: this node left the cluster under the program\n");
    } else {
        // READY: the node could not run the fault (no memory).
        say("kdsm: a page of the region could not be served at this node\n");
    }
    errno = saved;
    ::_exit(exit_cluster_failed);
}

void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    const auto a = reinterpret_cast<std::uintptr_t>(si->si_addr);

    // Only a fault has an address (si_code > 0); a kill(2) of SIGBUS is
    // the program's business.  1 marks a slot being filled.
    for (region_slot &s : slots) {
        const std::uintptr_t b = s.base.load(std::memory_order_acquire);
        if (si->si_code > 0 && b > 1 && a >= b &&
            a - b < s.bytes.load(std::memory_order_relaxed))
            report_and_exit(s.fd.load(std::memory_order_relaxed));
    }
    // Not ours: what the program had before libkdsm.
    if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction) {
        previous.sa_sigaction(sig, si, uc);
        return;
    }
    if (previous.sa_handler == SIG_IGN && si->si_code <= 0)
        return;  // an ignored kill(2) stays ignored; a fault cannot be
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    // The default action: the signal is blocked in its handler, so it is
    // delivered, with SIG_DFL, as this handler returns.
    signal(sig, SIG_DFL);
    raise(sig);
}

void install()
{
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (::sigaction(SIGBUS, &sa, &previous) < 0)
        throw error(errno, "install the SIGBUS handler");
}

}  // namespace

void attachment::watch_lost_pages()
{
    std::call_once(installed, install);
    for (region_slot &s : slots) {
        std::uintptr_t expect = 0;
        // claim with a value no address has, fill, then publish
        if (!s.base.compare_exchange_strong(expect, 1, std::memory_order_acquire))
            continue;
        s.bytes.store(bytes(), std::memory_order_relaxed);
        s.fd.store(fd_, std::memory_order_relaxed);
        s.base.store(reinterpret_cast<std::uintptr_t>(base()), std::memory_order_release);
        return;
    }
    throw error(EMFILE, "more than " + std::to_string(max_regions) +
                            " kdsm attachments in one process");
}

void attachment::unwatch_lost_pages() noexcept
{
    const auto b = reinterpret_cast<std::uintptr_t>(base());

    for (region_slot &s : slots) {
        std::uintptr_t expect = b;
        if (b && s.base.compare_exchange_strong(expect, 0, std::memory_order_acq_rel)) {
            s.bytes.store(0, std::memory_order_relaxed);
            return;
        }
    }
}

void attachment::exit_if_failed(int err) const
{
    if (err != EHOSTDOWN)
        return;
    std::fflush(nullptr);  // not a signal handler: keep what was printed
    report_and_exit(fd_);
}

unsigned attachment::state() const
{
    kdsm_state_arg st{};
    if (::ioctl(fd_, KDSM_IOC_STATE, &st) < 0)
        throw error(errno, "state");
    return st.state;
}

}  // namespace kdsm
