// SPDX-License-Identifier: GPL-2.0-only
//
// Sequential-consistency litmus tests across nodes 1 and 2 (others only
// join the barriers), and a lock stress test on every node:
//
// Node 1 zeroes the variables first; iteration i (from 1) writes the
// value i, so a stale copy shows as an older value:
//
//   sb       store buffering (Dekker): x = i; r1 = y  ||  y = i; r2 = x.
//            Forbidden: r1 < i and r2 < i (neither saw the other's store).
//   mp       message passing: data = i; flag = i  ||  wait flag == i;
//            r = data.  Forbidden: r != i.
//   lb       load buffering: r1 = x; y = i  ||  r2 = y; x = i.
//            Forbidden: r1 = r2 = i (both saw a store that follows).
//   iriw     independent reads of independent writes (4 nodes or more):
//            node 1: x = i  ||  node 2: y = i  ||  node 3: r1 = x; r2 = y
//            ||  node 4: r3 = y; r4 = x.  Forbidden: r1 = i, r2 < i,
//            r3 = i, r4 < i (nodes 3 and 4 saw the writes in opposite
//            orders).
//   counter  every thread of every node adds 1 under a kdsm::mutex
//            --iters times and writes its own slot of one shared page;
//            the counter and the slots must end exact.
//
// The lock tests (counter and the cases below) use the kernel lock, or
// with --kind atomic the queue lock on RDMA atomics.
//
// Lock cases, one node at a time (no collective calls):
//
//   hold         take lock --lock, print "held", keep it --hold-ms, give
//                it back, print "released".
//   take         take lock --lock and give it back.
//   unlock-race  --iters times: take lock --lock, then two threads give it
//                back at once; exactly one must succeed and the other get
//                EPERM, and the cluster must stay up.
//
// hold and take say "(previous holder died)" after "took lock N (kind)"
// when the lock came with EOWNERDEAD (the harness kills a holder).
//
// Loss cases, for a node lost while the program runs (the harness deletes
// a link or kills a guest): print "waiting", wait up to --hold-ms for this
// node's cluster to fail, then meet the loss in one order:
//
//   lost-fault   first at a page this node never touched, homed at
//                another node (SIGBUS, which libkdsm turns into its
//                report);
//   lost-sync    first at a barrier (EHOSTDOWN).
//
// Either way libkdsm must end the process with "kdsm: cluster failed:
// <reason>" and status kdsm::exit_cluster_failed; returning is a failure.
//
// Variables sit on separate pages (odd ones, so that the test-only weak
// mode, which skips invalidations of odd pages, reaches them) or, with
// --same-page, on one.  Exit 0 when the outcome is as expected: no
// violation, or with --expect-violations (the weak mode) at least one.
#include "app.hpp"

#include <atomic>
#include <barrier>
#include <cerrno>

