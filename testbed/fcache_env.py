"""Guest environment for the file-cache benchmark and tests: disks, NFS, fio.

Everything here goes into a per-run overlay (initramfs.build_overlay), never
into the base image that boots every suite:

- make_disk(): a raw ext4 image built on the host from a directory, without
  root mounts; Cluster(disks=[...]) gives it to a guest as /dev/vda.
- distro_modules(): the distro kernel's modules for virtio_blk + ext4, the
  NFS server (nfsd, rpcrdma) and the NFS client (nfs, nfsv4, rpcrdma),
  minus what the base image already loads; insmod_script() loads them.
- nfs_files(), fio_files(): rpc.nfsd, exportfs, rpc.mountd, mount.nfs(4)
  and fio with their libraries.  fio links every ioengine's library
  (ceph, gluster, pmem, nbd: 84 MB with ICU); those are replaced by stubs
  that abort if called, so psync, libaio and the other built-in engines
  work and the overlay stays small.
- Guest-side helpers taking a cluster Node: load_modules, mount_disk,
  nfs_server_start (NFSv4.2 only, no rpcbind; TCP 2049 and RDMA 20049),
  nfs_mount / nfs_umount (transport "rdma" or "tcp"), nfs_server_stop,
  drop_caches.  Each raises HarnessError with the guest's output.
- smoke(kernel): two guests, server with a disk, client mounting over RDMA
  and over TCP; md5sum and a short fio run on each.
  `python3 -m testbed.fcache_env_check [6.1 6.12]` runs it.

Typical use (one overlay for every node; each node loads its own sets):

    img = make_disk(workdir / "srv.img", src_dir, size_mb=256)
    ovl, mods = overlay(kernel, workdir / "overlay.cpio", files)
    with Cluster(kernel, 2, workdir, ovl, mem_mb=768,
                 disks=[img, None]) as c:
        srv, cli = c.nodes
        load_modules(srv, mods["disk"] + mods["server"])
        load_modules(cli, mods["client"])
        mount_disk(srv, "/export")
        nfs_server_start(srv, "/export")
        nfs_mount(cli, srv.ip, "/export", "/mnt", "rdma")
"""
import hashlib
import lzma
import os
import random
import re
import shutil
import time
from pathlib import Path

from .common import HarnessError, cache_dir, log, require_tool, run
from . import initramfs

DISK_MODULES = ["virtio_blk", "ext4"]
NFS_SERVER_MODULES = ["nfsd", "rpcrdma"]
NFS_CLIENT_MODULES = ["nfs", "nfsv4", "rpcrdma"]
MODULE_SETS = {"disk": DISK_MODULES, "server": NFS_SERVER_MODULES,
               "client": NFS_CLIENT_MODULES}
# may fail to load without harm: crc32c-intel needs SSE4.2, which QEMU's
# default TCG CPU lacks (crc32c_generic, loaded next, provides crc32c)
OPTIONAL_MODULES = {"crc32c_intel"}
GUEST_MODDIR = "/kvlab/fcache/modules"

NFS_SERVER_TOOLS = ["/usr/sbin/rpc.nfsd", "/usr/sbin/exportfs",
                    "/usr/sbin/rpc.mountd"]
MOUNT_NFS = "/sbin/mount.nfs"
# libtirpc reads /etc/netconfig for its transports (rpc.mountd, mount.nfs);
# mount.nfs looks proto=tcp up in /etc/protocols (netbase)
NFS_CONFIG = ["/etc/netconfig", "/etc/protocols"]
RDMA_PORT = 20049
NFS_VERS = "4.2"
# The benchmark reads only: a read-only export is the default.
EXPORT_OPTS = "insecure,no_root_squash,fsid=1,no_subtree_check"
FIO = "/usr/bin/fio"
# ioengine libraries fio links but the guests never use: stubbed
FIO_STUBBED = ("libgfapi.so.0", "libnbd.so.0", "librados.so.2",
               "librbd.so.1", "libpmemblk.so.1", "libpmem.so.1")


