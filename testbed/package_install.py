"""kverbs' packages installed as an operator installs them (issue 28, item
1): in a clean Debian 12 chroot made by mmdebstrap with the kernel's
headers and dkms, `apt-get install ./kverbs-*.deb`; DKMS builds the
modules for the guests' kernel there; then two guests run the kping
sample from what was installed alone (the modules DKMS built, the
packaged kvping).  The base chroot is cached as a tarball (about 60 s to
make); each run unpacks a fresh one.

What this does not show: the systemd units starting and stopping (the
guests have no systemd; the package suite verifies the units)."""
import shutil
import subprocess
from pathlib import Path

from .common import HarnessError, build_dir, cache_dir, log, require_tool, run
from . import dkms, initramfs

MIRROR = "http://deb.debian.org/debian"
SOURCES = (f"deb {MIRROR} bookworm main",
           f"deb {MIRROR} bookworm-updates main",
           "deb http://deb.debian.org/debian-security bookworm-security main")
PORT = 18515             # kping's default port
ROUND_TRIPS = 200


def _base(abi):
    """The cached base chroot for @abi: apt, dkms and the kernel's
    headers, nothing of ours."""
    tar = cache_dir() / "chroot" / f"bookworm-{abi}.tar.zst"
    if tar.exists():
        return tar
    require_tool("mmdebstrap", "mmdebstrap")
    tar.parent.mkdir(parents=True, exist_ok=True)
    # mmdebstrap picks the format by the name's suffixes: keep .tar.zst
    part = tar.with_name(f"bookworm-{abi}.part.tar.zst")
    part.unlink(missing_ok=True)
    log(f"making the base chroot {tar.name} (mmdebstrap, about a minute)")
    run(["mmdebstrap", "--variant=apt", "--mode=root",
         f"--include=dkms,linux-headers-{abi},kmod", "bookworm",
         str(part)] + list(SOURCES), timeout=1800)
    part.rename(tar)
    return tar


def _remove(root):
    """Remove @root, refusing if anything is mounted under it (a bind of
    the host's /dev or /sys would take the host's files with it)."""
    if not root.exists():
        return
    mounted = [l.split()[4] for l in
               Path("/proc/self/mountinfo").read_text().splitlines()
               if l.split()[4] == str(root) or
               l.split()[4].startswith(str(root) + "/")]
    if mounted:
        raise HarnessError(f"mounts under {root}: {mounted}",
                           "unmount them (umount -R), then run again")
    run(["rm", "-rf", "--one-file-system", str(root)], timeout=600)


class Chroot:
    """A fresh chroot from the base tarball.  Each command runs in a mount
    namespace of its own (unshare), where /proc, /dev and /sys are mounted
    for it and go with it: nothing is mounted on the host, so nothing can
    be left mounted or propagate to the host's own mounts."""

    def __init__(self, abi, where):
        self.abi, self.root = abi, where

    def __enter__(self):
        _remove(self.root)
        self.root.mkdir(parents=True)
        run(["tar", "--zstd", "-xf", str(_base(self.abi)), "-C",
             str(self.root)], timeout=600)
        shutil.copy2("/etc/resolv.conf", self.root / "etc/resolv.conf")
        return self

    def __exit__(self, *exc):
        _remove(self.root)

    def run(self, cmd, timeout=1800):
        """@cmd (a shell line) in the chroot: (status, output); a command
        that outlives @timeout is status 124."""
        require_tool("unshare", "util-linux")
        r = str(self.root)
        inner = (f"mount -t proc proc {r}/proc && "
                 f"mount --rbind /dev {r}/dev && mount --make-rslave {r}/dev && "
                 f"mount --rbind /sys {r}/sys && mount --make-rslave {r}/sys && "
                 f'exec chroot {r} /bin/sh -c "$0"')
        try:
            p = subprocess.run(["unshare", "--mount", "--propagation",
                                "private", "sh", "-c", inner, cmd],
                               capture_output=True, text=True, timeout=timeout,
                               env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                    "DEBIAN_FRONTEND": "noninteractive",
                                    "LC_ALL": "C"})
        except subprocess.TimeoutExpired as e:
            return 124, f"timed out after {timeout} s\n{e.output or ''}"
        return p.returncode, p.stdout + p.stderr


