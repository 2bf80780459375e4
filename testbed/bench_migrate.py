"""`./kvlab bench migrate`: kmigrate's post-copy and pre-copy against
CRIU's lazy migration, on the same two guests, the same process, the same
link.

The process is kmigrate-bench (tools/kmigrate/apps/bench.cpp): N MiB
filled through operator new, then a UDP beat every 200 us to an observer
on the source (kmigrate-observe), until it has moved; on the destination
it says "resumed", touches every page of its buffer and says "touched".
kmigrate-bench-plain is the same program on glibc's heap, which CRIU
migrates from outside (CRIU cannot dump kmigrate's arena, a device
mapping).  One clock, the observer's:

  downtime  the last beat from the source to "resumed" from the
            destination, less the one-way delay of a datagram from the
            destination (half the least UDP round trip, measured each
            round).  kmigrate's process beats until it freezes (its
            preparation ran in the background); CRIU freezes it from
            outside, within one beat (200 us) of its last, and restores
            its socket, queue included: its freeze is the start of the
            longest silence of the source's beats.
  total     freeze to the source's last work for the migration: kmigrate,
            the kernel's own t_freeze -> DONE at the source (every page
            pulled, the copy freed); CRIU lazy, `criu dump --lazy-pages`'
            exit (its page server served every page), from the last beat.
  fault     kmigrate post-copy without prefetch: the first touch of each
            page of 16 MiB timed in the process (median), against the raw
            ib_core limit of one 4 KB RDMA read (testbed/rawping.py
            page_read_us: the better of a softirq and a busy-polled CQ).

Methods:
  postcopy   kmigrate, resume at once, pages by fault and prefetcher
  precopy    kmigrate, every page first (the same pull), then resume
  criu-lazy  criu dump --lazy-pages on the source, the images (no pages)
             to the destination (tar, fetched with wget from busybox
             httpd on the source), criu lazy-pages
             --page-server and criu restore --lazy-pages there: CRIU's
             documented lazy migration (criu.org/Lazy_migration), pages by
             userfaultfd from CRIU's TCP page server

Rounds follow testbed/benchmethod.py (methods rotated, medians, every
sample kept).  Writes build/bench/migrate.json (downtime_growth: post-copy
downtime at 256 MiB over 1 MiB; ratio_fault_over_raw_read), migrate.svg and
migrate-runs.json.
"""
import json
import re
import shutil

from .benchmethod import fmt, rotated, spread
from .common import HarnessError, Phase, build_dir, log
from . import fcache_env, initramfs, kbuild, rawping, suite_kmigrate

DEFAULT_KERNEL = "6.12"
SIZES = [1, 4, 16, 64, 256]
QUICK_SIZES = [1, 16]
METHODS = ["postcopy", "precopy", "criu-lazy"]
OBS_PORT = 18950
ECHO_PORT = 18951
CRIU_PORT = 27000
TAR_PORT = 27001
FAULT_MB = 16
BENCH = "/kvlab/bin/kmigrate-bench"
PLAIN = "/kvlab/bin/kmigrate-bench-plain"
OBSERVE = "/kvlab/bin/kmigrate-observe"
CRIU = "/kvlab/bin/criu"
# what CRIU 3.17 needs of the kernel beyond the base image: netlink
# socket diagnostics, nftables (its kerndat probes), tun and veth
CRIU_MODULES = ["nf_tables", "nfnetlink", "unix_diag", "inet_diag",
                "tcp_diag", "udp_diag", "netlink_diag", "af_packet_diag",
                "tun", "veth"]
GOALS = {"downtime_growth_max": 1.2,
         "postcopy_downtime_below_criu_at_every_size": True,
         "ratio_fault_over_raw_read_max": 1.5}


def _overlay(k, workdir, mods):
    from . import suites
    files = suite_kmigrate._files(mods)
    for b in ("kmigrate-bench", "kmigrate-bench-plain", "kmigrate-observe"):
        initramfs.add_binary(files, suites.meson_build() /
                             f"tools/kmigrate/apps/{b}")
    files["/kvlab/modules/rawping.ko"] = mods["rawping.ko"]
    initramfs.add_binary(files, "/usr/sbin/criu")
    mf, order = fcache_env.distro_modules(k, CRIU_MODULES)
    files.update(mf)
    return initramfs.build_overlay(files, workdir / "overlay.cpio"), order