# ------------------------------------------------------------ host side
def make_disk(path, src_dir=None, size_mb=64, label="fcache"):
    """Build a raw ext4 image of @size_mb at @path holding a copy of
    @src_dir (mke2fs -d; no mount, no root needed).  Inode tables and the
    journal are initialised now, so the guest runs no ext4lazyinit in the
    background of a measurement."""
    mkfs = require_tool("mkfs.ext4", "e2fsprogs")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    with open(path, "wb") as f:
        f.truncate(size_mb << 20)
    cmd = [mkfs, "-F", "-q", "-L", label,
           "-E", "lazy_itable_init=0,lazy_journal_init=0"]
    if src_dir is not None:
        cmd += ["-d", str(src_dir)]
    p = run(cmd + [str(path), f"{size_mb}M"], check=False, timeout=300)
    if p.returncode != 0:
        raise HarnessError(f"mkfs.ext4 of {path} ({size_mb} MiB) from "
                           f"{src_dir} failed:\n{p.stdout.strip()[-2000:]}",
                           "make size_mb larger than the directory "
                           "(mke2fs -d needs e2fsprogs >= 1.43)")
    return path


def _modprobe_closure(kernel, name):
    p = run(["modprobe", "-d", str(kernel.root), "-S", kernel.abi,
             "--show-depends", name], check=False)
    if p.returncode != 0 and "builtin" not in p.stdout:
        raise HarnessError(f"module {name} not found in {kernel.abi}: "
                           f"{p.stdout.strip()}",
                           "check the kernel's config; the module sets are "
                           "in testbed/fcache_env.py")
    return [m.group(1) for line in p.stdout.splitlines()
            if (m := re.match(r"insmod (\S+)", line))]


def _plain_ko(kernel, src):
    """A module busybox insmod can load: .ko.xz/.ko.zst decompressed once
    into the cache."""
    src = Path(src)
    name = re.sub(r"\.ko\.(xz|zst)$", ".ko", src.name)
    if name == src.name:
        return src
    out = cache_dir() / "fcache" / kernel.abi / "modules" / name
    if out.exists() and out.stat().st_mtime_ns >= src.stat().st_mtime_ns:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    if src.suffix == ".xz":
        tmp.write_bytes(lzma.decompress(src.read_bytes()))
    else:
        run(["zstd", "-q", "-d", "-f", "-o", str(tmp), str(src)])
    os.replace(tmp, out)
    return out


def distro_modules(kernel, names):
    """(files, guest paths): the distro modules @names of @kernel with
    their dependencies in load order, except those the base image already
    loads (initramfs._module_closure) and built-in ones.  files maps guest
    path to host path for build_overlay(); the list is the load order for
    insmod_script()/load_modules()."""
    base = set(initramfs._module_closure(kernel))
    files, order = {}, []
    for name in names:
        for path in _modprobe_closure(kernel, name):
            if path in base:
                continue
            ko = _plain_ko(kernel, path)
            guest = f"{GUEST_MODDIR}/{ko.name}"
            if guest not in files:
                files[guest] = ko
                order.append(guest)
    return files, order


def _modname(guest_path):
    return Path(guest_path).name[:-len(".ko")].replace("-", "_")


def insmod_script(guest_paths):
    """Guest shell snippet loading @guest_paths in order, skipping loaded
    ones; prints 'fcache: insmod X failed' for each failure."""
    lines = []
    for g in guest_paths:
        lines.append(f"[ -d /sys/module/{_modname(g)} ] || insmod {g} || "
                     f"echo 'fcache: insmod {g} failed'")
    return "\n".join(lines) + "\n"


def _elf_needed(path):
    p = run(["readelf", "-d", "-W", str(path)])
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", p.stdout)


def _ldd_map(path):
    p = run(["ldd", str(path)])
    return dict(re.findall(r"^\s*(\S+)\s+=>\s+(/\S+)", p.stdout, re.M))


