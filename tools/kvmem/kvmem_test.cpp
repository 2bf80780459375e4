// SPDX-License-Identifier: GPL-2.0-only
//
// kvmem behaviour from user space, run inside a guest that loaded
// kvmem.ko (the kvmem-* suites).  Faults are counted by the driver
// (KVMEM_IOC_STATS); deaths by signal are checked in child processes.
#include "kvmem.hpp"
#include "../../kunit/kvmemclient.h"

#include <gtest/gtest.h>

#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace {

using namespace std::chrono_literals;
using kvmem::Region;

// Runs fn in a child process; returns the signal that killed it, 0 if it
// exited with status 0, -1 otherwise.
template <class F>
int child_signal(F fn)
{
    const pid_t pid = fork();
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int status = 0;
    for (int i = 0; i < 500; ++i) {  // 10 s
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFSIGNALED(status) ? WTERMSIG(status) :
                   (WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1);
        std::this_thread::sleep_for(20ms);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -2;  // hung
}

// Runs fn in a child process; returns its exit status, 128 + the signal
// that killed it, or -2 if it had not ended after `limit` (then killed).
template <class F>
int child_status(F fn, std::chrono::milliseconds limit)
{
    const pid_t pid = fork();
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int status = 0;
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        std::this_thread::sleep_for(20ms);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -2;
}

// Polls pred until it holds (true) or `limit` has passed (false).
template <class P>
bool wait_for(P pred, std::chrono::milliseconds limit)
{
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() >= end)
            return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

// A thread id from fd within `limit`.
bool read_tid(int fd, pid_t &tid, std::chrono::milliseconds limit)
{
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, static_cast<int>(limit.count())) == 1 &&
           read(fd, &tid, sizeof(tid)) == static_cast<ssize_t>(sizeof(tid)) && tid > 0;
}

// One byte from fd within `limit`.
bool read_byte(int fd, std::chrono::milliseconds limit)
{
    pollfd p{fd, POLLIN, 0};
    char c;
    return poll(&p, 1, static_cast<int>(limit.count())) == 1 && read(fd, &c, 1) == 1;
}

// The whole of a small /proc file, or "" if it cannot be read.
std::string proc_text(const std::string &path)
{
    std::ifstream f(path);
    std::ostringstream text;
    text << f.rdbuf();
    return f ? text.str() : std::string();
}

// The scheduler state of thread tid of process pid ('R', 'S', 'D', ...),
// or '?' if it cannot be read.  The name in the stat line may hold spaces
// and parentheses: the state follows the last ')'.
char thread_state(pid_t pid, pid_t tid)
{
    const std::string stat =
        proc_text("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat");
    const auto close = stat.rfind(')');
    return close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
}

void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

TEST(Kvmem, FaultsExactlyAsTheProtectionSays)
{
    Region r(8, KVMEM_POLICY_GRANT, KVMEM_PROT_NONE);
    auto *p = r.map();
    EXPECT_EQ(r.stats().callbacks, 0U);

    static_cast<void>(p[0]);               // NONE: a read fault
    EXPECT_EQ(r.stats().read_faults, 1U);
    static_cast<void>(p[1]);               // granted READ now: none
    EXPECT_EQ(r.stats().read_faults, 1U);
    p[0] = 7;                              // READ: a write fault
    EXPECT_EQ(r.stats().write_faults, 1U);
    p[1] = 8;                              // RW now: none
    EXPECT_EQ(r.stats().write_faults, 1U);
    *r.page(2) = 9;                        // NONE, written: one write fault
    EXPECT_EQ(r.stats().write_faults, 2U);
    EXPECT_EQ(r.stats().read_faults, 1U);
    EXPECT_EQ(r.stats().callbacks, 3U);

    // Revoke to READ: reads go on, data intact; the next write faults once.
    ASSERT_EQ(r.protect({{0, 1}}, KVMEM_PROT_READ), 0);
    EXPECT_EQ(p[0], 7);
    EXPECT_EQ(r.stats().read_faults, 1U);
    p[0] = 10;
    p[0] = 11;
    EXPECT_EQ(r.stats().write_faults, 3U);
    EXPECT_EQ(p[0], 11);
}

TEST(Kvmem, OneBatchOneZapOneFaultPerPage)
{
    Region r(64, KVMEM_POLICY_GRANT, KVMEM_PROT_RW);
    auto *p = r.map();
    for (std::size_t i = 0; i < 64; ++i)
        *r.page(i) = static_cast<std::uint8_t>(i);
    const auto zaps = r.stats().zaps;
    ASSERT_EQ(r.protect({{1, 1}, {5, 2}, {20, 1}, {63, 1}}, KVMEM_PROT_NONE), 0);
    EXPECT_EQ(r.stats().zaps, zaps + 1);   // one TLB flush for the batch
    for (std::size_t i : {1, 5, 6, 20, 63})
        EXPECT_EQ(*r.page(i), i);
    EXPECT_EQ(r.stats().read_faults, 5U);
    EXPECT_EQ(r.stats().callbacks, 5U);
    static_cast<void>(p[4096 * 2]);        // in the span, kept its access
    EXPECT_EQ(r.stats().read_faults, 5U);
}