def install_checks(res, name, debs, kernel):
    """Install @debs in a clean chroot and run kping from the result."""
    abi, ver = kernel.abi, dkms.version()
    ch = Chroot(abi, build_dir() / "package" / "chroot")
    try:
        ch.__enter__()
    except HarnessError as e:
        res.add(name, "a clean Debian 12 chroot (mmdebstrap) with dkms and "
                f"the headers of {abi}", False, e)
        return
    try:
        (ch.root / "tmp/debs").mkdir()
        for d in debs.values():
            shutil.copy2(d, ch.root / "tmp/debs" / d.name)
        rc, out = ch.run("apt-get update -q && apt-get install -y "
                         "--no-install-recommends /tmp/debs/*.deb")
        if not res.check(name, "apt-get install ./kverbs-dkms ./kverbs-tools "
                         "./libkverbs-dev in a clean Debian 12 chroot",
                         rc == 0, out[-3000:]):
            return
        # dh_dkms' postinst builds for the newest kernel with headers (the
        # guests'); if not, as an operator would for another kernel
        rc, out = ch.run(f"dkms status kverbs/{ver} -k {abi} | grep -q "
                         f"installed || dkms install kverbs/{ver} -k {abi}; "
                         f"dkms status kverbs/{ver} -k {abi}")
        mods = {p.name.split(".ko")[0]: p for p in
                (ch.root / f"lib/modules/{abi}/updates/dkms").glob("*.ko*")}
        want = set(dkms.shipped_modules())
        res.check(name, f"DKMS builds and installs every module for {abi} "
                  "in the chroot", rc == 0 and "installed" in out and
                  want <= set(mods), f"{out[-2000:]}\nmodules: {sorted(mods)}"
                  f"\nwant: {sorted(want)}")
        rc, out = ch.run("getent group kverbs; ls /lib/udev/rules.d/ | "
                         "grep kverbs; kvping --version; ls "
                         "/etc/systemd/system/multi-user.target.wants/")
        res.check(name, "the installed system has the kverbs group, the udev "
                  "rule, the tools, and both units enabled (no systemd runs "
                  "in the chroot: deb-systemd-helper's links)",
                  out.startswith("kverbs:") and "kverbs-tools.rules" in out
                  and f"kvping (kverbs) {ver}" in out and
                  "kfcache-server.service" in out and
                  "kmigrate.service" in out, out)
        if not want <= set(mods):
            return
        _guest_run(res, name, kernel, mods, ch.root)
    finally:
        ch.__exit__(None, None, None)


def _guest_run(res, name, kernel, mods, root):
    from .cluster import Cluster
    workdir = build_dir() / "testbed" / name
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    files = {}
    for m in ("kverbs", "kping"):
        files[f"/kvlab/modules/{m}.ko"] = dkms.plain_ko(mods[m],
                                                        workdir / "modules")
    kvping = workdir / "kvping"
    shutil.copy2(root / "usr/bin/kvping", kvping)
    initramfs.add_binary(files, kvping)
    overlay = initramfs.build_overlay(files, workdir / "overlay.cpio")
    try:
        with Cluster(kernel, nodes=2, workdir=workdir, overlay=overlay) as c:
            n0, n1 = c.nodes
            r = n0.run("insmod /kvlab/modules/kverbs.ko && insmod "
                       f"/kvlab/modules/kping.ko port={PORT} node_id=1",
                       timeout=60)
            if not res.check(name, "node0: the installed kverbs and kping "
                             "load; kping listens", r.rc == 0, r.out):
                return
            r = n1.run(f"/kvlab/bin/kvping --server-addr {n0.ip} --port "
                       f"{PORT} --count {ROUND_TRIPS}", timeout=300)
            res.check(name, f"node1: the packaged kvping makes {ROUND_TRIPS} "
                      "round trips with the installed kping",
                      r.rc == 0 and f"{ROUND_TRIPS} round trips ok" in r.out,
                      r.out)
            r = n0.run("rmmod kping && rmmod kverbs && echo unloaded",
                       timeout=60)
            res.check(name, "node0: the installed modules unload",
                      "unloaded" in r.out, r.out)
        res.add(name, "guest consoles clean", True)
    except HarnessError as e:
        res.add(name, "guest run", False, e)
