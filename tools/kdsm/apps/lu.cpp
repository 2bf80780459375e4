// SPDX-License-Identifier: GPL-2.0-only
//
// Blocked dense LU factorisation without pivoting of a diagonally
// dominant N x N matrix (the SPLASH-2 LU "contiguous blocks" scheme).
//
// The matrix is cut into B x B blocks (B = 16: a block is 2 KB of
// doubles, stored contiguously), owned 2D-cyclically by the workers, all
// threads of all nodes, on a pr x pc grid.  Each worker's blocks are
// stored together and its area is padded to a page, so a page holds the
// blocks of one owner only: only the owner writes a page, and sharing is
// true sharing.  Step k of nb = N / B:
//
//   the owner of the diagonal block A_kk factors it        barrier
//   owners of row k and column k update their blocks with
//   L_kk^-1 and U_kk^-1, reading A_kk                      barrier
//   owners of the trailing blocks A_ij -= A_ik A_kj
//
// so each step the diagonal block is read by the owners of row and
// column k, and each perimeter block by a row or column of the worker
// grid (the owners of the trailing blocks it updates): a producer-consumer
// pattern where pages change hands between readers and one writer every
// step.  The next diagonal block is only touched by its owner in between,
// so two barriers per step suffice.
//
// Every block goes through the same kernels in the same order whatever
// the split, so node 1 checks the result bit for bit against the same
// blocked algorithm run sequentially on private memory, and prints the
// residual max |LU - A| / max |A| as a sanity value.
//
// Defaults: --size 256 (a 256 x 256 matrix, 128 pages plus up to one page
// of padding per worker, 11 Mflop); --iters is not used.
#include "app.hpp"

#include <algorithm>
#include <cmath>

namespace {

constexpr std::size_t B = 16;  // block side
constexpr std::size_t BB = B * B;

double initial(std::size_t i, std::size_t j, std::size_t n)
{
    if (i == j)
        return double(n);  // diagonally dominant: no pivoting needed
    return double((i * 7919 + j * 104729) % 1000) / 1000.0 - 0.5;
}

// A_kk = L U in place (L unit lower, U upper).
void diag(double *d)
{
    for (std::size_t k = 0; k < B; k++)
        for (std::size_t i = k + 1; i < B; i++) {
            d[i * B + k] /= d[k * B + k];
            for (std::size_t j = k + 1; j < B; j++)
                d[i * B + j] -= d[i * B + k] * d[k * B + j];
        }
}

// A_kj = L_kk^-1 A_kj.
void row_panel(const double *d, double *a)
{
    for (std::size_t k = 0; k < B; k++)
        for (std::size_t i = k + 1; i < B; i++)
            for (std::size_t j = 0; j < B; j++)
                a[i * B + j] -= d[i * B + k] * a[k * B + j];
}

// A_ik = A_ik U_kk^-1.
void col_panel(const double *d, double *a)
{
    for (std::size_t i = 0; i < B; i++)
        for (std::size_t k = 0; k < B; k++) {
            a[i * B + k] /= d[k * B + k];
            for (std::size_t j = k + 1; j < B; j++)
                a[i * B + j] -= a[i * B + k] * d[k * B + j];
        }
}

// A_ij -= A_ik A_kj.
void interior(double *a, const double *l, const double *u)
{
    for (std::size_t i = 0; i < B; i++)
        for (std::size_t k = 0; k < B; k++)
            for (std::size_t j = 0; j < B; j++)
                a[i * B + j] -= l[i * B + k] * u[k * B + j];
}

// The blocked factorisation: @blk(i, j) is block (i, j), @mine(i, j)
// whether this worker updates it, @sync() the barrier between phases.
template <typename Blk, typename Mine, typename Sync>
void factor(std::size_t nb, Blk blk, Mine mine, Sync sync)
{
    for (std::size_t k = 0; k < nb; k++) {
        if (mine(k, k))
            diag(blk(k, k));
        sync();
        for (std::size_t j = k + 1; j < nb; j++) {
            if (mine(k, j))
                row_panel(blk(k, k), blk(k, j));
            if (mine(j, k))
                col_panel(blk(k, k), blk(j, k));
        }
        sync();
        for (std::size_t i = k + 1; i < nb; i++)
            for (std::size_t j = k + 1; j < nb; j++)
                if (mine(i, j))
                    interior(blk(i, j), blk(i, k), blk(k, j));
    }
}

}  // namespace