def _observe(text):
    """[(t_ns, kind, words)] of the observer's output."""
    out = []
    for line in text.splitlines():
        p = line.split()
        if len(p) >= 2 and p[0].isdigit():
            out.append((int(p[0]), p[1], p[2:]))
    return out


def _timeline(events, src, dst, gap=False):
    """(t the process stopped beating at @src, t of "resumed" from @dst,
    t of "touched", ok, fault median ns or None).

    kmigrate's process closes its socket and freezes right after a beat:
    the last beat from @src before "resumed" is the freeze.  CRIU freezes
    its process from outside and carries its socket to @dst, which may
    deliver a beat the source queued after "resumed"'s predecessor: with
    @gap the freeze is the start of the longest silence in @src's beats
    (every 200 us otherwise) before "resumed"."""
    beats, resumed = [], None
    touched, ok, fault = None, False, None
    for t, kind, w in events:
        if kind == "failed":
            raise HarnessError("the migrating process failed: " + " ".join(w))
        if kind == "hb" and w and w[-1] == src and resumed is None:
            beats.append(t)
        elif kind == "resumed" and w and w[-1] == dst and resumed is None:
            resumed = t
        elif kind == "faults":
            m = re.search(r"median_ns=(\d+)", " ".join(w))
            fault = int(m.group(1)) if m else None
        elif kind == "touched":
            touched = t
            ok = "ok=1" in w
    if not beats or None in (resumed, touched):
        raise HarnessError(f"incomplete timeline ({len(events)} messages): "
                           f"{len(beats)} beats, resumed {resumed}, "
                           f"touched {touched}")
    last = beats[-1]
    if gap:
        marks = beats + [resumed]
        i = max(range(len(marks) - 1), key=lambda j: marks[j + 1] - marks[j])
        last = marks[i]
    return last, resumed, touched, ok, fault


def _owd_ns(a, b):
    r = a.run(f"{OBSERVE} rtt {b.ip}:{ECHO_PORT} 100", timeout=120)
    m = re.search(r"min_ns=(\d+)", r.out)
    if r.rc or not m:
        raise HarnessError("UDP round trips to the destination failed", r.out)
    return int(m.group(1)) / 2


def _start_observer(a):
    a.run(f"rm -f /tmp/obs.out; ({OBSERVE} listen {OBS_PORT} 900 "
          "> /tmp/obs.out 2>&1; echo done >> /tmp/obs.done) "
          "> /dev/null 2>&1 &", timeout=30)


def _observer_output(a, timeout=900):
    r = a.run(f"for i in $(seq {timeout * 5}); do [ -s /tmp/obs.done ] && "
              "break; sleep 0.2; done; rm -f /tmp/obs.done; cat /tmp/obs.out",
              timeout=timeout + 60)
    return r.out


def run_kmigrate(a, b, mb, method, owd, faults=False):
    _start_observer(a)
    opts = "--precopy" if method == "precopy" else ""
    if faults:
        opts += " --no-prefetch --faults"
    st0 = suite_kmigrate._status(a)["stats"]
    r = a.run(f"{BENCH} --mb {mb} --observer {a.ip}:{OBS_PORT} "
              f"--to {b.ip}:{suite_kmigrate.PORT} {opts}", timeout=900)
    if r.rc:
        raise HarnessError(f"kmigrate-bench {method} {mb} MiB exited {r.rc}",
                           r.out[-2000:])
    ev = _observe(_observer_output(a))
    last_hb, resumed, touched, ok, fault = _timeline(ev, a.name, b.name)
    st = suite_kmigrate._status_when(
        a, lambda s: s["stats"]["out_done"] > st0["out_done"])["stats"]
    if not ok:
        raise HarnessError(f"{method} {mb} MiB: the checksum differs on "
                           f"{b.name}")
    return {"downtime_ms": (resumed - last_hb - owd) / 1e6,
            "total_ms": st["total_ns"] / 1e6,
            "kernel_downtime_ms": st["downtime_ns"] / 1e6,
            "touch_ms": (touched - resumed) / 1e6,
            "fault_median_us": fault / 1e3 if fault else None}


