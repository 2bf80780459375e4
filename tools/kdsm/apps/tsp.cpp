// SPDX-License-Identifier: GPL-2.0-only
//
// Travelling salesman by branch and bound (the TreadMarks TSP): the
// shortest round trip through N cities with pseudo-random coordinates in
// a 1000 x 1000 square and rounded Euclidean (integer) distances.
//
// Work is a shared queue of partial tours from city 0, taken by every
// thread of every node.  A tour shorter than the split depth (3 cities)
// is expanded, its children pushed back on the queue; a longer one is
// searched to the end on the worker's own stack.  The queue (append only,
// with a head, a tail and the count of busy workers) is under one
// kdsm::mutex, the best tour so far under another, and the pruning bound
// is each worker's copy of the best length, refreshed under the lock with
// every job it takes and with every tour it finds: a lock-heavy program
// whose shared data moves between nodes only with the locks.  A worker
// that finds the queue empty while others are busy sleeps and retries;
// the search ends when the queue is empty and no one is busy.
//
// The pruning bound is the tour so far plus the cheapest edge out of its
// last city and out of every city not yet visited.  Node 1 checks that
// the optimal length equals a sequential branch and bound on private
// memory (the tours may differ on ties) and that the shared best tour is
// a round trip of that length.
//
// Defaults: --size 12 cities (at most 16); --iters is not used.  Shared
// memory: 3 pages (queue state, best tour, at most 226 jobs).
#include "app.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <mutex>

namespace {

constexpr unsigned max_cities = 16;
constexpr unsigned split = 3;  // jobs of this many cities are searched whole

struct job {
    std::uint8_t city[max_cities];
    std::int32_t len;
    std::uint32_t depth;
};

struct queue_state {
    std::uint32_t head, tail, busy;
};

struct best_tour {
    std::int32_t len;
    std::uint8_t city[max_cities];
};

struct graph {
    unsigned n;
    std::vector<std::int32_t> d, minout;

    explicit graph(unsigned cities) : n(cities), d(n * n), minout(n, INT_MAX)
    {
        auto coord = [](unsigned i, unsigned axis) {
            std::uint64_t x = 0x9e3779b97f4a7c15ull * (2 * i + axis + 1);
            x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
            return double((x ^ (x >> 29)) % 1000);
        };
        for (unsigned i = 0; i < n; i++)
            for (unsigned j = 0; j < n; j++) {
                d[i * n + j] = std::int32_t(std::lround(
                    std::hypot(coord(i, 0) - coord(j, 0), coord(i, 1) - coord(j, 1))));
                if (i != j)
                    minout[i] = std::min(minout[i], d[i * n + j]);
            }
    }
    std::int32_t dist(unsigned i, unsigned j) const { return d[i * n + j]; }

    // Sum of minout[] over the cities not in @t[0, @depth), city 0 aside.
    std::int32_t rest(const std::uint8_t *t, unsigned depth) const
    {
        std::int32_t r = 0;
        for (unsigned c = 1; c < n; c++)
            if (std::find(t, t + depth, c) == t + depth)
                r += minout[c];
        return r;
    }

    // Extend @t (@depth cities, length @len) to every round trip shorter
    // than @best; improve(length, tour) returns the new bound.
    template <typename Improve>
    void search(std::uint8_t *t, unsigned depth, std::int32_t len, std::int32_t rest,
                std::int32_t &best, Improve &improve) const
    {
        const unsigned last = t[depth - 1];
        if (depth == n) {
            if (len + dist(last, 0) < best)
                best = improve(len + dist(last, 0), t);
            return;
        }
        for (unsigned c = 1; c < n; c++) {
            if (std::find(t, t + depth, c) != t + depth)
                continue;
            const std::int32_t nl = len + dist(last, c);
            if (nl + rest >= best)  // rest still counts c's way out
                continue;
            t[depth] = std::uint8_t(c);
            search(t, depth + 1, nl, rest - minout[c], best, improve);
        }
    }
};

}  // namespace

