"""`./kvlab bench rtt`: small-message round-trip time by receiving context,
side by side on the same two guests in one run.

  (a)  kping, both sides busy-polling the CQ      (paper: polling, 45 us)
  (b)  kping, handlers in the CQ's softirq         (paper: ISR, 60 us)
  (c)  kping, handlers deferred to the workqueue   (paper: task queue, 70 us)
  (bk) (b) in keyed domains: peers authenticated at connection set-up;
       the messages are the same, so the ratio (bk)/(b) should be 1
  (d)  user space, librdmacm/libibverbs, one wake-up per round trip on a
       completion channel                          (paper: process, 90 us)
  (di) (d) with inline sends (IBV_SEND_INLINE) on both sides
  (d') user space, busy-polling the CQ
  (e)  rawping, ib_core directly, selective signaling
  (e') rawping with inline sends (IB_SEND_INLINE)
  The raw limit of a round is the faster of (e) and (e'), the user-level
  point the faster of (d) and (di): each baseline gets inline sends if
  they help it.

Every method puts the same bytes on the wire (kping's 64 B message plus
the 16 B kvmsg header = 80 B; the baselines send 80 B), signals one send
in several, takes t0 after writing the payload just before posting, and
checks no payload (check=0 everywhere; the tests verify payloads).

The method is testbed/benchmethod.py's: warm-up round, rotated order,
per-round ratios (median, min-max), every round in the JSON, a failing
method fails the run.  TCG timings: only ratios mean anything.  Writes
build/bench/rtt.json and rtt.svg.
"""
import json
import re
import secrets
import statistics
import time

from .benchmethod import fmt, per_round_ratio, rotated
from .common import HarnessError, Phase, build_dir, log

RESULT_RX = re.compile(r"result (?:mode=\S+ )?count=(\d+) size=(\d+) "
                       r"outstanding=(\d+) median_ns=(\d+) p99_ns=(\d+) "
                       r"msgs_per_s=(\d+)(.*)")
# key, how it runs, label
METHODS = [("a", "poll", "kping, busy polling"),
           ("b", "softirq", "kping, softirq handler"),
           ("c", "wq", "kping, workqueue handler"),
           ("bk", "softirq-keyed", "kping, softirq handler, peers "
            "authenticated"),
           ("d", "user", "user space, completion channel"),
           ("di", "user-inline", "user space, channel, inline sends"),
           ("d'", "user-poll", "user space, busy polling"),
           ("e", "raw", "raw ib_core, selective signaling"),
           ("e'", "raw-inline", "raw ib_core, inline sends")]
LABEL = {k: lbl for k, _, lbl in METHODS}
THROUGHPUT = ["b", "d", "di", "d'", "e", "e'"]
WINDOWS = (1, 4, 16, 64)
PAPER_US = {"a": 45, "b": 60, "c": 70, "d": 90}
KPING_PORT, RAW_PORT, USER_PORT = 18515, 18517, 18518
KEY = "kverbs:rtt"            # (bk)'s logon key, on both guests
SIZE = 64                     # kping message, its own 16 B header included
KVMSG_HDR = 16                # struct kvmsg_hdr (uapi/kverbs/kvmsg.h)
WIRE = SIZE + KVMSG_HDR       # bytes every method sends per message


def _parse(text, what):
    m = None
    for m in RESULT_RX.finditer(text):
        pass
    if not m:
        raise HarnessError(f"{what}: no result line", text[-1500:])
    keys = ("count", "size", "outstanding", "median_ns", "p99_ns",
            "msgs_per_s")
    out = dict(zip(keys, map(int, m.groups()[:6])))
    out.update(re.findall(r"(\w+)=(\S+)", m.group(7)))
    return out


