// SPDX-License-Identifier: GPL-2.0-only
//
// Messages and RDMA operations per fault kind, measured against the
// designed table of Documentation/kdsm-design.rst ("Messages per fault"),
// and the fault latency at the requester.
//
// Run it first on a freshly formed cluster: the designed counts assume
// pages that start owned by their home, untouched since.
//
// Every scenario uses fresh pages homed at node 2 (block placement), so
// H = 2; R, O and the sharers are the nodes the scenario names.  A round:
// the setup accesses, each followed by a barrier (they make O the owner
// and the sharers hold copies), then every node reads its counters, one
// barrier, R makes the measured access, a barrier, the counters again.
// Page-protocol messages (wire types below KDSM_WIRE_CTL_FIRST, so not
// the barriers' or the heartbeat's) sent by all nodes, RDMA writes and
// RDMA reads are summed over --iters rounds.  A cluster created with
// --fetch-read is held to the fetch column where the design
// differs.  Scenarios that need more nodes than the
// cluster has are skipped, and say so.  Exit 0 when every measured count
// equals the designed one.
//
// Latency: R times the measured access itself (steady_clock around the
// touching instruction, barriers outside it); "R us" is the mean over the
// rounds, "R med us" the median, both R's own: the other nodes time
// nothing and contribute 0 to the sums node 1 prints.
#include "app.hpp"

#include <algorithm>
#include <array>
#include <optional>

namespace {

struct step {
    unsigned node;
    bool write;
};

// Designed per fault: messages, RDMA writes, RDMA reads.
struct cost {
    unsigned msgs, writes, reads;
};

struct scenario {
    const char *name;
    std::vector<step> setup;
    step measured;
    cost plain;
    std::optional<cost> fetch;  // with --fetch-read, when it differs
};

// H = 2 throughout; k is the number of sharers other than R and O.
const std::vector<scenario> scenarios = {
    {"read, O = H", {}, {1, false}, {3, 1, 0}, {}},
    {"read, O != H, R != H", {{3, true}}, {1, false}, {4, 1, 0}, {}},
    {"read, R = H, O remote", {{3, true}}, {2, false}, {2, 1, 0}, {}},
    {"read, O != H holds READ, R != H", {{3, true}, {4, false}}, {1, false}, {4, 1, 0},
     cost{3, 0, 1}},
    {"read, R = H, O remote holds READ", {{3, true}, {4, false}}, {2, false}, {2, 1, 0},
     cost{0, 0, 1}},
    {"write, O = H, k = 0", {}, {1, true}, {3, 1, 0}, {}},
    {"write, O = H, k = 1", {{3, false}}, {1, true}, {5, 1, 0}, {}},
    {"write, O = H, k = 2", {{3, false}, {4, false}}, {1, true}, {7, 1, 0}, {}},
    {"write, O != H, R != H, k = 0", {{3, true}}, {1, true}, {4, 1, 0}, {}},
    {"write, R = H, O remote, k = 0", {{3, true}}, {2, true}, {2, 1, 0}, {}},
    {"upgrade, R sharer, O = H, k = 1", {{1, false}, {3, false}}, {1, true}, {5, 0, 0}, {}},
    {"upgrade, R = O = H, k = 1", {{3, false}}, {2, true}, {2, 0, 0}, {}},
    {"upgrade, R = O, R != H, k = 1", {{1, true}, {3, false}}, {1, true}, {5, 0, 0}, {}},
    {"upgrade, R sharer, O != H, R != H, k = 0", {{3, true}, {1, false}}, {1, true},
     {4, 0, 0}, {}},
};

unsigned nodes_needed(const scenario &s)
{
    unsigned n = std::max(2u, s.measured.node);
    for (const step &a : s.setup)
        n = std::max(n, a.node);
    return n;
}

void touch(volatile std::uint64_t *p, bool write)
{
    if (write)
        *p = 1;
    else
        static_cast<void>(*p);
}

struct tally {
    std::uint64_t msgs, rdma, reads, ns, faults;
    std::uint64_t med_ns;  // R's median over the rounds; 0 at other nodes
    std::array<std::uint32_t, KDSM_WIRE_CTL_FIRST> by_type;
};

const char *const type_names[KDSM_WIRE_CTL_FIRST] = {
    "?", "read_req", "write_req", "fwd_read", "fwd_write", "inv", "inv_ack",
    "read_reply", "write_reply", "done",
};

// The median of @v (the mean of the middle two for an even count); 0 if empty.
std::uint64_t median(std::vector<std::uint64_t> v)
{
    if (v.empty())
        return 0;
    const std::size_t h = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(h), v.end());
    const std::uint64_t hi = v[h];
    if (v.size() % 2)
        return hi;
    const std::uint64_t lo = *std::max_element(v.begin(), v.begin() + std::ptrdiff_t(h));
    return lo + (hi - lo) / 2;
}

}  // namespace

