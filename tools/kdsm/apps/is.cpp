// SPDX-License-Identifier: GPL-2.0-only
//
// Integer sort in the manner of NAS IS: rank N keys in [0, K) by counting
// sort, --iters times, changing two keys before each iteration as NAS
// does (key[it] = it, key[it + iters] = K - 1 - it).
//
// The keys (an approximately Gaussian sum of four uniform parts, as NAS
// makes them, from a counter-based generator so each worker makes its own
// slice) are split in page-sized chunks over the workers, all threads of
// all nodes.  One iteration:
//
//   each worker counts the keys of its slice into its own histogram
//   (page aligned)                                              barrier
//   each worker owns a range of key values: it sums every worker's
//   histogram over its range (read sharing of all histograms), writes
//   the starts within its range and its range's total          barrier
//   each worker ranks its keys: start of the key + the counts of that
//   key in the lower workers' histograms + those before it in its slice
//   (a stable sort), and adds a checksum of its ranks to the
//   iteration's shared sum under a kdsm::mutex                 barrier
//
// so the histogram pages migrate between their writer and every reader
// each iteration, and one page of sums is a lock-protected reduction.
// (The starts, 2 pages, are written by several workers: some false
// sharing.)
// Node 1 checks every iteration's checksum exactly against a sequential
// counting sort on private memory (whose time it reports), and the final
// ranks of both against std::stable_sort.
//
// Defaults: --size 65536 keys, K = 2048, --iters 10 (NAS class S); shared
// memory 64 + 64 pages of keys and ranks, 3 pages per worker (histogram
// and total), 3 pages more.
#include "app.hpp"

#include <algorithm>
#include <mutex>
#include <numeric>
#include <utility>

namespace {

constexpr std::uint32_t maxkey = 2048;

std::uint64_t mix(std::uint64_t x)  // splitmix64's finaliser
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

std::uint32_t initial(std::size_t i)
{
    const std::uint64_t r = mix(i);
    std::uint32_t k = 0;
    for (unsigned p = 0; p < 4; p++)
        k += std::uint32_t(r >> (16 * p)) % (maxkey / 4);
    return k;
}

// The two keys NAS changes before iteration @it (from 1).
void modify(std::uint32_t *key, std::size_t i0, std::size_t i1, unsigned it, unsigned iters)
{
    if (it >= i0 && it < i1)
        key[it] = it % maxkey;
    if (it + iters >= i0 && it + iters < i1)
        key[it + iters] = maxkey - 1 - it % maxkey;
}

// The sequential counting sort: the time to beat.
void count_rank(const std::vector<std::uint32_t> &key, std::vector<std::uint32_t> &rank)
{
    std::vector<std::uint32_t> start(maxkey);
    for (std::uint32_t k : key)
        start[k]++;
    for (std::uint32_t k = 0, run = 0; k < maxkey; k++)
        run += std::exchange(start[k], run);
    for (std::size_t i = 0; i < key.size(); i++)
        rank[i] = start[key[i]]++;
}

std::uint64_t weigh(std::size_t i, std::uint32_t rank)
{
    return (i + 1) * (std::uint64_t(rank) + 1);
}

}  // namespace

