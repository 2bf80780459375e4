"""./kvlab demo [dsm|fcache|migrate|all]: two guests show each sample as
an operator would type it (issue 28, item 5): SOR on the kdsm DSM; a
directory served by kfcache_srv, mounted and read with cat and md5sum;
a running process moved with `kmigrate move`.  Peers authenticate with
each tool's default key.  Each demo returns whether what it showed was
right."""
import re
import secrets
import shutil

from .common import Phase, build_dir
from . import initramfs, kbuild

WHAT = ("dsm", "fcache", "migrate")


def _say(cmd, where=""):
    """Print @cmd as the operator's line (our paths stripped)."""
    print(f"$ {cmd.replace('/kvlab/bin/', '')}" + (f"    # {where}" if where
                                                    else ""))


def _overlay(k, workdir, mods, bins):
    from . import suites
    built = kbuild.build(k.headers, build_dir() / "kbuild" / k.abi,
                         tests=True)
    files = {f"/kvlab/modules/{m}": built[m] for m in mods}
    for b in bins:
        initramfs.add_binary(files, suites.meson_build() / b)
    return initramfs.build_overlay(files, workdir / "overlay.cpio")


def _workdir(name):
    d = build_dir() / "demo" / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


def _keys(nodes, desc):
    secret = secrets.token_hex(16)
    for n in nodes:
        n.run_checked(f"keyctl add logon {desc} {secret} @u > /dev/null")
    _say(f"keyctl add logon {desc} <secret> @u", "the same secret on each node")


def _banner(c, k):
    n0, n1 = c.nodes
    print(f"\n== {n0.name} ({n0.ip}) and {n1.name} ({n1.ip}), Debian "
          f"kernel {k.abi}, Soft-RoCE rxe0 on each ==")


def dsm(args, k):
    """SOR on the DSM, on both nodes at once."""
    from . import suite_kdsm
    from .cluster import Cluster
    workdir = _workdir("dsm")
    with Phase("build"):
        overlay = suite_kdsm.overlay_for(k, workdir)
    with Phase("boot 2-node cluster"), \
            Cluster(k, nodes=2, workdir=workdir, overlay=overlay, smp=2,
                    port_base=args.port_base) as c:
        n0, n1 = c.nodes
        _banner(c, k)
        for n in c.nodes:
            n.run_checked(" && ".join(f"insmod /kvlab/modules/{m}"
                                      for m in suite_kdsm.MODS))
        _keys(c.nodes, suite_kdsm.KDSM_KEY)
        create = suite_kdsm.create_cmd(c.nodes, n0, key=suite_kdsm.KDSM_KEY)
        _say(f"{create} --wait", "on each node")
        for n, o in suite_kdsm.form(c.nodes, key=suite_kdsm.KDSM_KEY):
            print(f"  {n.name}: {o.strip().splitlines()[0]}")
        cmd = f"/kvlab/bin/kdsm-sor --size {args.size} --iters {args.iters}"
        print()
        _say(cmd, "on both nodes at once")
        runs = suite_kdsm.spmd(c.nodes, cmd)
        for n, rc, out in runs:
            print(f"-- {n.name} (exit {rc})")
            print("\n".join(l for l in out.splitlines()
                            if not l.startswith("rc=")))
        print(f"\n-- {n0.name}: kdsmctl status --stats (excerpt)")
        st = n0.run("/kvlab/bin/kdsmctl status --stats").out
        print("\n".join(l for l in st.splitlines() if re.match(
            r"(state|node|read_faults|write_faults|msgs_tx|events_|"
            r"invalidations|rdma_write_bytes)", l)))
        for n in c.nodes:
            n.run("/kvlab/bin/kdsmctl delete; rmmod kdsm; rmmod kvmem; "
                  "rmmod kverbs", timeout=120)
        ok = all(rc == 0 for _, rc, _ in runs) and \
            "0 cells differ" in runs[0][2]
    print(f"\ndemo dsm: {'SOR on the DSM equals the sequential run' if ok else 'FAILED'}")
    return ok


