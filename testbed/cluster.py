"""Virtual RDMA clusters: N QEMU (TCG) guests with Soft-RoCE between them.

Network: a private L2 segment carried over host loopback only.  Two nodes
use a pair of QEMU UDP socket netdevs on 127.0.0.1; more use a vde_switch
on a unix socket.  Never QEMU user networking.

Each guest's ttyS0 (console) goes to <workdir>/nodeN.console.log, scanned
for kernel reports on exit.  A virtio-serial port carries the command agent
(testbed/initramfs.py): the host writes "RUN <id> <base64 script>" and reads
"@@BEGIN <id>", base64 output, "@@END <id> <rc>".

Every wait is bounded; no QEMU or switch outlives the Cluster, whatever
happens inside the with-block.
"""
import base64
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from .common import (HarnessError, log, reap, require_tool, spawn,
                     trap_signals, untrap_signals)
from . import console, initramfs

# No guest outlives the harness: QEMU and vde_switch are started with
# common.spawn() (process group, atexit kill, SIGTERM/SIGHUP trapped,
# `setpriv --pdeathsig KILL`) and __exit__ reaps them on any exception,
# Ctrl-C included.  pdeathsig fires when the *thread* that started them
# ends: enter and exit a Cluster in one thread.


class ConsoleError(HarnessError):
    pass


class Result:
    def __init__(self, rc, out):
        self.rc, self.out = rc, out

    def __repr__(self):
        return f"Result(rc={self.rc}, out={self.out[-200:]!r})"