TEST(Kvmem, BadInputChangesNothing)
{
    Region r(16, KVMEM_POLICY_GRANT, KVMEM_PROT_RW);
    auto *p = r.map();
    p[0] = 1;
    const auto before = r.stats();
    EXPECT_EQ(r.protect({}, KVMEM_PROT_NONE), EINVAL);                  // empty batch
    EXPECT_EQ(r.protect({{0, 0}}, KVMEM_PROT_NONE), EINVAL);            // empty range
    EXPECT_EQ(r.protect({{15, 2}}, KVMEM_PROT_NONE), EINVAL);           // past the end
    EXPECT_EQ(r.protect({{0, 4}, {3, 1}}, KVMEM_PROT_NONE), EINVAL);    // overlap
    EXPECT_EQ(r.protect({{4, 1}, {0, 1}}, KVMEM_PROT_NONE), EINVAL);    // out of order
    EXPECT_EQ(r.protect({{0, 1}}, 3), EINVAL);                         // unknown prot
    EXPECT_EQ(r.protect({{0, 1}}, KVMEM_PROT_NONE, 0x80), EINVAL);      // unknown flag
    EXPECT_EQ(r.protect({{0, 1}}, KVMEM_PROT_NONE, 0, 1), EINVAL);      // reserved
    p[0] = 2;                                                          // still RW
    const auto after = r.stats();
    EXPECT_EQ(after.write_faults, before.write_faults);
    EXPECT_EQ(after.protects, before.protects);
    EXPECT_EQ(after.zaps, before.zaps);

    const int fd = r.fd();
    const auto size = r.bytes();
    EXPECT_EQ(mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0), MAP_FAILED);  // second map
    EXPECT_EQ(errno, EBUSY);
    r.unmap();
    EXPECT_EQ(mmap(nullptr, size / 2, PROT_READ, MAP_SHARED, fd, 0), MAP_FAILED);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0), MAP_FAILED);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 4096), MAP_FAILED);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_THROW(Region(0, KVMEM_POLICY_GRANT, KVMEM_PROT_RW), std::system_error);
    EXPECT_THROW(Region(4, 7, KVMEM_PROT_RW), std::system_error);
}

TEST(Kvmem, NoWriteLandsAfterARevokeReturns)
{
    ASSERT_GE(std::thread::hardware_concurrency(), 2U) << "needs two CPUs";
    for (int round = 0; round < 20; ++round) {
        Region r(4, KVMEM_POLICY_WAIT, KVMEM_PROT_RW);
        auto *p = reinterpret_cast<volatile std::uint64_t *>(r.map());
        std::atomic<bool> stop{false};
        std::atomic<std::uint64_t> written{0};
        std::thread writer([&] {
            pin(1);
            for (std::uint64_t v = 1; !stop.load(); ++v) {
                *p = v;                    // blocks in the fault once revoked
                written.store(v);
            }
        });
        pin(0);
        while (written.load() < 1000)
            std::this_thread::yield();
        ASSERT_EQ(r.protect({{0, 1}}, KVMEM_PROT_READ), 0);
        const std::uint64_t seen = *p;     // reads are still allowed
        std::this_thread::sleep_for(30ms);
        EXPECT_EQ(*p, seen) << "a write landed after the revoke returned (round "
                            << round << ")";
        EXPECT_GE(r.stats().write_faults, 1U);
        stop.store(true);
        ASSERT_EQ(r.protect({{0, 1}}, KVMEM_PROT_RW), 0);  // release the writer
        writer.join();
    }
}

TEST(Kvmem, ConcurrentFaultsOnOnePageShareOneCallback)
{
    Region r(2, KVMEM_POLICY_WAIT, KVMEM_PROT_NONE);
    auto *p = r.map();
    std::atomic<int> done{0};
    std::vector<std::thread> readers;
    for (int i = 0; i < 4; ++i)
        readers.emplace_back([&] {
            static_cast<void>(p[0]);
            done.fetch_add(1);
        });
    for (int i = 0; i < 250 && r.stats().read_faults < 4; ++i)
        std::this_thread::sleep_for(10ms);
    EXPECT_EQ(r.stats().read_faults, 4U);
    EXPECT_EQ(r.stats().callbacks, 1U);
    EXPECT_EQ(done.load(), 0);
    ASSERT_EQ(r.protect({{0, 1}}, KVMEM_PROT_READ), 0);
    for (auto &t : readers)
        t.join();
    EXPECT_EQ(done.load(), 4);
}

