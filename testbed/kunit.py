"""KUnit runner: a small test kernel built from linux-source, and a QEMU boot
that insmods kverbs modules whose kunit_test_suite()s run at load.

Distro kernels lack CONFIG_KUNIT, so kernel() builds one from Debian's
/usr/src/linux-source-*.tar.xz (cached; a warm call takes seconds) and run()
boots it under TCG with a busybox initramfs, then parses the KTAP output.

    kk = kernel()                       # or kernel("debug"): KASAN, lockdep...
    # make -C kk.build M=<module dir>   # external modules build against it
    res = run(kk, [kverbs_ko, kverbs_kunit_ko], workdir)
    res.passed, res.failed, res.skipped, res.total, res.cases, res.findings
    res.ktap                            # ktap.Report: plans, for ktap.verify
    suite_names()                       # the suites kunit/*_kunit.c define
    guest_timeout(kk, 120)              # a bound scaled for kk's debug options

Guest facts the callers rely on:
  * modules are insmod'ed in the given order; a module's suites run while it
    loads (MODULE_STATE_COMING), i.e. BEFORE its own module_init: code under
    test must live in an earlier module (e.g. kverbs.ko) or not need init;
  * the command line has oops=panic, so an oops ends the run at once and the
    unfinished suite counts as "crashed" (KUnit 6.1 would wait 300 s);
  * the guest has no NIC (-nodefaults; never QEMU user networking).

CLI: python3 -m testbed.kunit build [--variant debug]
     python3 -m testbed.kunit run [--variant V] [--timeout S] MODULE.ko...
"""
import argparse
import fcntl
import hashlib
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import ktap
from .common import (REPO, HarnessError, Phase, cache_dir, log, reap,
                     require_tool, run as run_cmd, spawn)
from .console import scan
from .cpio import make_cpio

FRAGMENTS = Path(__file__).resolve().parent / "kunit"
# variant: its fragments, in order, and the linux-source it builds from.
# debug-6.12 is the debug kernel on 6.12 source: rxe runs its tasks in
# work items there (tasklets on 6.1), and the compat branches 6.12 selects
# run under KASAN and lockdep (issue 26).
VARIANTS = {"default": ["base.config"],
            "debug": ["base.config", "debug.config"],
            "debug-6.12": ["base.config", "debug.config"]}
SOURCE = {"default": "6.1", "debug": "6.1", "debug-6.12": "6.12"}
BUILD_TIMEOUT = 3600          # seconds for the whole `make bzImage modules`
DONE_STAMP = ".kvlab-complete"  # written last: its presence = usable build
SRC_STAMP = ".kvlab-extracted"  # written after a complete extraction

# Guest time bound of run() on the default kernel: boot, every suite and
# the /init epilogue, with a wide margin.  Other kernels: guest_timeout().
RUN_TIMEOUT = 300
# How much slower a TCG guest runs with each debug option, as a factor on
# the default kernel; factors of the options present multiply.  Upper
# bounds for timeouts (a hang costs the full bound), not predictions.
SLOWDOWN = [
    (("CONFIG_KASAN",), 2.0),           # shadow checks on every access
    (("CONFIG_LOCKDEP", "CONFIG_PROVE_LOCKING"), 1.5),
    (("CONFIG_DEBUG_KMEMLEAK",), 1.25),
]

# Lines the guest /init prints; run() keys off them.
MARK = "KVLAB-KUNIT"
RX_INSMOD = re.compile(MARK + r" insmod (OK|FAIL) ([^\s:]+)(?:: (.*))?")


class KunitKernel:
    def __init__(self, variant, build, bzimage, version):
        self.variant = variant
        self.build = Path(build)      # O= dir: make -C <build> M=<dir> works
        self.bzimage = Path(bzimage)
        self.version = version        # kernel release, e.g. "6.1.192"

    def __repr__(self):
        return (f"KunitKernel({self.variant!r}, {self.version}, "
                f"build={self.build})")


