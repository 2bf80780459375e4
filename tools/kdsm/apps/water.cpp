// SPDX-License-Identifier: GPL-2.0-only
//
// Molecular dynamics after SPLASH-2 Water-Nsquared, simplified: N
// molecules, each one Lennard-Jones centre (reduced units, cutoff 2.5,
// mass 1), in a periodic cubic box, started on a lattice with jitter and
// random velocities; --iters time steps of symplectic Euler.
//
// The molecules are split in blocks over the workers, all threads of all
// nodes; each worker's slice of the molecule array and of the force array
// is padded to whole pages.  One step:
//
//   each worker computes the pairs (i, j) with i in its slice and j among
//   the next N/2 molecules, cyclically (so each pair once), reading every
//   position; it sums both sides of each pair in a private buffer, then
//   adds the buffer into the shared forces slice by slice, each under
//   that slice's kdsm::mutex (as Water does), starting at its own slice
//   and skipping slices it has no pair with;
//   the potential energy goes into a shared sum under one more lock
//                                                                 barrier
//   each worker moves its own molecules and clears their forces  barrier
//
// so positions are read-shared by all, and the force pages migrate
// between writers under locks, with the data moving with each lock.
// The order of the additions depends on who takes the locks first, so
// node 1 checks against a sequential run on private memory to a relative
// tolerance of 1e-9: positions (by the minimum image, relative to the
// box), velocities (relative to the largest), and each step's potential
// energy.
//
// Defaults: --size 128 molecules, --iters 4 steps.  Shared memory: one
// page of molecules and one of forces per worker (more for big slices),
// and one page of energies; locks 1 (energy) and 2.. (slices).
#include "app.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <mutex>

namespace {

constexpr double rc = 2.5, spacing = 1.2, dt = 0.002;

// @m = max(@m, @e), where a NaN @e sticks.
void worse(double &m, double e)
{
    if (!(e <= m))
        m = e;
}

struct molecule { double pos[3], vel[3], pad[2]; };
struct force { double f[3], pad; };

double uniform(std::uint64_t x)  // [0, 1)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return double((x ^ (x >> 31)) >> 11) / 9007199254740992.0;
}

struct box {
    std::size_t m;  // lattice side
    double len;

    explicit box(std::size_t n) : m(std::size_t(std::ceil(std::cbrt(double(n)) - 1e-9)))
    {
        len = std::max(double(m) * spacing, 2 * rc + 0.2);
    }
    double image(double d) const { return d - len * std::nearbyint(d / len); }

    molecule initial(std::size_t i) const
    {
        molecule mo{};
        const std::size_t cell[3] = {i % m, i / m % m, i / m / m};
        for (unsigned a = 0; a < 3; a++) {
            const std::uint64_t seed = 0x9e3779b97f4a7c15ull * (3 * i + a + 1);
            mo.pos[a] = (double(cell[a]) + 0.5) * spacing + 0.1 * (uniform(seed) - 0.5);
            mo.vel[a] = uniform(seed ^ 0x5555) - 0.5;
        }
        return mo;
    }

    // Forces of the pairs (i, j), i in [i0, i1), into @buf; returns
    // their potential energy.  @mol(i) is molecule i.
    template <typename Mol>
    double pairs(Mol mol, std::size_t n, std::size_t i0, std::size_t i1,
                 std::vector<double> &buf) const
    {
        double epot = 0;
        for (std::size_t i = i0; i < i1; i++)
            for (std::size_t off = 1; off <= n / 2; off++) {
                const std::size_t j = (i + off) % n;
                if (2 * off == n && i >= n / 2)
                    continue;  // the pair was counted from j
                double d[3], r2 = 0;
                for (unsigned a = 0; a < 3; a++) {
                    d[a] = image(mol(i).pos[a] - mol(j).pos[a]);
                    r2 += d[a] * d[a];
                }
                if (r2 >= rc * rc)
                    continue;
                const double s6 = 1 / (r2 * r2 * r2);
                const double f = 24 * s6 * (2 * s6 - 1) / r2;
                epot += 4 * s6 * (s6 - 1);
                for (unsigned a = 0; a < 3; a++) {
                    buf[3 * i + a] += f * d[a];
                    buf[3 * j + a] -= f * d[a];
                }
            }
        return epot;
    }

    void move(molecule &mo, const double *f) const
    {
        for (unsigned a = 0; a < 3; a++) {
            mo.vel[a] += f[a] * dt;
            mo.pos[a] += mo.vel[a] * dt;
            mo.pos[a] -= len * std::floor(mo.pos[a] / len);
        }
    }
};

}  // namespace

