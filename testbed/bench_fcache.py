"""`./kvlab bench fcache`: kfcache against NFSv4.2 over RDMA and over TCP,
on the same two guests, the same ext4 disk and file set, the same link.

Node 0 serves one ext4 disk (fcache_env.make_disk) read-only both ways:
kfcache_srv exports it, and nfsd exports it (fcache_env.nfs_server_start,
as nfs-rdma.rst and exports(5) recommend: `insecure`, NFSv4.2 only,
8 threads, Debian's default).  Node 1 mounts it with each method in turn
(kfcache; NFS `proto=rdma,port=20049`; NFS `proto=tcp`, both with the
client's defaults for rsize and caching) and runs fio (testbed/benchmethod.py:
methods rotated per round, ratios per round):

  qd1-warm   4 KB random reads, one at a time (psync, fio's default
             POSIX_FADV_RANDOM: no readahead), client cache dropped,
             server cache warm: median and mean completion latency
  qd1-cold   the same with the server's cache dropped too (disk reads)
  seq        sequential 1 MB reads of the large file, client cache cold,
             server warm: throughput, and the server's CPU time per GB
             served (/proc/stat, every non-idle state, its one vCPU:
             rxe or the TCP stack included, as a NIC would not be)
  qd16       4 KB random reads by 16 threads (psync), each over its own
             16th of the file, every block once, client cache cold,
             server warm: IOPS

and, each round, the raw ib_core limit of a QD1 read from a warm server
(testbed/rawping.py: a request, a 4 KB RDMA write, the reply; no file
system, no framework), and kfcache's own breakdown of its READs
(debugfs kfcache/<dev>/stats: registering, the answer, revoking).

Writes build/bench/fcache.json (ratio_qd1_read_over_nfs_rdma,
ratio_seq_throughput_over_nfs_rdma, server CPU per GB) and fcache.svg.
"""
import json
import os
import re
import shutil
import time

from .benchmethod import fmt, per_round_ratio, rotated, spread
from .common import HarnessError, Phase, build_dir, log
from . import fcache_env, fcache_tree, kbuild, rawping, suite_kfcache

METHODS = ["kfcache", "nfs-rdma", "nfs-tcp", "raw"]
MNT = "/mnt/bench"
# kfcache mount options: its defaults, without a key, as NFS runs with
# sec=sys (authentication costs only the connection set-up)
KFC_OPTS = "-o insecure"
BIG_MIB = 64
GOALS = {"ratio_qd1_read_over_nfs_rdma": 0.5,
         "ratio_seq_throughput_over_nfs_rdma": 1.0}


def _mount(cli, srv, method):
    if method == "kfcache":
        cli.run_checked(f"mkdir -p {MNT} && mount -t kfcache "
                        f"{KFC_OPTS} {srv.ip}:/disk {MNT}", timeout=60)
    else:
        fcache_env.nfs_mount(cli, srv.ip, "/export", MNT,
                             "rdma" if method == "nfs-rdma" else "tcp")


def _umount(cli, method):
    if method == "kfcache":
        cli.run_checked(f"umount {MNT}", timeout=60)
    else:
        fcache_env.nfs_umount(cli, MNT)


def _fio(cli, name, args, runtime):
    r = cli.run_checked(
        f"fio --name={name} --filename={MNT}/big.bin --readonly "
        f"--output-format=json {args} --runtime={runtime} 2>/dev/null",
        timeout=runtime + 600)
    text = r.out[r.out.index("{"):]
    job = json.loads(text)["jobs"][0]["read"]
    if job.get("io_bytes", 0) == 0:
        raise HarnessError(f"fio {name} read nothing:\n{text[-2000:]}")
    clat = job.get("clat_ns", {})
    return {"iops": job["iops"], "bw_kib": job["bw"],
            "lat_mean_us": clat.get("mean", 0) / 1000,
            "lat_median_us": clat.get("percentile", {}).get(
                "50.000000", 0) / 1000}


def _cpu_jiffies(node):
    """Non-idle jiffies of the node so far: user nice system irq softirq
    steal (not idle, not iowait)."""
    f = node.run_checked("head -1 /proc/stat", timeout=30).out.split()
    v = [int(x) for x in f[1:9]]
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7]