TEST(Kvmem, NonBlockingVariant)
{
    Region r(8, KVMEM_POLICY_GRANT, KVMEM_PROT_RW);
    auto *p = r.map();
    p[0] = 1;                                                  // page 0 mapped
    EXPECT_EQ(r.protect({{0, 1}}, KVMEM_PROT_NONE, KVMEM_PROTECT_NOWAIT), EAGAIN);
    EXPECT_EQ(r.stats().nowait_busy, 1U);
    EXPECT_EQ(r.protect({{1, 7}}, KVMEM_PROT_NONE, KVMEM_PROTECT_NOWAIT), 0);  // never mapped
    EXPECT_EQ(r.protect({{1, 1}}, KVMEM_PROT_RW, KVMEM_PROTECT_NOWAIT), 0);    // a grant
    p[0] = 2;                                                  // still writable
    EXPECT_EQ(r.stats().write_faults, 0U);
    static_cast<void>(*r.page(2));                             // revoked above
    EXPECT_EQ(r.stats().read_faults, 1U);
}

TEST(Kvmem, ForkedChildHasNoMapping)
{
    Region r(2, KVMEM_POLICY_GRANT, KVMEM_PROT_RW);
    auto *p = r.map();
    p[0] = 5;
    EXPECT_EQ(child_signal([&] { p[0] = 6; }), SIGSEGV);   // VM_DONTCOPY
    EXPECT_EQ(p[0], 5);
}