class KunitResult:
    def __init__(self, cases, log_path, findings, insmod_failures,
                 completed, timed_out, report):
        self.cases = cases                      # [(suite, case, status)]
        # The console's KTAP alone (`cases` adds insmod failures and an
        # unfinished guest): plans and skip reasons, for ktap.verify().
        self.ktap = report
        self.log = Path(log_path)
        self.findings = findings                # testbed.console Findings
        self.insmod_failures = insmod_failures  # [(module, error text)]
        self.completed = completed              # /init reached its end
        self.timed_out = timed_out
        counts = ktap.count(cases)
        self.passed = counts["pass"]
        self.failed = counts["fail"] + counts["crashed"]
        self.skipped = counts["skip"]
        self.total = len(cases)

    @property
    def ok(self):
        return self.failed == 0 and not self.findings

    def summary(self):
        s = (f"KUnit: {self.passed} passed, {self.failed} failed, "
             f"{self.skipped} skipped of {self.total}")
        if self.findings:
            s += f"; {len(self.findings)} console finding(s)"
        return s


# ---------------------------------------------------------------- kernel build

def _source_tarball(version="6.1"):
    """/usr/src/linux-source-<version>.tar.xz, from Debian's package."""
    p = Path(f"/usr/src/linux-source-{version}.tar.xz")
    if not p.exists():
        raise HarnessError(f"no kernel source tarball {p} (KUnit and debug "
                           "kernels are built from source)",
                           f"apt-get install linux-source-{version}"
                           + (" (bookworm-backports)" if version != "6.1"
                              else ""))
    return p


