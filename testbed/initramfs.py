"""Guest initramfs images: a cached base per kernel plus per-run overlays.

The base holds static busybox, the distro kernel's module closure for
virtio networking and Soft-RoCE, the rdma-core user tools with their
libraries, and /init, which brings up eth0 and rxe0 and then runs the
command agent on a virtio-serial port (protocol in testbed/cluster.py).
Overlays (our modules, our tools) are separate archives concatenated after
the base; the kernel unpacks them in order, later files overriding earlier.
"""
import hashlib
import lzma
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from .common import (HarnessError, build_dir, cache_dir, log,
                     require_tool, run)
from .cpio import make_cpio

# Load order matters; dependencies are added by modprobe --show-depends.
# crc32_generic first: rdma_rxe's ICRC needs a crc32 provider.
# sch_netem and tc: tests delay a guest's packets (suite_kdsm).
GUEST_MODULES = ["crc32_generic", "virtio_pci", "virtio_console",
                 "virtio_net", "udp_tunnel",
                 "ip6_udp_tunnel", "configfs", "ib_core", "ib_cm", "iw_cm",
                 "rdma_cm", "ib_uverbs", "rdma_ucm", "rdma_rxe", "sch_netem"]
GUEST_TOOLS = ["/usr/bin/rdma", "/usr/bin/rping", "/usr/bin/ibv_devices",
               "/usr/bin/ibv_devinfo", "/usr/bin/ibv_rc_pingpong",
               "/sbin/tc", "/usr/bin/keyctl"]
RXE_PROVIDER_GLOB = "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so"
RXE_DRIVER = "/etc/libibverbs.d/rxe.driver"
# dlopen()ed by glibc's pthread_exit/cancel, so ldd does not list it.
LIBGCC = "/lib/x86_64-linux-gnu/libgcc_s.so.1"

INIT = r"""#!/bin/sh
# kvlab guest init: modules, network, rxe, then the command agent.
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mkdir -p /proc /sys /dev /tmp /root /run
mount -t proc proc /proc
# Debug kernels boot with nosoftlockup (testbed/kunit/debug.config says
# why); the watchdog is armed here, before any module of ours loads.
grep -qw nosoftlockup /proc/cmdline && echo 1 > /proc/sys/kernel/soft_watchdog
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
mount -t configfs configfs /sys/kernel/config 2>/dev/null
for m in $(cat /etc/kvlab-modules); do
	insmod "$m" || echo "kvlab-init: insmod $m failed"
done
mount -t configfs configfs /sys/kernel/config 2>/dev/null
NODE=0; IP=
for a in $(cat /proc/cmdline); do
	case "$a" in
	kvlab.node=*) NODE=${a#kvlab.node=} ;;
	kvlab.ip=*) IP=${a#kvlab.ip=} ;;
	esac
done
hostname node$NODE
ip link set lo up
ip link set eth0 up
[ -n "$IP" ] && ip addr add "$IP" dev eth0
RXE=fail
rdma link add rxe0 type rxe netdev eth0 && RXE=ok
echo "kvlab-init: node $NODE ip $IP rxe=$RXE"
exec /bin/kvlab-agent "$NODE" "$RXE"
"""

AGENT = r"""#!/bin/sh
# Command agent on a virtio-serial port (no tty line discipline, no
# per-byte UART emulation that can drop bytes under load).
# In: "RUN <id> <base64 script>".  Out: "@@READY <node> <release>
# rxe=<ok|fail>" every second until the first command, then per command
# "@@BEGIN <id>", base64 output, "@@END <id> <rc>".
NODE=$1; RXE=$2
PORT=
for i in $(seq 100); do
	for p in /sys/class/virtio-ports/*; do
		[ "$(cat $p/name 2>/dev/null)" = kvlab.agent ] && PORT=/dev/${p##*/}
	done
	[ -n "$PORT" ] && [ -e "$PORT" ] && break
	sleep 0.1
done
[ -n "$PORT" ] || { echo "kvlab-agent: no virtio port kvlab.agent"; exit 1; }
exec 3<>"$PORT"
REL=$(uname -r)
# READY repeats until the first command so a host that connects late still
# sees it; the loop is reaped before any reply so its lines never land
# inside a reply's base64 body.
( while :; do echo "@@READY $NODE $REL rxe=$RXE" >&3; sleep 1; done ) &
BEACON=$!
while read -r cmd id data <&3; do
	[ "$cmd" = RUN ] || continue
	if [ -n "$BEACON" ]; then
		kill $BEACON; wait $BEACON 2>/dev/null; BEACON=
	fi
	echo "$data" | base64 -d > /tmp/.cmd.$id
	# fd 3 closed: background jobs a script leaves behind must not write
	# into the protocol stream.
	( cd /root && sh /tmp/.cmd.$id ) > /tmp/.out.$id 2>&1 < /dev/null 3>&-
	rc=$?
	{ echo "@@BEGIN $id"; base64 < /tmp/.out.$id; echo "@@END $id $rc"; } >&3
	rm -f /tmp/.cmd.$id /tmp/.out.$id
done
"""


def _ldd(path):
    """Libraries (absolute paths) a dynamic ELF needs, loader included."""
    p = run(["ldd", str(path)], check=False)
    if "not a dynamic executable" in p.stdout:
        return []
    libs = []
    for line in p.stdout.splitlines():
        m = re.search(r"=>\s+(/\S+)", line) or re.match(r"\s*(/\S+)", line)
        if m:
            libs.append(m.group(1))
        elif "not found" in line:
            raise HarnessError(f"{path}: library {line.split()[0]} not found",
                               "run ./kvlab setup")
    return libs