def _dynsyms(path, undefined):
    """{name: version or None} of the dynamic FUNC/NOTYPE/OBJECT symbols
    @path defines (undefined=False) or imports (undefined=True)."""
    p = run(["readelf", "--dyn-syms", "-W", str(path)])
    syms = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].endswith(":") or f[3] not in (
                "FUNC", "OBJECT", "IFUNC"):
            continue
        if (f[6] == "UND") != undefined:
            continue
        name, _, ver = f[7].partition("@")
        syms[name] = ver.lstrip("@") or None
    return syms


def _fio_stubs(fio, libs):
    """Stub shared objects for fio's unused ioengine libraries: same
    soname, same symbol versions, every function fio imports from them
    aborting.  Cached by fio's identity; needs gcc (build-essential)."""
    gcc = require_tool("gcc", "build-essential")
    st = os.stat(fio)
    key = hashlib.sha256(f"{fio} {st.st_size} {st.st_mtime_ns} "
                         f"{sorted(libs)}".encode()).hexdigest()[:12]
    out = cache_dir() / "fcache" / f"fio-stubs-{key}"
    if (out / ".done").exists():
        return {so: out / so for so in libs}
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    wanted = _dynsyms(fio, undefined=True)
    for so, real in libs.items():
        have = _dynsyms(real, undefined=False)
        mine = {n: v for n, v in wanted.items() if n in have}
        if not mine:
            raise HarnessError(f"fio imports nothing from {so} ({real})",
                               "update FIO_STUBBED in testbed/fcache_env.py")
        src = out / f"{so}.c"
        src.write_text(
            "#include <stdlib.h>\n#include <unistd.h>\n"
            "static void stub(void) { static const char m[] = \"fio: "
            f"{so} is a kvlab stub: use another ioengine\\n\"; "
            "write(2, m, sizeof(m) - 1); abort(); }\n" +
            "".join(f"void {n}(void) {{ stub(); }}\n" for n in sorted(mine)))
        cmd = [gcc, "-shared", "-fPIC", "-O1", f"-Wl,-soname,{so}",
               "-o", str(out / so), str(src)]
        versions = sorted({v for v in mine.values() if v})
        if versions:
            # unversioned imports bind to any default version
            first = {v: [n for n, w in mine.items()
                         if w == v or (w is None and v == versions[0])]
                     for v in versions}
            vs = out / f"{so}.map"
            vs.write_text("".join(
                f"{v} {{ global: {'; '.join(sorted(first[v]))}; }};\n"
                for v in versions))
            cmd.append(f"-Wl,--version-script={vs}")
        run(cmd)
    (out / ".done").write_text("")
    return {so: out / so for so in libs}


def fio_files(files=None):
    """fio at /usr/bin/fio with its libraries, the unused ioengines'
    libraries stubbed (FIO_STUBBED)."""
    files = {} if files is None else files
    fio = require_tool("fio", "fio")
    found = _ldd_map(fio)
    stubbed = {so: found[so] for so in FIO_STUBBED if so in found}
    stubs = _fio_stubs(fio, stubbed)
    files["/usr/bin/fio"] = Path(fio)
    for so in _elf_needed(fio):
        if so in stubs:
            files[found[so]] = stubs[so]
        elif so in found:
            files.setdefault(found[so], Path(found[so]))
            for lib in initramfs._ldd(found[so]):
                files.setdefault(lib, Path(lib))
    return files


def nfs_files(files=None):
    """NFS server and client user space (rpc.nfsd, exportfs, rpc.mountd,
    mount.nfs, mount.nfs4) with libraries and /etc/netconfig."""
    files = {} if files is None else files
    require_tool("rpc.nfsd", "nfs-kernel-server")
    require_tool("mount.nfs", "nfs-common")
    for tool in NFS_SERVER_TOOLS:
        initramfs.add_binary(files, tool, "/usr/sbin")
    initramfs.add_binary(files, MOUNT_NFS, "/sbin")
    files["/sbin/mount.nfs4"] = Path(MOUNT_NFS)    # a copy: argv[0] says v4
    for conf in NFS_CONFIG:
        files[conf] = Path(conf)
    return files