def _extract(tarball):
    """Extract once into cache_dir()/kunit/src-<X.Y>/; re-extract when the
    tarball changed (the stamp records name and size)."""
    ver = tarball.name[len("linux-source-"):-len(".tar.xz")]
    src = cache_dir() / "kunit" / f"src-{ver}"
    ident = f"{tarball.name} {tarball.stat().st_size}\n"
    stamp = src / SRC_STAMP
    if stamp.exists() and stamp.read_text() == ident:
        return src
    tmp = src.with_name(src.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with Phase(f"extract {tarball.name}"):
        run_cmd(["tar", "-xJf", str(tarball), "-C", str(tmp),
                 "--strip-components=1"], timeout=900)
    shutil.rmtree(src, ignore_errors=True)
    tmp.rename(src)
    (src / SRC_STAMP).write_text(ident)
    return src


def source_tree():
    """The unpacked 6.1 linux-source tree (extracted once, cached)."""
    return _extract(_source_tarball())


def _fragment(variant):
    """Concatenated fragment text for a variant."""
    if variant not in VARIANTS:
        raise HarnessError(f"unknown KUnit kernel variant {variant!r}",
                           f"use one of: {', '.join(VARIANTS)}")
    return "".join((FRAGMENTS / f).read_text() for f in VARIANTS[variant])


def _parse_config(text):
    """{CONFIG_X: value} with 'n' for '# CONFIG_X is not set'; later wins."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        m = re.fullmatch(r"(CONFIG_\w+)=(.*)", line)
        if m:
            out[m.group(1)] = m.group(2)
            continue
        m = re.fullmatch(r"# (CONFIG_\w+) is not set", line)
        if m:
            out[m.group(1)] = "n"
    return out


def _build_key(tarball, fragment):
    """Key of a build: source, compiler and the options the fragments set
    (not their comments, so editing a comment never forces a rebuild)."""
    gcc = run_cmd(["gcc", "--version"], timeout=30).stdout.splitlines()[0]
    opts = "\n".join(f"{k}={v}" for k, v in
                     sorted(_parse_config(fragment).items()))
    h = hashlib.sha256()
    for part in (tarball.name, str(tarball.stat().st_size), opts, gcc):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:12]


def _stream_make(cmd, logfile, timeout):
    """Run make, write all output to logfile, print a heartbeat every 30 s
    with the latest line; kill the whole process group on timeout."""
    t0 = time.monotonic()
    with open(logfile, "w") as lf:
        p = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                  text=True, errors="replace")
        expired = []
        timer = threading.Timer(timeout, lambda: (expired.append(1),
                                                  reap(p)))
        last_beat, last = t0, ""
        try:
            timer.start()
            for line in p.stdout:
                lf.write(line)
                if line.strip():
                    last = line.strip()
                now = time.monotonic()
                if now - last_beat >= 30:
                    log(f"  make {now - t0:4.0f}s: {last[:100]}")
                    last_beat = now
            rc = p.wait()
        finally:
            timer.cancel()
            reap(p)
    if expired:
        raise HarnessError(f"kernel build timed out after {timeout}s; "
                           f"log: {logfile}",
                           "check the log; the build takes ~7 min on 2 cores")
    if rc != 0:
        tail = "".join(Path(logfile).read_text(errors="replace")
                       .splitlines(True)[-40:])
        raise HarnessError(f"kernel build failed (exit {rc}); full log: "
                           f"{logfile}\n{tail}")


def kernel(variant="default"):
    """Return a built KUnit kernel for `variant`, building it if needed.

    Invariant: a build directory is used only when DONE_STAMP exists; it is
    written after bzImage, modules and Module.symvers all exist. The key covers
    everything that changes the output (tarball, fragments, gcc), so a stale
    build is never reused; a half-done one is resumed by make.
    """
    fragment = _fragment(variant)
    tarball = _source_tarball(SOURCE[variant])
    key = _build_key(tarball, fragment)
    build = cache_dir() / "kunit" / f"build-{variant}-{key}"
    if (build / DONE_STAMP).exists():       # fast path, no lock needed
        return _kernel_locked(variant, fragment, tarball, build)
    # One builder at a time per cache (extraction is shared by variants);
    # a second caller waits, then finds the stamp.
    (cache_dir() / "kunit").mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / "kunit" / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _kernel_locked(variant, fragment, tarball, build)


def _kernel_locked(variant, fragment, tarball, build):
    bzimage = build / "arch/x86/boot/bzImage"
    stamp = build / DONE_STAMP
    if stamp.exists():
        version = stamp.read_text().strip()
        log(f"KUnit kernel {variant} {version}: cached ({build})")
        return KunitKernel(variant, build, bzimage, version)

    for tool, pkg in (("gcc", "build-essential"), ("make", "build-essential"),
                      ("flex", "flex"), ("bison", "bison"), ("bc", "bc")):
        require_tool(tool, pkg)
    src = _extract(tarball)
    build.mkdir(parents=True, exist_ok=True)
    make = ["make", "-C", str(src), f"O={build}", "ARCH=x86_64"]

    # allnoconfig + KCONFIG_ALLCONFIG: everything not forced by the fragment
    # (or selected/defaulted by it) is off, which keeps the build small.
    frag_file = build / "kvlab-fragment.config"
    frag_file.write_text(fragment)
    with Phase(f"configure KUnit kernel ({variant})"):
        run_cmd(make + [f"KCONFIG_ALLCONFIG={frag_file}", "allnoconfig"],
                timeout=300)
        want = _parse_config(fragment)
        have = _parse_config((build / ".config").read_text())
        dropped = [f"{k}={v} (got {have.get(k, 'n')})"
                   for k, v in want.items() if have.get(k, "n") != v]
        if dropped:
            raise HarnessError(
                "KUnit kernel config: options from testbed/kunit/ did not "
                "survive allnoconfig (unmet dependencies?):\n  "
                + "\n  ".join(dropped),
                "add the missing dependencies to testbed/kunit/"
                f"{VARIANTS[variant][-1]} (see the Kconfig 'depends on')")

    jobs = os.cpu_count() or 1
    logfile = build / "kvlab-build.log"
    with Phase(f"build KUnit kernel ({variant}, -j{jobs}, log {logfile})"):
        _stream_make(make + [f"-j{jobs}", "bzImage", "modules"], logfile,
                     BUILD_TIMEOUT)
    version = (build / "include/config/kernel.release").read_text().strip()
    for need in (bzimage, build / "Module.symvers"):
        if not need.exists():
            raise HarnessError(f"kernel build finished but {need} is missing",
                               f"remove {build} and build again")
    stamp.write_text(version + "\n")
    log(f"KUnit kernel {variant} {version}: built ({build})")
    return KunitKernel(variant, build, bzimage, version)


def kernel_config(kk):
    """{CONFIG_X: value} of kk: its built .config, or (no build yet) the
    fragments of its variant, which name fewer options."""
    built = Path(kk.build) / ".config"
    if built.is_file():
        return _parse_config(built.read_text(errors="replace"))
    return _parse_config(_fragment(kk.variant))


def guest_timeout(kk, base):
    """Seconds to allow a guest of kernel kk for work that takes at most
    `base` seconds on the default KUnit kernel: base times the SLOWDOWN
    factor of every debug option kk's config enables.  Use it for every
    bound on a guest of this kernel (KUnit run, cluster boot_timeout,
    command timeouts) rather than a number fixed per variant."""
    config = kernel_config(kk)
    factor = 1.0
    for options, slower in SLOWDOWN:
        if any(config.get(o) == "y" for o in options):
            factor *= slower
    return int(math.ceil(base * factor))


def suite_names(src=None):
    """Names of the KUnit suites our sources define: the `.name = "..."`
    of every `struct kunit_suite X = {...}` in kunit/*_kunit.c (src).
    The runner expects exactly these, so a new suite is expected as soon
    as its file exists, with no list to update."""
    src = Path(src) if src is not None else REPO / "kunit"
    names = set()
    for path in sorted(src.glob("*_kunit.c")):
        text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", path.read_text(),
                      flags=re.S)
        for m in re.finditer(r"\bstruct\s+kunit_suite\s+(\w+)\s*=\s*\{"
                             r"(.*?)\n\s*\}\s*;", text, re.S):
            name = re.search(r"\.name\s*=\s*\"([^\"]+)\"", m.group(2))
            if not name:
                raise HarnessError(
                    f"{path.name}: struct kunit_suite {m.group(1)} has no "
                    "literal .name = \"...\"",
                    "give the suite a string-literal name: the harness "
                    "reads it to know which suites must run")
            names.add(name.group(1))
    return names


# ------------------------------------------------------------------ guest run

INIT = """#!/bin/sh
# Generated by testbed/kunit.py. Loads test modules in order; every insmod
# prints one marker line that run() parses; kunit suites run at load.
mount -t proc proc /proc
# booted with nosoftlockup (CMDLINE): the watchdog is armed here, before
# the first test module loads
[ -e /proc/sys/kernel/soft_watchdog ] && echo 1 > /proc/sys/kernel/soft_watchdog
echo "{mark} soft_watchdog $(cat /proc/sys/kernel/soft_watchdog 2>/dev/null || echo none)"
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug
mount -t configfs configfs /sys/kernel/config 2>/dev/null
echo "{mark} init start"
for m in {modules}; do
    if err=$(insmod /modules/$m 2>&1); then
        echo "{mark} insmod OK $m"
    else
        echo "{mark} insmod FAIL $m: $err"
    fi
done
if [ -e /sys/kernel/debug/kmemleak ]; then
    # debug variant (auto scan off): kmemleak reports an object only when
    # it is older than 5 s and its checksum was stable across two scans,
    # so one scan finds nothing new by design: scan, wait, scan again.
    sleep 6
    echo scan > /sys/kernel/debug/kmemleak
    sleep 6
    echo scan > /sys/kernel/debug/kmemleak
    cat /sys/kernel/debug/kmemleak
fi
echo "{mark} init done"
# reboot, not poweroff: this kernel has no ACPI, so poweroff would halt
# (or panic when init exits); QEMU's -no-reboot turns the reset into exit.
reboot -f
"""


def _is_static_elf(path):
    """True for a 64-bit little-endian ELF without PT_INTERP (no loader)."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return False
    phoff = int.from_bytes(data[0x20:0x28], "little")
    phentsize = int.from_bytes(data[0x36:0x38], "little")
    phnum = int.from_bytes(data[0x38:0x3a], "little")
    for i in range(phnum):
        off = phoff + i * phentsize
        if int.from_bytes(data[off:off + 4], "little") == 3:   # PT_INTERP
            return False
    return True


def _initramfs(modules, workdir):
    busybox = Path("/bin/busybox")
    if not busybox.exists():
        raise HarnessError("/bin/busybox not found",
                           "apt-get install busybox-static")
    if not _is_static_elf(busybox):
        raise HarnessError("/bin/busybox is not statically linked",
                           "apt-get install busybox-static")
    stage = workdir / "initramfs"
    shutil.rmtree(stage, ignore_errors=True)
    for d in ("bin", "sbin", "dev", "proc", "sys", "tmp", "modules"):
        (stage / d).mkdir(parents=True)
    shutil.copy2(busybox, stage / "bin/busybox")
    applets = run_cmd([str(busybox), "--list"], timeout=30).stdout.split()
    for a in applets:
        if a != "busybox":
            (stage / "bin" / a).symlink_to("busybox")
    names = []
    for m in modules:
        m = Path(m)
        if not m.is_file():
            raise HarnessError(f"module {m} does not exist",
                               "build the modules first")
        if m.name in names:
            raise HarnessError(f"two modules named {m.name}",
                               "module file names must be unique")
        names.append(m.name)
        shutil.copy2(m, stage / "modules" / m.name)
    init = stage / "init"
    init.write_text(INIT.format(mark=MARK, modules=" ".join(names)))
    init.chmod(0o755)
    # The kernel's built-in default initramfs provides /dev/console.
    return make_cpio(stage, workdir / "kunit-initramfs.cpio"), names


# oops=panic + panic=-1: an oops in a test ends the run at once (KUnit 6.1
# would otherwise wait 300 s for the dead test thread) and QEMU exits through
# -no-reboot; the unfinished suite is then reported as "crashed".
# nosoftlockup: see testbed/kunit/debug.config; INIT arms the watchdog.
CMDLINE = ("console=ttyS0 panic=-1 oops=panic kunit.enable=1 "
           "nosoftlockup")


def _boot(kk, initrd, console, timeout, append):
    """Boot under TCG; return True when QEMU had to be killed (timeout).
    QEMU never outlives this call, however it ends (timeout, exception,
    Ctrl-C, SIGTERM), nor the harness (common.spawn)."""
    qemu = require_tool("qemu-system-x86_64", "qemu-system-x86")
    cmd = [qemu, "-accel", "tcg", "-m", "1024", "-smp", "1", "-no-reboot",
           "-display", "none", "-nodefaults",   # nodefaults: no NIC at all
           "-serial", f"file:{console}", "-monitor", "none",
           "-kernel", str(kk.bzimage), "-initrd", str(initrd),
           "-append", f"{CMDLINE} {append}".strip()]
    p = spawn(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
              stderr=subprocess.STDOUT)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        log(f"KUnit guest still running after {timeout}s: killed")
        return True
    finally:
        reap(p)
    if p.returncode != 0:
        raise HarnessError(f"QEMU failed (exit {p.returncode}): "
                           f"{out.decode(errors='replace')[-2000:]}")
    return False


def _insmod_error(text, module, err):
    """busybox's message plus the kernel's own lines about the module
    (e.g. "kverbs: Unknown symbol ib_foo (err -2)"), which name the cause."""
    name = module[:-3] if module.endswith(".ko") else module
    rx = re.compile(r"^\[[\d. ]+\] (%s|%s): (.*)$" % (
        re.escape(name), re.escape(name.replace("-", "_"))), re.M)
    seen = []
    for m in rx.finditer(text):
        msg = m.group(2).strip()
        if "taints kernel" not in msg and msg not in seen:
            seen.append(msg)
    return "; ".join([err] + seen[:5])


def run(kk, modules, workdir, timeout=None, append=""):
    """Boot kk with `modules` insmod'ed in the given order; return the parsed
    KUnit result. Raises HarnessError if no KUnit test ran at all.
    timeout: seconds for the whole guest; default RUN_TIMEOUT scaled for
    kk's debug options (guest_timeout)."""
    if timeout is None:
        timeout = guest_timeout(kk, RUN_TIMEOUT)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    initrd, names = _initramfs(modules, workdir)
    console = workdir / "kunit.console.log"
    console.unlink(missing_ok=True)
    with Phase(f"KUnit guest ({kk.variant}, {len(names)} module(s))"):
        timed_out = _boot(kk, initrd, console, timeout, append)
    text = console.read_text(errors="replace") if console.exists() else ""

    insmod_failures, loaded = [], []
    for m in RX_INSMOD.finditer(text):
        if m.group(1) == "OK":
            loaded.append(m.group(2))
        else:
            insmod_failures.append((m.group(2), _insmod_error(
                text, m.group(2), (m.group(3) or "").strip())))
    completed = f"{MARK} init done" in text
    wd = re.search(rf"{re.escape(MARK)} soft_watchdog (\S+)", text)
    cases_extra = []
    # Every KUnit guest boots nosoftlockup (CMDLINE), so a kernel with the
    # detector relies on INIT to arm it.
    if completed and (wd is None or wd.group(1) != "1") and \
            kernel_config(kk).get("CONFIG_SOFTLOCKUP_DETECTOR") == "y":
        # INIT did not arm the watchdog: lockups in the tests would go
        # unreported
        cases_extra = [("kvlab", "soft-lockup watchdog armed by /init "
                        f"({wd.group(1) if wd else 'no marker'})", "fail")]
    report = ktap.report(text)
    cases = list(report.cases)
    ran = len(cases)        # KTAP entries (a crash-truncated suite counts)
    for mod, err in insmod_failures:
        log(f"insmod {mod} FAILED: {err}")
        cases.append(("insmod", mod, "fail"))
    cases += cases_extra
    if not completed:
        why = f"timed out after {timeout}s" if timed_out else \
            "guest stopped before /init finished (panic?)"
        log(f"KUnit guest did not finish: {why}")
        if not any(st == "crashed" for _s, _c, st in cases):
            # e.g. a crash between suites: nothing truncated, still a failure
            cases.append(("kvlab", f"guest run incomplete: {why}", "crashed"))

    if not ran:
        detail = "; ".join(f"insmod {m}: {e}" for m, e in insmod_failures)
        if not detail:
            detail = ("no module was loaded" if not loaded else
                      f"loaded {', '.join(loaded)} but they printed no KTAP "
                      "(no kunit_test_suite, or not built against this "
                      "kernel?)")
        if not completed:
            detail += ("; guest did not finish ("
                       + ("timeout" if timed_out else "crash") + ")")
        detail += "".join(f"\n  {f}" for f in scan(console)[:5])
        raise HarnessError(f"no KUnit test ran: {detail}; console: {console}",
                           "read the console log; check the modules were "
                           f"built with make -C {kk.build} M=<dir>")
    res = KunitResult(cases, console, scan(console), insmod_failures,
                      completed, timed_out, report)
    for s, c, st in cases:
        if st not in ("pass", "skip"):
            log(f"  {st.upper()}: {s}.{c}")
    for f in res.findings:
        log(f"  console: {f}")
    log(res.summary())
    return res


# ------------------------------------------------------------------------ CLI

def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m testbed.kunit")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build (or find cached) KUnit kernel")
    b.add_argument("--variant", default="default", choices=list(VARIANTS))
    r = sub.add_parser("run", help="boot the KUnit kernel with modules")
    r.add_argument("--variant", default="default", choices=list(VARIANTS))
    r.add_argument("--timeout", type=int, default=None,
                   help=f"guest seconds (default {RUN_TIMEOUT}, scaled for "
                   "the variant's debug options)")
    r.add_argument("--append", default="")
    r.add_argument("--workdir", type=Path, default=None)
    r.add_argument("modules", nargs="+", type=Path)
    a = ap.parse_args(argv)
    try:
        kk = kernel(a.variant)
        if a.cmd == "build":
            print(f"build={kk.build}\nbzimage={kk.bzimage}\n"
                  f"version={kk.version}")
            return 0
        from .common import build_dir
        workdir = a.workdir or build_dir() / "kunit"
        res = run(kk, a.modules, workdir, a.timeout, a.append)
        return 0 if res.ok else 1
    except HarnessError as e:
        print(f"kvlab: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