// The child maps its own region and one of its threads blocks in a read
// fault nobody grants.  The child is killed only once that thread provably
// waits in the fault: the region counted the fault (the only access to
// it), and the thread then sleeps in the kernel (S, or D for a killable
// wait) throughout 200 ms, outside any system call where /proc tells.
// SIGKILL must end the wait and the child; the region dies with it.
TEST(Kvmem, ExitWhileAFaultWaits)
{
    int up[2];
    ASSERT_EQ(pipe(up), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        close(up[0]);
        alarm(30);                                 // never outlives a lost parent
        Region r(1, KVMEM_POLICY_WAIT, KVMEM_PROT_NONE);
        auto *p = r.map();
        std::atomic<pid_t> tid{0};
        std::thread toucher([&] {
            tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
            static_cast<void>(p[0]);               // waits: nobody grants
            _exit(4);                              // the fault returned
        });
        if (!wait_for([&] { return tid.load() != 0 && r.stats().read_faults >= 1; }, 5000ms))
            _exit(5);                              // the fault never reached kvmem
        const pid_t t = tid.load();
        if (write(up[1], &t, sizeof(t)) != static_cast<ssize_t>(sizeof(t)))
            _exit(6);
        for (;;)
            pause();
    }
    close(up[1]);
    pid_t tid = 0;
    const bool counted = read_tid(up[0], tid, 10000ms);
    close(up[0]);

    // Sleeping in the kernel for 40 samples in a row, 5 ms apart.
    int asleep = 0;
    char state = '?';
    const bool waits = counted && wait_for([&] {
        state = thread_state(pid, tid);
        asleep = state == 'S' || state == 'D' ? asleep + 1 : 0;
        return asleep >= 40;
    }, 5000ms);
    const std::string task = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid);
    const std::string sys = counted ? proc_text(task + "/syscall") : std::string();
    const std::string wchan = counted ? proc_text(task + "/wchan") : std::string();

    kill(pid, SIGKILL);
    int status = 0;
    const bool ended = wait_for([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 10000ms);

    ASSERT_TRUE(counted) << "the child never reached the fault (child status 0x" << std::hex
                         << status << "; exit 4: the fault returned, 5: kvmem counted no "
                         << "fault, 6: pipe)";
    EXPECT_TRUE(waits) << "the faulting thread never slept in the kernel for 200 ms (last "
                       << "state '" << state << "', wchan '" << wchan << "')";
    // "-1 sp pc": blocked, not in a system call, so in the fault.
    if (!sys.empty() && sys.rfind("running", 0) != 0) {
        EXPECT_EQ(sys.rfind("-1 ", 0), 0U) << "the thread sleeps in a system call, not in "
                                              "the fault: " << sys;
    }
    EXPECT_TRUE(ended) << "SIGKILL did not end a task waiting in a kvmem fault";
    EXPECT_TRUE(ended && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "child status 0x" << std::hex << status;
    Region again(1, KVMEM_POLICY_GRANT, KVMEM_PROT_NONE);      // the module is fine
    EXPECT_EQ(again.map()[0], 0);
    EXPECT_EQ(again.stats().read_faults, 1U);
}

TEST(Kvmem, MunmapSplitAndMremap)
{
    EXPECT_EQ(child_signal([] {
                  Region r(2, KVMEM_POLICY_GRANT, KVMEM_PROT_RW);
                  auto *p = r.map();
                  p[0] = 1;
                  munmap(const_cast<std::uint8_t *>(p), r.bytes());
                  if (r.protect({{0, 2}}, KVMEM_PROT_NONE) != 0)  // no mapping: fine
                      _exit(3);
                  p[0] = 2;                                      // unmapped: SIGSEGV
              }), SIGSEGV);
    Region r(4, KVMEM_POLICY_GRANT, KVMEM_PROT_RW);
    auto *p = r.map();
    auto *raw = const_cast<std::uint8_t *>(p);
    for (std::size_t i = 0; i < 4; ++i)
        *r.page(i) = static_cast<std::uint8_t>(0x10 + i);
    EXPECT_NE(munmap(raw + kvmem::page_size(), kvmem::page_size()), 0);  // no split
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(mprotect(raw, kvmem::page_size(), PROT_READ), -1);        // no split
    EXPECT_EQ(mremap(raw, r.bytes(), r.bytes() * 2, MREMAP_MAYMOVE), MAP_FAILED);
    // Still whole, in place, each address on its own page, and writable
    // (a SIGSEGV here: the refused mprotect() changed the first page).
    for (std::size_t i = 0; i < 4; ++i)
        EXPECT_EQ(*r.page(i), 0x10 + i) << "page " << i;
    p[0] = 3;
}

TEST(Kvmem, DestroyedRegionRaisesSigbus)
{
    EXPECT_EQ(child_signal([] {
                  Region r(2, KVMEM_POLICY_GRANT, KVMEM_PROT_RW);
                  auto *p = r.map();
                  p[0] = 1;
                  if (r.destroy() != 0)
                      _exit(3);
                  p[0] = 2;
              }), SIGBUS);
}

// A region of kunit/kvmemclient.ko, mapped whole: @dev is the client's file
// (closing it destroys the region), @fd the region's descriptor.  At the
// first step that fails, the later fields stay -1 / nullptr and errno says
// why.
struct ClientRegion {
    int dev = -1;
    int fd = -1;
    std::uint8_t *base = nullptr;
};

ClientRegion client_region(unsigned long pages)
{
    ClientRegion c;
    c.dev = ::open("/dev/kvmemclient", O_RDWR | O_CLOEXEC);
    if (c.dev < 0)
        return c;
    c.fd = ::ioctl(c.dev, KVMEMCLIENT_IOC_REGION, pages);
    if (c.fd < 0)
        return c;
    void *m = ::mmap(nullptr, pages * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, c.fd, 0);
    if (m != MAP_FAILED)
        c.base = static_cast<std::uint8_t *>(m);
    return c;
}

// A kernel client (kunit/kvmemclient.ko, as a DSM would) hands its process
// a descriptor of its region: kvmem's own ioctls that change protections or
// destroy the region must not work on it (the process would grant itself
// access), the client's ioctls reach the client until it destroys the
// region, and stats stay readable.
TEST(Kvmem, ClientRegionTakesNoKvmemProtectionIoctls)
{
    const ClientRegion c = client_region(2);
    if (c.dev < 0)
        GTEST_SKIP() << "no /dev/kvmemclient: kunit/kvmemclient.ko not loaded";
    ASSERT_GE(c.fd, 0) << std::strerror(errno);
    ASSERT_NE(c.base, nullptr) << std::strerror(errno);
    const int fd = c.fd;
    auto *p = static_cast<volatile std::uint8_t *>(c.base);
    p[0] = 7;  // the client grants RW from the fault

    kvmem_range page1{1, 1};  // never granted
    kvmem_range page0{0, 1};  // granted RW by its fault
    const auto batch = [](kvmem_range &r, std::uint32_t prot, std::uint32_t reps) {
        return kvmem_protect{reinterpret_cast<std::uintptr_t>(&r), 1, prot, 0, reps, 0, 0, 0};
    };
    kvmem_protect grant = batch(page1, KVMEM_PROT_RW, 0);
    kvmem_protect revoke = batch(page0, KVMEM_PROT_NONE, 0);
    kvmem_protect bench = batch(page0, KVMEM_PROT_NONE, 1);
    errno = 0;
    EXPECT_EQ(::ioctl(fd, KVMEM_IOC_PROTECT, &grant), -1);
    EXPECT_EQ(errno, ENOTTY);
    errno = 0;
    EXPECT_EQ(::ioctl(fd, KVMEM_IOC_PROTECT, &revoke), -1);
    EXPECT_EQ(errno, ENOTTY);
    errno = 0;
    EXPECT_EQ(::ioctl(fd, KVMEM_IOC_BENCH, &bench), -1);
    EXPECT_EQ(errno, ENOTTY);
    errno = 0;
    EXPECT_EQ(::ioctl(fd, KVMEM_IOC_DESTROY), -1);
    EXPECT_EQ(errno, ENOTTY);
    EXPECT_EQ(p[0], 7);  // still mapped and granted: nothing changed

    kvmem_stats s{};
    EXPECT_EQ(::ioctl(fd, KVMEM_IOC_STATS, &s), 0) << std::strerror(errno);
    EXPECT_EQ(s.callbacks, 1U);  // only page 0's write fault
    EXPECT_EQ(::ioctl(fd, KVMEMCLIENT_IOC_HELLO, nullptr), KVMEMCLIENT_HELLO);
    ::munmap(c.base, 2 * 4096);

    // The client destroys the region and frees its state: no callback
    // reaches it any more, while the descriptor lives on.
    ::close(c.dev);
    errno = 0;
    EXPECT_EQ(::ioctl(fd, KVMEMCLIENT_IOC_HELLO, nullptr), -1);
    EXPECT_EQ(errno, ENODEV);
    EXPECT_EQ(::ioctl(fd, KVMEM_IOC_STATS, &s), 0) << std::strerror(errno);
    ::close(fd);
}

// The client destroys its region while a thread's client ioctls write
// into the region's own pages (each first write faults and calls the
// client from inside the ioctl's callback): destroy must neither deadlock
// on that nested fault nor let a callback run after it returned (KASAN on
// kvmem-debug); the ioctls end -ENODEV (or -EFAULT for a write the dying
// region refused).
TEST(Kvmem, ClientDestroyRacesItsOwnCallbacks)
{
    constexpr std::uint32_t pages = 64;
    const int status = child_status([] {
        const ClientRegion c = client_region(pages);
        if (c.dev < 0)
            _exit(10);
        if (c.base == nullptr)
            _exit(c.fd < 0 ? 11 : 12);
        const int fd = c.fd;
        auto *base = c.base;
        std::atomic<std::uint32_t> done{0};
        std::atomic<int> last_errno{0};
        std::thread caller([&] {
            for (std::uint32_t i = 0;; ++i) {
                auto *dst = base + (i % pages) * 4096;
                if (::ioctl(fd, KVMEMCLIENT_IOC_HELLO, dst) < 0) {
                    last_errno = errno;
                    return;
                }
                done.fetch_add(1);
            }
        });
        while (done.load() < pages / 2)
            std::this_thread::yield();
        ::close(c.dev);  // destroys the region mid-stream
        caller.join();
        const int e = last_errno.load();
        if (e != ENODEV && e != EFAULT)
            _exit(13);
        errno = 0;
        if (::ioctl(fd, KVMEMCLIENT_IOC_HELLO, nullptr) != -1 || errno != ENODEV)
            _exit(14);
        _exit(0);
    }, 20000ms);
    if (status == 10)
        GTEST_SKIP() << "no /dev/kvmemclient: kunit/kvmemclient.ko not loaded";
    EXPECT_EQ(status, 0) << "10-14: see the child's exits; -2: hung (destroy deadlocked)";
}

// kvmem_fail(): a failed page raises SIGBUS on access, including in a task
// already waiting for it (the client held it back) and after a grant,
// while the region's other pages keep working.
TEST(Kvmem, FailedPageRaisesSigbusOthersWork)
{
    if (::access("/dev/kvmemclient", F_OK) != 0)
        GTEST_SKIP() << "no /dev/kvmemclient: kunit/kvmemclient.ko not loaded";
    // Shared with the children: how far each got before it died.
    void *shm = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(shm, MAP_FAILED);
    auto *stage = static_cast<std::atomic<int> *>(shm);
    const auto setup = [] {
        const ClientRegion c = client_region(4);
        if (c.base == nullptr)
            _exit(10);
        return std::pair{c.fd, static_cast<volatile std::uint8_t *>(c.base)};
    };

    // A page in use fails: the next access dies, another page works.
    stage->store(0);
    EXPECT_EQ(child_signal([&] {
                  auto [fd, p] = setup();
                  p[0] = 1;
                  if (::ioctl(fd, KVMEMCLIENT_IOC_FAIL, 0UL) != 0)
                      _exit(11);
                  p[4096] = 2;
                  stage->store(p[4096] == 2 ? 1 : -1);
                  if (::ioctl(fd, KVMEMCLIENT_IOC_GRANT, 0UL) != 0)
                      _exit(12);  // grants succeed, and change nothing
                  (void)p[0];
                  stage->store(2);
              }), SIGBUS);
    EXPECT_EQ(stage->load(), 1) << "page 1 must work after page 0 failed, and page 0 must not";

    // A task waiting for a held page dies once the page fails, not before.
    stage->store(0);
    EXPECT_EQ(child_signal([&] {
                  auto [fd, p] = setup();
                  if (::ioctl(fd, KVMEMCLIENT_IOC_HOLD, 2UL) != 0)
                      _exit(11);
                  std::thread waiter([p = p] { (void)p[2 * 4096]; });
                  std::this_thread::sleep_for(200ms);
                  stage->store(1);  // the waiter is still blocked
                  if (::ioctl(fd, KVMEMCLIENT_IOC_FAIL, 2UL) != 0)
                      _exit(12);
                  waiter.join();
                  stage->store(2);
              }), SIGBUS);
    EXPECT_EQ(stage->load(), 1) << "the waiter must block until the page fails";
    ::munmap(shm, 4096);
}

// madvise(MADV_DOFORK) would clear VM_DONTCOPY and let a child inherit the
// entries, where a revoke in the parent does not reach them.  It must be
// refused, and no child may write after the parent revoked.
TEST(Kvmem, MadviseDoforkCannotLeakTheMappingIntoAChild)
{
    Region r(2, KVMEM_POLICY_WAIT, KVMEM_PROT_RW);
    auto *p = r.map();
    p[0] = 1;
    errno = 0;
    const int ret = madvise(const_cast<std::uint8_t *>(p), r.bytes(), MADV_DOFORK);
    const int err = errno;
    EXPECT_EQ(ret, -1) << "madvise(MADV_DOFORK) on a kvmem mapping was accepted: the VMA "
                          "lost VM_DONTCOPY";
    EXPECT_EQ(err, EINVAL);

    int up[2], down[2];
    ASSERT_EQ(pipe(up), 0);
    ASSERT_EQ(pipe(down), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(5);                          // a write that waits in a fault ends here
        char c = 'r';
        if (write(up[1], &c, 1) != 1 || read(down[0], &c, 1) != 1)
            _exit(3);
        p[0] = 0x55;                       // after the parent's revoke: must not land
        _exit(0);
    }
    const bool ready = read_byte(up[0], 5000ms);
    EXPECT_TRUE(ready) << "the child never started";
    ASSERT_EQ(r.protect({{0, 1}}, KVMEM_PROT_NONE), 0);
    const char go = 'g';
    EXPECT_EQ(write(down[1], &go, 1), 1);
    int status = 0;
    bool ended = wait_for([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 10000ms);
    if (!ended) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    for (int fd : {up[0], up[1], down[0], down[1]})
        close(fd);
    EXPECT_TRUE(ended) << "the child hung";
    // SIGSEGV: no mapping; SIGALRM: a mapping whose write waits in a fault.
    const bool wrote = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    EXPECT_FALSE(wrote) << "a forked child wrote to the region after the parent's revoke "
                           "returned";
    if (!wrote) {
        EXPECT_TRUE(WIFSIGNALED(status) &&
                    (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGALRM))
            << "child ended with status 0x" << std::hex << status;
    }
    ASSERT_EQ(r.protect({{0, 1}}, KVMEM_PROT_READ), 0);
    EXPECT_EQ(p[0], 1) << "a forked child's write landed after the parent's revoke";
}

// A revoke must not zap through a VMA that munmap has detached: revokes
// race a thread that maps, touches and unmaps the region.  On a KASAN
// kernel a stale VMA shows as a use-after-free; elsewhere this must pass.
TEST(Kvmem, RevokesRaceMmapTouchMunmap)
{
    ASSERT_GE(std::thread::hardware_concurrency(), 2U) << "needs two CPUs";
    constexpr std::uint32_t kPages = 16;
    Region r(kPages, KVMEM_POLICY_GRANT, KVMEM_PROT_RW);
    const int fd = r.fd();
    const std::size_t bytes = r.bytes();
    const std::size_t page = kvmem::page_size();
    std::atomic<bool> stop{false};
    std::atomic<int> maps{0}, map_errors{0};
    std::thread mapper([&] {
        pin(1);
        while (!stop.load()) {
            void *m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (m == MAP_FAILED) {
                map_errors.fetch_add(1);
                continue;
            }
            auto *q = static_cast<volatile std::uint8_t *>(m);
            for (std::size_t i = 0; i < kPages; ++i)
                q[i * page] = static_cast<std::uint8_t>(i);   // granted by the callback
            munmap(m, bytes);
            maps.fetch_add(1);
        }
    });
    int failed = 0, revokes = 0;
    // Both sides must really race: at least 2000 revokes and 20 mapping
    // cycles (a revoke takes microseconds, a cycle 16 faults), within 5 s.
    const auto end = std::chrono::steady_clock::now() + 5s;
    while ((revokes < 2000 || maps.load() < 20) && std::chrono::steady_clock::now() < end) {
        failed += r.protect({{0, kPages}}, KVMEM_PROT_NONE) != 0;
        ++revokes;
    }
    stop.store(true);
    mapper.join();
    EXPECT_EQ(failed, 0) << "revokes failed during the race";
    EXPECT_EQ(map_errors.load(), 0) << "mmap() failed during the race";
    EXPECT_GE(maps.load(), 20) << "the mapper never got going; no race was tested";
    // The region still works and holds what the last cycle wrote: every
    // write landed in the region's own page, whatever revoke it raced.
    r.map();
    for (std::uint32_t i = 0; i < kPages; ++i)
        EXPECT_EQ(*r.page(i), i) << "page " << i;
}

// A writer that faults while a reader's callback is outstanding waits
// behind it; the read grant answers that callback only, so the writer's
// need must then reach the client in a callback of its own.
TEST(Kvmem, WriteNeedBehindAReadCallbackReachesTheClient)
{
    Region r(1, KVMEM_POLICY_WAIT, KVMEM_PROT_NONE);
    auto *p = r.map();
    std::atomic<bool> read_done{false}, write_done{false}, mapped{false};
    std::thread reader([&] {
        static_cast<void>(p[0]);
        read_done.store(true);
    });
    ASSERT_TRUE(wait_for([&] { return r.stats().read_faults >= 1; }, 5000ms));
    std::thread writer([&] {
        p[0] = 9;
        write_done.store(true);
    });
    EXPECT_TRUE(wait_for([&] { return r.stats().write_faults >= 1; }, 5000ms))
        << "the writer never faulted";
    EXPECT_EQ(r.stats().callbacks, 1U);                      // waits behind the read one
    ASSERT_EQ(r.protect({{0, 1}}, KVMEM_PROT_READ), 0);       // answers the read callback
    EXPECT_TRUE(wait_for([&] { return read_done.load(); }, 5000ms)) << "reader stuck";
    EXPECT_TRUE(wait_for([&] { return r.stats().callbacks >= 2; }, 3000ms))
        << "the writer's need never reached the client: the read grant answered the "
           "only callback and the writer waits for a write grant nobody was asked for";
    EXPECT_FALSE(write_done.load());
    // The writer now waits in a retried fault: without mmap_lock, so an
    // mmap() in another thread goes through.
    std::thread mapper([&] {
        void *a = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (a != MAP_FAILED)
            munmap(a, 4096);
        mapped.store(true);
    });
    EXPECT_TRUE(wait_for([&] { return mapped.load(); }, 3000ms))
        << "mmap() blocked: a retried kvmem fault waits holding mmap_lock";
    ASSERT_EQ(r.protect({{0, 1}}, KVMEM_PROT_RW), 0);         // releases everything
    EXPECT_TRUE(wait_for([&] { return write_done.load(); }, 5000ms)) << "writer stuck";
    reader.join();
    writer.join();
    mapper.join();
    EXPECT_EQ(p[0], 9);
    EXPECT_EQ(r.stats().callbacks, 2U);
}

// A read-modify-write of one operand on a READ page whose entry is not
// present: under TCG the instruction restarts with its load, so after
// ->pfn_mkwrite removes the read-only entry the next fault is a read.
// kvmem must still ask the client for write access, or the access spins
// between a read fault and pfn_mkwrite for ever.
TEST(Kvmem, ReadModifyWriteOfAReadPageAsksForWriteAccess)
{
    Region r(1, KVMEM_POLICY_WAIT, KVMEM_PROT_READ);
    auto *p = reinterpret_cast<volatile int *>(r.map());
    std::atomic<bool> done{false};
    std::thread rmw([&] {
        asm volatile("addl $1, %0" : "+m"(*p));
        done.store(true);
    });
    EXPECT_TRUE(wait_for([&] { return r.stats().write_faults >= 1; }, 5000ms))
        << "the read-modify-write never asked for write access (read faults: "
        << r.stats().read_faults << ")";
    ASSERT_EQ(r.protect({{0, 1}}, KVMEM_PROT_RW), 0);
    EXPECT_TRUE(wait_for([&] { return done.load(); }, 5000ms)) << "the access never completed";
    rmw.join();
    EXPECT_EQ(*p, 1);
}

// GRANT policy, a reader and a writer on each of 2000 fresh NONE pages at
// the same time: whichever callback the page gets first, both accesses
// complete.  A writer stuck behind a read grant is reported, not hung on.
TEST(Kvmem, ConcurrentReadAndWriteFaultsBothComplete)
{
    ASSERT_GE(std::thread::hardware_concurrency(), 2U) << "needs two CPUs";
    const int st = child_status([] {
        alarm(40);
        constexpr std::uint32_t kPages = 2000;
        Region r(kPages, KVMEM_POLICY_GRANT, KVMEM_PROT_NONE);
        r.map();
        // Each thread starts page i when the other has finished page i - 1.
        std::atomic<std::uint32_t> rdone{0}, wdone{0};
        std::thread reader([&] {
            pin(0);
            for (std::uint32_t i = 0; i < kPages; ++i) {
                while (wdone.load() < i) {
                }
                static_cast<void>(*r.page(i));
                rdone.store(i + 1);
            }
        });
        std::thread writer([&] {
            pin(1);
            for (std::uint32_t i = 0; i < kPages; ++i) {
                while (rdone.load() < i) {
                }
                *r.page(i) = 1;
                wdone.store(i + 1);
            }
        });
        std::uint64_t last = 0;
        auto progress = std::chrono::steady_clock::now();
        while (rdone.load() < kPages || wdone.load() < kPages) {
            const std::uint64_t now_done = rdone.load() + wdone.load();
            if (now_done != last) {
                last = now_done;
                progress = std::chrono::steady_clock::now();
            } else if (std::chrono::steady_clock::now() - progress > 5s) {
                const bool writer_stuck = wdone.load() <= rdone.load();
                std::fprintf(stderr, "page %u: %s stuck for 5 s\n",
                             writer_stuck ? wdone.load() : rdone.load(),
                             writer_stuck ? "writer" : "reader");
                _exit(writer_stuck ? 2 : 3);                 // ends the stuck thread too
            }
            std::this_thread::sleep_for(20ms);
        }
        reader.join();
        writer.join();
        _exit(0);
    }, 60000ms);
    EXPECT_NE(st, 2) << "a write fault that waited behind a read callback never completed: "
                        "its write need never reached the GRANT client";
    EXPECT_NE(st, 3) << "a read fault never completed";
    EXPECT_NE(st, 128 + SIGALRM) << "the child timed out";
    EXPECT_EQ(st, 0);
}

// A fault that cannot be retried (futex's fixup_user_fault() passes no
// FAULT_FLAG_ALLOW_RETRY) must not wait for a grant holding mmap_lock:
// it fails (-EFAULT) instead, and another thread's mmap() goes through.
TEST(Kvmem, FaultThatCannotRetryDoesNotWaitHoldingMmapLock)
{
    const int st = child_status([] {
        alarm(20);
        Region r(1, KVMEM_POLICY_WAIT, KVMEM_PROT_NONE);
        auto *p = r.map();
        std::uint32_t word = 0;
        std::atomic<bool> futex_done{false}, mapped{false};
        std::atomic<long> futex_ret{0};
        std::atomic<int> futex_errno{0};
        std::thread futexer([&] {
            // FUTEX_WAKE_OP writes uaddr2: the write fault comes from
            // fault_in_user_writeable(), without ALLOW_RETRY.
            const long ret = syscall(SYS_futex, &word, FUTEX_WAKE_OP | FUTEX_PRIVATE_FLAG, 0,
                                     nullptr, const_cast<std::uint8_t *>(p),
                                     FUTEX_OP(FUTEX_OP_SET, 1, FUTEX_OP_CMP_EQ, 0));
            futex_errno.store(errno);
            futex_ret.store(ret);
            futex_done.store(true);
        });
        if (!wait_for([&] { return futex_done.load() || r.stats().write_faults >= 1; }, 5000ms))
            _exit(5);
        std::thread mapper([&] {
            void *a = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0);
            if (a != MAP_FAILED)
                munmap(a, 4096);
            mapped.store(true);
        });
        const bool map_ok = wait_for([&] { return mapped.load(); }, 3000ms);
        const bool futex_ok = wait_for([&] { return futex_done.load(); }, 3000ms);
        r.protect({{0, 1}}, KVMEM_PROT_RW);                   // releases a waiting fault
        mapper.join();
        futexer.join();
        if (!map_ok)
            _exit(2);
        if (!futex_ok)
            _exit(3);
        if (futex_ret.load() != -1 || futex_errno.load() != EFAULT)
            _exit(4);
        _exit(0);
    }, 30000ms);
    EXPECT_NE(st, 2) << "mmap() blocked behind a kvmem fault that cannot be retried and "
                        "waits for a grant holding mmap_lock";
    EXPECT_NE(st, 3) << "FUTEX_WAKE_OP on an ungranted page did not return";
    EXPECT_NE(st, 4) << "FUTEX_WAKE_OP on an ungranted page did not fail with EFAULT";
    EXPECT_NE(st, 5) << "the futex write never reached kvmem's fault handler";
    EXPECT_EQ(st, 0);
}

// Entries honour the VMA's protection as well as the page's: a PROT_READ
// mapping of an RW page must never get a writable entry.
TEST(Kvmem, ReadOnlyMappingGetsNoWritableEntry)
{
    EXPECT_EQ(child_signal([] {
                  Region r(2, KVMEM_POLICY_GRANT, KVMEM_PROT_NONE);
                  void *m = mmap(nullptr, r.bytes(), PROT_READ, MAP_SHARED, r.fd(), 0);
                  if (m == MAP_FAILED)
                      _exit(3);
                  if (r.protect({{0, 2}}, KVMEM_PROT_RW) != 0)
                      _exit(4);
                  auto *p = static_cast<volatile std::uint8_t *>(m);
                  static_cast<void>(p[0]);   // the read fault installs the entry
                  p[0] = 1;                  // PROT_READ: must be SIGSEGV
              }), SIGSEGV) << "a write through a PROT_READ mapping of a page kvmem grants RW "
                              "succeeded (or the child failed: 3 mmap, 4 protect)";
}

} // namespace
