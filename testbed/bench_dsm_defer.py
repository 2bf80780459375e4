"""`./kvlab bench dsm-defer`: where kdsm's deferred events should run.

A revoke of a page the application has mapped needs a TLB shootdown, so
kdsm's handler defers it to process context (Documentation/kdsm-design.rst,
"Deferral target").  The candidates, one cluster option each
(`kdsmctl create --defer-to`):

  highpri  kdsm's workqueue, WQ_HIGHPRI (the kind a kverbs domain uses);
  normal   kdsm's normal-priority workqueue (otherwise the same);
  fifo     a kthread_worker of the cluster's own at SCHED_FIFO.

Two 2-vCPU guests run SOR on a 2-node cluster per candidate, idle and
with two CPU-bound processes per guest (the paper's interference
experiment: a busy node is where a normal-priority worker waits).  Per
run node 1 reports the app time, the mean fault latency, the mean
arrival-to-completion of a deferred event and the mean queueing-to-start
of the worker (KDSM_STAT_DEFER_WAKE_NS).  The method is benchmethod.py's:
a warm-up round, the candidates in an order rotated per round, ratios per
round.  Writes build/bench/dsm-defer.json.
"""
import json
import re

from .benchmethod import fmt, per_round_ratio, rotated, spread
from .common import HarnessError, Phase, build_dir, log

TARGETS = ["highpri", "normal", "fifo"]
LOADS = ["idle", "loaded"]
SOR = "/kvlab/bin/kdsm-sor --size 256 --iters 16"
FIELDS = ("time", "fault_us", "deferred_us", "wake_us", "wakes", "zap")
HOG = ("for i in 1 2; do sh -c 'while :; do :; done' >/dev/null 2>&1 & "
       "echo $! >> /tmp/hogs; done")
UNHOG = "kill $(cat /tmp/hogs); rm -f /tmp/hogs"


def _parse(out):
    """Node 1's sor report line as a dict, or None."""
    m = re.search(r"sor: node 1: check ok time ([\d.]+) s .*deferred zap "
                  r"(\d+) .*fault_us (\d+) deferred_us (\d+) wakes (\d+) "
                  r"wake_us (\d+)", out)
    if not m:
        return None
    t, zap, fus, dus, wakes, wus = m.groups()
    return {"time": float(t), "zap": int(zap), "fault_us": int(fus),
            "deferred_us": int(dus), "wakes": int(wakes),
            "wake_us": int(wus)}


def main(args):
    from . import deps, kernels, suite_kdsm
    from .cluster import Cluster
    rounds = 1 if args.quick else 6      # a multiple of len(TARGETS)
    warmup = 1
    deps.ensure()
    k = kernels.resolve(args.kernel)
    workdir = build_dir() / "bench" / "dsm-defer-guests"
    workdir.mkdir(parents=True, exist_ok=True)
    with Phase("build"):
        overlay = suite_kdsm.overlay_for(k, workdir)
    runs = {(t, ld): [] for t in TARGETS for ld in LOADS}
    with Phase("boot 2 guests"), Cluster(k, nodes=2, workdir=workdir,
                                         overlay=overlay, smp=2,
                                         boot_timeout=180) as c:
        pair = c.nodes
        for n in pair:
            n.run_checked(" && ".join(f"insmod /kvlab/modules/{m}"
                                      for m in suite_kdsm.MODS), timeout=120)
        for rnd in range(warmup + rounds):
            for ld in LOADS:
                if ld == "loaded":
                    for n in pair:
                        n.run(HOG, timeout=30)
                for t in rotated(TARGETS, rnd):
                    outs = suite_kdsm.form(pair, extra=f"--defer-to {t}")
                    if not all("rc=0" in o for _, o in outs):
                        raise HarnessError(f"--defer-to {t}: no cluster",
                                           "\n".join(o for _, o in outs))
                    res = suite_kdsm.spmd(pair, SOR)
                    for n in pair:
                        n.run(f"{suite_kdsm.CTL} delete", timeout=120)
                    row = _parse(res[0][2])
                    if row is None or any(rc for _, rc, _ in res):
                        raise HarnessError(f"sor with --defer-to {t} ({ld})",
                                           res[0][2][-2000:])
                    if rnd >= warmup:
                        runs[(t, ld)].append(row)
                if ld == "loaded":
                    for n in pair:
                        n.run_checked(UNHOG, timeout=30)
            log(f"round {rnd + 1 - warmup}/{rounds}" if rnd >= warmup
                else "warm-up round done")
        for n in pair:
            n.run("rmmod kdsm kvmem kverbs", timeout=120)

    def series(t, ld, f):
        return [r[f] for r in runs[(t, ld)]]
    data = {"kernel": k.abi, "rounds": rounds, "warmup_rounds": warmup,
            "workload": f"2 nodes, {SOR}, node 1's report",
            "method": "testbed/benchmethod.py: candidates rotated per "
                      "round, ratios per round (median, min-max)",
            "note": "TCG guests on 2 host cores, rxe in software: compare "
                    "ratios only; vCPUs are host threads, so SCHED_FIFO "
                    "inside a guest says little about a real machine",
            "runs": {f"{t}/{ld}": runs[(t, ld)] for t in TARGETS
                     for ld in LOADS},
            "median": {f"{t}/{ld}": {f: spread(series(t, ld, f))["median"]
                                     for f in FIELDS}
                       for t in TARGETS for ld in LOADS},
            "ratio_over_highpri": {
                f"{t}/{ld}": {f: per_round_ratio(series(t, ld, f),
                                                 series("highpri", ld, f))
                              for f in ("time", "fault_us", "wake_us")}
                for t in TARGETS if t != "highpri" for ld in LOADS}}
    out = build_dir() / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "dsm-defer.json").write_text(json.dumps(data, indent=2) + "\n")
    print(f"\nDeferral targets, {k.abi}, 2 nodes x 2 vCPUs, {SOR}, "
          f"{rounds} rounds (+{warmup} warm-up), medians (TCG: ratios "
          "only)")
    print(f"  {'target':10}{'load':8}{'time s':>8}{'fault us':>10}"
          f"{'deferred us':>13}{'wake us':>9}{'wakes':>7}{'zaps':>6}")
    for ld in LOADS:
        for t in TARGETS:
            m = data["median"][f"{t}/{ld}"]
            print(f"  {t:10}{ld:8}{m['time']:8.3f}{m['fault_us']:10.0f}"
                  f"{m['deferred_us']:13.0f}{m['wake_us']:9.0f}"
                  f"{m['wakes']:7.0f}{m['zap']:6.0f}")
    for key, r in data["ratio_over_highpri"].items():
        print(f"  {key} over highpri: time {fmt(r['time'])}, fault "
              f"{fmt(r['fault_us'])}, wake {fmt(r['wake_us'])}")
    print(f"\nwrote {out / 'dsm-defer.json'}")
    return 0