int main(int argc, char **argv)
{
    try {
        const app::options o = app::parse(argc, argv, 256, 0);
        const std::size_t n = o.size, nb = n / B;
        if (n == 0 || n % B) {
            std::fprintf(stderr, "lu: --size must be a positive multiple of %zu\n", B);
            return 2;
        }
        kdsm::attachment dsm;
        const unsigned workers = dsm.nnodes() * o.threads;
        unsigned pr = 1;  // the worker grid: pr x pc, pr <= pc
        for (unsigned r = 1; r * r <= workers; r++)
            if (workers % r == 0)
                pr = r;
        const unsigned pc = workers / pr;
        auto owner = [&](std::size_t i, std::size_t j) { return (i % pr) * pc + j % pc; };

        // Each owner's blocks together, its area padded to a page.
        const std::size_t page = dsm.page_size() / sizeof(double);
        std::vector<std::size_t> off(nb * nb);
        std::size_t total = 0;
        for (unsigned w = 0; w < workers; w++) {
            for (std::size_t i = 0; i < nb; i++)
                for (std::size_t j = 0; j < nb; j++)
                    if (owner(i, j) == w) {
                        off[i * nb + j] = total;
                        total += BB;
                    }
            total = (total + page - 1) / page * page;
        }
        kdsm::shared_array<double> mat(dsm, total);
        kdsm::barrier bar(dsm, o.threads);

        const kdsm::status before = dsm.counters();
        const auto t0 = std::chrono::steady_clock::now();
        app::run_threads(o.threads, [&](unsigned t) {
            const unsigned w = (dsm.node() - 1) * o.threads + t;
            auto blk = [&](std::size_t i, std::size_t j) { return &mat[off[i * nb + j]]; };
            auto mine = [&](std::size_t i, std::size_t j) { return owner(i, j) == w; };
            for (std::size_t i = 0; i < nb; i++)
                for (std::size_t j = 0; j < nb; j++)
                    if (mine(i, j))
                        for (std::size_t x = 0; x < BB; x++)
                            blk(i, j)[x] = initial(i * B + x / B, j * B + x % B, n);
            bar.arrive_and_wait();
            // The last step's second barrier follows every write.
            factor(nb, blk, mine, [&] { bar.arrive_and_wait(); });
        });
        const double secs = app::seconds_since(t0);
        const kdsm::status after = dsm.counters();

        bool ok = true;
        if (dsm.node() == 1) {
            std::vector<double> ref(n * n);  // block (i, j) at (i * nb + j) * BB
            for (std::size_t k = 0; k < n * n; k++) {
                const std::size_t b = k / BB, x = k % BB;
                ref[k] = initial(b / nb * B + x / B, b % nb * B + x % B, n);
            }
            const auto s0 = std::chrono::steady_clock::now();
            factor(nb, [&](std::size_t i, std::size_t j) { return &ref[(i * nb + j) * BB]; },
                   [](std::size_t, std::size_t) { return true; }, [] {});
            const double seq = app::seconds_since(s0);

            std::vector<double> lu(n * n);  // the shared result, row major
            std::size_t bad = 0;
            for (std::size_t b = 0; b < nb * nb; b++)
                for (std::size_t x = 0; x < BB; x++) {
                    const double v = mat[off[b] + x];
                    bad += v != ref[b * BB + x];
                    lu[(b / nb * B + x / B) * n + b % nb * B + x % B] = v;
                }
            double res = 0, amax = 0;
            for (std::size_t i = 0; i < n; i++)
                for (std::size_t j = 0; j < n; j++) {
                    double s = i <= j ? lu[i * n + j] : 0;  // (L U)_ij, L unit lower
                    for (std::size_t k = 0; k < std::min(i, j + 1); k++)
                        s += lu[i * n + k] * lu[k * n + j];
                    res = std::max(res, std::fabs(s - initial(i, j, n)));
                    amax = std::max(amax, std::fabs(initial(i, j, n)));
                }
            res /= amax;
            ok = bad == 0 && res < 1e-9;
            std::printf("lu: %zux%zu, %zux%zu blocks on a %ux%u grid, %u nodes x %u threads: "
                        "residual %.3g, %zu elements differ from the sequential run\n",
                        n, n, B, B, pr, pc, dsm.nnodes(), o.threads, res, bad);
            std::printf("lu: 1 node, private memory, 1 thread: %.3f s; %u nodes: %.3f s\n",
                        seq, dsm.nnodes(), secs);
        }
        return app::finish("lu", dsm, before, after, secs, ok);
    } catch (const kdsm::error &e) {
        std::fprintf(stderr, "lu: %s\n", e.what());
        return 2;
    }
}
