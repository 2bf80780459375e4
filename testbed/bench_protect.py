"""`./kvlab bench protect`: the time to change the protection of 1, 16, 32,
256 and 1024 scattered pages, side by side in one guest run (two vCPUs):

  kvmem batch, through the ioctl and from a kernel caller (kvbench-protect);
  one mprotect per page, mprotect per contiguous range, and userfaultfd
  write-protect per page (kvbench-protect-baseline).

Revoke = take write access away, grant = give it back.  TCG timings: only
the ratios measured side by side mean anything.  Writes
build/bench/protect.json and protect.svg.
"""
import json
import math
import statistics

from .benchmethod import fmt, rotated, spread
from .common import HarnessError, Phase, build_dir, log

SIZES = [1, 16, 32, 256, 1024]
PAPER = ("Liss et al. measured a single page in about half the time of "
         "mprotect and more than 10x faster at 16 to 32 pages (hardware).")
GOALS = {"vs_mprotect_per_page_at_32": 20.0, "vs_uffd_wp_per_page_at_32": 2.0,
         "single_page_over_mprotect_max": 0.5}


def _series(doc):
    out = {}
    for row in doc.get("series", []):
        if "median_us" not in row:
            continue
        key = (row["method"], row.get("selection", "scattered"), row["op"])
        out.setdefault(key, {})[row["pages"]] = (row["median_us"],
                                                 row["p99_us"])
    return out


def _svg(series, path):
    w, h, pad = 720, 420, 70
    pts = [v for s in series.values() for v in s.values()]
    lo = min(m for m, _ in pts) or 0.01
    hi = max(m for m, _ in pts)
    lx0, lx1 = math.log10(1), math.log10(1024)
    ly0, ly1 = math.log10(max(lo, 1e-3)), math.log10(hi)

    def xy(n, v):
        x = pad + (w - 2 * pad) * (math.log10(n) - lx0) / (lx1 - lx0)
        y = h - pad - (h - 2 * pad) * (math.log10(max(v, 1e-3)) - ly0) / \
            max(ly1 - ly0, 1e-9)
        return x, y
    colors = ["#4a7ab5", "#c0504d", "#9bbb59", "#8064a2", "#f79646",
              "#4bacc6", "#7f7f7f"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" '
           f'height="{h}" font-family="sans-serif" font-size="12">',
           f'<text x="{pad}" y="20" font-size="14">Revoke time vs pages '
           '(median, log-log; TCG guest: compare ratios only)</text>',
           f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" '
           'stroke="black"/>',
           f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" '
           'stroke="black"/>']
    for n in SIZES:
        x, _ = xy(n, lo)
        out.append(f'<text x="{x:.0f}" y="{h - pad + 15}">{n}</text>')
    for i, (name, s) in enumerate(sorted(series.items())):
        c = colors[i % len(colors)]
        p = " ".join("%.0f,%.0f" % xy(n, s[n][0]) for n in sorted(s))
        out.append(f'<polyline points="{p}" fill="none" stroke="{c}" '
                   'stroke-width="2"/>')
        out.append(f'<text x="{pad + 10}" y="{pad + 15 * i}" fill="{c}">'
                   f'{name}</text>')
    out.append(f'<text x="{pad - 60}" y="{pad}">{hi:.0f} us</text>')
    out.append(f'<text x="{pad - 60}" y="{h - pad}">{lo:.2f} us</text>')
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")