def overlay(kernel, out, files=None, sets=("disk", "server", "client"),
            nfs=True, fio=True):
    """Build one overlay for every node of a cluster: @files (guest path:
    host path, e.g. the benchmark's own tools), the module @sets, NFS user
    space and fio.  Return (overlay path, {set name: guest module paths})
    for load_modules()."""
    files = dict(files or {})
    mods = {}
    for s in sets:
        f, mods[s] = distro_modules(kernel, MODULE_SETS[s])
        files.update(f)
    if nfs:
        nfs_files(files)
    if fio:
        fio_files(files)
    return initramfs.build_overlay(files, out), mods


# ----------------------------------------------------------- guest side
def _step(node, what, cmd, fix, timeout=120):
    r = node.run(cmd, timeout=timeout)
    if r.rc != 0:
        raise HarnessError(f"{node.name}: {what} failed (exit {r.rc}):\n"
                           f"$ {cmd.strip()}\n{r.out.strip()[-3000:]}", fix)
    return r.out


def load_modules(node, guest_paths, timeout=180):
    """insmod @guest_paths (from overlay()/distro_modules()) in order on
    @node; every one except OPTIONAL_MODULES must end up loaded."""
    r = node.run(insmod_script(guest_paths), timeout=timeout)
    missing = node.run(" ".join(
        f"[ -d /sys/module/{_modname(g)} ] || echo {_modname(g)};"
        for g in guest_paths if _modname(g) not in OPTIONAL_MODULES),
        timeout=60).out.split()
    if missing:
        dmesg = node.run("dmesg | tail -30", timeout=30).out
        raise HarnessError(f"{node.name}: modules not loaded: "
                           f"{' '.join(missing)}\n{r.out}\n{dmesg}",
                           "the overlay must come from the same kernel the "
                           "guest boots (fcache_env.overlay(kernel, ...))")
    return r.out


def mount_disk(node, mnt="/export", dev="/dev/vda", ro=True):
    """Mount the ext4 disk of @node (load the "disk" set first)."""
    _step(node, f"mounting {dev} on {mnt}",
          f"mkdir -p {mnt} && mount -t ext4 -o {'ro' if ro else 'rw'} "
          f"{dev} {mnt}",
          "is there a disk (Cluster(disks=...)) and were virtio_blk and "
          "ext4 loaded?", timeout=120)


NFS_CONF = """[nfsd]
threads={threads}
udp=n
tcp=y
vers3=n
vers4.0=n
vers4.1=n
vers4.2=y
[mountd]
manage-gids=n
"""


def nfs_server_start(node, export_dir, rw=False, threads=4, grace_s=10):
    """NFSv4.2 server on @node exporting @export_dir (already populated,
    e.g. mount_disk) to everyone, read-only unless @rw, over TCP 2049 and
    RDMA 20049.  Needs the "server" module set loaded.  No rpcbind: with
    v2/v3 off neither rpc.nfsd nor rpc.mountd registers with it;
    rpc.mountd still runs, answering the kernel's export upcalls.  The
    NFSv4 grace period (nfsv4gracetime, at least 10 s) is ended at once
    through /proc/fs/nfsd/v4_end_grace: there is no client state to
    reclaim, and the first OPEN would otherwise wait it out."""
    opts = ("rw" if rw else "ro") + "," + EXPORT_OPTS
    _step(node, "preparing the NFS server's files", f"""
mkdir -p /var/lib/nfs/v4recovery /run/rpc_pipefs /etc
: > /var/lib/nfs/etab; : > /var/lib/nfs/rmtab
echo '{export_dir} *({opts})' > /etc/exports
cat > /etc/nfs.conf <<'EOF'
{NFS_CONF.format(threads=threads)}EOF
grep -q ' /proc/fs/nfsd ' /proc/mounts || mount -t nfsd nfsd /proc/fs/nfsd
test -e /proc/fs/nfsd/portlist
""", "load the server modules first (load_modules(node, mods['server']))")
    # writable only while no nfsd runs
    _step(node, "setting the NFSv4 grace time",
          f"echo {grace_s} > /proc/fs/nfsd/nfsv4gracetime",
          "nfsd already runs: nfs_server_stop() first; the minimum is 10")
    _step(node, "exportfs -ra", "exportfs -ra && cat /var/lib/nfs/etab",
          "check /etc/exports and that the export directory exists")
    _step(node, "starting rpc.mountd",
          "rpc.mountd -N 2 -N 3 < /dev/null > /tmp/mountd.log 2>&1; rc=$?; "
          "cat /tmp/mountd.log; sleep 0.5; pidof rpc.mountd || exit 1; "
          "exit $rc", "see the output above")
    _step(node, "starting rpc.nfsd",
          f"rpc.nfsd --debug -p 2049 -N 3 -N 4.0 -N 4.1 -V 4.2 -U {threads} 2>&1",
          "see the output above and the guest's dmesg")
    _step(node, "adding the RDMA listener",
          f"echo rdma {RDMA_PORT} > /proc/fs/nfsd/portlist",
          "is rpcrdma loaded and rxe0 up?")
    _step(node, "ending the NFSv4 grace period",
          "echo Y > /proc/fs/nfsd/v4_end_grace",
          "v4_end_grace needs a running nfsd (kernel >= 4.20)")
    return _step(node, "reading the server state",
                 "for f in versions threads portlist nfsv4gracetime "
                 "nfsv4leasetime v4_end_grace; do "
                 "echo \"$f: $(cat /proc/fs/nfsd/$f | tr '\\n' ' ')\"; done",
                 "")


