"""`./kvlab bench dsm-fault`: remote fault latency, the kernel DSM against
the user-level DSM and the raw limit, side by side in one run (issue 11).

  K  kdsm, softirq first (the default);
  T  kdsm, every peer message in process context (the paper's task queue);
  S  kdsm, T plus 1 us per would-be system call (the paper's user-level
     simulation), Documentation/kdsm-modes.rst;
  U-segv-block, U-segv-poll, U-uffd-block, U-uffd-poll
     udsm, the user-level DSM (Documentation/udsm.rst): the same protocol
     over librdmacm/libibverbs, access by SIGSEGV + mprotect or by
     userfaultfd, a progress thread blocked on a completion channel or
     busy-polling;
  raw
     rawping page=1: one small send round trip plus one 4 KB RDMA write
     into the requester's registered page, on raw ib_core with selective
     signaling, the faster of plain and inline sends: what a remote read
     fault cannot beat on this link.

Four 2-vCPU guests.  Per round, every method once in an order rotated per
round: K, T and S form a fresh 4-node kdsm cluster and run kdsm-faults,
the udsm variants run udsm-faults (the same program against libudsm),
whose rows give the requester's median latency per fault kind with the
messages checked against the design.  Rows: a remote read (O = H) and
writes with 0, 1 and 2 sharers besides the owner (k = 0, 1, 2; k = 2
takes three copies away, the most 4 nodes allow).  Ratios per round
(testbed/benchmethod.py).  A variant the kernel cannot run (userfaultfd
write-protect on shmem needs 6.6+) is reported as missing with its
reason, never dropped silently.  After the rounds, one more K run with
kdsm's tracepoints on splits a read fault into its parts
(testbed/dsm_trace.py).  Writes build/bench/dsm-fault.json and
dsm-fault.svg.
"""
import contextlib
import json
import re

from . import dsm_trace, rawping, udsm
from .benchmethod import fmt, per_round_ratio, rotated, spread
from .common import HarnessError, Phase, build_dir, log

DEFAULT_KERNEL = "6.12"       # has userfaultfd WP on shmem; 6.1 does not
KERNEL_MODES = ["K", "T", "S"]
METHODS = KERNEL_MODES + list(udsm.VARIANTS) + ["raw"]
ROWS = {"read": "read, O = H",
        "write_k0": "write, O = H, k = 0",
        "write_k1": "write, O = H, k = 1",
        "write_k2": "write, O = H, k = 2"}
MEDIAN_COLUMN = "R med us"    # kdsm-faults: R's median over the rounds
GOALS = {"read_fault_kernel_over_user": 0.5,
         "read_fault_kernel_over_raw": 1.5}


def parse_faults(out):
    """{row key: R's median latency in us} from node 1's faults table, or
    None when a row is missing or mismatches the design."""
    lines = out.splitlines()
    head = next((ln for ln in lines if ln.startswith("fault ")), None)
    if head is None:
        return None
    cols = re.split(r"\s{2,}|\s(?=\S+:)", head[42:].strip())
    if MEDIAN_COLUMN not in cols:
        return None
    want = cols.index(MEDIAN_COLUMN)
    got = {}
    for key, name in ROWS.items():
        row = next((ln for ln in lines if ln.startswith(name + " ")
                    and ln[:42].strip() == name), None)
        if row is None or "MISMATCH" in row or "skipped" in row:
            return None
        vals = row[42:].split()
        if len(vals) <= want:
            return None
        got[key] = float(vals[want])
    return got