int main(int argc, char **argv)
{
    try {
        const app::options o = app::parse(argc, argv, 0, 8);
        kdsm::attachment dsm;
        const unsigned me = dsm.node(), nn = dsm.nnodes();
        if (!dsm.block_placement()) {
            std::fprintf(stderr, "faults: needs block placement (kdsmctl create --block)\n");
            return 2;
        }
        const std::size_t ns = scenarios.size();
        kdsm::shared_array<tally> all(dsm, std::size_t(KDSM_MAX_NODES) * ns);
        // node 2's pages: [npages / nn, 2 npages / nn), past anything allocated
        const std::uint32_t first = dsm.npages() / nn, end = 2 * dsm.npages() / nn;
        const std::size_t need = ns * o.iters;
        if (dsm.page_of(all.data() + all.size()) >= first || first + need > end) {
            std::fprintf(stderr, "faults: node 2 homes %u pages, %zu needed\n", end - first, need);
            return 2;
        }
        auto proto = [](const kdsm::status &s) {
            std::uint64_t n = 0;
            for (unsigned t = 1; t < KDSM_WIRE_CTL_FIRST; t++)
                n += s.stat(KDSM_STAT_MSG_TYPE + t);
            return n;
        };
        std::vector<tally> mine(ns);
        std::uint32_t page = first;
        for (std::size_t i = 0; i < ns; i++) {
            const scenario &s = scenarios[i];
            if (nodes_needed(s) > nn)
                continue;
            std::vector<std::uint64_t> lat;  // R: each round's access, in ns
            for (unsigned round = 0; round < o.iters; round++, page++) {
                auto *p = reinterpret_cast<volatile std::uint64_t *>(dsm.base() +
                                                                   page * dsm.page_size());
                for (const step &a : s.setup) {
                    if (a.node == me)
                        touch(p, a.write);
                    dsm.barrier_all();
                }
                const kdsm::status a = dsm.counters();
                dsm.barrier_all();
                if (s.measured.node == me) {
                    const auto t0 = std::chrono::steady_clock::now();
                    touch(p, s.measured.write);
                    const auto t1 = std::chrono::steady_clock::now();
                    const auto ns = std::uint64_t(
                        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
                    mine[i].ns += ns;
                    lat.push_back(ns);
                }
                dsm.barrier_all();
                const kdsm::status b = dsm.counters();
                dsm.barrier_all();  // no node starts the next round before every b
                mine[i].msgs += proto(b) - proto(a);
                for (unsigned t = 1; t < KDSM_WIRE_CTL_FIRST; t++)
                    mine[i].by_type[t] += std::uint32_t(b.stat(KDSM_STAT_MSG_TYPE + t) -
                                                        a.stat(KDSM_STAT_MSG_TYPE + t));
                mine[i].faults += b.stat(KDSM_STAT_READ_FAULTS) + b.stat(KDSM_STAT_WRITE_FAULTS) -
                                  a.stat(KDSM_STAT_READ_FAULTS) - a.stat(KDSM_STAT_WRITE_FAULTS);
                mine[i].rdma += (b.stat(KDSM_STAT_RDMA_WRITE_BYTES) -
                                 a.stat(KDSM_STAT_RDMA_WRITE_BYTES)) / dsm.page_size();
                mine[i].reads += (b.stat(KDSM_STAT_RDMA_READ_BYTES) -
                                  a.stat(KDSM_STAT_RDMA_READ_BYTES)) / dsm.page_size();
            }
            mine[i].med_ns = median(std::move(lat));
        }
        for (std::size_t i = 0; i < ns; i++)
            all[(me - 1) * ns + i] = mine[i];
        dsm.barrier_all();
        bool ok = true;
        const bool fetch = dsm.counters().options & KDSM_OPT_FETCH_READ;
        if (me == 1) {
            std::printf("faults: %u nodes, %u faults per kind, H = node 2%s\n", nn, o.iters,
                        fetch ? ", fetch by RDMA read" : "");
            std::printf("%-42s %9s %9s %6s %6s %6s %6s %10s %10s\n", "fault", "msgs:des",
                        "msgs:got", "W:des", "W:got", "Rd:des", "Rd:got", "R us", "R med us");
            for (std::size_t i = 0; i < ns; i++) {
                const scenario &s = scenarios[i];
                if (nodes_needed(s) > nn) {
                    std::printf("%-42s skipped: needs %u nodes\n", s.name, nodes_needed(s));
                    continue;
                }
                tally t{};
                for (unsigned n = 0; n < nn; n++) {
                    t.msgs += all[n * ns + i].msgs;
                    t.rdma += all[n * ns + i].rdma;
                    t.reads += all[n * ns + i].reads;
                    t.ns += all[n * ns + i].ns;
                    t.faults += all[n * ns + i].faults;
                    t.med_ns += all[n * ns + i].med_ns;
                    for (unsigned k = 1; k < KDSM_WIRE_CTL_FIRST; k++)
                        t.by_type[k] += all[n * ns + i].by_type[k];
                }
                const cost want = fetch && s.fetch ? *s.fetch : s.plain;
                const double msgs = double(t.msgs) / o.iters, rdma = double(t.rdma) / o.iters,
                             reads = double(t.reads) / o.iters;
                const bool same = msgs == want.msgs && rdma == want.writes &&
                                  reads == want.reads;
                ok &= same;
                std::printf("%-42s %9u %9.2f %6u %6.2f %6u %6.2f %10.1f %10.1f%s\n", s.name,
                            want.msgs, msgs, want.writes, rdma, want.reads, reads,
                            double(t.ns) / o.iters / 1e3, double(t.med_ns) / 1e3,
                            same ? "" : "  MISMATCH");
                if (!same) {
                    std::printf("    %llu faults;",
                                static_cast<unsigned long long>(t.faults));
                    for (unsigned k = 1; k < KDSM_WIRE_CTL_FIRST; k++)
                        if (t.by_type[k])
                            std::printf(" %s %u", type_names[k] ? type_names[k] : "?",
                                        t.by_type[k]);
                    std::printf("\n");
                }
            }
            std::printf("faults: %s\n", ok ? "every kind as designed" : "MISMATCH");
        }
        dsm.barrier_all();  // node 1 has read the tallies
        return ok ? 0 : 1;
    } catch (const kdsm::error &e) {
        std::fprintf(stderr, "faults: %s\n", e.what());
        return 2;
    }
}
