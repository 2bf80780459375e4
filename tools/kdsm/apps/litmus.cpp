// SPDX-License-Identifier: GPL-2.0-only
//
// Sequential-consistency litmus tests across nodes 1 and 2 (others only
// join the barriers), and a lock stress test on every node:
//
// Iteration i (from 1) writes the value i, so no reset is needed and a
// stale copy shows as an older value:
//
//   sb       store buffering (Dekker): x = i; r1 = y  ||  y = i; r2 = x.
//            Forbidden: r1 < i and r2 < i (neither saw the other's store).
//   mp       message passing: data = i; flag = i  ||  wait flag == i;
//            r = data.  Forbidden: r != i.
//   lb       load buffering: r1 = x; y = i  ||  r2 = y; x = i.
//            Forbidden: r1 = r2 = i (both saw a store that follows).
//   counter  every thread of every node adds 1 under a kdsm::mutex
//            --iters times and writes its own slot of one shared page;
//            the counter and the slots must end exact.
//
// Variables sit on separate pages (odd ones, so that the test-only weak
// mode, which skips invalidations of odd pages, reaches them) or, with
// --same-page, on one.  Exit 0 when the outcome is as expected: no
// violation, or with --expect-violations (the weak mode) at least one.
#include "app.hpp"

#include <atomic>

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

}  // namespace

int main(int argc, char **argv)
{
    try {
        const app::options o = app::parse(argc, argv, 0, 2000);
        kdsm::attachment dsm;
        const unsigned me = dsm.node();
        int *x = place(dsm, nullptr);
        int *y = place(dsm, o.same_page ? x : nullptr);
        int *flag = o.same_page ? x + 32 : static_cast<int *>(dsm.allocate(sizeof(int), 0, true));
        if (!o.same_page && dsm.page_of(flag) % 2)
            flag = static_cast<int *>(dsm.allocate(sizeof(int), 0, true));
        kdsm::shared_array<int> results(dsm, o.iters);  // node 2's, for node 1
        kdsm::shared_array<int> slots(dsm, 64 * KDSM_MAX_NODES);
        kdsm::shared_array<long> counter(dsm, 1);
        std::vector<int> mine(o.iters);
        const kdsm::status before = dsm.counters();
        const auto t0 = std::chrono::steady_clock::now();
        std::size_t violations = 0;
        bool ok = true;

        if (o.test == "counter") {
            kdsm::mutex mu(dsm, 7);
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
                std::printf("litmus counter: %u nodes x %u threads x %u: counter %ld of %ld, "
                            "%zu slots wrong\n", dsm.nnodes(), o.threads, o.iters, got, want,
                            bad_slots);
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
            std::fprintf(stderr, "litmus: --test sb, mp, lb or counter\n");
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