class Runner:
    """One method's round on a booted 4-guest cluster."""

    def __init__(self, nodes, iters):
        from . import suite_kdsm
        self.kd = suite_kdsm
        self.nodes = nodes
        self.iters = iters
        self.unsupported = {}         # method: why

    def kernel(self, mode):
        kd = self.kd
        outs = kd.form(self.nodes, extra=f"--mode {mode}")
        if not all("rc=0" in o for _, o in outs):
            raise HarnessError(f"--mode {mode}: no cluster",
                               "\n".join(o for _, o in outs))
        try:
            res = kd.spmd(self.nodes, f"/kvlab/bin/kdsm-faults --iters "
                          f"{self.iters}")
        finally:
            for n in self.nodes:
                n.run(f"{kd.CTL} delete", timeout=120)
        return self._rows(f"kdsm-faults --mode {mode}", res)

    def user(self, variant):
        res = self.kd.spmd(self.nodes, udsm.line(
            self.nodes, variant, "faults", f"--iters {self.iters}",
            pages=self.kd.PAGES))
        if all(rc == udsm.UNSUPPORTED for _, rc, _ in res):
            self.unsupported[variant] = res[0][2].strip().splitlines()[0]
            return None
        return self._rows(f"udsm-faults {variant}", res)

    def raw(self):
        """{read: us}: rawping's page exchange, node 1 asking node 2."""
        return {"read": rawping.page_exchange_us(
            self.nodes[0], self.nodes[1], self.iters * 20)}

    def _rows(self, what, res):
        row = parse_faults(res[0][2])
        if row is None or any(rc for _, rc, _ in res):
            raise HarnessError(f"{what} failed or mismatched the design",
                               "\n".join(f"{n.name} rc={rc}:\n{out[-1500:]}"
                                         for n, rc, out in res))
        return row

    def run(self, method):
        if method == "raw":
            return self.raw()
        if method in KERNEL_MODES:
            return self.kernel(method)
        if method in self.unsupported:
            return None
        return self.user(method)


def overlay(k, workdir):
    from . import initramfs, kbuild, suite_kdsm, suites
    mods = kbuild.build(k.headers, build_dir() / "kbuild-bench" / k.abi,
                        tests=True, bench=True)
    files = {f"/kvlab/modules/{m}": mods[m]
             for m in (*suite_kdsm.MODS, "rawping.ko")}
    bdir = suites.meson_build()
    for b in (*suite_kdsm.BINS, *udsm.BINS):
        initramfs.add_binary(files, bdir / b)
    return initramfs.build_overlay(files, workdir / "overlay.cpio")


@contextlib.contextmanager
def four_guests(k, name):
    """Four 2-vCPU guests of @k with kdsm's modules loaded, rawping and
    both DSMs' programs on board; the modules unload at the end."""
    from . import suite_kdsm
    from .cluster import Cluster
    workdir = build_dir() / "bench" / f"{name}-guests"
    workdir.mkdir(parents=True, exist_ok=True)
    with Phase("build"):
        ov = overlay(k, workdir)
    with Phase("boot 4 guests"), Cluster(k, nodes=4, workdir=workdir,
                                         overlay=ov, smp=2,
                                         boot_timeout=180) as c:
        for n in c.nodes:
            n.run_checked(" && ".join(f"insmod /kvlab/modules/{m}"
                                      for m in suite_kdsm.MODS), timeout=120)
        yield c.nodes
        for n in c.nodes:
            n.run("rmmod kdsm kvmem kverbs", timeout=120)


def summarize(k, runs, unsupported, rounds, warmup, iters):
    def series(m, key):
        return [r.get(key) if r else None for r in runs[m]]

    def best_user(key):
        """Per round: the fastest udsm variant's latency."""
        per = zip(*(series(v, key) for v in udsm.VARIANTS))
        return [min((x for x in r if x), default=None) for r in per]

    median = {m: {key: spread(series(m, key))["median"] for key in ROWS}
              for m in METHODS}
    ratios = {m: {key: per_round_ratio(series(m, key), series("K", key))
                  for key in ROWS} for m in METHODS if m != "K"}
    over_user = per_round_ratio(series("K", "read"), best_user("read"))
    over_raw = per_round_ratio(series("K", "read"), series("raw", "read"))
    write_over_user = {key: per_round_ratio(series("K", key), best_user(key))
                       for key in ROWS if key != "read"}
    met = {"read_fault_kernel_over_user":
           over_user["median"] is not None and over_user["median"] <=
           GOALS["read_fault_kernel_over_user"],
           "read_fault_kernel_over_raw":
           over_raw["median"] is not None and over_raw["median"] <=
           GOALS["read_fault_kernel_over_raw"]}
    return {"kernel": k.abi, "rounds": rounds, "warmup_rounds": warmup,
            "faults_per_kind": iters, "nodes": 4, "vcpus_per_node": 2,
            "methods": METHODS,
            "method": "testbed/benchmethod.py: methods rotated per round, "
                      "ratios per round (median, min-max); best user-level "
                      "variant chosen per round",
            "note": "TCG guests on 2 host cores, rxe in software on the "
                    "same vCPUs as the application: compare ratios only",
            "unsupported": unsupported,
            "runs": runs, "median_us": median, "ratio_over_K": ratios,
            "ratio_read_fault_kernel_over_user": over_user["median"],
            "ratio_read_fault_kernel_over_user_spread": over_user,
            "ratio_read_fault_kernel_over_raw": over_raw["median"],
            "ratio_read_fault_kernel_over_raw_spread": over_raw,
            "ratio_write_fault_kernel_over_user": write_over_user,
            "goals": {"target": GOALS, "met": met}}