namespace {

using ref = std::atomic_ref<int>;

// An int on its own odd page, or @share's page.
int *place(kdsm::attachment &a, int *share)
{
    if (share)
        return share + 16;
    int *p = static_cast<int *>(a.allocate(sizeof(int), 0, true));
    if (a.page_of(p) % 2 == 0)
        p = static_cast<int *>(a.allocate(sizeof(int), 0, true));
    return p;
}

// The lock cases; see the top of the file.
int lock_case(kdsm::attachment &dsm, const app::options &o)
{
    if (o.test == "hold" || o.test == "take") {
        const bool died = dsm.lock(o.lock, o.kind);
        std::printf("litmus %s: node %u took lock %u (%s)%s\n", o.test.c_str(), dsm.node(),
                    o.lock, kdsm::lock_kind_name(o.kind), died ? " (previous holder died)" : "");
        std::fflush(stdout);
        if (o.test == "hold") {
            std::printf("held\n");
            std::fflush(stdout);
            std::this_thread::sleep_for(std::chrono::milliseconds(o.hold_ms));
        }
        dsm.unlock(o.lock, o.kind);
        std::printf("released\n");
        return 0;
    }
    std::size_t wrong = 0;
    std::barrier sync(2);
    int res[2];
    for (unsigned i = 0; i < o.iters; i++) {
        dsm.lock(o.lock, o.kind);
        app::run_threads(2, [&](unsigned t) {
            sync.arrive_and_wait();
            try {
                dsm.unlock(o.lock, o.kind);
                res[t] = 0;
            } catch (const kdsm::error &e) {
                res[t] = e.errnum();
            }
        });
        const bool one_won = (res[0] == 0 && res[1] == EPERM) ||
                             (res[0] == EPERM && res[1] == 0);
        if (!one_won && wrong++ < 5)
            std::printf("iteration %u: unlocks returned %d and %d\n", i, res[0], res[1]);
    }
    std::printf("litmus unlock-race (%s): node %u, %u iterations, %zu wrong\n",
                kdsm::lock_kind_name(o.kind), dsm.node(), o.iters, wrong);
    return wrong ? 1 : 0;
}

// The loss cases; see the top of the file.
int lost_case(kdsm::attachment &dsm, const app::options &o)
{
    std::printf("litmus %s: node %u waiting\n", o.test.c_str(), dsm.node());
    std::fflush(stdout);
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.hold_ms);
    while (dsm.state() != KDSM_STATE_FAILED) {
        if (std::chrono::steady_clock::now() > end) {
            std::printf("litmus %s: the cluster did not fail in %u ms\n", o.test.c_str(),
                        o.hold_ms);
            return 1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (o.test == "lost-sync") {
        dsm.barrier_all();
        std::printf("litmus lost-sync: a barrier returned in a failed cluster\n");
        return 1;
    }
    // The last page homed elsewhere: the collective allocator hands out
    // pages from the start, so no program of this cluster touched it.
    const unsigned nn = dsm.nnodes(), me = dsm.node();
    auto home = [&](std::uint64_t p) {
        return unsigned(dsm.block_placement() ? p * nn / dsm.npages() + 1 : p % nn + 1);
    };
    std::uint64_t page = dsm.npages() - 1;
    while (page && home(page) == me)
        page--;
    std::printf("litmus lost-fault: node %u reads page %llu (home %u)\n", me,
                static_cast<unsigned long long>(page), home(page));
    std::fflush(stdout);
    const volatile std::uint8_t *p = dsm.base() + page * dsm.page_size();
    const unsigned v = *p;
    std::printf("litmus lost-fault: page %llu read (%u) in a failed cluster\n",
                static_cast<unsigned long long>(page), v);
    return 1;
}

}  // namespace

int main(int argc, char **argv)
{
    try {
        const app::options o = app::parse(argc, argv, 0, 2000);
        kdsm::attachment dsm;
        const unsigned me = dsm.node();
        if (o.test == "hold" || o.test == "take" || o.test == "unlock-race")
            return lock_case(dsm, o);
        if (o.test == "lost-fault" || o.test == "lost-sync")
            return lost_case(dsm, o);
        int *x = place(dsm, nullptr);
        int *y = place(dsm, o.same_page ? x : nullptr);
        int *flag = o.same_page ? x + 32 : static_cast<int *>(dsm.allocate(sizeof(int), 0, true));
        if (!o.same_page && dsm.page_of(flag) % 2)
            flag = static_cast<int *>(dsm.allocate(sizeof(int), 0, true));
        kdsm::shared_array<int> results(dsm, o.iters);  // node 2's, for node 1
        kdsm::shared_array<int> slots(dsm, 64 * KDSM_MAX_NODES);
        kdsm::shared_array<long> counter(dsm, 1);
        std::vector<int> mine(o.iters);
        // The region keeps what earlier programs left: start from zero.
        if (me == 1) {
            ref(*x).store(0);
            ref(*y).store(0);
            ref(*flag).store(0);
            counter[0] = 0;
            std::fill(slots.begin(), slots.end(), 0);
        }
        dsm.barrier_all();
        const kdsm::status before = dsm.counters();
        const auto t0 = std::chrono::steady_clock::now();
        std::size_t violations = 0;
        bool ok = true;

        if (o.test == "counter") {
            kdsm::mutex mu(dsm, 7, o.kind);
            kdsm::barrier bar(dsm, o.threads);
            app::run_threads(o.threads, [&](unsigned t) {
                const unsigned slot = (me - 1) * 64 + t;
                bar.arrive_and_wait();
                for (unsigned i = 0; i < o.iters; i++) {
                    std::lock_guard g(mu);
                    ref(*reinterpret_cast<int *>(&counter[0])).store(
                        ref(*reinterpret_cast<int *>(&counter[0])).load() + 1);
                    slots[slot] = static_cast<int>(i + 1);
                }
                bar.arrive_and_wait();
            });
            if (me == 1) {
                const long want = long(dsm.nnodes()) * o.threads * o.iters;
                long got = ref(*reinterpret_cast<int *>(&counter[0])).load();
                std::size_t bad_slots = 0;
                for (unsigned n = 0; n < dsm.nnodes(); n++)
                    for (unsigned t = 0; t < o.threads; t++)
                        bad_slots += slots[n * 64 + t] != int(o.iters);
                violations = std::size_t(want - got) + bad_slots;
                std::printf("litmus counter (%s lock): %u nodes x %u threads x %u: counter %ld "
                            "of %ld, %zu slots wrong\n", kdsm::lock_kind_name(o.kind),
                            dsm.nnodes(), o.threads, o.iters, got, want, bad_slots);
            }
        } else if (o.test == "iriw") {
            if (dsm.nnodes() < 4) {
                std::fprintf(stderr, "litmus: iriw needs 4 nodes\n");
                return 2;
            }
            // node 3's pair of reads, then node 4's, for node 1
            kdsm::shared_array<int> seen(dsm, 4 * std::size_t(o.iters));
            for (unsigned i = 0; i < o.iters; i++) {
                const int v = int(i + 1);
                dsm.barrier_all();
                if (me == 1) {
                    ref(*x).store(v);
                } else if (me == 2) {
                    ref(*y).store(v);
                } else if (me == 3 || me == 4) {
                    int *first = me == 3 ? x : y, *second = me == 3 ? y : x;
                    while (ref(*first).load() != v)  // the first write landed
                        ;
                    mine[i] = ref(*second).load();
                }
            }
            if (me == 3 || me == 4)
                for (unsigned i = 0; i < o.iters; i++)
                    seen[(me - 3) * std::size_t(o.iters) + i] = mine[i];
            dsm.barrier_all();
            if (me == 1) {
                // node 3 saw x before y and node 4 y before x: forbidden
                for (unsigned i = 0; i < o.iters; i++)
                    violations += seen[i] < int(i + 1) && seen[o.iters + i] < int(i + 1);
                std::printf("litmus iriw (%s): %u iterations, %zu violations of SC\n",
                            o.same_page ? "one page" : "separate pages", o.iters, violations);
            }
        } else if (o.test == "sb" || o.test == "mp" || o.test == "lb") {
            for (unsigned i = 0; i < o.iters; i++) {
                const int v = int(i + 1);
                dsm.barrier_all();
                if (o.test == "sb") {
                    if (me == 1) {
                        ref(*x).store(v);
                        mine[i] = ref(*y).load();
                    } else if (me == 2) {
                        ref(*y).store(v);
                        mine[i] = ref(*x).load();
                    }
                } else if (o.test == "lb") {
                    if (me == 1) {
                        mine[i] = ref(*x).load();
                        ref(*y).store(v);
                    } else if (me == 2) {
                        mine[i] = ref(*y).load();
                        ref(*x).store(v);
                    }
                } else {
                    if (me == 1) {
                        ref(*x).store(v);       // data
                        ref(*flag).store(v);
                    } else if (me == 2) {
                        while (ref(*flag).load() != v)
                            ;
                        mine[i] = ref(*x).load();
                    }
                }
            }
            if (me == 2)
                for (unsigned i = 0; i < o.iters; i++)
                    results[i] = mine[i];
            dsm.barrier_all();
            if (me == 1) {
                for (unsigned i = 0; i < o.iters; i++) {
                    const int v = int(i + 1);
                    if (o.test == "sb")
                        violations += mine[i] < v && results[i] < v;
                    else if (o.test == "lb")
                        violations += mine[i] == v && results[i] == v;
                    else
                        violations += results[i] != v;
                }
                std::printf("litmus %s (%s): %u iterations, %zu violations of SC\n",
                            o.test.c_str(), o.same_page ? "one page" : "separate pages",
                            o.iters, violations);
            }
        } else {
            std::fprintf(stderr, "litmus: --test sb, mp, lb, iriw, counter, hold, take "
                                 "or unlock-race\n");
            return 2;
        }
        const double secs = app::seconds_since(t0);
        if (me == 1)
            ok = o.expect_violations ? violations > 0 : violations == 0;
        app::report(("litmus-" + o.test).c_str(), before, dsm.counters(), secs, ok);
        dsm.barrier_all();
        return ok ? 0 : 1;
    } catch (const kdsm::error &e) {
        std::fprintf(stderr, "litmus: %s\n", e.what());
        return 2;
    }
}
