"""`./kvlab bench rtt`: small-message round-trip time by receiving context,
side by side on the same two guests in one run.

  (a) kping, both sides busy-polling the CQ      (paper: polling, 45 us)
  (b) kping, handlers in the CQ's softirq         (paper: ISR, 60 us)
  (c) kping, handlers deferred to the workqueue   (paper: task queue, 70 us)
  (d) user space, librdmacm/libibverbs blocking on a completion channel
                                                  (paper: process, 90 us)
  (e) rawping, ib_core directly with no framework (the limit of this link)

Methods run interleaved for several rounds, so drift hits all alike.  These
are TCG timings: only ratios measured side by side mean anything, never the
absolute microseconds.  Writes build/bench/rtt.json and rtt.svg.
"""
import json
import re
import statistics
import time

from .common import HarnessError, Phase, build_dir, log

RESULT_RX = re.compile(r"result (?:mode=\S+ )?count=(\d+) size=(\d+) "
                       r"outstanding=(\d+) median_ns=(\d+) p99_ns=(\d+) "
                       r"msgs_per_s=(\d+)")
METHODS = [("a", "poll", "kping, busy polling"),
           ("b", "softirq", "kping, softirq handler"),
           ("c", "wq", "kping, workqueue handler"),
           ("d", "user", "user space, completion channel"),
           ("e", "raw", "raw ib_core, no framework")]
PAPER_US = {"a": 45, "b": 60, "c": 70, "d": 90}
KPING_PORT, RAW_PORT, USER_PORT = 18515, 18517, 18518
SIZE = 64


def _parse(text, what):
    m = None
    for m in RESULT_RX.finditer(text):
        pass
    if not m:
        raise HarnessError(f"{what}: no result line", text[-1500:])
    keys = ("count", "size", "outstanding", "median_ns", "p99_ns",
            "msgs_per_s")
    return dict(zip(keys, map(int, m.groups())))


class Bench:
    def __init__(self, c, count):
        self.n0, self.n1 = c.nodes
        self.count = count

    def _kping(self, mode, outstanding):
        n0, n1 = self.n0, self.n1
        for n in (n0, n1):
            n.run("rmmod kping 2>/dev/null; dmesg -c >/dev/null", timeout=60)
        r = n0.run(f"insmod /kvlab/modules/kping.ko port={KPING_PORT} "
                   f"node_id=1 mode={mode}", timeout=60)
        if r.rc:
            raise HarnessError(f"kping server mode={mode} refused", r.out)
        r = n1.run(f"insmod /kvlab/modules/kping.ko server={n0.ip} "
                   f"port={KPING_PORT} node_id=2 count={self.count} "
                   f"size={SIZE} mode={mode} outstanding={outstanding} "
                   "; echo rc=$?; dmesg | grep 'kping: result'",
                   timeout=900)
        if "rc=0" not in r.out:
            raise HarnessError(f"kping mode={mode} failed", r.out)
        return _parse(r.out, f"kping mode={mode}")

    def _raw(self, outstanding):
        n0, n1 = self.n0, self.n1
        for n in (n0, n1):
            n.run("rmmod rawping 2>/dev/null; dmesg -c >/dev/null",
                  timeout=60)
        r = n0.run(f"insmod /kvlab/modules/rawping.ko port={RAW_PORT}",
                   timeout=60)
        if r.rc:
            raise HarnessError("rawping server refused", r.out)
        r = n1.run(f"insmod /kvlab/modules/rawping.ko server={n0.ip} "
                   f"port={RAW_PORT} count={self.count} size={SIZE} "
                   f"outstanding={outstanding}; echo rc=$?; "
                   "dmesg | grep 'rawping: result'", timeout=900)
        if "rc=0" not in r.out:
            raise HarnessError("rawping failed", r.out)
        return _parse(r.out, "rawping")

    def _user(self, outstanding):
        n0, n1 = self.n0, self.n1
        n0.run("kill $(pidof kvbench-rtt-user) 2>/dev/null; "
               f"(/kvlab/bin/kvbench-rtt-user --server --port {USER_PORT} "
               "> /tmp/rtt-server.out 2>&1 &); sleep 1", timeout=60)
        r = n1.run(f"/kvlab/bin/kvbench-rtt-user --client {n0.ip} "
                   f"--port {USER_PORT} --count {self.count} --size {SIZE} "
                   f"--outstanding {outstanding}", timeout=900)
        n0.run("kill $(pidof kvbench-rtt-user) 2>/dev/null", timeout=30)
        if r.rc:
            raise HarnessError("user-space ping-pong failed", r.out)
        return _parse(r.out, "kvbench-rtt-user")

    def run(self, key, outstanding=1):
        mode = dict((k, m) for k, m, _ in METHODS)[key]
        if mode == "user":
            return self._user(outstanding)
        if mode == "raw":
            return self._raw(outstanding)
        return self._kping(mode, outstanding)

    def cleanup(self):
        for n in (self.n0, self.n1):
            n.run("rmmod kping rawping 2>/dev/null; "
                  "kill $(pidof kvbench-rtt-user) 2>/dev/null", timeout=60)

    def ep_memory(self):
        """Bytes one kping endpoint uses (depth 128, max_msg 4096)."""
        n0, n1 = self.n0, self.n1
        self._kping_server_only()
        n1.run("rmmod kping 2>/dev/null", timeout=60)
        n1.run(f"(insmod /kvlab/modules/kping.ko server={n0.ip} "
               f"port={KPING_PORT} node_id=2 count=1000000 size={SIZE} "
               "> /dev/null 2>&1 &)", timeout=30)
        r = n0.run("for i in $(seq 60); do grep -h 'state connected' "
                   "/sys/kernel/debug/kverbs/kping-server.*/endpoints && "
                   "break; sleep 0.5; done", timeout=60)
        n1.run("kill -9 $(pidof insmod) 2>/dev/null; sleep 1; "
               "rmmod kping 2>/dev/null", timeout=60)
        m = re.search(r"mem=(\d+)", r.out)
        return int(m.group(1)) if m else None

    def _kping_server_only(self):
        self.n0.run("rmmod kping 2>/dev/null; insmod /kvlab/modules/kping.ko "
                    f"port={KPING_PORT} node_id=1", timeout=60)