def _hz(node):
    return int(node.run_checked("getconf CLK_TCK 2>/dev/null || echo 100",
                                timeout=30).out.split()[0])


def _warm_server(srv):
    srv.run_checked("cat /export/big.bin > /dev/null", timeout=600)


def _kfc_stats(cli):
    out = cli.run("cat /sys/kernel/debug/kfcache/*/stats", timeout=30).out
    return {k: int(v) for k, v in re.findall(r"^(\w+) (-?\d+)$", out,
                                             re.M)}


def _breakdown(before, after):
    """Per READ, us: registering, the answer, revoking."""
    n = after.get("reads", 0) - before.get("reads", 0)
    if n <= 0:
        return None
    return {"reads": n, "pages_per_read": round(
        (after["pages"] - before["pages"]) / n, 1)} | {
        k[3:] + "_us": round((after[k] - before[k]) / n / 1000, 1)
        for k in ("ns_register", "ns_answer", "ns_revoke")}


def run_method(srv, cli, method, runtime, hz):
    if method == "raw":
        return {"qd1-warm": {"lat_median_us": rawping.page_exchange_us(
            cli, srv, 200)}}
    row = {}
    _mount(cli, srv, method)
    try:
        fcache_env.drop_caches(cli)
        fcache_env.drop_caches(srv)
        row["qd1-cold"] = _fio(cli, "qd1c", "--rw=randread --bs=4k "
                               "--ioengine=psync --time_based", runtime)
        _warm_server(srv)
        fcache_env.drop_caches(cli)
        s0 = _kfc_stats(cli) if method == "kfcache" else {}
        row["qd1-warm"] = _fio(cli, "qd1w", "--rw=randread --bs=4k "
                               "--ioengine=psync --time_based", runtime)
        if method == "kfcache":
            row["qd1-warm"]["breakdown"] = _breakdown(s0, _kfc_stats(cli))
        fcache_env.drop_caches(cli)
        c0, t0 = _cpu_jiffies(srv), time.monotonic()
        s0 = _kfc_stats(cli) if method == "kfcache" else {}
        row["seq"] = _fio(cli, "seq", "--rw=read --bs=1M "
                          "--ioengine=psync", runtime)
        if method == "kfcache":
            row["seq"]["breakdown"] = _breakdown(s0, _kfc_stats(cli))
        cpu_s = (_cpu_jiffies(srv) - c0) / hz
        gb = row["seq"]["bw_kib"] * 1024 * (time.monotonic() - t0) / 1e9
        row["seq"]["server_cpu_s_per_gb"] = cpu_s / gb if gb else None
        fcache_env.drop_caches(cli)
        # 16 threads, each over its own 1/16 of the file, every block
        # once: no thread reads what another brought into the cache
        row["qd16"] = _fio(cli, "qd16", "--rw=randread --bs=4k "
                           "--ioengine=psync --numjobs=16 --thread "
                           f"--size={BIG_MIB // 16}M "
                           f"--offset_increment={BIG_MIB // 16}M "
                           "--group_reporting", runtime)
    finally:
        _umount(cli, method)
    return row