def main(args):
    from . import deps, kernels
    from .svgchart import grouped_bars
    rounds = args.rounds or (1 if args.quick else 6)
    iters = 4 if args.quick else 10
    warmup = 1
    deps.ensure()
    k = kernels.resolve(args.kernel)
    runs = {m: [] for m in METHODS}
    with four_guests(k, "dsm-fault") as nodes:
        r = Runner(nodes, iters)
        for rnd in range(warmup + rounds):
            for m in rotated(METHODS, rnd):
                row = r.run(m)
                if rnd >= warmup:
                    runs[m].append(row)
            log(f"round {rnd + 1 - warmup}/{rounds}" if rnd >= warmup
                else "warm-up round done")
        with Phase("traced K run: where a read fault's time goes"):
            breakdown = dsm_trace.read_fault_breakdown(
                nodes, iters, lambda: r.kernel("K")["read"])
    data = summarize(k, runs, r.unsupported, rounds, warmup, iters)
    data["read_fault_breakdown_K_us"] = breakdown
    out = build_dir() / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "dsm-fault.json").write_text(json.dumps(data, indent=2) + "\n")
    med = data["median_us"]
    grouped_bars(out / "dsm-fault.svg",
                 f"Remote fault latency at the requester, {k.abi}, "
                 "4 nodes (median us)", list(ROWS),
                 {m: [med[m][key] for key in ROWS] for m in METHODS},
                 unit=" us", log_note="TCG guests, rxe: compare ratios only;"
                 " raw: read only")
    print(f"\nfault latency at the requester, {k.abi}, 4 nodes x 2 vCPUs, "
          f"{iters} faults per kind, {rounds} rounds (+{warmup} warm-up), "
          "median us (TCG: ratios only)")
    print(f"  {'method':14}" + "".join(f"{key:>10}" for key in ROWS))
    for m in METHODS:
        print(f"  {m:14}" + "".join(
            f"{med[m][key]:10.0f}" if med[m][key] else f"{'-':>10}"
            for key in ROWS))
    for m, why in data["unsupported"].items():
        print(f"  {m}: not run on this kernel: {why}")
    for m, rr in data["ratio_over_K"].items():
        print(f"  {m} over K: " + ", ".join(f"{key} {fmt(v)}"
                                             for key, v in rr.items()))
    print("  K read over best user-level: "
          f"{fmt(data['ratio_read_fault_kernel_over_user_spread'])} "
          f"(goal <= {GOALS['read_fault_kernel_over_user']})")
    print("  K read over raw: "
          f"{fmt(data['ratio_read_fault_kernel_over_raw_spread'])} "
          f"(goal <= {GOALS['read_fault_kernel_over_raw']})")
    print("  K read fault, traced (median us): " + ", ".join(
        f"{key} {v}" for key, v in breakdown.items()))
    print(f"\nwrote {out / 'dsm-fault.json'} and dsm-fault.svg")
    if breakdown["matched_faults"] < iters:
        log(f"the traced run matched {breakdown['matched_faults']} of "
            f"{iters} read faults: the breakdown is incomplete")
        return 1
    return 0
