"""`./kvlab bench dsm-apps`: every DSM application in every mode, the
kernel DSM against the user-level DSM, idle and under load (issue 11).

Methods: kdsm in modes K, T and S (Documentation/kdsm-modes.rst) and the
udsm variants (Documentation/udsm.rst; testbed/udsm.py), each running the
same application sources.  Conditions, on four booted 2-vCPU guests:

  2n-idle     2 nodes, one application thread per node;
  2n-loaded   the same with one CPU-bound process per node (the paper's
              interference experiment: a shell busy loop on each node);
  2n-threads  2 nodes, 2 application threads per node;
  4n-idle, 4n-loaded, 4n-threads   the same on 4 nodes.

A warm-up runs every method once on the first application and condition
(thrown away); then per round every condition, every application and
every method once, methods in an order rotated per round and application.  Reported per run:
the time (the slowest node's), faults and messages (summed over nodes),
the softirq share (the mean over nodes of each node's share of events
handled in softirq; udsm's events all count as process context), and the speedup over the 1-node run, which is the application's
own sequential run on private memory, timed by node 1 in the same run.
Ratios per round (testbed/benchmethod.py); "best user-level" is the
fastest udsm variant of the round.  Writes build/bench/dsm-apps.json and
dsm-apps.svg.
"""
import json
import re

from . import udsm
from .benchmethod import fmt, per_round_ratio, rotated, spread
from .bench_dsm_fault import four_guests
from .common import HarnessError, build_dir, log

KERNEL_MODES = ["K", "T", "S"]
METHODS = KERNEL_MODES + list(udsm.VARIANTS)
# Sizes: seconds per run under TCG, large enough that faults dominate
# start-up.  The tests' sizes are smaller (suite_kdsm.APPS).
APPS = {"sor": "--size 512 --iters 10", "lu": "--size 256",
        "is": "--size 65536 --iters 4", "tsp": "--size 11",
        "water": "--size 128 --iters 2", "nbody": "--size 512 --iters 2"}
QUICK_APPS = ("sor", "nbody")
PAGES = 1024                 # the region, the same for kdsm and udsm
CONDITIONS = {"2n-idle": (2, False, 1), "2n-loaded": (2, True, 1),
              "2n-threads": (2, False, 2), "4n-idle": (4, False, 1),
              "4n-loaded": (4, True, 1), "4n-threads": (4, False, 2)}
QUICK_CONDITIONS = ("2n-idle", "2n-loaded")
GOAL_LOWER = 0.23            # K at least 23% below the best user level
GOAL_APPS = 3                # ... on at least this many applications
REPORT_RX = re.compile(
    r"(\w+): node (\d+): (check ok|CHECK FAILED) time ([\d.]+) s "
    r"read_faults (\d+) write_faults (\d+) msgs_tx (\d+) "
    r"events_softirq (\d+) deferred zap (\d+) nobuf (\d+) order (\d+) "
    r"softirq_share ([\d.]+)%")
SEQ_RX = re.compile(r"1 node, private memory, 1 thread: ([\d.]+) s")
BUSY = "( while :; do :; done ) >/dev/null 2>&1 & echo $! > /tmp/busy.pid"


def parse_run(res):
    """One run's numbers from every node's output, or None."""
    reps = []
    seq = None
    for _, rc, out in res:
        m = REPORT_RX.search(out)
        if rc or not m or m.group(3) != "check ok":
            return None
        reps.append(m)
        s = SEQ_RX.search(out)
        seq = float(s.group(1)) if s else seq
    g = [[float(x) for x in m.groups()[3:]] for m in reps]
    time = max(x[0] for x in g)
    return {"time_s": time,
            "faults": int(sum(x[1] + x[2] for x in g)),
            "msgs": int(sum(x[3] for x in g)),
            "softirq_share": round(sum(x[8] for x in g) / len(g), 1),
            "seq_s": seq,
            "speedup": round(seq / time, 3) if seq and time else None}


class Runner:
    def __init__(self, nodes):
        from . import suite_kdsm
        self.kd = suite_kdsm
        self.nodes = nodes
        self.unsupported = {}

    def run(self, method, app, cond):
        kd = self.kd
        n, loaded, threads = CONDITIONS[cond]
        nodes = self.nodes[:n]
        args = f"{APPS[app]} --threads {threads}"
        if method in self.unsupported:
            return None
        if loaded:
            for x in nodes:
                x.run(BUSY, timeout=30)
        try:
            if method in KERNEL_MODES:
                outs = kd.form(nodes, PAGES, f"--mode {method}")
                if not all("rc=0" in o for _, o in outs):
                    raise HarnessError(f"--mode {method}: no cluster",
                                       "\n".join(o for _, o in outs))
                try:
                    res = kd.spmd(nodes, f"/kvlab/bin/kdsm-{app} {args}",
                                  timeout=900)
                finally:
                    for x in nodes:
                        x.run(f"{kd.CTL} delete", timeout=120)
            else:
                res = kd.spmd(nodes, udsm.line(nodes, method, app, args,
                                               pages=PAGES),
                              timeout=900)
                if all(rc == udsm.UNSUPPORTED for _, rc, _ in res):
                    self.unsupported[method] = \
                        res[0][2].strip().splitlines()[0]
                    return None
        finally:
            if loaded:
                for x in nodes:
                    x.run("kill $(cat /tmp/busy.pid)", timeout=30)
        got = parse_run(res)
        if got is None:
            raise HarnessError(f"{app} {method} {cond} failed",
                               "\n".join(f"{x.name} rc={rc}:\n{o[-1500:]}"
                                         for x, rc, o in res))
        return got


