"""The iWARP suite (siw-debug; issue 26, item 2).

Soft-iWARP (siw) is built into the debug kernels (testbed/kunit/
debug.config); Debian's kernels do not build it.  Two guests of two vCPUs
boot the 6.1 debug kernel (KASAN, lockdep, kmemleak), replace rxe0 by
siw0 on the same eth0 before any module of ours loads, and run what
iWARP's rules touch:

  - connection set-up through iWARP's CM, whose QP is the CM's own
    (rdma_create_qp), and kvmsg's exchange in every handler mode;
  - a burst with no RNR retry: iWARP has no RNR at all (a send without a
    posted receive is a TERMINATE), so only kvmsg's credits keep it whole;
  - krdma: RDMA read, where the sink must be writable by the peer (rdma_rw
    registers it, kverbs/rdma_rw.c), write, atomics refused
    (-EOPNOTSUPP), and a read through an invalidated rkey refused; reads
    with a request right behind them, every WR signaled (kverbs'
    signal_interval=1), whose data must be in place at their completion:
    siw completes a send before an earlier read's response unless the
    send is fenced; with the fence undone (test_undo bit 128) the same
    check must fail;
  - kmigrate, whose pages all come by RDMA read (rdma_rw on iWARP):
    post-copy with and without prefetch, pre-copy, A -> B -> A;
  - rdma link delete of siw0 under a live connection;
  - every module unloads and kmemleak finds nothing on either node.

kdsm's --fetch-read stays refused on iWARP (its reads are posted under a
spinlock, where rdma_rw cannot allocate); Documentation/testbed.rst has
the matrix.
"""
from .common import HarnessError
from .knobs import kverbs_params
from . import suite_kmigrate as km
from .suites import (_burst, _debug_cluster, _device_removal,
                     _handler_modes, _krdma, _restart_server, kmemleak_report,
                     kping, load_kverbs)

SUITE = "siw-debug"
MODS = ("kverbs.ko", "kping.ko", "krdma.ko", "kvmem.ko", "kmigrate.ko")


def _to_siw(res, name, nodes):
    """rxe0 out, siw0 in, on the same eth0 (rdma_cm then resolves the
    guests' addresses to siw0)."""
    for n in nodes:
        r = n.run("rdma link delete rxe0 && rdma link add siw0 type siw "
                  "netdev eth0 && rdma link", timeout=120)
        res.setup(name, f"{n.name}: siw0 replaces rxe0 on eth0",
                  r.rc == 0 and "siw0" in r.out and "rxe0" not in r.out,
                  r.out)


def _fence_undone(res, name, n0, n1):
    """The overlapped-read check can fail: with the fence undone
    (KVERBS_UNDO_IWARP_FENCE) a request's completion retires the read
    before its data came, and krdma's check of the data at the read's
    completion fails (-EBADMSG)."""
    r = n0.run("insmod /kvlab/modules/krdma.ko", timeout=60)
    res.setup(name, "krdma server loads (fence undone)", r.rc == 0, r.out)
    r = n1.run(f"{kverbs_params(test_undo=128)}; insmod /kvlab/modules/"
               f"krdma.ko server={n0.ip} node_id={n1.node_id}; echo rc=$?; "
               f"{kverbs_params(test_undo=0)}; dmesg | grep krdma: | "
               "tail -n 4; rmmod krdma 2>/dev/null", timeout=300)
    res.check(name, "planted: with the fence undone the overlapped read's "
              "data is missing at its completion (-EBADMSG)",
              "rc=0" not in r.out and
              "overlapped by a request: -74" in r.out, r.out)
    r = n0.run("rmmod krdma", timeout=60)
    res.check(name, "krdma server unloads (fence undone)", r.rc == 0, r.out)


def suite_siw(res, variant="debug"):
    name = SUITE if variant == "debug" else f"siw-{variant}"
    try:
        # two vCPUs: a read being set up races its endpoint's teardown,
        # the CQ's softirq and the tasks on another CPU
        with _debug_cluster(name, MODS, km.BINS, smp=2,
                            variant=variant) as c:
            n0, n1 = c.nodes
            _to_siw(res, name, c.nodes)
            load_kverbs(res, name, c.nodes)
            for n in c.nodes:
                r = n.run(kverbs_params(signal_interval=1), timeout=30)
                res.setup(name, f"{n.name}: every WR signaled", r.rc == 0,
                          r.out)
            for n in c.nodes:
                r = n.run("dmesg | grep -c 'kverbs: device siw0 added'",
                          timeout=30)
                res.check(name, f"{n.name}: kverbs tracks siw0, an iWARP "
                          "device", r.out.strip() == "1", r.out)
            r = n0.run(kping(n0), timeout=120)
            res.setup(name, "kping server listens", r.rc == 0, r.out)
            r = n1.run(kping(n1, n0, count=500, size=512) +
                       " && dmesg | grep -m1 'kping-client: bound to' && "
                       "rmmod kping", timeout=600)
            res.check(name, "iWARP: kping 500 round trips through siw0 "
                      "(the CM's QP)", r.rc == 0 and "bound to siw0" in r.out,
                      r.out)
            _handler_modes(res, name, n0, n1)
            _burst(res, name, n0, n1)
            r = _restart_server(n0)
            res.check(name, "server back in softirq mode", r.rc == 0, r.out)
            _krdma(res, name, n0, n1, iwarp=True)
            _fence_undone(res, name, n0, n1)
            _device_removal(res, name, n0, n1, dev="siw0", kind="siw")
            for n in c.nodes:
                r = n.run("rmmod kping 2>/dev/null; rmmod kverbs", timeout=300)
                res.check(name, f"{n.name}: kping and kverbs unload", r.rc == 0,
                          r.out)

            a, b = n0, n1
            km._setup(res, name, (a, b))
            km.kmigrate_basics(res, name, a, b)
            km._unload(res, name, (a, b))
            for n in c.nodes:
                leaks = kmemleak_report(n)
                res.check(name, f"{n.name}: kmemleak (two scans) finds "
                          "nothing", not leaks, leaks[-3000:])
        res.add(name, "guest consoles clean (KASAN, lockdep, ...)", True)
    except HarnessError as e:
        res.add(name, "cluster run", False, e)