int main(int argc, char **argv)
{
    try {
        const app::options o = app::parse(argc, argv, 12, 1);
        const unsigned n = unsigned(o.size);
        if (n < 3 || n > max_cities) {
            std::fprintf(stderr, "tsp: --size must be 3..%u cities\n", max_cities);
            return 2;
        }
        const graph g(n);
        kdsm::attachment dsm;
        kdsm::shared_array<queue_state> q(dsm, 1);
        kdsm::shared_array<best_tour> best(dsm, 1);
        kdsm::shared_array<job> jobs(dsm, 1 + (n - 1) + (n - 1) * (n - 2));
        kdsm::mutex q_lock(dsm, 1), best_lock(dsm, 2);
        kdsm::barrier bar(dsm, o.threads);

        const kdsm::status before = dsm.counters();
        const auto t0 = std::chrono::steady_clock::now();
        auto work = [&](unsigned t) {
            if (dsm.node() == 1 && t == 0) {
                q[0] = {0, 1, 0};
                best[0] = {INT_MAX, {}};
                jobs[0] = {{0}, 0, 1};
            }
            bar.arrive_and_wait();
            std::int32_t bound = INT_MAX;
            auto improve = [&](std::int32_t len, const std::uint8_t *tour) {
                std::lock_guard lg(best_lock);
                if (len < best[0].len) {
                    best[0].len = len;
                    std::copy(tour, tour + n, best[0].city);
                }
                return best[0].len;
            };
            for (bool mine = false;;) {
                job j;
                {
                    std::lock_guard lq(q_lock);
                    q[0].busy -= mine;
                    mine = q[0].head < q[0].tail;
                    if (mine) {
                        j = jobs[q[0].head++];
                        q[0].busy++;
                    } else if (!q[0].busy) {
                        break;
                    }
                }
                if (!mine) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                    continue;
                }
                {
                    std::lock_guard lb(best_lock);
                    bound = best[0].len;
                }
                const std::int32_t rest = g.rest(j.city, j.depth);
                if (j.depth >= split) {
                    g.search(j.city, j.depth, j.len, rest, bound, improve);
                    continue;
                }
                std::vector<job> kids;
                const unsigned last = j.city[j.depth - 1];
                for (unsigned c = 1; c < n; c++)
                    if (std::find(j.city, j.city + j.depth, c) == j.city + j.depth &&
                        j.len + g.dist(last, c) + rest < bound) {
                        kids.push_back(j);
                        kids.back().city[j.depth] = std::uint8_t(c);
                        kids.back().len = j.len + g.dist(last, c);
                        kids.back().depth = j.depth + 1;
                    }
                std::lock_guard lq(q_lock);
                for (const job &k : kids)
                    jobs[q[0].tail++] = k;
            }
            bar.arrive_and_wait();
        };
        app::run_threads(o.threads, work);
        const double secs = app::seconds_since(t0);
        const kdsm::status after = dsm.counters();

        bool ok = true;
        if (dsm.node() == 1) {
            const auto s0 = std::chrono::steady_clock::now();
            std::uint8_t tour[max_cities] = {0};
            std::int32_t ref = INT_MAX;
            auto keep = [](std::int32_t len, const std::uint8_t *) { return len; };
            g.search(tour, 1, 0, g.rest(tour, 1), ref, keep);
            const double seq = app::seconds_since(s0);

            const best_tour b = best[0];
            std::int32_t len = 0;
            std::uint32_t seen = 0;
            for (unsigned i = 0; i < n; i++) {
                len += g.dist(b.city[i], b.city[(i + 1) % n]);
                seen |= 1u << (b.city[i] % max_cities);
            }
            const bool valid = b.city[0] == 0 && seen == (1u << n) - 1 && len == b.len;
            ok = valid && b.len == ref;
            std::printf("tsp: %u cities, %u jobs, %u nodes x %u threads: shortest tour %d "
                        "(%s), sequential %d\n",
                        n, q[0].tail, dsm.nnodes(), o.threads, b.len,
                        valid ? "a valid tour" : "NOT A VALID TOUR", ref);
            std::printf("tsp: 1 node, private memory, 1 thread: %.3f s; %u nodes: %.3f s\n",
                        seq, dsm.nnodes(), secs);
        }
        return app::finish("tsp", dsm, before, after, secs, ok);
    } catch (const kdsm::error &e) {
        std::fprintf(stderr, "tsp: %s\n", e.what());
        return 2;
    }
}