def nfs_mount(node, server_ip, export, mnt, transport="rdma", opts=""):
    """Mount @server_ip:@export on @mnt of @node with NFSv4.2 over
    @transport ("rdma": proto=rdma,port=20049; "tcp").  @opts: more mount
    options (comma-separated).  Needs the "client" module set loaded.
    Return the mount's line of /proc/mounts (its options as granted)."""
    if transport == "rdma":
        o = f"vers={NFS_VERS},proto=rdma,port={RDMA_PORT}"
    elif transport == "tcp":
        o = f"vers={NFS_VERS},proto=tcp"
    else:
        raise HarnessError(f"unknown NFS transport {transport!r}",
                           "use 'rdma' or 'tcp'")
    if opts:
        o += "," + opts
    out = _step(node, f"mounting {server_ip}:{export} over {transport}",
                f"mkdir -p {mnt} && /sbin/mount.nfs4 {server_ip}:{export} "
                f"{mnt} -o {o} 2>&1 && grep ' {mnt} ' /proc/mounts",
                "is the server started (nfs_server_start) and are the "
                "client modules (nfs, nfsv4, rpcrdma) loaded? see both "
                "guests' dmesg", timeout=180)
    line = out.strip().splitlines()[-1] if out.strip() else ""
    if f"proto={transport}" not in line:
        raise HarnessError(f"{node.name}: {mnt} is mounted, but not with "
                           f"proto={transport}: {line}")
    return line


def nfs_umount(node, mnt):
    _step(node, f"unmounting {mnt}", f"umount {mnt}",
          "a process still uses the mount?", timeout=120)


def nfs_server_stop(node):
    """Stop nfsd's threads and listeners, unexport, stop rpc.mountd."""
    _step(node, "stopping the NFS server",
          "rpc.nfsd 0 && exportfs -ua && "
          "{ p=$(pidof rpc.mountd); [ -z \"$p\" ] || kill $p; } && "
          "cat /proc/fs/nfsd/threads",
          "see the guest's dmesg", timeout=120)


def drop_caches(node):
    """Write back, then drop the page cache, dentries and inodes."""
    _step(node, "dropping caches", "sync && echo 3 > /proc/sys/vm/drop_caches",
          "", timeout=120)


# ---------------------------------------------------------------- smoke
def _fill(src, mib):
    """Deterministic test data: a small tree and one @mib MiB file."""
    src.mkdir(parents=True)
    rnd = random.Random(1)
    (src / "big.bin").write_bytes(rnd.randbytes(mib << 20))
    (src / "sub").mkdir()
    for i in range(8):
        (src / "sub" / f"f{i}.txt").write_text(f"file {i}\n" * (100 * i + 1))
    return hashlib.md5((src / "big.bin").read_bytes()).hexdigest()