int main(int argc, char **argv)
{
    try {
        const app::options o = app::parse(argc, argv, 65536, 10);
        const std::size_t n = o.size;
        if (!o.iters || n <= 2 * std::size_t(o.iters) || n >= (std::size_t(1) << 32)) {
            std::fprintf(stderr, "is: --iters must be positive, --size exceed 2 x --iters "
                                 "and fit 32 bits\n");
            return 2;
        }
        kdsm::attachment dsm;
        const unsigned workers = dsm.nnodes() * o.threads;
        const std::size_t page = dsm.page_size() / sizeof(std::uint32_t);
        const std::size_t chunks = (n + page - 1) / page;
        const std::size_t hstride = (maxkey + page - 1) / page * page;
        kdsm::shared_array<std::uint32_t> key(dsm, n);
        kdsm::shared_array<std::uint32_t> rank(dsm, n);
        kdsm::shared_array<std::uint32_t> hist(dsm, workers * hstride);
        kdsm::shared_array<std::uint32_t> start(dsm, maxkey);  // within its range
        kdsm::shared_array<std::uint32_t> total(dsm, workers * page);  // of range w at w*page
        kdsm::shared_array<std::uint64_t> sum(dsm, o.iters + 1);
        kdsm::mutex sum_lock(dsm, 1);
        kdsm::barrier bar(dsm, o.threads);

        const kdsm::status before = dsm.counters();
        const auto t0 = std::chrono::steady_clock::now();
        auto work = [&](unsigned t) {
            const unsigned w = (dsm.node() - 1) * o.threads + t;
            const std::size_t i0 = std::min(n, chunks * w / workers * page);
            const std::size_t i1 = std::min(n, chunks * (w + 1) / workers * page);
            const std::uint32_t k0 = maxkey * w / workers, k1 = maxkey * (w + 1) / workers;
            std::uint32_t *h = &hist[w * hstride];
            std::vector<std::uint32_t> base(maxkey);
            for (std::size_t i = i0; i < i1; i++)
                key[i] = initial(i);
            if (w == 0)
                for (unsigned it = 1; it <= o.iters; it++)
                    sum[it] = 0;
            for (unsigned it = 1; it <= o.iters; it++) {
                modify(key.data(), i0, i1, it, o.iters);
                std::fill(h, h + maxkey, 0);
                for (std::size_t i = i0; i < i1; i++)
                    h[key[i]]++;
                bar.arrive_and_wait();
                std::uint32_t run = 0;
                for (std::uint32_t k = k0; k < k1; k++) {
                    start[k] = run;
                    for (unsigned v = 0; v < workers; v++)
                        run += hist[v * hstride + k];
                }
                total[w * page] = run;
                bar.arrive_and_wait();
                std::uint32_t off = 0;  // of the key range being walked
                for (unsigned r = 0, k = 0; r < workers; off += total[r++ * page])
                    for (; k < maxkey * (r + 1) / workers; k++) {
                        base[k] = off + start[k];
                        for (unsigned v = 0; v < w; v++)
                            base[k] += hist[v * hstride + k];
                    }
                std::uint64_t s = 0;
                for (std::size_t i = i0; i < i1; i++) {
                    rank[i] = base[key[i]]++;
                    s += weigh(i, rank[i]);
                }
                {
                    std::lock_guard g(sum_lock);
                    sum[it] += s;
                }
                bar.arrive_and_wait();
            }
        };
        app::run_threads(o.threads, work);
        const double secs = app::seconds_since(t0);
        const kdsm::status after = dsm.counters();

        bool ok = true;
        if (dsm.node() == 1) {
            std::vector<std::uint32_t> ref(n), cref(n), rref(n);
            for (std::size_t i = 0; i < n; i++)
                ref[i] = initial(i);
            std::size_t bad_sums = 0;
            double seq = 0;
            for (unsigned it = 1; it <= o.iters; it++) {
                modify(ref.data(), 0, n, it, o.iters);
                const auto s0 = std::chrono::steady_clock::now();
                count_rank(ref, cref);
                seq += app::seconds_since(s0);
                std::uint64_t s = 0;
                for (std::size_t i = 0; i < n; i++)
                    s += weigh(i, cref[i]);
                bad_sums += s != sum[it];
            }
            // The last ranks by std::stable_sort, for the counting sorts too.
            std::vector<std::size_t> idx(n);
            std::iota(idx.begin(), idx.end(), 0);
            std::stable_sort(idx.begin(), idx.end(),
                             [&](std::size_t a, std::size_t b) { return ref[a] < ref[b]; });
            for (std::size_t r = 0; r < n; r++)
                rref[idx[r]] = std::uint32_t(r);
            std::size_t bad = 0;
            for (std::size_t i = 0; i < n; i++)
                bad += rank[i] != rref[i] || key[i] != ref[i] || cref[i] != rref[i];
            ok = bad == 0 && bad_sums == 0;
            std::printf("is: %zu keys in [0, %u), %u iterations, %u nodes x %u threads: "
                        "%zu iterations' checksums and %zu final ranks differ from the "
                        "sequential sorts\n",
                        n, maxkey, o.iters, dsm.nnodes(), o.threads, bad_sums, bad);
            std::printf("is: 1 node, private memory, 1 thread: %.3f s; %u nodes: %.3f s\n",
                        seq, dsm.nnodes(), secs);
        }
        return app::finish("is", dsm, before, after, secs, ok);
    } catch (const kdsm::error &e) {
        std::fprintf(stderr, "is: %s\n", e.what());
        return 2;
    }
}