class Bench:
    def __init__(self, c, count):
        self.n0, self.n1 = c.nodes
        self.count = count

    def _kping(self, mode, outstanding, count):
        n0, n1 = self.n0, self.n1
        key = ""
        if mode.endswith("-keyed"):
            mode, key = mode[:-len("-keyed")], f" auth_key={KEY}"
        for n in (n0, n1):
            n.run("rmmod kping 2>/dev/null; dmesg -c >/dev/null", timeout=60)
        r = n0.run(f"insmod /kvlab/modules/kping.ko port={KPING_PORT} "
                   f"node_id=1 mode={mode}{key}", timeout=60)
        if r.rc:
            raise HarnessError(f"kping server mode={mode} did not start",
                               r.out)
        r = n1.run(f"insmod /kvlab/modules/kping.ko server={n0.ip} "
                   f"port={KPING_PORT} node_id=2 count={count} "
                   f"size={SIZE} mode={mode} outstanding={outstanding} "
                   f"check=0{key}; echo rc=$?; dmesg | grep 'kping: result'",
                   timeout=900)
        if "rc=0" not in r.out:
            raise HarnessError(f"kping mode={mode} failed", r.out)
        return _parse(r.out, f"kping mode={mode}")

    def _raw(self, outstanding, count, inline):
        n0, n1 = self.n0, self.n1
        for n in (n0, n1):
            n.run("rmmod rawping 2>/dev/null; dmesg -c >/dev/null",
                  timeout=60)
        r = n0.run(f"insmod /kvlab/modules/rawping.ko port={RAW_PORT} "
                   f"inline_send={int(inline)}", timeout=60)
        if r.rc:
            raise HarnessError("rawping server did not start", r.out)
        r = n1.run(f"insmod /kvlab/modules/rawping.ko server={n0.ip} "
                   f"port={RAW_PORT} count={count} size={WIRE} "
                   f"outstanding={outstanding} check=0 "
                   f"inline_send={int(inline)}; echo rc=$?; "
                   "dmesg | grep 'rawping: result'", timeout=900)
        if "rc=0" not in r.out:
            raise HarnessError("rawping failed", r.out)
        out = _parse(r.out, "rawping")
        if inline and out.get("inline") != "1":
            raise HarnessError("rawping: the device took no inline data",
                               r.out)
        return out

    def _user(self, outstanding, count, wait, inline=False):
        n0, n1 = self.n0, self.n1
        tool = "/kvlab/bin/kvbench-rtt-user"
        il = " --inline" if inline else ""
        # Ready once it says so: a dying predecessor must not pass for it.
        r = n0.run("kill $(pidof kvbench-rtt-user) 2>/dev/null; "
                   "for i in $(seq 50); do pidof kvbench-rtt-user >/dev/null "
                   "|| break; sleep 0.1; done; "
                   f"({tool} --server --port {USER_PORT} --wait {wait} "
                   f"--size {WIRE}{il} > /tmp/rtt-server.out 2>&1 &); "
                   "for i in $(seq 100); do grep -q 'listening on port' "
                   "/tmp/rtt-server.out && exit 0; sleep 0.1; done; "
                   "cat /tmp/rtt-server.out; exit 1", timeout=60)
        if r.rc:
            raise HarnessError(f"user-space server (--wait {wait}{il}) did "
                               "not start", r.out)
        r = n1.run(f"{tool} --client {n0.ip} --port {USER_PORT} "
                   f"--count {count} --size {WIRE} --wait {wait} --check 0 "
                   f"--outstanding {outstanding}{il}", timeout=900)
        srv = n0.run("kill $(pidof kvbench-rtt-user) 2>/dev/null; "
                     "cat /tmp/rtt-server.out", timeout=30).out
        if r.rc:
            raise HarnessError(f"user-space ping-pong (--wait {wait}{il}) "
                               "failed", r.out)
        out = _parse(r.out, "kvbench-rtt-user")
        m = re.search(r"inline up to (\d+) bytes", srv)
        if inline and (out.get("inline") != "1" or not m or
                       int(m.group(1)) < WIRE):
            raise HarnessError("user-space: inline sends not granted on "
                               "both sides", r.out + srv)
        return out

    def run(self, key, outstanding=1, count=None):
        count = count or self.count
        mode = dict((k, m) for k, m, _ in METHODS)[key]
        if mode in ("user", "user-poll", "user-inline"):
            return self._user(outstanding, count,
                              "poll" if mode == "user-poll" else "event",
                              inline=mode == "user-inline")
        if mode in ("raw", "raw-inline"):
            return self._raw(outstanding, count, mode == "raw-inline")
        return self._kping(mode, outstanding, count)

    def diagnose(self):
        """After a failed run: is the link itself alive (IP ping, the
        NIC's counters), and what rxe saw (retries, sequence errors)."""
        out = []
        for n, peer in ((self.n0, self.n1), (self.n1, self.n0)):
            r = n.run(f"ping -c 2 -W 2 {peer.ip} | tail -2; "
                      "ip -s link show eth0; "
                      "cd /sys/class/infiniband/rxe0/ports/1/hw_counters && "
                      "grep -H . * | grep -v ':0$'; dmesg | tail -15",
                      timeout=60)
            out.append(f"--- {n.name}:\n{r.out.strip()}")
        return "\n".join(out)

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
           f'<text x="{pad}" y="20" font-size="14">Round-trip time, {WIRE} B '
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
    colors = {"b": "#4a7ab5", "d": "#c0504d", "di": "#d99694",
              "d'": "#f79646",
              "e": "#9bbb59", "e'": "#8064a2"}
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