def _svg(data, path):
    """Bar chart of median RTT with p99 whiskers, and msgs/s by window."""
    lat = data["latency"]
    keys = [k for k, _, _ in METHODS if lat.get(k, {}).get("median_ns")]
    w, h, pad = 760, 330, 60
    top = max(lat[k]["p99_ns"] for k in keys) / 1000 if keys else 1
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" '
           f'height="{2 * h}" font-family="sans-serif" font-size="12">',
           f'<text x="{pad}" y="20" font-size="14">Round-trip time, {SIZE} B '
           '(median bar, p99 whisker; TCG guests: compare ratios only)'
           '</text>']
    bw = (w - 2 * pad) / max(len(keys), 1)
    for i, k in enumerate(keys):
        med, p99 = lat[k]["median_ns"] / 1000, lat[k]["p99_ns"] / 1000
        x = pad + i * bw + bw * 0.15
        y = h - pad - (h - 2 * pad) * med / top
        y99 = h - pad - (h - 2 * pad) * p99 / top
        label = dict((a, c) for a, _, c in METHODS)[k]
        out += [f'<rect x="{x:.0f}" y="{y:.0f}" width="{bw * 0.7:.0f}" '
                f'height="{h - pad - y:.0f}" fill="#4a7ab5"/>',
                f'<line x1="{x + bw * 0.35:.0f}" y1="{y:.0f}" '
                f'x2="{x + bw * 0.35:.0f}" y2="{y99:.0f}" stroke="black"/>',
                f'<text x="{x:.0f}" y="{y - 4:.0f}">{med:.0f} us</text>',
                f'<text x="{x:.0f}" y="{h - pad + 15}">({k})</text>',
                f'<text x="{x:.0f}" y="{h - pad + 30}" font-size="9">'
                f'{label}</text>']
    out.append(f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" '
               f'y2="{h - pad}" stroke="black"/>')
    tp = data["throughput"]
    series = [k for k in tp if any(v for v in tp[k].values())]
    peak = max([v for k in series for v in tp[k].values() if v] or [1])
    y0 = 2 * h - pad
    out.append(f'<text x="{pad}" y="{h + 20}" font-size="14">Messages per '
               'second by messages outstanding</text>')
    colors = {"b": "#4a7ab5", "d": "#c0504d", "e": "#9bbb59"}
    windows = sorted({int(o) for k in series for o in tp[k]})
    for j, k in enumerate(series):
        pts = []
        for i, o in enumerate(windows):
            v = tp[k].get(str(o))
            if not v:
                continue
            x = pad + i * (w - 2 * pad) / max(len(windows) - 1, 1)
            y = y0 - (h - 2 * pad) * v / peak
            pts.append(f"{x:.0f},{y:.0f}")
        out.append(f'<polyline points="{" ".join(pts)}" fill="none" '
                   f'stroke="{colors.get(k, "gray")}" stroke-width="2"/>')
        out.append(f'<text x="{w - pad + 5}" y="{h + 60 + 15 * j}" '
                   f'fill="{colors.get(k, "gray")}">({k})</text>')
    for i, o in enumerate(windows):
        x = pad + i * (w - 2 * pad) / max(len(windows) - 1, 1)
        out.append(f'<text x="{x:.0f}" y="{y0 + 15}">{o}</text>')
    out.append(f'<text x="{pad}" y="{y0 - (h - 2 * pad) - 5}">peak '
               f'{peak:.0f}/s</text>')
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")


