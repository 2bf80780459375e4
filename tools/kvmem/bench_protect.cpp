// SPDX-License-Identifier: GPL-2.0-only
//
// kvbench-protect: kvmem batch protection timed the way
// kvbench-protect-baseline times mprotect and userfaultfd (same region of
// 2048 pages, same scattered selections of N pages, revoke = RW -> READ,
// grant = back to RW, medians and p99 in microseconds), so that
// `./kvlab bench protect` can put them side by side from one guest run.
//
// Series, per N:
//   kvmem_ioctl    one KVMEM_IOC_PROTECT per revoke and per grant, timed in
//                 user space (system call included);
//   kvmem_kernel   the same kvmem_protect() calls timed inside the kernel
//                 (KVMEM_IOC_BENCH): what a kernel client pays;
//   kvmem_refault  writing the N pages after a grant: kvmem grants lazily, so
//                 the first write to each page takes a minor fault that
//                 mprotect's eager grant does not.  Reported, not hidden.
// Before every revoke the pages are written, so the revoke really has page
// table entries to remove, as mprotect's do.
#include "kvmem.hpp"
#include "../bench/stats.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr std::uint32_t region_pages = 2048;
constexpr std::uint32_t sizes[] = {1, 16, 32, 256, 1024};

using kvbench::Stat;
using kvbench::summarize;

struct Row {
    std::string method, op;
    std::uint32_t pages;
    Stat s;
};

std::string fixed3(double v)
{
    char b[32];
    std::snprintf(b, sizeof(b), "%.3f", v);
    return b;
}

} // namespace

int main(int argc, char **argv)
{
    int reps = 200;
    std::string json_path;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--reps" && i + 1 < argc)
            reps = std::max(1, std::atoi(argv[++i]));
        else if (a == "--json" && i + 1 < argc)
            json_path = argv[++i];
        else {
            std::fprintf(stderr, "usage: kvbench-protect [--reps N] [--json FILE]\n");
            return 1;
        }
    }
    using clock = std::chrono::steady_clock;
    using us = std::chrono::duration<double, std::micro>;
    std::vector<Row> rows;
    try {
        kvmem::Region r(region_pages, KVMEM_POLICY_GRANT, KVMEM_PROT_RW);
        r.map();
        const auto touch = [&r](std::uint32_t n) {
            for (std::uint32_t i = 0; i < n; ++i)
                *r.page(2 * i) = static_cast<std::uint8_t>(i);
        };
        for (const std::uint32_t n : sizes) {
            std::vector<kvmem_range> sel;
            for (std::uint32_t i = 0; i < n; ++i)
                sel.push_back({2 * i, 1});
            std::vector<double> rv, gr, krv, kgr, rf;
            for (int i = 0; i < reps; ++i) {
                touch(n);
                auto t0 = clock::now();
                if (r.protect(sel, KVMEM_PROT_READ) != 0)
                    throw std::runtime_error("revoke failed");
                auto t1 = clock::now();
                if (r.protect(sel, KVMEM_PROT_RW) != 0)
                    throw std::runtime_error("grant failed");
                auto t2 = clock::now();
                rv.push_back(us(t1 - t0).count());
                gr.push_back(us(t2 - t1).count());
                t0 = clock::now();
                touch(n);
                rf.push_back(us(clock::now() - t0).count());
                const auto [kr, kg] = r.kernel_bench(sel, KVMEM_PROT_READ);
                krv.push_back(static_cast<double>(kr) / 1000);
                kgr.push_back(static_cast<double>(kg) / 1000);
            }
            rows.push_back({"kvmem_ioctl", "revoke", n, summarize(rv)});
            rows.push_back({"kvmem_ioctl", "grant", n, summarize(gr)});
            rows.push_back({"kvmem_kernel", "revoke", n, summarize(krv)});
            rows.push_back({"kvmem_kernel", "grant", n, summarize(kgr)});
            rows.push_back({"kvmem_refault", "write", n, summarize(rf)});
        }
        const auto st = r.stats();
        std::fprintf(stderr, "kvbench-protect: %llu zaps, %llu write faults\n",
                     static_cast<unsigned long long>(st.zaps),
                     static_cast<unsigned long long>(st.write_faults));
    } catch (const std::exception &e) {
        std::fprintf(stderr, "kvbench-protect: %s\n", e.what());
        return 1;
    }
    std::printf("%-14s %-7s %5s %11s %11s\n", "method", "op", "pages", "median_us", "p99_us");
    for (const auto &x : rows)
        std::printf("%-14s %-7s %5u %11.2f %11.2f\n", x.method.c_str(), x.op.c_str(), x.pages,
                    x.s.median_us, x.s.p99_us);
    if (!json_path.empty()) {
        std::ofstream f(json_path);
        f << "{\n  \"reps\": " << reps << ",\n  \"series\": [\n";
        for (std::size_t i = 0; i < rows.size(); ++i)
            f << "    {\"method\": \"" << rows[i].method << "\", \"selection\": \"scattered\""
              << ", \"pages\": " << rows[i].pages << ", \"op\": \"" << rows[i].op
              << "\", \"median_us\": " << fixed3(rows[i].s.median_us)
              << ", \"p99_us\": " << fixed3(rows[i].s.p99_us) << "}"
              << (i + 1 < rows.size() ? ",\n" : "\n");
        f << "  ]\n}\n";
        if (!f)
            return 1;
    }
    return 0;
}