def fcache(args, k):
    """A directory of the server's, mounted by the client and read."""
    from . import suite_kfcache as kf
    from .cluster import Cluster
    workdir = _workdir("fcache")
    with Phase("build"):
        overlay = _overlay(k, workdir, kf.MODS, ("tools/kfcache/kfcachectl",))
    with Phase("boot 2-node cluster"), \
            Cluster(k, nodes=2, workdir=workdir, overlay=overlay,
                    port_base=args.port_base) as c:
        srv, cli = c.nodes
        _banner(c, k)
        srv.run_checked("insmod /kvlab/modules/kverbs.ko && insmod "
                        "/kvlab/modules/kfcache_srv.ko && mkdir -p /srv/demo "
                        "&& echo \"hello from $(hostname)'s page cache\" > "
                        "/srv/demo/hello.txt && dd if=/dev/urandom "
                        "of=/srv/demo/data.bin bs=1M count=4 2>/dev/null")
        cli.run_checked("insmod /kvlab/modules/kverbs.ko && insmod "
                        "/kvlab/modules/kfcache.ko && mkdir -p /mnt/demo")
        _keys(c.nodes, kf.KFC_KEY)
        for cmd in (f"{kf.CTL} start {srv.ip}",
                    f"{kf.CTL} export demo /srv/demo", f"{kf.CTL} status"):
            _say(cmd, srv.name)
            print(srv.run_checked(cmd).out.rstrip())
        steps = [f"mount -t kfcache {srv.ip}:/demo /mnt/demo",
                 "ls -l /mnt/demo", "cat /mnt/demo/hello.txt",
                 "md5sum /mnt/demo/data.bin"]
        outs = []
        for cmd in steps:
            _say(cmd, cli.name)
            r = cli.run(cmd, timeout=120)
            outs.append(r)
            print(r.out.rstrip())
        want = srv.run("md5sum /srv/demo/data.bin").out.split()[:1]
        _say("md5sum /srv/demo/data.bin", srv.name)
        print(" ".join(want))
        st = srv.run(f"{kf.CTL} status --stats").out
        print(f"\n-- {srv.name}: kfcachectl status --stats (excerpt)")
        print("\n".join(l for l in st.splitlines()
                        if re.match(r"(clients|reads|pages|softirq) ", l)))
        cli.run("umount /mnt/demo; rmmod kfcache; rmmod kverbs", timeout=120)
        srv.run(f"{kf.CTL} stop; rmmod kfcache_srv; rmmod kverbs",
                timeout=120)
        ok = all(r.rc == 0 for r in outs) and "hello from" in outs[2].out \
            and outs[3].out.split()[:1] == want
    print(f"\ndemo fcache: {'the client read the server files, md5 equal' if ok else 'FAILED'}")
    return ok


def migrate(args, k):
    """A running process moved to the other node with kmigrate move."""
    from . import suite_kmigrate as km
    from .cluster import Cluster
    workdir = _workdir("migrate")
    with Phase("build"):
        overlay = _overlay(k, workdir, km.MODS,
                           ("tools/kmigrate/kmigrate",
                            "tools/kmigrate/apps/kmigrate-sum"))
    with Phase("boot 2-node cluster"), \
            Cluster(k, nodes=2, workdir=workdir, overlay=overlay,
                    mem_mb=768, port_base=args.port_base) as c:
        a, b = c.nodes
        _banner(c, k)
        for n in c.nodes:
            n.run_checked(" && ".join(f"insmod /kvlab/modules/{m}"
                                      for m in km.MODS) + " && mkdir -p "
                          "/etc/kverbs /var/log/kmigrate")
        _keys(c.nodes, km.KEY)
        for i, n in enumerate(c.nodes, 1):
            rule = (f"accept {c.nodes[2 - i].ip} user 0:0 exec "
                    f"{km.SUM}")
            n.run_checked(f"echo '{rule}' > /etc/kverbs/kmigrate-serve.conf")
            for cmd in (f"{km.CTL} start --addr {n.ip} --node {i}",
                        f"({km.CTL} serve --allow-root > /tmp/serve.out "
                        "2>&1 &)"):
                _say(cmd, n.name)
                n.run_checked(cmd)
        print(f"  {b.name}'s policy: "
              + b.run("cat /etc/kverbs/kmigrate-serve.conf").out.strip())
        cmd = f"{km.SUM} --mb 8 --wait-move"
        _say(f"{cmd} &", f"{a.name}: fills 8 MiB, sums it, waits to be moved")
        a.run(f"({cmd} > /tmp/sum.out 2>&1 &)")
        r = a.run("for i in $(seq 300); do grep -q before /tmp/sum.out && "
                  "break; sleep 0.2; done; cat /tmp/sum.out; pidof "
                  "kmigrate-sum", timeout=120)
        print(r.out.rstrip())
        pid = r.out.split()[-1] if r.out.split() else "?"
        mv = f"{km.CTL} move {pid} {b.ip}"
        _say(mv, a.name)
        r = a.run(mv, timeout=60)
        print(r.out.rstrip())
        log = b.run("for i in $(seq 600); do grep -qs 'kmigrate-sum: after' "
                    "/var/log/kmigrate/*.log && break; sleep 0.2; done; "
                    "cat /var/log/kmigrate/*.log", timeout=180).out
        print(f"-- {b.name}: the process's output after the move "
              "(/var/log/kmigrate)")
        print("\n".join(l for l in log.splitlines() if "kmigrate-sum" in l))
        before = km._sums(a.run("cat /tmp/sum.out").out).get(("before",
                                                              a.name))
        after = km._sums(log).get(("after", b.name))
        for n in c.nodes:
            n.run(f"kill $(pidof kmigrate) 2>/dev/null; {km.CTL} stop; "
                  "rmmod kmigrate; rmmod kvmem; rmmod kverbs", timeout=120)
        ok = bool(before and after and after[0] == before[0] and
                  after[2] == "1")
    print(f"\ndemo migrate: {'the process finished on ' + b.name + ' with its checksum' if ok else 'FAILED'}")
    return ok


def run(args, k):
    """The demos @args.what names; 0 if each showed what it should."""
    todo = WHAT if args.what == "all" else (args.what,)
    results = {w: globals()[w](args, k) for w in todo}
    print(f"\nconsole logs in {build_dir() / 'demo'}")
    return 0 if all(results.values()) else 1