def main(args):
    from . import deps, initramfs, kbuild, kernels, suites
    from .cluster import Cluster
    count = 200 if args.quick else 2000
    rounds = 1 if args.quick else 3
    deps.ensure()
    k = kernels.resolve(args.kernel)
    with Phase("build"):
        mods = kbuild.build(k.headers, build_dir() / "kbuild" / k.abi,
                            bench=True)
        mbuild = suites.meson_build()
    workdir = build_dir() / "bench" / "rtt-guests"
    workdir.mkdir(parents=True, exist_ok=True)
    files = {f"/kvlab/modules/{n}": mods[n] for n in ("kverbs.ko",
                                                     "kping.ko",
                                                     "rawping.ko")}
    initramfs.add_binary(files, mbuild / "tools" / "bench" /
                         "kvbench-rtt-user")
    overlay = initramfs.build_overlay(files, workdir / "overlay.cpio.gz")
    samples = {k: [] for k, _, _ in METHODS}
    errors = {}
    throughput = {"b": {}, "d": {}, "e": {}}
    t0 = time.monotonic()
    with Phase("boot 2 guests"), Cluster(k, nodes=2, workdir=workdir,
                                         overlay=overlay) as c:
        for n in c.nodes:
            n.run_checked("insmod /kvlab/modules/kverbs.ko")
        b = Bench(c, count)
        for rnd in range(rounds):
            for key, _, label in METHODS:
                if key in errors:
                    continue
                try:
                    r = b.run(key)
                    samples[key].append(r)
                    log(f"round {rnd + 1}/{rounds} ({key}) {label}: median "
                        f"{r['median_ns'] / 1000:.0f} us, p99 "
                        f"{r['p99_ns'] / 1000:.0f} us")
                except HarnessError as e:
                    errors[key] = str(e)
                    log(f"({key}) {label}: FAILED: {e}")
        for key in throughput:
            for o in (1, 4, 16, 64):
                if key in errors:
                    break
                try:
                    r = b.run(key, outstanding=o)
                    throughput[key][str(o)] = r["msgs_per_s"]
                except HarnessError as e:
                    throughput[key][str(o)] = None
                    log(f"({key}) {o} outstanding: FAILED: {e}")
        mem = b.ep_memory()
        b.cleanup()

    latency = {}
    for key, mode, label in METHODS:
        runs = samples[key]
        latency[key] = {
            "method": label, "mode": mode,
            "median_ns": (int(statistics.median(r["median_ns"]
                                                for r in runs))
                          if runs else None),
            "p99_ns": (int(statistics.median(r["p99_ns"] for r in runs))
                       if runs else None),
            "rounds": runs, "error": errors.get(key),
            "paper_us": PAPER_US.get(key)}

    def ratio(a, b_):
        x, y = latency[a]["median_ns"], latency[b_]["median_ns"]
        return round(x / y, 3) if x and y else None

    data = {
        "kernel": k.abi, "message_bytes": SIZE, "count_per_run": count,
        "rounds": rounds,
        "note": "TCG guests: absolute times are not hardware claims; "
                "compare the ratios, measured side by side in one run. "
                "paper_us are Liss et al.'s hardware numbers (HOTI'03).",
        "latency": latency,
        "throughput": throughput,
        "memory_per_endpoint_bytes": mem,
        "memory_note": "kping endpoint: depth 128, max_msg 4096",
        "ratio_softirq_over_user": ratio("b", "d"),
        "ratio_softirq_over_raw": ratio("b", "e"),
        "goals": {"softirq_over_user_max": 0.5,
                  "softirq_over_raw_max": 1.05},
        "seconds": round(time.monotonic() - t0, 1),
    }
    out = build_dir() / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "rtt.json").write_text(json.dumps(data, indent=2) + "\n")
    _svg(data, out / "rtt.svg")

    print(f"\nRTT of a {SIZE}-byte message, {count} round trips x {rounds} "
          f"rounds, {k.abi} guests under TCG (ratios only):")
    print(f"  {'':4}{'method':34}{'median':>10}{'p99':>10}{'paper':>8}")
    for key, _, label in METHODS:
        L = latency[key]
        if L["median_ns"] is None:
            print(f"  ({key}) {label:32}  FAILED: "
                  f"{(L['error'] or '')[:60]}")
            continue
        paper = f"{L['paper_us']} us" if L["paper_us"] else "-"
        print(f"  ({key}) {label:32}{L['median_ns'] / 1000:8.0f} us"
              f"{L['p99_ns'] / 1000:8.0f} us{paper:>8}")
    print("\n  messages/s by outstanding:   " +
          "".join(f"{o:>9}" for o in (1, 4, 16, 64)))
    for key in throughput:
        vals = [throughput[key].get(str(o)) for o in (1, 4, 16, 64)]
        print(f"  ({key}) {dict((a, c) for a, _, c in METHODS)[key]:24}" +
              "".join(f"{v if v else '-':>9}" for v in vals))
    print(f"\n  memory per kping endpoint: {mem} bytes")
    rs, rr = data["ratio_softirq_over_user"], data["ratio_softirq_over_raw"]
    print(f"  (b)/(d) softirq over user = {rs}  (goal <= 0.5: "
          f"{'met' if rs is not None and rs <= 0.5 else 'NOT met'})")
    print(f"  (b)/(e) softirq over raw  = {rr}  (goal <= 1.05: "
          f"{'met' if rr is not None and rr <= 1.05 else 'NOT met'})")
    print(f"\nwrote {out / 'rtt.json'} and {out / 'rtt.svg'}")
    return 0 if not errors else 1
