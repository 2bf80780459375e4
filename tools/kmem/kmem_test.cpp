// SPDX-License-Identifier: GPL-2.0-only
//
// kmem behaviour from user space, run inside a guest that loaded
// kverbs_kmem.ko (the kmem-* suites).  Faults are counted by the driver
// (KMEM_IOC_STATS); deaths by signal are checked in child processes.
#include "kmem.hpp"

#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace {

using namespace std::chrono_literals;
using kmem::Region;

// Runs fn in a child process; returns the signal that killed it, 0 if it
// exited with status 0, -1 otherwise.
template <class F>
int child_signal(F fn, std::chrono::milliseconds kill_after = 0ms)
{
    const pid_t pid = fork();
    if (pid == 0) {
        fn();
        _exit(0);
    }
    if (kill_after.count() > 0) {
        std::this_thread::sleep_for(kill_after);
        kill(pid, SIGKILL);
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

void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

TEST(Kmem, FaultsExactlyAsTheProtectionSays)
{
    Region r(8, KMEM_POLICY_GRANT, KMEM_PROT_NONE);
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
    ASSERT_EQ(r.protect({{0, 1}}, KMEM_PROT_READ), 0);
    EXPECT_EQ(p[0], 7);
    EXPECT_EQ(r.stats().read_faults, 1U);
    p[0] = 10;
    p[0] = 11;
    EXPECT_EQ(r.stats().write_faults, 3U);
    EXPECT_EQ(p[0], 11);
}

TEST(Kmem, OneBatchOneZapOneFaultPerPage)
{
    Region r(64, KMEM_POLICY_GRANT, KMEM_PROT_RW);
    auto *p = r.map();
    for (std::size_t i = 0; i < 64; ++i)
        *r.page(i) = static_cast<std::uint8_t>(i);
    const auto zaps = r.stats().zaps;
    ASSERT_EQ(r.protect({{1, 1}, {5, 2}, {20, 1}, {63, 1}}, KMEM_PROT_NONE), 0);
    EXPECT_EQ(r.stats().zaps, zaps + 1);   // one TLB flush for the batch
    for (std::size_t i : {1, 5, 6, 20, 63})
        EXPECT_EQ(*r.page(i), i);
    EXPECT_EQ(r.stats().read_faults, 5U);
    EXPECT_EQ(r.stats().callbacks, 5U);
    static_cast<void>(p[4096 * 2]);        // in the span, kept its access
    EXPECT_EQ(r.stats().read_faults, 5U);
}

TEST(Kmem, BadInputChangesNothing)
{
    Region r(16, KMEM_POLICY_GRANT, KMEM_PROT_RW);
    auto *p = r.map();
    p[0] = 1;
    const auto before = r.stats();
    EXPECT_EQ(r.protect({}, KMEM_PROT_NONE), EINVAL);                  // empty batch
    EXPECT_EQ(r.protect({{0, 0}}, KMEM_PROT_NONE), EINVAL);            // empty range
    EXPECT_EQ(r.protect({{15, 2}}, KMEM_PROT_NONE), EINVAL);           // past the end
    EXPECT_EQ(r.protect({{0, 4}, {3, 1}}, KMEM_PROT_NONE), EINVAL);    // overlap
    EXPECT_EQ(r.protect({{4, 1}, {0, 1}}, KMEM_PROT_NONE), EINVAL);    // out of order
    EXPECT_EQ(r.protect({{0, 1}}, 3), EINVAL);                         // unknown prot
    EXPECT_EQ(r.protect({{0, 1}}, KMEM_PROT_NONE, 0x80), EINVAL);      // unknown flag
    EXPECT_EQ(r.protect({{0, 1}}, KMEM_PROT_NONE, 0, 1), EINVAL);      // reserved
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
    EXPECT_THROW(Region(0, KMEM_POLICY_GRANT, KMEM_PROT_RW), std::system_error);
    EXPECT_THROW(Region(4, 7, KMEM_PROT_RW), std::system_error);
}

TEST(Kmem, NoWriteLandsAfterARevokeReturns)
{
    ASSERT_GE(std::thread::hardware_concurrency(), 2U) << "needs two CPUs";
    for (int round = 0; round < 20; ++round) {
        Region r(4, KMEM_POLICY_WAIT, KMEM_PROT_RW);
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
        ASSERT_EQ(r.protect({{0, 1}}, KMEM_PROT_READ), 0);
        const std::uint64_t seen = *p;     // reads are still allowed
        std::this_thread::sleep_for(30ms);
        EXPECT_EQ(*p, seen) << "a write landed after the revoke returned (round "
                            << round << ")";
        EXPECT_GE(r.stats().write_faults, 1U);
        stop.store(true);
        ASSERT_EQ(r.protect({{0, 1}}, KMEM_PROT_RW), 0);  // release the writer
        writer.join();
    }
}

TEST(Kmem, ConcurrentFaultsOnOnePageShareOneCallback)
{
    Region r(2, KMEM_POLICY_WAIT, KMEM_PROT_NONE);
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
    ASSERT_EQ(r.protect({{0, 1}}, KMEM_PROT_READ), 0);
    for (auto &t : readers)
        t.join();
    EXPECT_EQ(done.load(), 4);
}

TEST(Kmem, NonBlockingVariant)
{
    Region r(8, KMEM_POLICY_GRANT, KMEM_PROT_RW);
    auto *p = r.map();
    p[0] = 1;                                                  // page 0 mapped
    EXPECT_EQ(r.protect({{0, 1}}, KMEM_PROT_NONE, KMEM_PROTECT_NOWAIT), EAGAIN);
    EXPECT_EQ(r.stats().nowait_busy, 1U);
    EXPECT_EQ(r.protect({{1, 7}}, KMEM_PROT_NONE, KMEM_PROTECT_NOWAIT), 0);  // never mapped
    EXPECT_EQ(r.protect({{1, 1}}, KMEM_PROT_RW, KMEM_PROTECT_NOWAIT), 0);    // a grant
    p[0] = 2;                                                  // still writable
    EXPECT_EQ(r.stats().write_faults, 0U);
    static_cast<void>(*r.page(2));                             // revoked above
    EXPECT_EQ(r.stats().read_faults, 1U);
}

TEST(Kmem, ForkedChildHasNoMapping)
{
    Region r(2, KMEM_POLICY_GRANT, KMEM_PROT_RW);
    auto *p = r.map();
    p[0] = 5;
    EXPECT_EQ(child_signal([&] { p[0] = 6; }), SIGSEGV);   // VM_DONTCOPY
    EXPECT_EQ(p[0], 5);
}

TEST(Kmem, ExitWhileAFaultWaits)
{
    // The child maps its own region and blocks in a fault nobody grants.
    EXPECT_EQ(child_signal([] {
                  Region r(1, KMEM_POLICY_WAIT, KMEM_PROT_NONE);
                  static_cast<void>(r.map()[0]);
              }, 300ms), SIGKILL);
    Region again(1, KMEM_POLICY_GRANT, KMEM_PROT_NONE);      // the module is fine
    EXPECT_EQ(again.map()[0], 0);
}

TEST(Kmem, MunmapSplitAndMremap)
{
    EXPECT_EQ(child_signal([] {
                  Region r(2, KMEM_POLICY_GRANT, KMEM_PROT_RW);
                  auto *p = r.map();
                  p[0] = 1;
                  munmap(const_cast<std::uint8_t *>(p), r.bytes());
                  if (r.protect({{0, 2}}, KMEM_PROT_NONE) != 0)  // no mapping: fine
                      _exit(3);
                  p[0] = 2;                                      // unmapped: SIGSEGV
              }), SIGSEGV);
    Region r(4, KMEM_POLICY_GRANT, KMEM_PROT_RW);
    auto *p = r.map();
    auto *raw = const_cast<std::uint8_t *>(p);
    EXPECT_NE(munmap(raw + kmem::page_size(), kmem::page_size()), 0);  // no split
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(mprotect(raw, kmem::page_size(), PROT_READ), -1);        // no split
    EXPECT_EQ(mremap(raw, r.bytes(), r.bytes() * 2, MREMAP_MAYMOVE), MAP_FAILED);
    p[0] = 3;                                                          // still whole
    EXPECT_EQ(p[0], 3);
}

TEST(Kmem, DestroyedRegionRaisesSigbus)
{
    EXPECT_EQ(child_signal([] {
                  Region r(2, KMEM_POLICY_GRANT, KMEM_PROT_RW);
                  auto *p = r.map();
                  p[0] = 1;
                  if (r.destroy() != 0)
                      _exit(3);
                  p[0] = 2;
              }), SIGBUS);
}

} // namespace
