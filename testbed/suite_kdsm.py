"""kdsm in guests: the DSM sample across two Debian guests over rxe.

Setup refusals, SOR checked against the sequential run, the SC litmus
tests (and the weakened mode they must catch), the lock stress test, and
a clean leave and unload.  Guests have two vCPUs, so the two-thread runs
are parallel inside a node."""
import re

from .common import HarnessError, build_dir
from . import initramfs, kbuild

BINS = ("tools/kdsm/kdsmctl", "tools/kdsm/apps/kdsm-sor",
        "tools/kdsm/apps/kdsm-litmus")
MODS = ("kverbs.ko", "kvmem.ko", "kdsm.ko")
PAGES = 640           # SOR's 512 x 512 grid is 512 pages, plus the rest


def overlay_for(kernel, workdir):
    from . import suites
    mods = kbuild.build(kernel.headers, build_dir() / "kbuild" / kernel.abi,
                        tests=True)
    bdir = suites.meson_build()
    files = {f"/kvlab/modules/{m}": mods[m] for m in MODS}
    for b in BINS:
        initramfs.add_binary(files, bdir / b)
    return initramfs.build_overlay(files, workdir / "overlay.cpio.gz")


def create_cmd(c, n, pages=PAGES, extra=""):
    peers = " ".join(f"--peer {m.node_id}={m.ip}" for m in c.nodes)
    return (f"/kvlab/bin/kdsmctl create --node {n.node_id} --pages {pages} "
            f"--block {peers} {extra}")


def form(c, pages=PAGES, extra=""):
    """Create the cluster on every node; wait until each is ready."""
    for n in c.nodes:
        n.run(f"({create_cmd(c, n, pages, extra)} --wait; echo rc=$?) "
              "> /tmp/create.out 2>&1 &", timeout=30)
    outs = []
    for n in c.nodes:
        r = n.run("for i in $(seq 300); do grep -q rc= /tmp/create.out && "
                  "break; sleep 0.2; done; cat /tmp/create.out", timeout=120)
        outs.append((n, r.out))
    return outs


def spmd(c, cmd, timeout=600):
    """Run @cmd on every node at once; return [(node, rc, output)]."""
    for n in c.nodes[1:]:
        n.run(f"({cmd}; echo rc=$?) > /tmp/spmd.out 2>&1 &", timeout=30)
    r0 = c.nodes[0].run(f"{cmd}; echo rc=$?", timeout=timeout)
    res = [(c.nodes[0], r0.out)]
    for n in c.nodes[1:]:
        r = n.run("for i in $(seq 600); do grep -q rc= /tmp/spmd.out && "
                  "break; sleep 0.5; done; cat /tmp/spmd.out",
                  timeout=timeout)
        res.append((n, r.out))
    return [(n, int(m.group(1)) if (m := re.search(r"rc=(\d+)", out))
             else -1, out) for n, out in res]


def suite_kdsm(res, kernel, name):
    from .cluster import Cluster
    from .suites import _fresh_workdir
    workdir = _fresh_workdir(name)
    overlay = overlay_for(kernel, workdir)
    try:
        with Cluster(kernel, nodes=2, workdir=workdir, overlay=overlay,
                     smp=2) as c:
            kdsm_checks(res, name, c)
        res.add(name, "guest consoles clean", True)
    except HarnessError as e:
        res.add(name, "guest run", False, e)


def _spmd_check(res, suite, c, what, cmd, want, timeout=600):
    runs = spmd(c, cmd, timeout)
    ok = all(rc == 0 for _, rc, _ in runs) and \
        all(re.search(want, out) for _, _, out in runs[:1])
    res.check(suite, what, ok,
              "\n".join(f"--- {n.name} rc {rc}\n{out[-2500:]}"
                        for n, rc, out in runs))
    return runs


