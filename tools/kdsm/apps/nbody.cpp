// SPDX-License-Identifier: GPL-2.0-only
//
// Direct all-pairs N-body: N bodies under softened gravity (G = 1,
// softening 0.05), a Plummer-like random cluster, --iters time steps of
// symplectic Euler.
//
// The bodies are split in blocks over the workers, all threads of all
// nodes; each worker's slice of the position and velocity arrays is
// padded to whole pages.  One step:
//
//   each worker computes the acceleration of its own bodies from every
//   position, into private memory                               barrier
//   each worker moves its own bodies                            barrier
//
// so every position page is read by every worker, then written by its
// owner alone: each step invalidates all the read copies and every
// reader fetches every page again (read sharing with one writer).
//
// Each body's acceleration sums the bodies j = 0 .. N-1 in order with
// the same function in the parallel and the sequential run, so node 1
// checks positions and velocities bit for bit against a sequential run
// on private memory.
//
// Defaults: --size 512 bodies, --iters 4 steps (1 M interactions).
// Shared memory: 4 + 4 pages for one worker, at least one page of each
// array per worker.
#include "app.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace {

constexpr double eps2 = 0.05 * 0.05, dt = 0.001;

struct body {
    double x[3], m;
};

struct velocity {
    double v[3], pad;
};

double uniform(std::uint64_t x)  // [0, 1)
{
    x *= 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return double((x ^ (x >> 31)) >> 11) / 9007199254740992.0;
}

void initial(std::size_t i, std::size_t n, body &b, velocity &v)
{
    const double r = 1 / std::sqrt(std::pow(uniform(6 * i) * 0.99 + 0.005, -2.0 / 3) - 1);
    const double z = 2 * uniform(6 * i + 1) - 1, phi = 2 * std::numbers::pi * uniform(6 * i + 2);
    const double s = std::sqrt(1 - z * z);
    b = {{r * s * std::cos(phi), r * s * std::sin(phi), r * z}, 1.0 / double(n)};
    for (unsigned a = 0; a < 3; a++)
        v.v[a] = 0.3 * (uniform(6 * i + 3 + a) - 0.5);
    v.pad = 0;
}

// The acceleration of body @i from every body @pos(j), j in order.
template <typename Pos>
void accel(Pos pos, std::size_t n, std::size_t i, double *acc)
{
    const body bi = pos(i);
    acc[0] = acc[1] = acc[2] = 0;
    for (std::size_t j = 0; j < n; j++) {
        const body &bj = pos(j);
        const double d[3] = {bj.x[0] - bi.x[0], bj.x[1] - bi.x[1], bj.x[2] - bi.x[2]};
        const double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + eps2;
        const double s = bj.m / (r2 * std::sqrt(r2));
        for (unsigned a = 0; a < 3; a++)
            acc[a] += s * d[a];
    }
}

void move(body &b, velocity &v, const double *acc)
{
    for (unsigned a = 0; a < 3; a++) {
        v.v[a] += acc[a] * dt;
        b.x[a] += v.v[a] * dt;
    }
}

}  // namespace

int main(int argc, char **argv)
{
    try {
        const app::options o = app::parse(argc, argv, 512, 4);
        const std::size_t n = o.size;
        kdsm::attachment dsm;
        const unsigned workers = dsm.nnodes() * o.threads;
        if (n == 0 || dsm.page_size() % sizeof(body)) {
            std::fprintf(stderr, "nbody: --size must be positive\n");
            return 2;
        }
        app::slices<body> pos(dsm, n, workers);
        app::slices<velocity> vel(dsm, n, workers);
        kdsm::barrier bar(dsm, o.threads);

        const kdsm::status before = dsm.counters();
        const auto t0 = std::chrono::steady_clock::now();
        app::run_threads(o.threads, [&](unsigned t) {
            const unsigned w = (dsm.node() - 1) * o.threads + t;
            const std::size_t i0 = std::min(n, w * pos.per), i1 = std::min(n, i0 + pos.per);
            std::vector<double> acc(3 * (i1 - i0));
            for (std::size_t i = i0; i < i1; i++)
                initial(i, n, pos[i], vel[i]);
            bar.arrive_and_wait();
            for (unsigned it = 0; it < o.iters; it++) {
                for (std::size_t i = i0; i < i1; i++)
                    accel([&](std::size_t j) -> body & { return pos[j]; }, n, i,
                          &acc[3 * (i - i0)]);
                bar.arrive_and_wait();
                for (std::size_t i = i0; i < i1; i++)
                    move(pos[i], vel[i], &acc[3 * (i - i0)]);
                bar.arrive_and_wait();
            }
        });
        const double secs = app::seconds_since(t0);
        const kdsm::status after = dsm.counters();

        bool ok = true;
        if (dsm.node() == 1) {
            std::vector<body> rpos(n);
            std::vector<velocity> rvel(n);
            std::vector<double> acc(3 * n);
            for (std::size_t i = 0; i < n; i++)
                initial(i, n, rpos[i], rvel[i]);
            const auto s0 = std::chrono::steady_clock::now();
            for (unsigned it = 0; it < o.iters; it++) {
                for (std::size_t i = 0; i < n; i++)
                    accel([&](std::size_t j) -> body & { return rpos[j]; }, n, i, &acc[3 * i]);
                for (std::size_t i = 0; i < n; i++)
                    move(rpos[i], rvel[i], &acc[3 * i]);
            }
            const double seq = app::seconds_since(s0);
            std::size_t bad = 0;
            double ekin = 0;
            for (std::size_t i = 0; i < n; i++)
                for (unsigned a = 0; a < 3; a++) {
                    bad += pos[i].x[a] != rpos[i].x[a];
                    bad += vel[i].v[a] != rvel[i].v[a];
                    ekin += pos[i].m * vel[i].v[a] * vel[i].v[a] / 2;
                }
            ok = bad == 0;
            std::printf("nbody: %zu bodies, %u steps, %u nodes x %u threads: kinetic energy "
                        "%.9g, %zu coordinates differ from the sequential run\n",
                        n, o.iters, dsm.nnodes(), o.threads, ekin, bad);
            std::printf("nbody: 1 node, private memory, 1 thread: %.3f s; %u nodes: %.3f s\n",
                        seq, dsm.nnodes(), secs);
        }
        return app::finish("nbody", dsm, before, after, secs, ok);
    } catch (const kdsm::error &e) {
        std::fprintf(stderr, "nbody: %s\n", e.what());
        return 2;
    }
}
