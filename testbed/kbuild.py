"""Build the kverbs kernel modules against one kernel tree, out of the source
tree, with W=1, and fail on any compiler warning.

Kbuild builds external modules in place, so the kernel-side sources are
copied to the output directory first (only the files a module build reads:
the same set the DKMS package ships, plus kunit/ when asked).

Usable from meson: python3 testbed/kbuild.py --kdir DIR --out DIR [--kunit]
"""
import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from testbed.common import REPO, HarnessError, log, run  # noqa: E402
else:
    from .common import REPO, HarnessError, log, run

# What a module build needs; also what the DKMS source tree contains.
# What a DKMS build needs: scripts/dkms-src holds the one list.
KERNEL_SOURCES = subprocess.run(
    [str(REPO / "scripts" / "dkms-src"), "--list"], capture_output=True,
    text=True, check=True).stdout.split()
SHIPPED_MODULES = ["kverbs.ko", "kvmem.ko", "kping.ko", "krdma.ko", "kdsm.ko",
                   "kfcache_srv.ko", "kfcache.ko", "kmigrate.ko"]
KUNIT_MODULES = ["kverbs_kunit.ko", "kvmem_kunit.ko", "kdsm_kunit.ko",
                 "kfcache_kunit.ko", "kmigrate_kunit.ko",
                 "kvtest.ko", "kvleak.ko"]
BENCH_MODULES = ["rawping.ko"]
# Plain API clients the behaviour tests load: no KUnit needed, so they build
# for the distro kernels too (tests=True), and with every KUnit build.
TEST_MODULES = ["kvmemclient.ko"]

WARNING_RX = re.compile(r"\bwarning:|^WARNING: ", re.M)


def stage(out, kunit=False, bench=False):
    """Copy the kernel sources to `out`, removing stale files; @kunit:
    with kunit/ (test modules), @bench: with bench/."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = (KERNEL_SOURCES + (["kunit"] if kunit else []) +
             (["bench"] if bench else []))
    for name in names:
        src, dst = REPO / name, out / name
        if not src.exists():
            continue
        if dst.exists() and dst.is_dir():
            shutil.rmtree(dst)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns(
                "*.o", "*.ko", "*.cmd", "*.mod*", "generated"))
        else:
            shutil.copy2(src, dst)
    if not kunit and (out / "kunit").exists():
        shutil.rmtree(out / "kunit")
    if not bench and (out / "bench").exists():
        shutil.rmtree(out / "bench")
    return out


def build(kdir, out, kunit=False, jobs=2, werror=True, bench=False,
          tests=False):
    """Build the modules; return {module name: Path of .ko}.  @kunit: the
    KUnit and test modules (a KUnit kernel), @tests: only TEST_MODULES,
    @bench: the benchmark baselines."""
    kdir = Path(kdir)
    if not (kdir / "Makefile").exists():
        raise HarnessError(f"no kernel build tree at {kdir}",
                           "install the matching linux-headers package or "
                           "pass a built kernel tree")
    out = stage(Path(out).resolve(), kunit or tests, bench)
    cmd = ["make", "-C", str(kdir), f"M={out}", "W=1", f"-j{jobs}",
           "modules"]
    if kunit:
        cmd.insert(-1, "KVERBS_KUNIT=m")
    elif tests:
        cmd.insert(-1, "KVERBS_TESTS=m")
    if bench:
        cmd.insert(-1, "KVERBS_BENCH=m")
    p = run(cmd, timeout=900, check=False)
    text = p.stdout or ""
    if p.returncode != 0:
        raise HarnessError(f"module build against {kdir} failed:\n"
                           + text[-6000:])
    warnings = [l for l in text.splitlines() if WARNING_RX.search(l)]
    if werror and warnings:
        raise HarnessError(f"module build against {kdir} printed "
                           f"{len(warnings)} warning(s) (W=1 must be "
                           "clean):\n" + "\n".join(warnings[:40]))
    names = (SHIPPED_MODULES + (KUNIT_MODULES if kunit else []) +
             (TEST_MODULES if kunit or tests else []) +
             (BENCH_MODULES if bench else []))
    mods = {n: out / n for n in names}
    missing = [n for n, p in mods.items() if not p.exists()]
    if missing:
        raise HarnessError(f"build succeeded but {missing} are missing")
    return mods


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kdir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--kunit", action="store_true")
    a = ap.parse_args(argv)
    try:
        mods = build(a.kdir, a.out, a.kunit)
    except HarnessError as e:
        print(f"kbuild: error: {e}", file=sys.stderr)
        return 1
    for n, p in mods.items():
        log(f"built {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