def run_criu(a, b, mb, owd):
    """CRIU's lazy migration of kmigrate-bench-plain from @a to @b."""
    _start_observer(a)
    for n in (a, b):
        n.run("rm -rf /tmp/img /tmp/dump.t /tmp/lazy.rc /tmp/criu.ready "
              "/tmp/tar.done; mkdir -p /tmp/img", timeout=30)
    a.run(f"setsid {PLAIN} --mb {mb} --observer {a.ip}:{OBS_PORT} "
          "< /dev/null > /dev/null 2>&1 &", timeout=30)
    r = a.run(f"for i in $(seq 3000); do P=$(pidof kmigrate-bench-plain); "
              f"[ -n \"$P\" ] && [ $(grep VmRSS /proc/$P/status | "
              f"tr -dc 0-9) -ge {mb * 1024} ] && break; sleep 0.1; done; "
              "sleep 0.5; pidof kmigrate-bench-plain", timeout=600)
    pid = r.out.strip().split()[-1] if r.out.strip() else None
    if not pid:
        raise HarnessError(f"criu-lazy {mb} MiB: the process did not start",
                           r.out)
    # the dump freezes it, writes every image but the pages, then serves
    # the pages until the lazy-pages daemon has them all
    a.run(f"(t0=$({OBSERVE} now); {CRIU} dump -t {pid} -D /tmp/img "
          f"--lazy-pages --port {CRIU_PORT} -o dump.log -v2 "
          f"--status-fd 9 9>/tmp/criu.ready; echo rc=$? $t0 $({OBSERVE} now)"
          " > /tmp/dump.t) > /dev/null 2>&1 &", timeout=30)
    r = a.run("for i in $(seq 3000); do [ -s /tmp/criu.ready ] && break; "
              "[ -s /tmp/dump.t ] && break; sleep 0.05; done; cat /tmp/dump.t "
              "2>/dev/null; ls /tmp/img", timeout=600)
    if "rc=" in r.out:
        raise HarnessError(f"criu dump --lazy-pages failed ({mb} MiB)",
                           a.run("tail -30 /tmp/img/dump.log").out)
    # the images (no pages) to the destination, as one archive served by
    # the source's busybox httpd (started once, serving /tmp/criu-web)
    r = a.run("tar c -f /tmp/criu-web/img.tar -C /tmp/img . && "
              "stat -c %s /tmp/criu-web/img.tar", timeout=120)
    size = r.out.strip().splitlines()[-1] if r.rc == 0 and r.out.strip() else ""
    r = b.run("rm -f /tmp/img.tar; for i in $(seq 50); do busybox wget -q -O "
              f"/tmp/img.tar http://{a.ip}:{TAR_PORT}/img.tar && break; "
              "sleep 0.1; done; tar x -f /tmp/img.tar -C /tmp/img && "
              "stat -c %s /tmp/img.tar", timeout=300)
    if not size or r.out.strip().splitlines()[-1:] != [size]:
        raise HarnessError(f"criu-lazy {mb} MiB: the images did not reach "
                           f"the destination whole ({size} bytes sent)", r.out)
    r = b.run(f"({CRIU} lazy-pages --page-server --address {a.ip} "
              f"--port {CRIU_PORT} -D /tmp/img -o lazy.log -v2; echo rc=$? "
              "> /tmp/lazy.rc) > /dev/null 2>&1 & sleep 0.3; "
              f"{CRIU} restore --lazy-pages -D /tmp/img -d -o restore.log -v2;"
              " echo restore rc=$?", timeout=600)
    if "restore rc=0" not in r.out:
        raise HarnessError(f"criu restore --lazy-pages failed ({mb} MiB)",
                           r.out + b.run("tail -30 /tmp/img/restore.log").out)
    ev = _observe(_observer_output(a))
    last_hb, resumed, touched, ok, _ = _timeline(ev, a.name, b.name, gap=True)
    r = a.run("for i in $(seq 6000); do [ -s /tmp/dump.t ] && break; "
              "sleep 0.1; done; cat /tmp/dump.t", timeout=900)
    m = re.search(r"rc=(\d+) (\d+) (\d+)", r.out)
    b.run("kill $(pidof kmigrate-bench-plain) 2>/dev/null", timeout=30)
    if not ok or not m or m.group(1) != "0":
        raise HarnessError(f"criu-lazy {mb} MiB: checksum ok={ok}, "
                           f"dump {r.out.strip()}",
                           a.run("tail -20 /tmp/img/dump.log").out)
    # the observer's clock: from the freeze (the last beat) to the dump's
    # exit, its page server having served the last page
    return {"downtime_ms": (resumed - last_hb - owd) / 1e6,
            "total_ms": (int(m.group(3)) - last_hb) / 1e6,
            "dump_ms": (int(m.group(3)) - int(m.group(2))) / 1e6,
            "touch_ms": (touched - resumed) / 1e6}