def add_binary(files, host_path, guest_dir="/kvlab/bin"):
    """Add an executable and every library it links to `files`."""
    host_path = Path(host_path)
    files[f"{guest_dir}/{host_path.name}"] = host_path
    for lib in _ldd(host_path):
        files.setdefault(lib, Path(lib))
    return files


def _is_our_program(path):
    """An executable ELF the harness built (meson's build tree), not a
    distro file (already stripped) and not a kernel module."""
    path = Path(path)
    if path.suffix == ".ko" or \
            not path.is_relative_to(build_dir().resolve()):
        return False
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def _stage_files(staging, files):
    """Copy {guest path: host path} under @staging.  Our programs lose
    their DWARF (symbols stay, for backtraces): built debugoptimized they
    are about 16 times larger, and every byte of the initramfs is unpacked
    at each guest boot (kdsm's overlay: 56 MB, 23 s on the KASAN kernels
    under TCG; stripped, 15 MB)."""
    for guest, host in files.items():
        dst = staging / guest.lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        src = os.path.realpath(host)
        if _is_our_program(src):
            run(["objcopy", "--strip-debug", src, str(dst)])
        else:
            shutil.copy2(src, dst)


def build_overlay(files, out):
    """Pack {guest path: host path} into an archive appended at boot."""
    with tempfile.TemporaryDirectory(prefix="kvlab-ovl-") as tmp:
        _stage_files(Path(tmp), files)
        return make_cpio(tmp, out)


def _module_closure(kernel):
    """Module files in load order, from modprobe --show-depends."""
    if getattr(kernel, "builtin_modules", False):
        return []
    order = []
    for mod in GUEST_MODULES:
        p = run(["modprobe", "-d", str(kernel.root), "-S", kernel.abi,
                 "--show-depends", mod], check=False)
        if p.returncode != 0 and "builtin" not in p.stdout:
            raise HarnessError(f"module {mod} not found in {kernel.abi}: "
                               f"{p.stdout.strip()}")
        for line in p.stdout.splitlines():
            m = re.match(r"insmod (\S+)", line)
            if m and m.group(1) not in order:
                order.append(m.group(1))
    return order


def _key(kernel):
    """Cache key over everything that goes into the base image: this file
    (init, agent, module list), the kernel build, and the host binaries."""
    h = hashlib.sha256()
    h.update(Path(__file__).read_bytes())
    # the archive format (compression, alignment) lives in cpio.py
    h.update((Path(__file__).parent / "cpio.py").read_bytes())
    h.update(kernel.abi.encode())
    h.update(str(getattr(kernel, "version", "")).encode())
    inputs = GUEST_TOOLS + ["/bin/busybox", LIBGCC] + \
        sorted(map(str, Path("/").glob(RXE_PROVIDER_GLOB.lstrip("/"))))
    for t in inputs:
        st = os.stat(t)
        h.update(f"{t} {st.st_size} {st.st_mtime_ns}".encode())
    return h.hexdigest()[:12]


def base_image(kernel):
    """The cached base initramfs of `kernel`."""
    require_tool("busybox", "busybox-static")
    out = cache_dir() / "initramfs" / f"{kernel.abi}-{_key(kernel)}.cpio"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    log(f"building base initramfs for {kernel.abi}")
    with tempfile.TemporaryDirectory(prefix="kvlab-base-") as tmp:
        st = Path(tmp)
        for d in ("bin", "sbin", "etc", "proc", "sys", "dev", "tmp", "root",
                  "lib/modules"):
            (st / d).mkdir(parents=True, exist_ok=True)
        shutil.copy2("/bin/busybox", st / "bin" / "busybox")
        (st / "bin" / "sh").symlink_to("busybox")
        names = []
        for i, path in enumerate(_module_closure(kernel)):
            src = Path(path)
            name = src.name.replace(".ko.xz", ".ko").replace(".ko.zst", ".ko")
            dst = st / "lib" / "modules" / f"{i:02d}-{name}"
            if src.suffix == ".xz":
                dst.write_bytes(lzma.decompress(src.read_bytes()))
            elif src.suffix == ".zst":
                run(["zstd", "-q", "-d", "-f", "-o", str(dst), str(src)])
            else:
                shutil.copy2(src, dst)
            names.append(f"/lib/modules/{dst.name}")
        (st / "etc" / "kvlab-modules").write_text("\n".join(names) + "\n")
        files = {}
        for tool in GUEST_TOOLS:
            add_binary(files, tool, "/usr/bin")
        providers = sorted(Path("/").glob(RXE_PROVIDER_GLOB.lstrip("/")))
        if not providers:
            raise HarnessError("no rxe provider library for libibverbs",
                               "apt-get install ibverbs-providers")
        for prov in providers:
            add_binary(files, prov, str(prov.parent))
        files[RXE_DRIVER] = Path(RXE_DRIVER)
        files[LIBGCC] = Path(LIBGCC)
        _stage_files(st, files)
        for name, text in (("init", INIT), ("bin/kvlab-agent", AGENT)):
            p = st / name
            p.write_text(text)
            p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP |
                    stat.S_IXOTH)
        make_cpio(st, out)
    return out