def kdsm_checks(res, suite, c):
    n0, n1 = c.nodes
    for n in c.nodes:
        r = n.run(" && ".join(f"insmod /kvlab/modules/{m}" for m in MODS) +
                  " && stat -c 'mode %a' /dev/kdsm", timeout=60)
        res.check(suite, f"{n.name}: kverbs, kvmem, kdsm load; /dev/kdsm "
                  "is root's only (mode 600)", r.rc == 0 and "mode 600" in
                  r.out, r.out)

    # Setup refuses bad input with the reason, and creates nothing.
    peers = f"--peer 1={n0.ip} --peer 2={n1.ip}"
    ctl = "/kvlab/bin/kdsmctl"
    for args, text in [
            (f"--node 1 --pages 100000 {peers}", "max_pages"),
            (f"--node 1 --pages 64 --peer 1={n0.ip} --peer 1={n1.ip}",
             "listed twice"),
            (f"--node 3 --pages 64 {peers}", "not in the peer list"),
            (f"--node 1 --pages 64 --peer 1={n0.ip} --peer 3={n1.ip}",
             "ids 1..N")]:
        r = n0.run(f"{ctl} create {args}; echo rc=$?; {ctl} status",
                   timeout=30)
        res.check(suite, f"create refuses: {text}",
                  "rc=1" in r.out and text in r.out and
                  "state none" in r.out, r.out)

    # Mismatched geometry between nodes: both refuse, with the reason.
    n0.run(f"{create_cmd(c, n0, 64)} --join-ms 20000", timeout=30)
    n1.run(f"{create_cmd(c, n1, 128)} --join-ms 20000", timeout=30)
    outs = []
    for n in c.nodes:
        r = n.run("for i in $(seq 100); do "
                  f"{ctl} status | grep -q 'state failed' && break; "
                  f"sleep 0.2; done; {ctl} status; {ctl} delete", timeout=60)
        outs.append(r.out)
    res.check(suite, "nodes with different region sizes refuse each other "
              "at setup, with the reason",
              all("state failed" in o and "region size" in o for o in outs),
              "\n---\n".join(outs))

    outs = form(c)
    res.check(suite, "2-node cluster forms (full mesh, keys, READY)",
              all("rc=0" in o and "ready" in o for _, o in outs),
              "\n".join(f"{n.name}: {o}" for n, o in outs))

    _spmd_check(res, suite, c, "SOR 512x512, 10 iterations, 1 thread per "
                "node, equals the sequential run",
                "/kvlab/bin/kdsm-sor --iters 10", r"0 cells differ")
    _spmd_check(res, suite, c, "SOR, 2 threads per node, equals the "
                "sequential run",
                "/kvlab/bin/kdsm-sor --iters 4 --threads 2",
                r"0 cells differ")
    for test in ("sb", "mp", "lb"):
        for same in ("", " --same-page"):
            _spmd_check(res, suite, c, f"litmus {test}"
                        f"{' (one page)' if same else ''}: 0 violations of "
                        "SC in 1000 iterations",
                        f"/kvlab/bin/kdsm-litmus --test {test} --iters 1000"
                        f"{same}", r" 0 violations")
    _spmd_check(res, suite, c, "lock stress: 2 nodes x 2 threads x 500 "
                "increments, counter exact",
                "/kvlab/bin/kdsm-litmus --test counter --threads 2 "
                "--iters 500", r"counter 2000 of 2000, 0 slots wrong")
    r = n0.run(f"{ctl} status --stats; cat /sys/kernel/debug/kdsm/node1/stats"
               " | grep -E 'malformed|events'", timeout=30)
    res.check(suite, "no malformed messages, counters in netlink and "
              "debugfs", "malformed 0" in r.out and "read_faults" in r.out,
              r.out)
    lock_checks(res, suite, c)
    for n in c.nodes:
        n.run(f"{ctl} delete", timeout=120)

    # The litmus tests catch a protocol that skips invalidations.
    outs = form(c, extra="--weak")
    res.check(suite, "cluster in the test-only weak mode forms",
              all("rc=0" in o for _, o in outs),
              "\n".join(o for _, o in outs))
    for test in ("sb", "mp"):
        _spmd_check(res, suite, c, f"litmus {test} catches the weak mode "
                    "(violations found)",
                    f"/kvlab/bin/kdsm-litmus --test {test} --iters 300 "
                    "--expect-violations", r" [1-9]\d* violations")
    for n in c.nodes:
        n.run(f"{ctl} delete", timeout=120)
    max_pages_check(res, suite, c)
    for n in c.nodes:
        r = n.run(f"{ctl} delete && {ctl} status && rmmod kdsm && "
                  "rmmod kvmem && rmmod kverbs", timeout=120)
        res.check(suite, f"{n.name}: leave and unload", r.rc == 0 and
                  "state none" in r.out, r.out)


LITMUS = "/kvlab/bin/kdsm-litmus"


def lock_checks(res, suite, c):
    """Locks survive a waiter killed at its own node's manager, and two
    threads racing to unlock (review findings 4 and 8).  Lock 1's manager
    is node 2 (id % 2 + 1), lock 0's node 1."""
    n0, n1 = c.nodes[:2]
    n0.run(f"{LITMUS} --test hold --lock 1 --hold-ms 8000 > /tmp/hold.out "
           "2>&1 &", timeout=30)
    r = n0.run("for i in $(seq 100); do grep -q held /tmp/hold.out && "
               "break; sleep 0.2; done; cat /tmp/hold.out", timeout=60)
    killed = n1.run(f"timeout -s KILL 3 {LITMUS} --test take --lock 1; "
                    "echo rc=$?", timeout=30)
    done = n0.run("for i in $(seq 100); do grep -q released /tmp/hold.out "
                  "&& break; sleep 0.2; done; cat /tmp/hold.out", timeout=60)
    again = n1.run(f"timeout 30 {LITMUS} --test take --lock 1; echo rc=$?",
                   timeout=60)
    res.check(suite, "a waiter killed at its own node's lock manager does "
              "not keep the lock: the next task takes it",
              "held" in r.out and "rc=137" in killed.out and
              "released" in done.out and "took lock 1" in again.out and
              "rc=0" in again.out,
              f"{r.out}\n--- killed waiter\n{killed.out}\n--- holder\n"
              f"{done.out}\n--- next\n{again.out}")
    r = n1.run(f"timeout 300 {LITMUS} --test unlock-race --lock 0 "
               "--iters 300; echo rc=$?; /kvlab/bin/kdsmctl status",
               timeout=330)
    res.check(suite, "two threads unlocking at once: one succeeds, one "
              "gets EPERM, the cluster stays up (300 rounds)",
              "0 wrong" in r.out and "rc=0" in r.out and
              "state ready" in r.out, r.out)


def max_pages_check(res, suite, c):
    """A region at the default max_pages (64 MiB) has more key extents
    than a connection has send credits before it is up (finding 2)."""
    outs = form(c, pages=16384)
    ok = all("rc=0" in o and "ready" in o for _, o in outs)
    res.check(suite, "a cluster at max_pages (16384 pages) forms",
              ok, "\n".join(f"{n.name}: {o}" for n, o in outs))
    if ok:
        _spmd_check(res, suite, c, "litmus mp on the 16384-page region: "
                    "0 violations", f"{LITMUS} --test mp --iters 200",
                    r" 0 violations")