def main(args):
    from . import deps, kernels
    from .cluster import Cluster
    from .suite_kvmem import overlay_for
    rounds = 1 if args.quick else 5
    reps = 20 if args.quick else 40          # per round
    warmup = 1
    deps.ensure()
    k = kernels.resolve(args.kernel)
    workdir = build_dir() / "bench" / "protect-guests"
    workdir.mkdir(parents=True, exist_ok=True)
    with Phase("build"):
        overlay = overlay_for(k, workdir, (
            "tools/kvmem/kvbench-protect",
            "tools/bench/kvbench-protect-baseline"))
    tools = [("kvmem", "kvbench-protect"),
             ("baseline", "kvbench-protect-baseline")]
    docs = {"kvmem": [], "baseline": []}      # one JSON doc per round
    with Phase("boot 2 guests"), Cluster(k, nodes=2, workdir=workdir,
                                         overlay=overlay, smp=2) as c:
        n = c.nodes[0]
        n.run_checked("insmod /kvlab/modules/kvmem.ko", timeout=60)
        for rnd in range(warmup + rounds):
            for name, tool in rotated(tools, rnd):
                r = n.run(f"/kvlab/bin/{tool} --reps {reps} --json "
                          f"/tmp/{name}.json >/dev/null && "
                          f"cat /tmp/{name}.json", timeout=1800)
                if r.rc:
                    raise HarnessError(f"{tool} failed", r.out[-2000:])
                if rnd >= warmup:
                    docs[name].append(json.loads(r.out[r.out.index("{"):]))
            log(f"round {rnd + 1 - warmup}/{rounds}" if rnd >= warmup
                else "warm-up round done")
        n.run("rmmod kvmem", timeout=60)

    rounds_s = [{**_series(a), **_series(b)}
                for a, b in zip(docs["kvmem"], docs["baseline"])]
    # The reported series: per point, the median over rounds of the
    # round's median (and of its p99).
    s = {}
    for key in {k_ for rs in rounds_s for k_ in rs}:
        for pages in SIZES:
            pts = [rs[key][pages] for rs in rounds_s
                   if pages in rs.get(key, {})]
            if pts:
                s.setdefault(key, {})[pages] = (
                    statistics.median(m for m, _ in pts),
                    statistics.median(p for _, p in pts))
    kvmem_doc = {"series": [row for d in docs["kvmem"]
                            for row in d["series"]]}
    base_doc = {"series": [row for d in docs["baseline"]
                           for row in d["series"]]}

    def round_speedups(base, n=32, ours="kvmem_ioctl"):
        out = []
        for rs in rounds_s:
            a = rs.get((base, "scattered", "revoke"), {}).get(n)
            b = rs.get((ours, "scattered", "revoke"), {}).get(n)
            out.append(a[0] / b[0] if a and b else None)
        return spread(out)
    rev = {f"{m}" + ("" if sel == "scattered" else f" ({sel})"): v
           for (m, sel, op), v in s.items() if op == "revoke"}

    def med(method, n, op="revoke", sel="scattered"):
        v = s.get((method, sel, op), {}).get(n)
        return v[0] if v else None

    def speedup(base, n=32):
        return round_speedups(base, n)["median"]

    uffd = speedup("uffd_wp_per_page")
    data = {
        "kernel": k.abi, "reps_per_round": reps, "rounds": rounds,
        "warmup_rounds": warmup, "guest_vcpus": 2,
        "method": "testbed/benchmethod.py: warm-up not counted, kvmem and "
                  "baselines alternate with the order rotated per round, "
                  "speedups per round (median, min-max); series points are "
                  "medians over rounds",
        "speedup_spread_at_32_pages": {
            "vs_mprotect_per_page": round_speedups("mprotect_per_page"),
            "vs_uffd_wp_per_page": round_speedups("uffd_wp_per_page")},
        "note": "TCG guest: compare ratios only.  revoke = remove write "
                "access, grant = give it back.  kvmem grants lazily; "
                "kvmem_refault is the write after a grant that mprotect does "
                "not need.",
        "paper": PAPER,
        "speedup_at_32_pages": {
            "vs_mprotect_per_page": speedup("mprotect_per_page"),
            "vs_uffd_wp_per_page": uffd,
        },
        "single_page_kvmem_over_mprotect": round_speedups(
            "kvmem_ioctl", 1, "mprotect_per_page")["median"],
        "single_page_kvmem_over_mprotect_spread": round_speedups(
            "kvmem_ioctl", 1, "mprotect_per_page"),
        "speedup_by_pages": {str(n): {
            "vs_mprotect_per_page": speedup("mprotect_per_page", n),
            "vs_mprotect_per_range": speedup("mprotect_per_range", n),
            "vs_uffd_wp_per_page": speedup("uffd_wp_per_page", n),
            "kernel_caller_vs_mprotect_per_page": round_speedups(
                "mprotect_per_page", n, "kvmem_kernel")["median"]}
            for n in SIZES},
        "goals": GOALS,
        "uffd_available": uffd is not None,
        "series": kvmem_doc["series"] + base_doc["series"],
    }
    out = build_dir() / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "protect.json").write_text(json.dumps(data, indent=2) + "\n")
    _svg(rev, out / "protect.svg")

    print(f"\nProtection change of N scattered pages, {k.abi} guest, 2 "
          f"vCPUs, {rounds} rounds x {reps} reps (+{warmup} warm-up), "
          "median us (TCG: ratios only)")
    methods = ["kvmem_ioctl", "kvmem_kernel", "mprotect_per_page",
               "mprotect_per_range", "uffd_wp_per_page"]
    print(f"  {'method':22}{'op':8}" + "".join(f"{n:>10}" for n in SIZES))
    for m in methods:
        for op in ("revoke", "grant"):
            vals = [med(m, n, op) for n in SIZES]
            print(f"  {m:22}{op:8}" + "".join(
                f"{v:10.1f}" if v is not None else f"{'-':>10}"
                for v in vals))
    vals = [med("kvmem_refault", n, "write") for n in SIZES]
    print(f"  {'kvmem_refault':22}{'write':8}" + "".join(
        f"{v:10.1f}" if v is not None else f"{'-':>10}" for v in vals))
    sp = data["speedup_at_32_pages"]
    one = data["single_page_kvmem_over_mprotect"]

    def verdict(ok):
        return "met" if ok else "NOT met"
    print(f"\n  at 32 pages: {sp['vs_mprotect_per_page']}x vs mprotect per "
          f"page (goal >= 20: {verdict((sp['vs_mprotect_per_page'] or 0) >= 20)}), "
          f"{sp['vs_uffd_wp_per_page']}x vs uffd-wp per page (goal >= 2: "
          f"{verdict((sp['vs_uffd_wp_per_page'] or 0) >= 2)})")
    sps = data["speedup_spread_at_32_pages"]
    print(f"  per-round spread at 32 pages: vs mprotect per page "
          f"{fmt(sps['vs_mprotect_per_page'])}, vs uffd-wp per page "
          f"{fmt(sps['vs_uffd_wp_per_page'])}")
    print(f"  single page: kvmem / mprotect = {one} (goal <= 0.5: "
          f"{verdict(one is not None and one <= 0.5)})")
    print(f"\nwrote {out / 'protect.json'} and {out / 'protect.svg'}")
    return 0