def _sweep_sockdirs():
    """Remove socket directories of harness processes that were SIGKILLed
    (named kvlab-<pid>-*; nothing else can clean them up)."""
    for d in Path(tempfile.gettempdir()).glob("kvlab-*-*"):
        pid = d.name.split("-")[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(d, ignore_errors=True)


def _free_udp_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def _check_udp_ports(ports):
    for port in ports:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise HarnessError(
                f"UDP port 127.0.0.1:{port} is already in use ({e.strerror})",
                "pass --port-base with a free range, or stop the other "
                "run (another kvlab or QEMU) holding the port") from e
        finally:
            s.close()


class Node:
    def __init__(self, cluster, index):
        self.cluster = cluster
        self.index = index
        self.name = f"node{index}"
        self.node_id = index + 1
        self.ip = f"10.77.0.{index + 1}"
        self.console_path = cluster.workdir / f"{self.name}.console.log"
        self.sock_path = Path(cluster.sockdir) / f"{self.name}.agent"
        self.proc = None
        self.sock = None
        self.lines = []
        self.cond = threading.Condition()
        self.eof = False
        self.release = None
        self.rxe = None
        self._seq = 0
        self.expected = []      # (kind, first line, last line) of console

    def _console_lines(self):
        try:
            return len(self.console_path.read_text(
                errors="replace").splitlines())
        except FileNotFoundError:
            return 0

    @contextlib.contextmanager
    def expect_report(self, kind):
        """Within this block the test provokes a console report of @kind
        on purpose (a planted fault that proves a check can fail): such
        findings on these console lines do not fail the run; any other
        kind, or the same kind elsewhere, still does."""
        first = self._console_lines() + 1
        try:
            yield
        finally:
            time.sleep(0.5)         # let the console file catch up
            self.expected.append((kind, first, self._console_lines()))

    def unexpected(self, findings):
        return [f for f in findings if not any(
            f.kind == k and a <= f.lineno <= b for k, a, b in self.expected)]

    def _reader(self):
        buf = b""
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                with self.cond:
                    self.eof = True
                    self.cond.notify_all()
                return
            buf += data
            *done, buf = buf.split(b"\n")
            with self.cond:
                self.lines.extend(l.decode(errors="replace").rstrip("\r")
                                  for l in done)
                self.cond.notify_all()

    def _wait_line(self, pred, deadline):
        """Wait until a line matching pred arrives; consume up to it."""
        with self.cond:
            while True:
                for i, line in enumerate(self.lines):
                    if pred(line):
                        got = self.lines[:i + 1]
                        del self.lines[:i + 1]
                        return got
                if self.eof or (self.proc and self.proc.poll() is not None):
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(min(left, 0.5))

    def console_tail(self, n=50):
        try:
            text = self.console_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-n:])

    def run(self, cmd, timeout=60):
        """Run a shell script in the guest; return Result(rc, out)."""
        self._seq += 1
        cid = f"{self._seq}"
        payload = base64.b64encode(cmd.encode()).decode()
        try:
            self.sock.sendall(f"RUN {cid} {payload}\n".encode())
        except OSError as e:
            raise HarnessError(f"{self.name}: agent connection lost ({e})"
                               f"\n{self.console_tail()}") from e
        deadline = time.monotonic() + timeout
        got = self._wait_line(lambda l: l.startswith(f"@@END {cid} "),
                              deadline)
        if got is None:
            why = ("guest stopped" if self.proc.poll() is not None
                   else f"no answer within {timeout}s")
            raise HarnessError(
                f"{self.name}: command {cmd[:120]!r}: {why}\n"
                f"console tail ({self.console_path}):\n{self.console_tail()}")
        try:
            begin = got.index(f"@@BEGIN {cid}")
        except ValueError:
            raise HarnessError(f"{self.name}: garbled agent reply for "
                               f"{cmd[:80]!r}: {got[-5:]}")
        body = "".join(got[begin + 1:-1])
        out = base64.b64decode(body).decode(errors="replace")
        rc = int(got[-1].split()[2])
        return Result(rc, out)

    def kill(self):
        """Kill this guest's QEMU at once, as a node that dies would
        vanish: no disconnect, no reboot; its console stays readable."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def run_checked(self, cmd, timeout=60):
        r = self.run(cmd, timeout)
        if r.rc != 0:
            raise HarnessError(f"{self.name}: {cmd!r} exited {r.rc}:\n{r.out}")
        return r


# The emulated link's buffer: the host UDP socket QEMU reads a guest's
# frames from (-netdev socket,udp=) gets net.core.rmem_default, 208 KB on
# Debian, so a burst of RDMA writes larger than that (one 256 KB
# readahead) was dropped whenever the receiving guest's vCPU lagged, and
# RoCE's go-back-N resent all of it.  A RoCE fabric is lossless (PFC):
# the link should not drop what one would not.  The default is raised
# only while QEMU creates its sockets, and restored at once.
UDP_RMEM = 4 << 20
RMEM_DEFAULT = Path("/proc/sys/net/core/rmem_default")


@contextlib.contextmanager
def _udp_rmem(size=UDP_RMEM):
    try:
        old = int(RMEM_DEFAULT.read_text())
    except OSError:
        old = None
    raised = False
    if old is not None and old < size:
        try:
            RMEM_DEFAULT.write_text(f"{size}\n")
            raised = True
        except OSError as e:
            log(f"WARNING: cannot raise {RMEM_DEFAULT} to {size} ({e}): "
                "the guests' link drops bursts above "
                f"{old >> 10} KB")
    try:
        yield
    finally:
        if raised:
            RMEM_DEFAULT.write_text(f"{old}\n")


# The guests' NIC notifies by flags, not by event index.  With
# VIRTIO_RING_F_EVENT_IDX a guest kicks only when its avail index crosses
# the avail_event QEMU published, so one kick QEMU 7.2 (TCG) loses leaves
# the queue stalled for good: seen under host CPU load as a TX ring with
# 90 buffers posted past avail_event 8886 that QEMU never read, every
# packet of that guest lost from then on (ARP included), and rxe's
# destroy_qp waiting 50 s for the unsent skbs (the 6.1 CI run of
# 4b41d48).  With flags the guest kicks whenever QEMU has not suppressed
# notifications, so the next packet recovers from a lost kick.
NIC_OPTS = "event_idx=off"


class BootPanic(HarnessError):
    """A guest kernel panicked before its init reported ready."""


class Cluster:
    def __init__(self, kernel, nodes=2, workdir=None, overlay=None,
                 boot_timeout=120, port_base=None, mem_mb=512, smp=1,
                 append="", machine=None, disks=None):
        if nodes < 2:
            raise HarnessError(f"a cluster needs at least 2 nodes, not {nodes}")
        if disks is not None and len(disks) != nodes:
            raise HarnessError(f"disks names {len(disks)} images for "
                               f"{nodes} nodes", "give one path (or None) "
                               "per node")
        self.kernel = kernel
        self.n = nodes
        self.workdir = Path(workdir)
        self.overlay = overlay
        self.boot_timeout = boot_timeout
        self.port_base = port_base
        # KVLAB_GUEST_APPEND: extra kernel arguments for every guest of
        # every cluster, for a hunt (slub_debug=FZPU page_poison=1, ...).
        extra = os.environ.get("KVLAB_GUEST_APPEND", "").strip()
        self.mem_mb, self.smp = mem_mb, smp
        self.append = " ".join(a for a in (append, extra) if a)
        self.machine = machine
        # one raw image (or None) per node, the guest's /dev/vda
        # (testbed/fcache_env.py make_disk); O_DIRECT on the host file
        self.disks = disks
        self.nodes = []
        self.sockdir = None
        self.switch = None

    # -- setup ---------------------------------------------------------
    def _netdevs(self):
        if self.n == 2:
            if self.port_base is not None:
                ports = [self.port_base, self.port_base + 1]
                _check_udp_ports(ports)
            else:
                ports = _free_udp_ports(2)
            a, b = ports
            return [f"socket,id=n0,udp=127.0.0.1:{b},localaddr=127.0.0.1:{a}",
                    f"socket,id=n0,udp=127.0.0.1:{a},localaddr=127.0.0.1:{b}"]
        vde = require_tool("vde_switch", "vde2")
        sw = Path(self.sockdir) / "sw"
        # Not daemonised: the switch is our child, holds a pipe from us as
        # its management stdin and exits on its EOF, so it dies with the
        # harness however the harness ends.
        swlog = self.workdir / "vde_switch.log"
        with open(swlog, "wb") as f:
            self.switch = spawn([vde, "-s", str(sw)], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=f)
        deadline = time.monotonic() + 30
        while not (sw / "ctl").exists():
            if self.switch.poll() is not None or time.monotonic() > deadline:
                raise HarnessError(
                    f"vde_switch did not start: "
                    f"{swlog.read_text(errors='replace').strip()[-500:]}",
                    f"see {swlog}; try vde_switch -s /tmp/x by hand")
            time.sleep(0.05)
        return [f"vde,id=n0,sock={sw}"] * self.n

    def _initrd(self):
        base = initramfs.base_image(self.kernel)
        out = self.workdir / "initrd.cpio"
        with open(out, "wb") as f:
            f.write(base.read_bytes())
            if self.overlay:
                f.write(Path(self.overlay).read_bytes())
        return out

    def __enter__(self):
        # Every tool is checked before any work, so a missing one fails fast.
        qemu = require_tool("qemu-system-x86_64", "qemu-system-x86")
        if self.n > 2:
            require_tool("vde_switch", "vde2")
        require_tool("setpriv", "util-linux")
        self.workdir.mkdir(parents=True, exist_ok=True)
        # Unix socket paths are limited to 108 bytes, so sockets live in a
        # short private directory rather than under workdir.
        _sweep_sockdirs()
        for attempt in (1, 2):
            self.sockdir = tempfile.mkdtemp(prefix=f"kvlab-{os.getpid()}-")
            trap_signals()
            try:
                # only the two-guest UDP link: vde_switch's unix sockets
                # (3 guests or more) keep their defaults and timings
                with (_udp_rmem() if self.n == 2 else
                      contextlib.nullcontext()):
                    self._boot(qemu)
                return self
            except BootPanic as e:
                self._teardown()
                if attempt == 2:
                    raise
                self._keep_consoles(e)
            except BaseException:
                self._teardown()
                raise

    def _keep_consoles(self, e):
        """A distro kernel that panics before the guest's init reported
        ready ran none of our code (init loads only distro modules before
        @@READY) unless our init itself died ("Attempted to kill init",
        never retried), so the cluster is booted once more, loudly; the
        consoles of the failed boot are kept beside the new ones and not
        scanned by findings()."""
        for node in self.nodes:
            if node.console_path.exists():
                node.console_path.rename(
                    node.console_path.with_suffix(".boot1.log"))
        log(f"WARNING: {e.node} panicked while booting {self.kernel.abi}, "
            f"before init reported ready (no kverbs module loaded yet); "
            f"booting the cluster once more. First boot's consoles: "
            f"{self.workdir}/*.console.boot1.log")
        self.nodes = []
        self.switch = None
        self.sockdir = None

    def _boot(self, qemu):
        initrd = self._initrd()
        netdevs = self._netdevs()
        t0 = time.monotonic()
        for i in range(self.n):
            node = Node(self, i)
            self.nodes.append(node)
            append = (f"console=ttyS0 panic=-1 loglevel=7 "
                      f"kvlab.node={i} kvlab.ip={node.ip}/24 {self.append}")
            cmd = [qemu, "-accel", "tcg", "-nodefaults", "-no-reboot",
                   "-display", "none", "-m", str(self.mem_mb),
                   "-smp", str(self.smp),
                   *(["-machine", self.machine] if self.machine else []),
                   "-kernel", str(self.kernel.vmlinuz),
                   "-initrd", str(initrd), "-append", append,
                   "-chardev", f"file,id=con,path={node.console_path}",
                   "-serial", "chardev:con",
                   "-device", "virtio-serial-pci,id=vs",
                   "-chardev", f"socket,id=ag,path={node.sock_path},"
                   "server=on,wait=off",
                   "-device", "virtserialport,bus=vs.0,chardev=ag,"
                   "name=kvlab.agent",
                   "-netdev", netdevs[i],
                   "-device", f"virtio-net-pci,netdev=n0,{NIC_OPTS},"
                   f"mac=52:54:00:77:00:{i:02x}"]
            if self.disks and self.disks[i]:
                cmd += ["-drive", f"file={self.disks[i]},if=virtio,"
                        "format=raw,cache=none"]
            (self.workdir / f"{node.name}.qemu-cmd").write_text(
                " ".join(cmd) + "\n")
            node.proc = spawn(cmd, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.boot_timeout
        for node in self.nodes:
            self._connect(node, deadline)
        for node in self.nodes:
            got = node._wait_line(lambda l: l.startswith("@@READY"), deadline)
            if got is None:
                self._boot_failed(node)
            _, _, node.release, rxe = got[-1].split()[:4]
            node.rxe = rxe.split("=")[1]
            if node.rxe != "ok":
                raise HarnessError(f"{node.name}: 'rdma link add rxe0' failed "
                                   f"in the guest\n{node.console_tail()}")
        for node in self.nodes:
            self._check_cpus(node)
            self._check_watchdog(node)
        log(f"{self.n} x {self.kernel.abi} booted in "
            f"{time.monotonic() - t0:.1f}s")

    def _check_cpus(self, node):
        """A guest that silently runs on fewer vCPUs than -smp gave it
        turns every race test into a sequential one (a kernel without
        ACPI sees only the boot CPU of QEMU's MP table)."""
        r = node.run("grep -c ^processor /proc/cpuinfo", timeout=60)
        seen = r.out.strip()
        if r.rc != 0 or seen != str(self.smp):
            raise HarnessError(
                f"{node.name} ({self.kernel.abi}): the guest sees {seen!r} "
                f"CPUs, QEMU gave it -smp {self.smp}\n{node.console_tail()}",
                "the kernel needs ACPI (the MADT) or an MP table listing "
                "every CPU; see testbed/kunit/debug.config")

    def _check_watchdog(self, node):
        """A guest booted with nosoftlockup must have had the soft-lockup
        watchdog armed by its /init (testbed/initramfs.py), or lockups in
        the tests would go unreported."""
        if "nosoftlockup" not in self.append.split():
            return
        # watchdog (0 with nowatchdog) gates soft_watchdog; a threshold of
        # 0 turns the detector off too
        r = node.run("cd /proc/sys/kernel && cat watchdog soft_watchdog "
                     "watchdog_thresh", timeout=60)
        vals = r.out.split()
        if r.rc != 0 or len(vals) != 3 or vals[:2] != ["1", "1"] or \
                vals[2] == "0":
            raise HarnessError(
                f"{node.name} ({self.kernel.abi}): the soft-lockup watchdog "
                f"is off after boot (watchdog, soft_watchdog, "
                f"watchdog_thresh: {r.out.strip()!r})",
                "the guest's /init arms it (testbed/initramfs.py INIT); "
                "nowatchdog or watchdog_thresh=0 in KVLAB_GUEST_APPEND "
                "turn it off")

    def _connect(self, node, deadline):
        while time.monotonic() < deadline:
            if node.proc.poll() is not None:
                self._boot_failed(node)
            if node.sock_path.exists():
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(str(node.sock_path))
                    node.sock = s
                    threading.Thread(target=node._reader, daemon=True).start()
                    return
                except OSError:
                    s.close()
            time.sleep(0.05)
        self._boot_failed(node)

    def _boot_failed(self, node):
        if node.eof:    # the agent socket closes just before QEMU exits
            try:
                node.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        if node.proc.poll() is not None:
            out = node.proc.stdout.read().decode(errors="replace")
            cause = f"QEMU exited with status {node.proc.returncode}"
            if out.strip():
                cause += f": {out.strip()[-1500:]}"
        else:
            cause = f"did not boot within {self.boot_timeout}s"
        tail = node.console_tail(200)
        panicked = "Kernel panic" in tail
        if panicked:
            cause += " (the guest kernel panicked)"
        # our own init dying is never retried
        err = BootPanic if panicked and "Attempted to kill init" not in \
            tail else HarnessError
        e = err(
            f"{node.name} ({self.kernel.abi}): {cause}\n"
            f"console tail ({node.console_path}):\n{node.console_tail()}",
            "read the console log; a kernel panic or a missing module shows "
            "there. Raise boot_timeout only if the machine is just slow")
        e.node = node.name
        raise e

    # -- teardown --------------------------------------------------------
    def findings(self):
        found = []
        for node in self.nodes:
            found += node.unexpected(console.scan(node.console_path))
        return found

    def _teardown(self):
        # reboot, not poweroff: with -no-reboot QEMU exits at once, and
        # kernels without ACPI (the KUnit ones) cannot power off.
        for node in self.nodes:
            if node.sock and node.proc and node.proc.poll() is None:
                try:
                    node.sock.sendall(b"RUN 0 " + base64.b64encode(
                        b"sync; reboot -f") + b"\n")
                except OSError:
                    pass
        deadline = time.monotonic() + 10
        for node in self.nodes:
            if node.proc is None:       # Popen itself failed
                continue
            try:
                node.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            reap(node.proc)
            if node.sock:
                node.sock.close()
        if self.switch:
            reap(self.switch)
        if self.sockdir:
            shutil.rmtree(self.sockdir, ignore_errors=True)
        untrap_signals()

    def __exit__(self, et, ev, tb):
        self._teardown()
        found = self.findings()
        if found and et is None:
            raise ConsoleError("guest console shows kernel reports:\n" +
                               "\n".join(str(f) for f in found[:20]))
        if found:
            log("guest console shows kernel reports:\n" +
                "\n".join(str(f) for f in found[:20]))
        return False