int main(int argc, char **argv)
{
    try {
        const app::options o = app::parse(argc, argv, 128, 4);
        const std::size_t n = o.size;
        const box bx(n);
        kdsm::attachment dsm;
        const unsigned workers = dsm.nnodes() * o.threads;
        if (n < 2 || workers + 2 > KDSM_MAX_LOCKS || dsm.page_size() % sizeof(molecule)) {
            std::fprintf(stderr, "water: --size must be at least 2, workers at most %u\n",
                         KDSM_MAX_LOCKS - 2);
            return 2;
        }
        app::slices<molecule> mol(dsm, n, workers);
        app::slices<force> frc(dsm, n, workers);
        kdsm::shared_array<double> epot(dsm, o.iters);
        kdsm::mutex epot_lock(dsm, 1);
        std::deque<kdsm::mutex> slice_lock;
        for (unsigned w = 0; w < workers; w++)
            slice_lock.emplace_back(dsm, 2 + w);
        kdsm::barrier bar(dsm, o.threads);

        const kdsm::status before = dsm.counters();
        const auto t0 = std::chrono::steady_clock::now();
        auto work = [&](unsigned t) {
            const unsigned w = (dsm.node() - 1) * o.threads + t;
            const std::size_t i0 = std::min(n, w * mol.per), i1 = std::min(n, i0 + mol.per);
            std::vector<double> buf(3 * n);
            for (std::size_t i = i0; i < i1; i++) {
                mol[i] = bx.initial(i);
                frc[i] = {};
            }
            if (w == 0)
                std::fill(epot.begin(), epot.end(), 0.0);
            bar.arrive_and_wait();
            for (unsigned it = 0; it < o.iters; it++) {
                std::fill(buf.begin(), buf.end(), 0.0);
                const double e = bx.pairs([&](std::size_t i) -> molecule & { return mol[i]; },
                                          n, i0, i1, buf);
                for (unsigned k = 0; k < workers && i0 < i1; k++) {
                    const unsigned s = (w + k) % workers;
                    const std::size_t j0 = std::min(n, s * mol.per);
                    const std::size_t j1 = std::min(n, j0 + mol.per);
                    const auto b0 = buf.begin() + std::ptrdiff_t(3 * j0);
                    if (std::all_of(b0, b0 + std::ptrdiff_t(3 * (j1 - j0)),
                                    [](double f) { return f == 0; }))
                        continue;  // no pair of ours within the cutoff
                    std::lock_guard g(slice_lock[s]);
                    for (std::size_t j = j0; j < j1; j++)
                        for (unsigned a = 0; a < 3; a++)
                            frc[j].f[a] += buf[3 * j + a];
                }
                {
                    std::lock_guard g(epot_lock);
                    epot[it] += e;
                }
                bar.arrive_and_wait();
                for (std::size_t i = i0; i < i1; i++) {
                    bx.move(mol[i], frc[i].f);
                    frc[i] = {};
                }
                bar.arrive_and_wait();
            }
        };
        app::run_threads(o.threads, work);
        const double secs = app::seconds_since(t0);
        const kdsm::status after = dsm.counters();

        bool ok = true;
        if (dsm.node() == 1) {
            std::vector<molecule> ref(n);
            std::vector<double> buf(3 * n), eref(o.iters);
            for (std::size_t i = 0; i < n; i++)
                ref[i] = bx.initial(i);
            const auto s0 = std::chrono::steady_clock::now();
            for (unsigned it = 0; it < o.iters; it++) {
                std::fill(buf.begin(), buf.end(), 0.0);
                eref[it] = bx.pairs([&](std::size_t i) -> molecule & { return ref[i]; }, n, 0,
                                    n, buf);
                for (std::size_t i = 0; i < n; i++)
                    bx.move(ref[i], &buf[3 * i]);
            }
            const double seq = app::seconds_since(s0);
            double perr = 0, verr = 0, eerr = 0, vmax = 0;
            for (std::size_t i = 0; i < n; i++)
                for (unsigned a = 0; a < 3; a++) {
                    worse(perr, std::fabs(bx.image(mol[i].pos[a] - ref[i].pos[a])));
                    worse(verr, std::fabs(mol[i].vel[a] - ref[i].vel[a]));
                    worse(vmax, std::fabs(ref[i].vel[a]));
                }
            perr /= bx.len;
            verr /= vmax;
            for (unsigned it = 0; it < o.iters; it++)
                worse(eerr, std::fabs(epot[it] - eref[it]) / std::max(std::fabs(eref[it]), 1.0));
            ok = perr < 1e-9 && verr < 1e-9 && eerr < 1e-9;  // NaN fails
            std::printf("water: %zu molecules, %u steps, %u nodes x %u threads: potential "
                        "energy %.9g, relative error against the sequential run: positions "
                        "%.3g, velocities %.3g, energies %.3g\n",
                        n, o.iters, dsm.nnodes(), o.threads, o.iters ? epot[o.iters - 1] : 0.0,
                        perr, verr, eerr);
            std::printf("water: 1 node, private memory, 1 thread: %.3f s; %u nodes: %.3f s\n",
                        seq, dsm.nnodes(), secs);
        }
        return app::finish("water", dsm, before, after, secs, ok);
    } catch (const kdsm::error &e) {
        std::fprintf(stderr, "water: %s\n", e.what());
        return 2;
    }
}