def summarize(k, runs, sizes, rounds, raw_read_us, fault_us):
    s = {m: {str(mb): {key: spread([r[key] for r in runs[m][str(mb)]])
                       for key in ("downtime_ms", "total_ms", "touch_ms")}
             for mb in sizes} for m in METHODS}
    lo, hi = str(sizes[0]), str(sizes[-1])
    growth = [a["downtime_ms"] / b["downtime_ms"]
              if a["downtime_ms"] > 0 and b["downtime_ms"] > 0 else None
              for a, b in zip(runs["postcopy"][hi], runs["postcopy"][lo])]
    fault_ratio = [f / r if f and r else None
                   for f, r in zip(fault_us, raw_read_us)]
    below = {mb: s["postcopy"][str(mb)]["downtime_ms"]["median"] <
             s["criu-lazy"][str(mb)]["downtime_ms"]["median"]
             for mb in sizes}
    data = {"kernel": k.abi, "sizes_mib": sizes, "rounds": rounds,
            "methods": METHODS, "summary": s,
            "downtime_growth": spread(growth)["median"],
            "downtime_growth_spread": spread(growth),
            "raw_rdma_read_us": spread(raw_read_us),
            "postcopy_fault_us": spread(fault_us),
            "ratio_fault_over_raw_read": spread(fault_ratio)["median"],
            "ratio_fault_over_raw_read_spread": spread(fault_ratio),
            "postcopy_downtime_below_criu": below}
    g = data["downtime_growth"]
    f = data["ratio_fault_over_raw_read"]
    data["goals"] = {"target": GOALS, "met": {
        "downtime_growth": g is not None and g <= GOALS["downtime_growth_max"],
        "postcopy_downtime_below_criu_at_every_size": all(below.values()),
        "ratio_fault_over_raw_read": f is not None and
        f <= GOALS["ratio_fault_over_raw_read_max"]}}
    return data