def _order(runs, rnd, group):
    """@runs for round @rnd: in consecutive groups of @group (the methods
    of one window), each group rotated by the round plus its index, so
    every method moves through every place in the order."""
    out = []
    for i in range(0, len(runs), group):
        out += rotated(runs[i:i + group], rnd + i // group)
    return out


def _measure(b, rounds, warmup, errors, what, runs, group=None):
    """Run every (key, outstanding) of @runs once per round, the methods
    in an order rotated per round; the first @warmup rounds are not kept.
    Returns {(key, outstanding): [result or None per counted round]}."""
    out = {r: [] for r in runs}
    for rnd in range(warmup + rounds):
        counted = rnd >= warmup
        tag = (f"round {rnd - warmup + 1}/{rounds}" if counted
               else f"warm-up {rnd + 1}/{warmup}")
        for key, o in _order(runs, rnd, group or len(runs)):
            if key in errors:
                if counted:
                    out[(key, o)].append(None)
                continue
            try:
                r = b.run(key, outstanding=o)
            except HarnessError as e:
                try:
                    diag = b.diagnose()
                except HarnessError as d:   # a hung guest: keep the cause
                    diag = f"(diagnosis failed: {d})"
                errors[key] = f"{e}\n{diag}"
                log(f"{what} {tag} ({key}) {LABEL[key]}: FAILED: "
                    f"{errors[key]}")
                if counted:
                    out[(key, o)].append(None)
                continue
            if counted:
                out[(key, o)].append(r)
            if what == "latency":
                log(f"{what} {tag} ({key}) {LABEL[key]}: median "
                    f"{r['median_ns'] / 1000:.0f} us, p99 "
                    f"{r['p99_ns'] / 1000:.0f} us")
            else:
                log(f"{what} {tag} ({key}) {o} outstanding: "
                    f"{r['msgs_per_s']} msgs/s")
    return out


def _best(xs, ys, pick=min):
    """Per round, the better of two variants of one baseline (@pick: min
    for times, max for rates); None where neither ran."""
    return [pick([v for v in pair if v], default=None)
            for pair in zip(xs, ys)]


def main(args):
    from . import deps, initramfs, kbuild, kernels, suites
    from .cluster import Cluster
    count = 200 if args.quick else 2000
    rounds = 1 if args.quick else 5
    tp_rounds = 1 if args.quick else 3
    warmup = 1
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
    overlay = initramfs.build_overlay(files, workdir / "overlay.cpio")
    errors = {}
    t0 = time.monotonic()
    with Phase("boot 2 guests"), Cluster(k, nodes=2, workdir=workdir,
                                         overlay=overlay) as c:
        secret = secrets.token_hex(16)
        for n in c.nodes:
            n.run_checked("insmod /kvlab/modules/kverbs.ko && keyctl add "
                          f"logon {KEY} {secret} @u > /dev/null")
        b = Bench(c, count)
        lat_runs = _measure(b, rounds, warmup, errors, "latency",
                            [(key, 1) for key, _, _ in METHODS])
        tp_runs = _measure(b, tp_rounds, warmup, errors, "throughput",
                           [(key, o) for o in WINDOWS
                            for key in THROUGHPUT],
                           group=len(THROUGHPUT))
        mem = b.ep_memory()
        b.cleanup()

    def med_of(key, what="median_ns"):
        return [r[what] if r else None for r in lat_runs[(key, 1)]]

    latency = {}
    for key, mode, label in METHODS:
        runs = lat_runs[(key, 1)]
        ok = [r for r in runs if r]
        latency[key] = {
            "method": label, "mode": mode,
            "median_ns": (int(statistics.median(r["median_ns"] for r in ok))
                          if ok else None),
            "p99_ns": (int(statistics.median(r["p99_ns"] for r in ok))
                       if ok else None),
            "rounds": runs, "error": errors.get(key),
            "paper_us": PAPER_US.get(key)}
    raw = _best(med_of("e"), med_of("e'"))
    user = _best(med_of("d"), med_of("di"))
    user_best = _best(user, med_of("d'"))
    latency["limit"] = {"method": "raw limit: faster of (e), (e') per round",
                        "per_round_ns": raw,
                        "note": "the minimum of two noisy runs leans low: "
                                "it favours the baseline, never kmsg"}
    latency["user"] = {"method": "user level (d): faster of (d), (di) per "
                                 "round", "per_round_ns": user}
    ratios = {
        "softirq_over_user": per_round_ratio(med_of("b"), user),
        "softirq_over_user_no_inline": per_round_ratio(med_of("b"),
                                                       med_of("d")),
        "softirq_over_user_poll": per_round_ratio(med_of("b"),
                                                  med_of("d'")),
        "softirq_over_best_user": per_round_ratio(med_of("b"), user_best),
        "softirq_over_raw": per_round_ratio(med_of("b"), raw),
        "softirq_over_raw_signaled": per_round_ratio(med_of("b"),
                                                     med_of("e")),
        "raw_inline_over_raw": per_round_ratio(med_of("e'"), med_of("e")),
        "user_inline_over_user": per_round_ratio(med_of("di"),
                                                 med_of("d")),
        "poll_over_softirq": per_round_ratio(med_of("a"), med_of("b")),
        "wq_over_softirq": per_round_ratio(med_of("c"), med_of("b")),
        "keyed_over_softirq": per_round_ratio(med_of("bk"), med_of("b")),
    }
    throughput, tp_ratios = {}, {}
    for key in THROUGHPUT:
        throughput[key] = {}
        for o in WINDOWS:
            vals = [r["msgs_per_s"] if r else None
                    for r in tp_runs[(key, o)]]
            ok = [v for v in vals if v]
            throughput[key][str(o)] = (int(statistics.median(ok)) if ok
                                       else None)
    for o in WINDOWS:
        def rate(key):
            return [r["msgs_per_s"] if r else None
                    for r in tp_runs[(key, o)]]
        # Higher is better: raw over kmsg is the kmsg cost, like latency.
        best_raw = _best(rate("e"), rate("e'"), max)
        best_user = _best(rate("d"), rate("di"), max)
        tp_ratios[str(o)] = {
            "raw_over_softirq": per_round_ratio(best_raw, rate("b")),
            "softirq_over_user": per_round_ratio(rate("b"), best_user)}

    data = {
        "kernel": k.abi, "message_bytes": SIZE, "wire_bytes": WIRE,
        "wire_note": f"kping's {SIZE} B message travels as {WIRE} B with "
                     f"the {KVMSG_HDR} B kvmsg header; the baselines send "
                     f"{WIRE} B",
        "count_per_run": count, "rounds": rounds, "warmup_rounds": warmup,
        "throughput_rounds": tp_rounds,
        "method": "testbed/benchmethod.py: warm-up not counted, order "
                  "rotated per round, ratios per round (median, min-max)",
        "note": "TCG guests: absolute times are not hardware claims; "
                "compare the ratios, measured side by side in one run. "
                "paper_us are Liss et al.'s hardware numbers (HOTI'03).",
        "latency": latency,
        "ratios": ratios,
        "throughput": throughput,
        "throughput_rounds_raw": {f"{k_}@{o}": v
                                  for (k_, o), v in tp_runs.items()},
        "throughput_ratios": tp_ratios,
        "memory_per_endpoint_bytes": mem,
        "memory_note": "kping endpoint: depth 128, max_msg 4096",
        "ratio_softirq_over_user": ratios["softirq_over_user"]["median"],
        "ratio_softirq_over_raw": ratios["softirq_over_raw"]["median"],
        "goals": {"softirq_over_user_max": 0.5,
                  "softirq_over_raw_max": 1.05},
        "errors": errors,
        "complete": not errors,
        "seconds": round(time.monotonic() - t0, 1),
    }
    out = build_dir() / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "rtt.json").write_text(json.dumps(data, indent=2) + "\n")
    _svg(data, out / "rtt.svg")

    print(f"\nRTT, {SIZE} B kping message = {WIRE} B on the wire for every "
          f"method, {count} round trips x {rounds} rounds (+{warmup} "
          f"warm-up), {k.abi} guests under TCG (ratios only):")
    print(f"  {'':5}{'method':33}{'median':>10}{'p99':>10}{'paper':>8}")
    for key, _, label in METHODS:
        L = latency[key]
        if L["median_ns"] is None:
            print(f"  {'(' + key + ')':5}{label:33} "
                  f"FAILED: {(L['error'] or '')[:60]}")
            continue
        paper = f"{L['paper_us']} us" if L["paper_us"] else "-"
        print(f"  {'(' + key + ')':5}{label:33}"
              f"{L['median_ns'] / 1000:8.0f} us"
              f"{L['p99_ns'] / 1000:8.0f} us{paper:>8}")
    print("\n  per-round ratios, median (min-max):")
    for name, sp in ratios.items():
        print(f"    {name:28} {fmt(sp)}")
    print(f"\n  {'messages/s by outstanding:':38}" +
          "".join(f"{o:>9}" for o in WINDOWS))
    for key in throughput:
        vals = [throughput[key].get(str(o)) for o in WINDOWS]
        print(f"  {'(' + key + ')':5}{LABEL[key]:33}" +
              "".join(f"{v if v else '-':>9}" for v in vals))
    for o in WINDOWS:
        print(f"    {o:>2} outstanding: raw/(b) "
              f"{fmt(tp_ratios[str(o)]['raw_over_softirq'])}, (b)/(d) "
              f"{fmt(tp_ratios[str(o)]['softirq_over_user'])}")
    print(f"\n  memory per kping endpoint: {mem} bytes")
    rs, rr = ratios["softirq_over_user"], ratios["softirq_over_raw"]
    print(f"  (b) over the best user-level point incl. busy polling = "
          f"{fmt(ratios['softirq_over_best_user'])}")
    print(f"  P1 (b)/(d) softirq over user = {fmt(rs)}  (goal <= 0.5: "
          f"{'met' if rs['median'] is not None and rs['median'] <= 0.5 else 'NOT met'})")
    print(f"  P2 (b)/(e) softirq over raw  = {fmt(rr)}  (goal <= 1.05: "
          f"{'met' if rr['median'] is not None and rr['median'] <= 1.05 else 'NOT met'})")
    print(f"\nwrote {out / 'rtt.json'} and {out / 'rtt.svg'}")
    if errors:
        print("\nFAILED methods (the benchmark is incomplete):")
        for key, e in errors.items():
            print(f"  ({key}) {LABEL[key]}: {e.splitlines()[0][:200]}")
        return 1
    return 0
