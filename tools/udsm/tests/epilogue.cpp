// SPDX-License-Identifier: GPL-2.0-only
//
// The udsm suite's leaving cases (tests/meson.build): DSM access after the
// last barrier, and a node that detaches late.
//
//   udsm-epilogue [--read-after-ms MS] [--late-node N --late-ms MS [--late-read 1]]
//
// Every node writes its marker into its own page (node k: page k - 1),
// then the last barrier.  Node 1 then waits --read-after-ms (the others
// have detached by then and said BYE) and reads every node's page: a
// page whose owner has left is still served, as on kdsm.  Node
// --late-node waits --late-ms before detaching, past the others' leave,
// and with --late-read 1 then reads every node's page, which the others
// (waiting in their leave for its BYE) still serve.
// Node 1 prints "epilogue: node 1: check ok" when every marker is right.
#include <kdsm/kdsm.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

int main(int argc, char **argv)
{
    unsigned read_after_ms = 0, late_node = 0, late_ms = 0, late_read = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const unsigned v = unsigned(std::strtoul(argv[i + 1], nullptr, 10));
        if (!std::strcmp(argv[i], "--read-after-ms"))
            read_after_ms = v;
        else if (!std::strcmp(argv[i], "--late-node"))
            late_node = v;
        else if (!std::strcmp(argv[i], "--late-ms"))
            late_ms = v;
        else if (!std::strcmp(argv[i], "--late-read"))
            late_read = v;
        else {
            std::fprintf(stderr, "epilogue: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    bool ok = true;
    {
        kdsm::attachment a;
        const unsigned me = a.node();
        auto page = [&](unsigned k) {
            return reinterpret_cast<volatile unsigned *>(a.base() + (k - 1) * a.page_size());
        };
        *page(me) = 0xe0000000u + me;
        a.barrier_all();
        auto check = [&] {
            for (unsigned k = 1; k <= a.nnodes(); k++)
                if (*page(k) != 0xe0000000u + k) {
                    std::printf("epilogue: node %u: node %u's page holds %#x\n", me, k, *page(k));
                    ok = false;
                }
            if (ok)
                std::printf("epilogue: node %u: check ok\n", me);
            std::fflush(stdout);
        };
        if (me == 1) {
            std::this_thread::sleep_for(std::chrono::milliseconds(read_after_ms));
            check();
        }
        if (me == late_node) {
            std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
            if (late_read)
                check();
        }
    }  // detaches: BYE, then every peer's BYE (UDSM_LEAVE_MS)
    return ok ? 0 : 1;
}