def summarize(k, runs, apps, conds, unsupported, rounds, warmup):
    def series(app, cond, m, key="time_s"):
        return [r.get(key) if r else None for r in runs[app][cond][m]]

    def best_user(app, cond):
        per = zip(*(series(app, cond, v) for v in udsm.VARIANTS))
        return [min((x for x in r if x), default=None) for r in per]

    out = {}
    for app in apps:
        a = {"time_s": {}, "speedup_over_1_node": {}, "faults": {},
             "msgs": {}, "softirq_share": {}, "kernel_over_user": {}}
        for cond in conds:
            for key, name in (("time_s", "time_s"), ("speedup", "speedup_over_1_node"),
                              ("faults", "faults"), ("msgs", "msgs"),
                              ("softirq_share", "softirq_share")):
                a[name][cond] = {m: spread(series(app, cond, m, key))["median"]
                                 for m in METHODS}
            a["kernel_over_user"][cond] = per_round_ratio(
                series(app, cond, "K"), best_user(app, cond))
        a["ratio_kernel_over_user"] = a["kernel_over_user"].get(
            "2n-idle", {}).get("median")
        a["ratio_kernel_over_user_loaded"] = a["kernel_over_user"].get(
            "2n-loaded", {}).get("median")
        out[app] = a
    lower = [x for x in apps if out[x]["ratio_kernel_over_user"] and
             out[x]["ratio_kernel_over_user"] <= 1 - GOAL_LOWER]
    wider = [x for x in apps if out[x]["ratio_kernel_over_user"] and
             out[x]["ratio_kernel_over_user_loaded"] and
             out[x]["ratio_kernel_over_user_loaded"] <
             out[x]["ratio_kernel_over_user"]]
    return {"kernel": k.abi, "rounds": rounds, "warmup_runs_per_method": warmup,
            "methods": METHODS, "conditions": {c: CONDITIONS[c] for c in conds},
            "sizes": {x: APPS[x] for x in apps},
            "method": "testbed/benchmethod.py: methods rotated per round, "
                      "ratios per round (median, min-max); best user-level "
                      "variant chosen per round",
            "note": "TCG guests on 2 host cores, rxe in software on the "
                    "same vCPUs as the application: compare ratios only",
            "unsupported": unsupported, "apps": out, "runs": runs,
            "goals": {"apps_at_least_23pct_lower": lower,
                      "apps_gap_larger_loaded": wider,
                      "met": len(lower) >= GOAL_APPS and
                      len(wider) >= GOAL_APPS}}


def main(args):
    from . import deps, kernels
    from .svgchart import grouped_bars
    rounds = args.rounds or (1 if args.quick else 3)
    warmup = 1                   # runs of the first application per method
    apps = QUICK_APPS if args.quick else tuple(APPS)
    conds = QUICK_CONDITIONS if args.quick else tuple(CONDITIONS)
    if args.conditions:
        conds = tuple(args.conditions.split(","))
        bad = [x for x in conds if x not in CONDITIONS]
        if bad:
            raise HarnessError(f"--conditions: unknown {', '.join(bad)}",
                               f"choose from {', '.join(CONDITIONS)}")
    deps.ensure()
    k = kernels.resolve(args.kernel)
    runs = {a: {c: {m: [] for m in METHODS} for c in conds} for a in apps}
    with four_guests(k, "dsm-apps") as nodes:
        r = Runner(nodes)
        for _ in range(warmup):     # every method's programs once, thrown away
            for m in METHODS:
                r.run(m, apps[0], conds[0])
        for rnd in range(rounds):
            for i, cond in enumerate(conds):
                for j, app in enumerate(apps):
                    for m in rotated(METHODS, rnd + i + j):
                        runs[app][cond][m].append(r.run(m, app, cond))
                log(f"round {rnd + 1}/{rounds} {cond} done")
    data = summarize(k, runs, apps, conds, r.unsupported, rounds, warmup)
    out = build_dir() / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "dsm-apps.json").write_text(json.dumps(data, indent=2) + "\n")
    groups = [f"{a} {c}" for c in conds for a in apps]
    grouped_bars(out / "dsm-apps.svg",
                 f"Application time over K's, {k.abi} (median of rounds)",
                 groups,
                 {m: [(lambda t: t[m] / t["K"] if t[m] and t["K"] else None)(
                     data["apps"][a]["time_s"][c]) for c in conds for a in apps]
                  for m in METHODS},
                 log_note="1.0 = kdsm mode K; TCG guests, rxe: ratios only")
    print(f"\nDSM applications, {k.abi}, {rounds} rounds (after a warm-up),"
          " median time s (TCG: ratios only)")
    print(f"  {'app':7}{'condition':12}" + "".join(f"{m:>14}" for m in METHODS)
          + f"{'K/best U':>22}")
    for a in apps:
        for cnd in conds:
            t = data["apps"][a]["time_s"][cnd]
            print(f"  {a:7}{cnd:12}" + "".join(
                f"{t[m]:14.2f}" if t[m] else f"{'-':>14}" for m in METHODS)
                + f"{fmt(data['apps'][a]['kernel_over_user'][cnd]):>22}")
    for m, why in data["unsupported"].items():
        print(f"  {m}: not run on this kernel: {why}")
    g = data["goals"]
    print(f"  K >= 23% below the best user level: {g['apps_at_least_23pct_lower']}"
          f"; gap larger loaded: {g['apps_gap_larger_loaded']}")
    print(f"\nwrote {out / 'dsm-apps.json'} and dsm-apps.svg")
    return 0