def _fio_summary(out):
    m = re.search(r"read: IOPS=(\S+), BW=(\S+)", out)
    lat = re.search(r"^\s+clat \((\w+)\):.*avg=\s*([\d.]+)", out, re.M)
    return (f"IOPS={m.group(1).rstrip(',')} BW={m.group(2)}"
            + (f" clat avg={lat.group(2)} {lat.group(1)}" if lat else "")
            if m else "no fio summary")


def smoke(kernel, workdir=None, mem_mb=768, big_mib=16,
          transports=("rdma", "tcp")):
    """Boot 2 guests: node0 NFS server of an ext4 disk, node1 client.
    For each of @transports in turn (repeats allowed): mount, md5sum of
    a file (both guests' caches dropped), again (warm), fio randread 4k
    psync (client cache dropped), umount.  Return {step: seconds or
    text}."""
    from .cluster import Cluster
    from .common import build_dir
    workdir = Path(workdir or build_dir() / "testbed" /
                   f"fcache-smoke-{kernel.series}")
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    t = {}
    t0 = time.monotonic()
    want = _fill(workdir / "src", big_mib)
    img = make_disk(workdir / "node0.img", workdir / "src",
                    size_mb=big_mib + 48)
    ovl, mods = overlay(kernel, workdir / "overlay.cpio")
    t["host: disk + overlay"] = time.monotonic() - t0
    log(f"overlay {ovl.stat().st_size >> 10} KiB")

    def timed(name, fn, *a, **kw):
        s = time.monotonic()
        r = fn(*a, **kw)
        t[name] = time.monotonic() - s
        log(f"{name}: {t[name]:.1f}s")
        return r

    s = time.monotonic()
    with Cluster(kernel, nodes=2, workdir=workdir, overlay=ovl,
                 mem_mb=mem_mb, boot_timeout=300,
                 disks=[img, None]) as c:
        t["boot"] = time.monotonic() - s
        srv, cli = c.nodes
        timed("server: load modules", load_modules, srv,
              mods["disk"] + mods["server"])
        timed("client: load modules", load_modules, cli, mods["client"])
        timed("server: mount disk", mount_disk, srv, "/export")
        t["server state"] = timed("server: start nfsd", nfs_server_start,
                                  srv, "/export")
        for i, proto in enumerate(transports):
            tr = f"{i + 1}.{proto}" if len(transports) > 2 else proto
            t[f"{tr}: mounted"] = timed(f"{tr}: mount", nfs_mount, cli,
                                        srv.ip, "/export", "/mnt", proto)
            drop_caches(srv)
            drop_caches(cli)
            r = timed(f"{tr}: md5sum {big_mib} MiB cold", cli.run_checked,
                      "md5sum /mnt/big.bin", timeout=600)
            if r.out.split()[0] != want:
                raise HarnessError(f"md5 over {tr}: {r.out} != {want}")
            timed(f"{tr}: md5sum warm", cli.run_checked,
                  "md5sum /mnt/big.bin", timeout=600)
            drop_caches(cli)
            r = timed(f"{tr}: fio", cli.run_checked,
                      "fio --name=r --rw=randread --bs=4k --size=8M "
                      "--runtime=5 --ioengine=psync "
                      "--readonly --filename=/mnt/big.bin 2>&1",
                      timeout=600)
            t[f"{tr}: fio result"] = _fio_summary(r.out)
            (workdir / f"fio-{tr}.txt").write_text(r.out)
            timed(f"{tr}: umount", nfs_umount, cli, "/mnt")
        timed("server: stop nfsd", nfs_server_stop, srv)
        (workdir / "server-dmesg.txt").write_text(
            srv.run("dmesg", timeout=60).out)
        (workdir / "client-dmesg.txt").write_text(
            cli.run("dmesg", timeout=60).out)
    t["total"] = time.monotonic() - t0
    return t