def main(args):
    from . import deps, kernels, suites
    from .cluster import Cluster
    from .svgchart import grouped_bars
    quick = getattr(args, "quick", False)
    rounds = getattr(args, "rounds", None) or (1 if quick else 2)
    sizes = QUICK_SIZES if quick else SIZES
    deps.ensure()
    k = kernels.resolve(args.kernel)
    workdir = build_dir() / "testbed" / "bench-migrate"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    mods = kbuild.build(k.headers, build_dir() / "kbuild-bench" / k.abi,
                        tests=True, bench=True)
    suites.meson_build()
    ovl, criu_mods = _overlay(k, workdir, mods)
    runs = {m: {str(mb): [] for mb in sizes} for m in METHODS}
    raw_read_us, fault_us, owds = [], [], []
    with Cluster(k, nodes=2, workdir=workdir, overlay=ovl, mem_mb=1536,
                 boot_timeout=300) as c:
        a, b = c.nodes
        for n in (a, b):
            fcache_env.load_modules(n, criu_mods)

        class _Res:
            def check(self, suite, what, ok, detail=""):
                if not ok:
                    raise HarnessError(f"setup: {what}", str(detail))
        suite_kmigrate._setup(_Res(), "bench", (a, b), execs=(BENCH,))
        b.run(f"({OBSERVE} echo {ECHO_PORT} > /dev/null 2>&1 &)", timeout=30)
        a.run_checked(f"mkdir -p /tmp/criu-web && busybox httpd -p {TAR_PORT} "
                      "-h /tmp/criu-web", timeout=30)
        for rnd in range(rounds):
            with Phase(f"round {rnd + 1}/{rounds}"):
                owd = _owd_ns(a, b)
                owds.append(owd / 1e3)
                # the raw limit and our fault, side by side
                raw_read_us.append(rawping.page_read_us(b, a, 1000))
                row = run_kmigrate(a, b, FAULT_MB, "postcopy", owd,
                                   faults=True)
                fault_us.append(row["fault_median_us"])
                log(f"fault: {row['fault_median_us']:.0f} us, raw read "
                    f"{raw_read_us[-1]:.0f} us, one-way {owd / 1e3:.0f} us")
                for mb in sizes:
                    for m in rotated(METHODS, rnd + mb):
                        row = (run_criu(a, b, mb, owd) if m == "criu-lazy"
                               else run_kmigrate(a, b, mb, m, owd))
                        log(f"{m} {mb} MiB: downtime "
                            f"{row['downtime_ms']:.1f} ms, total "
                            f"{row['total_ms']:.1f} ms")
                        runs[m][str(mb)].append(row)
    out = build_dir() / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "migrate-runs.json").write_text(json.dumps(
        {"runs": runs, "raw_read_us": raw_read_us, "fault_us": fault_us,
         "one_way_us": owds}, indent=2) + "\n")
    data = summarize(k, runs, sizes, rounds, raw_read_us, fault_us)
    data["one_way_datagram_us"] = spread(owds)
    (out / "migrate.json").write_text(json.dumps(data, indent=2) + "\n")
    s = data["summary"]
    groups = [f"{mb} MiB" for mb in sizes]
    grouped_bars(out / "migrate.svg",
                 f"downtime (ms), {k.abi}, medians over {rounds} rounds",
                 groups, {m: [s[m][str(mb)]["downtime_ms"]["median"]
                              for mb in sizes] for m in METHODS},
                 unit=" ms", log_note="TCG guests, rxe: compare ratios only")
    grouped_bars(out / "migrate-total.svg",
                 f"total migration time (ms), {k.abi}", groups,
                 {m: [s[m][str(mb)]["total_ms"]["median"] for mb in sizes]
                  for m in METHODS},
                 unit=" ms", log_note="TCG guests, rxe: compare ratios only")
    print(f"\nkmigrate vs CRIU lazy migration on {k.abi}, 2 guests x 1 vCPU,"
          f" {rounds} rounds (TCG: ratios only)")
    print(f"  {'':22}" + "".join(f"{m + ' downtime':>28}{m + ' total':>26}"
                                 for m in METHODS))
    for mb in sizes:
        print(f"  {str(mb) + ' MiB':22}" + "".join(
            f"{fmt(s[m][str(mb)]['downtime_ms'], ' ms'):>28}"
            f"{fmt(s[m][str(mb)]['total_ms'], ' ms'):>26}" for m in METHODS))
    print(f"  post-copy fault {fmt(data['postcopy_fault_us'], ' us')}, raw "
          f"RDMA read {fmt(data['raw_rdma_read_us'], ' us')}: ratio "
          f"{fmt(data['ratio_fault_over_raw_read_spread'])}")
    print(f"  downtime_growth {fmt(data['downtime_growth_spread'])}")
    print(f"  goals: {data['goals']['met']}")
    print(f"\nwrote {out / 'migrate.json'}, migrate.svg, migrate-total.svg")
    return 0
