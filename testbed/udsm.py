"""The user-level DSM (tools/udsm, Documentation/udsm.rst) in the guests:
its binaries, its variants, and the command line of one node.

udsm runs the kdsm applications unchanged against libudsm; a node is
configured through the environment (UDSM_*), one process per node, over
librdmacm/libibverbs on the guests' rxe devices."""
APPS = ("sor", "lu", "is", "tsp", "water", "nbody", "litmus", "faults")
BINS = tuple(f"tools/udsm/udsm-{a}" for a in APPS)
PORT = 18700                 # udsm's default; kdsm listens on 18600

# name: (UDSM_ACCESS, UDSM_PROGRESS)
VARIANTS = {"U-segv-block": ("segv", "block"),
            "U-segv-poll": ("segv", "poll"),
            "U-uffd-block": ("uffd", "block"),
            "U-uffd-poll": ("uffd", "poll")}
# exit status of a variant the kernel cannot run (uffd features missing)
UNSUPPORTED = 77


def env(nodes, n, variant, pages, placement="block", extra=""):
    """The UDSM_* assignments for guest @n of @nodes (ids 1..N in list
    order)."""
    access, progress = VARIANTS[variant]
    peers = ",".join(m.ip for m in nodes)
    return (f"UDSM_NODE={nodes.index(n) + 1} UDSM_PEERS={peers} "
            f"UDSM_PAGES={pages} UDSM_PLACEMENT={placement} "
            f"UDSM_ACCESS={access} UDSM_PROGRESS={progress} {extra}").strip()


def line(nodes, variant, app, args="", pages=640, extra=""):
    """A per-node command for suite_kdsm.spmd(): udsm-@app @args."""
    return lambda n: (f"{env(nodes, n, variant, pages, extra=extra)} "
                      f"/kvlab/bin/udsm-{app} {args}").strip()


KILL_BOUND_S = 20            # as kdsm's: RC retries, then the survivors' exit


def checks(res, suite, four, uffd):
    """udsm over verbs on the guests' rxe devices, the same programs as
    kdsm's checks: the designed fault costs, an application with threads,
    the lock counter, the uffd variant (or, @uffd False, its refusal), and
    a node killed under load."""
    import re
    import time
    from . import suite_kdsm as kd

    def run(what, variant, app, args, want, nodes=four):
        return kd._spmd_check(res, suite, nodes, f"udsm {variant}: {what}",
                              line(nodes, variant, app, args, kd.PAGES), want)

    run("messages and RDMA writes per fault kind equal the designed table "
        "over verbs (4 nodes)", "U-segv-block", "faults", "--iters 4",
        r"every kind as designed")
    run(f"sor ({kd.APPS['sor']}) on 4 nodes x 2 threads equals the "
        "sequential run", "U-segv-poll", "sor",
        f"{kd.APPS['sor']} --threads 2", r"sor: node 1: check ok")
    run("lock stress: 2 nodes x 2 threads x 300 increments, counter exact",
        "U-segv-block", "litmus", "--test counter --threads 2 --iters 300",
        r"counter 1200 of 1200, 0 slots wrong", nodes=four[:2])
    run("queue lock (RDMA compare-and-swap): 4 nodes x 2 threads x 200 "
        "increments, counter exact", "U-segv-block", "litmus",
        "--test counter --threads 2 --iters 200 --kind atomic",
        r"counter 1600 of 1600, 0 slots wrong")
    if uffd:
        run(f"water ({kd.APPS['water']}) on 4 nodes equals the sequential "
            "run", "U-uffd-block", "water", kd.APPS["water"],
            r"water: node 1: check ok")
        run("litmus sb: 0 violations of SC in 300 iterations", "U-uffd-poll",
            "litmus", "--test sb --iters 300", r" 0 violations",
            nodes=four[:2])
    else:
        runs = kd.spmd(four[:2], line(four[:2], "U-uffd-block", "sor",
                                      kd.APPS["sor"], kd.PAGES))
        res.check(suite, "udsm uffd on a kernel without userfaultfd "
                  "write-protect on shmem: refused at start (exit 77), "
                  "naming the missing feature",
                  all(rc == UNSUPPORTED and re.search(r"UFFD\w*", out)
                      for _, rc, out in runs),
                  "\n".join(f"--- {n.name} rc {rc}\n{out[-800:]}"
                            for n, rc, out in runs))
    # a node's process killed: every survivor ends, naming it, in bound
    cmd = line(four, "U-segv-block", "sor", "--size 256 --iters 100000",
               kd.PAGES)
    for n in four:
        n.run(f"({cmd(n)}; echo rc=$?) > /tmp/urun.out 2>&1 &", timeout=30)
    time.sleep(5)
    four[-1].run("kill -9 $(pidof udsm-sor)", timeout=30)
    t0 = time.monotonic()
    outs, ok, named = [], True, 0
    for n in four[:-1]:
        left = max(1, int(KILL_BOUND_S - (time.monotonic() - t0)))
        r = n.run(f"for i in $(seq {left * 5}); do grep -q rc= /tmp/urun.out"
                  " && break; sleep 0.2; done; cat /tmp/urun.out",
                  timeout=left + 60)
        took = time.monotonic() - t0
        ok &= bool(re.search(r"rc=[1-9]", r.out)) and took <= KILL_BOUND_S \
            and bool(re.search(r"lost node [1-9]", r.out))
        named += bool(re.search(rf"lost node {len(four)}\b", r.out))
        outs.append(f"--- {n.name} ({took:.1f} s)\n{r.out[-1000:]}")
    # a survivor may name one that failed first from the same loss (a
    # cascade), but one at least names the killed node
    res.check(suite, "udsm: a node's process killed under sor: every "
              "survivor ends with an error naming a lost node within "
              f"{KILL_BOUND_S} s, one at least the killed node",
              ok and named > 0, "\n".join(outs))
    for n in four:          # a hung survivor must not disturb later checks
        n.run("kill -9 $(pidof udsm-sor) 2>/dev/null", timeout=30)
