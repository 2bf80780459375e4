// SPDX-License-Identifier: GPL-2.0-only
//
// Red-black successive over-relaxation on an N x N grid (the paper's SOR):
// rows are split in blocks over every thread of every node, one row is a
// page for N = 512, and each half-sweep ends with a barrier, so nodes
// exchange only their boundary rows.  Red-black updates within a colour
// are independent, so the result equals the sequential run bit for bit;
// node 1 checks it against one on private memory.
#include "app.hpp"

#include <cmath>

namespace {

constexpr double omega = 1.25;

double initial(std::size_t i, std::size_t j, std::size_t n)
{
    if (i == 0 || j == 0 || i == n - 1 || j == n - 1)
        return 1.0 + double(i + 2 * j) / double(n);  // fixed boundary
    return double((i * 31 + j * 17) % 97) / 97.0;
}

void sweep(double *a, std::size_t n, std::size_t r0, std::size_t r1, unsigned colour)
{
    for (std::size_t i = std::max<std::size_t>(r0, 1); i < std::min(r1, n - 1); i++)
        for (std::size_t j = 1 + (i + colour) % 2; j < n - 1; j += 2)
            a[i * n + j] = (1 - omega) * a[i * n + j] +
                           omega / 4 * (a[(i - 1) * n + j] + a[(i + 1) * n + j] +
                                        a[i * n + j - 1] + a[i * n + j + 1]);
}

}  // namespace

int main(int argc, char **argv)
{
    try {
        const app::options o = app::parse(argc, argv, 512, 10);
        const std::size_t n = o.size;
        kdsm::attachment dsm;
        kdsm::shared_array<double> grid(dsm, n * n);
        kdsm::barrier bar(dsm, o.threads);
        const unsigned workers = dsm.nnodes() * o.threads;

        const kdsm::status before = dsm.counters();
        const auto t0 = std::chrono::steady_clock::now();
        app::run_threads(o.threads, [&](unsigned t) {
            const unsigned w = (dsm.node() - 1) * o.threads + t;
            const std::size_t r0 = n * w / workers, r1 = n * (w + 1) / workers;
            for (std::size_t i = r0; i < r1; i++)
                for (std::size_t j = 0; j < n; j++)
                    grid[i * n + j] = initial(i, j, n);
            bar.arrive_and_wait();
            for (unsigned it = 0; it < o.iters; it++)
                for (unsigned c = 0; c < 2; c++) {
                    sweep(grid.data(), n, r0, r1, c);
                    bar.arrive_and_wait();
                }
        });
        const double secs = app::seconds_since(t0);
        const kdsm::status after = dsm.counters();

        bool ok = true;
        if (dsm.node() == 1) {
            std::vector<double> ref(n * n);
            for (std::size_t i = 0; i < n; i++)
                for (std::size_t j = 0; j < n; j++)
                    ref[i * n + j] = initial(i, j, n);
            const auto s0 = std::chrono::steady_clock::now();
            for (unsigned it = 0; it < o.iters; it++)
                for (unsigned c = 0; c < 2; c++)
                    sweep(ref.data(), n, 0, n, c);
            const double seq = app::seconds_since(s0);
            std::size_t bad = 0;
            double sum = 0;
            for (std::size_t k = 0; k < n * n; k++) {
                bad += grid[k] != ref[k];
                sum += grid[k];
            }
            ok = bad == 0;
            std::printf("sor: %zux%zu, %u iterations, %u nodes x %u threads: checksum %.9g, "
                        "%zu cells differ from the sequential run\n",
                        n, n, o.iters, dsm.nnodes(), o.threads, sum, bad);
            std::printf("sor: 1 node, private memory, 1 thread: %.3f s; %u nodes: %.3f s\n",
                        seq, dsm.nnodes(), secs);
        }
        return app::finish("sor", dsm, before, after, secs, ok);
    } catch (const kdsm::error &e) {
        std::fprintf(stderr, "sor: %s\n", e.what());
        return 2;
    }
}