def summarize(k, runs, rounds, runtime):
    def series(m, test, key):
        return [r[test][key] for r in runs[m]]

    med = {m: {"qd1_warm_lat_median_us": spread(series(m, "qd1-warm",
                                                       "lat_median_us")),
               "qd1_warm_lat_mean_us": spread(series(m, "qd1-warm",
                                                     "lat_mean_us")),
               "qd1_cold_lat_median_us": spread(series(m, "qd1-cold",
                                                       "lat_median_us")),
               "seq_mib_s": spread([v / 1024 for v in
                                    series(m, "seq", "bw_kib")]),
               "seq_server_cpu_s_per_gb": spread(
                   series(m, "seq", "server_cpu_s_per_gb")),
               "qd16_iops": spread(series(m, "qd16", "iops"))}
           for m in METHODS if m != "raw"}
    qd1 = per_round_ratio(series("kfcache", "qd1-warm", "lat_median_us"),
                          series("nfs-rdma", "qd1-warm", "lat_median_us"))
    qd1c = per_round_ratio(series("kfcache", "qd1-cold", "lat_median_us"),
                           series("nfs-rdma", "qd1-cold", "lat_median_us"))
    seq = per_round_ratio(series("kfcache", "seq", "bw_kib"),
                          series("nfs-rdma", "seq", "bw_kib"))
    cpu = per_round_ratio(series("kfcache", "seq", "server_cpu_s_per_gb"),
                          series("nfs-rdma", "seq", "server_cpu_s_per_gb"))
    iops = per_round_ratio(series("kfcache", "qd16", "iops"),
                           series("nfs-rdma", "qd16", "iops"))
    raw = series("raw", "qd1-warm", "lat_median_us")
    med["raw"] = {"qd1_warm_lat_median_us": spread(raw)}
    over_raw = {m: per_round_ratio(series(m, "qd1-warm", "lat_median_us"),
                                   raw) for m in METHODS if m != "raw"}

    def parts(test):
        rows = [r[test].get("breakdown") for r in runs["kfcache"]]
        keys = ("register_us", "answer_us", "revoke_us", "pages_per_read")
        return {k: spread([r[k] if r else None for r in rows]) for k in keys}
    met = {"ratio_qd1_read_over_nfs_rdma": qd1["median"] is not None and
           qd1["median"] <= GOALS["ratio_qd1_read_over_nfs_rdma"],
           "ratio_seq_throughput_over_nfs_rdma": seq["median"] is not None
           and seq["median"] >= GOALS["ratio_seq_throughput_over_nfs_rdma"],
           "server_cpu_per_gb_lower": cpu["median"] is not None and
           cpu["median"] < 1}
    return {"kernel": k.abi, "rounds": rounds, "runtime_s": runtime,
            "file_mib": BIG_MIB, "methods": METHODS,
            "method": "testbed/benchmethod.py: methods rotated per round, "
                      "ratios per round (median, min-max)",
            "note": "TCG guests on 2 host cores, rxe in software on the "
                    "guests' one vCPU each: compare ratios only",
            "runs": runs, "summary": med,
            "ratio_qd1_read_over_nfs_rdma": qd1["median"],
            "ratio_qd1_read_over_nfs_rdma_spread": qd1,
            "ratio_qd1_cold_read_over_nfs_rdma": qd1c,
            "ratio_seq_throughput_over_nfs_rdma": seq["median"],
            "ratio_seq_throughput_over_nfs_rdma_spread": seq,
            "ratio_server_cpu_per_gb_over_nfs_rdma": cpu,
            "ratio_qd16_iops_over_nfs_rdma": iops,
            "ratio_qd1_read_over_raw_page_exchange": over_raw,
            "kfcache_read_breakdown": {"qd1-warm": parts("qd1-warm"),
                                       "seq": parts("seq")},
            "goals": {"target": GOALS, "met": met}}


def main(args):
    from . import deps, kernels, suites
    from .cluster import Cluster
    from .svgchart import grouped_bars
    quick = getattr(args, "quick", False)
    rounds = getattr(args, "rounds", None) or (1 if quick else 2)
    warmup = 0 if quick else 1
    runtime = 3 if quick else 8
    deps.ensure()
    k = kernels.resolve(args.kernel)
    workdir = build_dir() / "testbed" / "bench-fcache"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    mods = kbuild.build(k.headers, build_dir() / "kbuild-bench" / k.abi,
                        tests=True, bench=True)
    suites.meson_build()
    src = workdir / "src"
    fcache_tree.make_tree(src, big_mib=BIG_MIB, small_files=50)
    img = fcache_env.make_disk(workdir / "node0.img", src,
                               size_mb=BIG_MIB + 160)
    files = suite_kfcache._files(mods)
    files["/kvlab/modules/rawping.ko"] = mods["rawping.ko"]
    ovl, sets = fcache_env.overlay(k, workdir / "overlay.cpio", files)
    runs = {m: [] for m in METHODS}
    # the disk image's dirty pages written back now, not under round 1
    os.sync()
    with Cluster(k, nodes=2, workdir=workdir, overlay=ovl, mem_mb=1024,
                 boot_timeout=300, disks=[img, None]) as c:
        srv, cli = c.nodes
        fcache_env.load_modules(srv, sets["disk"] + sets["server"])
        fcache_env.load_modules(cli, sets["client"])
        for n in (srv, cli):
            r = suite_kfcache.insmod(n, suite_kfcache.MODS)
            if r.rc:
                raise HarnessError(f"{n.name}: our modules: {r.out}")
        fcache_env.mount_disk(srv, "/export", ro=True)
        fcache_env.nfs_server_start(srv, "/export", threads=8)
        srv.run_checked(f"{suite_kfcache.CTL} start {srv.ip} --insecure && "
                        f"{suite_kfcache.CTL} export disk /export",
                        timeout=60)
        hz = _hz(srv)
        for rnd in range(warmup + rounds):
            with Phase(f"round {rnd + 1 - warmup}/{rounds}" if rnd >= warmup
                       else "warm-up round"):
                for m in rotated(METHODS, rnd):
                    row = run_method(srv, cli, m, runtime, hz)
                    log(f"{m}: " + ", ".join(
                        f"{t} {v['lat_median_us']:.0f} us / "
                        f"{v.get('bw_kib', 0) / 1024:.1f} MiB/s / "
                        f"{v.get('iops', 0):.0f} IOPS"
                        for t, v in row.items()))
                    if rnd >= warmup:
                        runs[m].append(row)
        stats = srv.run(f"{suite_kfcache.CTL} status --stats",
                        timeout=30).out
    out = build_dir() / "bench"
    out.mkdir(parents=True, exist_ok=True)
    # every sample first, so a failing summary loses nothing
    (out / "fcache-runs.json").write_text(json.dumps(runs, indent=2) + "\n")
    data = summarize(k, runs, rounds, runtime)
    data["kfcache_server_counters"] = stats
    (out / "fcache.json").write_text(json.dumps(data, indent=2) + "\n")
    s = data["summary"]
    rows = [("QD1 4K, server warm (median us)", "qd1_warm_lat_median_us"),
            ("QD1 4K, both cold (median us)", "qd1_cold_lat_median_us"),
            ("sequential (MiB/s)", "seq_mib_s"),
            ("server CPU s per GB (seq)", "seq_server_cpu_s_per_gb"),
            ("QD16 4K (IOPS)", "qd16_iops")]
    shown = [m for m in METHODS if m != "raw"]
    grouped_bars(out / "fcache.svg",
                 f"kfcache vs NFSv4.2, {k.abi} (medians over {rounds} "
                 "rounds)", [r[0] for r in rows],
                 {m: [s[m][key]["median"] for _, key in rows]
                  for m in shown},
                 log_note="TCG guests, rxe: compare ratios only")
    print(f"\nkfcache vs NFSv4.2 on {k.abi}, 2 guests x 1 vCPU, {BIG_MIB} "
          f"MiB file, {rounds} rounds (+{warmup} warm-up), fio {runtime} s "
          "per test (TCG: ratios only)")
    print(f"  {'':34}" + "".join(f"{m:>30}" for m in shown))
    for label, key in rows:
        print(f"  {label:34}" + "".join(f"{fmt(s[m][key]):>30}"
                                        for m in shown))
    print(f"  raw page exchange (median us)     "
          f"{fmt(s['raw']['qd1_warm_lat_median_us'])}")
    for m, v in data["ratio_qd1_read_over_raw_page_exchange"].items():
        print(f"  {m} QD1 over the raw page exchange: {fmt(v)}")
    for test, p in data["kfcache_read_breakdown"].items():
        print(f"  kfcache READ, {test}: " + ", ".join(
            f"{k} {fmt(v)}" for k, v in p.items()))
    for key in ("ratio_qd1_read_over_nfs_rdma_spread",
                "ratio_qd1_cold_read_over_nfs_rdma",
                "ratio_seq_throughput_over_nfs_rdma_spread",
                "ratio_server_cpu_per_gb_over_nfs_rdma",
                "ratio_qd16_iops_over_nfs_rdma"):
        print(f"  {key.replace('_spread', '')}: {fmt(data[key])}")
    print(f"  goals: {data['goals']}")
    print(f"\nwrote {out / 'fcache.json'} and fcache.svg")
    return 0
