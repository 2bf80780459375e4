"""kvlab: build, test and demo kverbs on virtual RDMA clusters.

  ./kvlab setup                    install what the harness needs (Debian)
  ./kvlab demo [dsm|fcache|migrate|all] [--kernel 6.1]
                                   boot 2 guests and show a sample: SOR on
                                   the DSM, a kfcache mount read with cat, a
                                   running process moved with kmigrate move
  ./kvlab test                     CI: the core suites and one rotation group
                                   ends "N passed, N failed, N skipped"
  ./kvlab test --full              every suite on every kernel
  ./kvlab test --suite a,b         the suites named
  ./kvlab build [--kernel 6.12]    W=1 module build against distro headers
  ./kvlab docs                     render Documentation/ to build/docs/html
  ./kvlab package                  the Debian packages, in build/package
  ./kvlab bench rtt|protect|dsm-defer|dsm-fault|dsm-apps|fcache|migrate
                                   side by side, charts in build/bench
"""
import argparse
import re
import sys
import time

from .common import HarnessError, Phase, build_dir, die, log
from .results import Results

# `./kvlab test` (what CI runs): the core on every commit, then one group
# of ROTATION chosen by the commit (see rotation_group()), so every suite
# runs in CI within len(ROTATION) consecutive commits.  Budget on the
# 2-core machine: 30 minutes warm, 50 cold.  The core takes about 10
# minutes warm (582 s, 2026-11-29), so a group may take 18 at most
# (kvtest-debug with faultinj-debug is the limit); groups are balanced
# on the times in Documentation/testbed.rst (the debug suites and
# kdsm-6.1 are the long ones).  `./kvlab test --full` runs the core, every group and
# FULL_ONLY: every suite on every kernel.
CORE_SUITES = ["unit", "harness", "style", "dkms", "kunit",
               "integration-6.1", "integration-6.12", "smp-6.1"]
ROTATION = [
    ["integration-debug", "kvmem-6.12", "cluster4"],
    ["kdsm-6.1", "package"],
    ["kunit-debug", "kvmem-debug", "kdsm-debug"],
    ["kdsm-6.12", "kdsm8", "kfcache-6.1", "kmigrate-6.1"],
    ["kfcache-debug", "kfcache-6.12"],
    ["kmigrate-debug", "kmigrate-6.12", "smp-6.12"],
    ["kvtest-debug", "faultinj-debug"],
    ["siw-debug", "kvmem-6.1"],
]
# Suites only --full runs: CI's time is spent on the same code on another
# kernel.  Each says why.
FULL_ONLY = {
    "integration-debug-6.12": "integration-debug runs the same checks on "
                              "the 6.1 debug kernel in CI; this one adds "
                              "6.12's rdma_cm and rxe under KASAN",
    "kvtest-debug-6.12": "kvtest-debug runs the same scenarios on the 6.1 "
                         "debug kernel in CI; this one adds 6.12's rxe "
                         "(work items, not tasklets) under KASAN",
}
# Suites that run only when named (--suite), each with why it is not in
# CI yet: a known failure, tracked in an issue, not a silent gap.  None.
NOT_IN_CI = {}
SUITES = (CORE_SUITES + [s for g in ROTATION for s in g] + list(FULL_ONLY) +
          list(NOT_IN_CI))


def rotation_group(explicit=None):
    """(index, why) of the ROTATION group this run adds to the core:
    @explicit if given, else the number of commits up to HEAD modulo the
    number of groups, so consecutive commits on main walk every group.
    Outside a git checkout (a release tarball), group 0."""
    import subprocess
    from .common import REPO
    if explicit is not None:
        if not 0 <= explicit < len(ROTATION):
            raise HarnessError(f"--rotation {explicit}: choose 0 to "
                               f"{len(ROTATION) - 1}")
        return explicit, "--rotation"
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-list", "--count",
                              "HEAD"], capture_output=True, text=True,
                             timeout=60)
        n = int(out.stdout.strip())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return 0, "not a git checkout"
    return n % len(ROTATION), f"commit {n} of main modulo {len(ROTATION)}"


def _kernels(series_list):
    from . import kernels
    out = []
    for s in series_list:
        with Phase(f"kernel {s}"):
            out.append(kernels.resolve(s))
    return out


def cmd_setup(args):
    from . import deps
    with Phase("setup"):
        deps.ensure()
    return 0


def cmd_build(args):
    from . import deps, kbuild
    deps.ensure(need=deps.NEEDS["build"])
    for k in _kernels(args.kernel):
        with Phase(f"build {k.abi}"):
            mods = kbuild.build(k.headers, build_dir() / "kbuild" / k.abi)
        for p in mods.values():
            log(f"built {p}")
    return 0


def cmd_test(args):
    from . import deps, suites
    if args.suite and (args.full or args.rotation is not None):
        raise HarnessError("--suite names the suites itself: give it "
                           "without --full or --rotation")
    if args.suite:
        chosen = args.suite.split(",")
    elif args.full:
        chosen = [s for s in SUITES if s not in NOT_IN_CI]
    else:
        g, why = rotation_group(args.rotation)
        chosen = CORE_SUITES + ROTATION[g]
        log(f"the core and rotation group {g} of {len(ROTATION)} ({why}): "
            f"{', '.join(ROTATION[g])}; ./kvlab test --full runs every "
            "group")
    unknown = [s for s in chosen if s not in SUITES]
    if unknown:
        raise HarnessError(f"unknown suite(s) {unknown}",
                           f"choose from {', '.join(SUITES)}")
    t0 = time.monotonic()
    res = Results()
    with Phase("setup"):
        deps.ensure()
    need = set()
    if {"style", "dkms"} & set(chosen):
        need |= {"6.1", "6.12"}
    for s in chosen:
        m = re.match(r"(?:integration|kvmem|smp|kdsm|kfcache|kmigrate)-(6\.\d+)$", s)
        if m:
            need.add(m.group(1))
    if {"cluster4", "kdsm8"} & set(chosen):
        need.add("6.1")
    kern = {k.series: k for k in _kernels(sorted(need))}
    needs_tools = [s for s in chosen if s.startswith(("integration", "smp",
                                                      "cluster", "kvmem",
                                                      "kdsm", "kfcache",
                                                      "kmigrate"))]
    if needs_tools and "unit" not in chosen:
        with Phase("user-space build"):
            suites.meson_build()

    for s in chosen:
        if s == "unit":
            suites.run_suite(res, s, suites.suite_unit)
        elif s == "harness":
            suites.run_suite(res, s, suites.suite_harness)
        elif s == "style":
            suites.run_suite(res, s, suites.suite_style,
                             [kern["6.1"], kern["6.12"]])
        elif s == "dkms":
            suites.run_suite(res, s, suites.suite_dkms,
                             [kern["6.1"], kern["6.12"]])
        elif s == "kunit":
            suites.run_suite(res, s, suites.suite_kunit)
        elif s == "package":
            from . import package
            suites.run_suite(res, s, package.suite_package)
        elif s == "kunit-debug":
            suites.run_suite(res, s, suites.suite_kunit, "debug")
        elif s in ("integration-debug", "integration-debug-6.12"):
            suites.run_suite(res, s, suites.suite_integration_debug,
                             s[len("integration-"):])
        elif s in ("kvtest-debug", "kvtest-debug-6.12"):
            from . import suite_kvtest
            suites.run_suite(res, s, suite_kvtest.suite_kvtest_debug,
                             s[len("kvtest-"):])
        elif s == "faultinj-debug":
            from . import suite_faultinj
            suites.run_suite(res, s, suite_faultinj.suite_faultinj_debug)
        elif s == "siw-debug":
            from . import suite_siw
            suites.run_suite(res, s, suite_siw.suite_siw)
        elif s == "kvmem-debug":
            suites.run_suite(res, s, suites.suite_kvmem_debug)
        elif s.startswith("integration-"):
            suites.run_suite(res, s, suites.suite_integration,
                             kern[s.split("-", 1)[1]], s)
        elif s == "cluster4":
            suites.run_suite(res, s, suites.suite_cluster4, kern["6.1"])
        elif s.startswith("smp-"):
            suites.run_suite(res, s, suites.suite_smp,
                             kern[s.split("-", 1)[1]], s)
        elif s == "kdsm8":
            from . import suite_kdsm
            suites.run_suite(res, s, suite_kdsm.suite_kdsm8, kern["6.1"])
        elif s == "kdsm-debug":
            from . import suite_kdsm
            suites.run_suite(res, s, suite_kdsm.suite_kdsm_debug)
        elif s.startswith("kdsm-"):
            from . import suite_kdsm
            suites.run_suite(res, s, suite_kdsm.suite_kdsm,
                             kern[s.split("-", 1)[1]], s)
        elif s == "kfcache-debug":
            from . import suite_kfcache
            suites.run_suite(res, s, suite_kfcache.suite_kfcache_debug)
        elif s.startswith("kfcache-"):
            from . import suite_kfcache
            suites.run_suite(res, s, suite_kfcache.suite_kfcache,
                             kern[s.split("-", 1)[1]], s)
        elif s == "kmigrate-debug":
            from . import suite_kmigrate
            suites.run_suite(res, s, suite_kmigrate.suite_kmigrate_debug)
        elif s.startswith("kmigrate-"):
            from . import suite_kmigrate
            suites.run_suite(res, s, suite_kmigrate.suite_kmigrate,
                             kern[s.split("-", 1)[1]], s)
        elif s.startswith("kvmem-"):
            from . import suite_kvmem
            suites.run_suite(res, s, suite_kvmem.suite_kvmem,
                             kern[s.split("-", 1)[1]], s)
    print(res.summary().rsplit("\n", 1)[0])
    log(f"total {time.monotonic() - t0:.1f}s")
    print(f"{res.passed} passed, {res.failed} failed, {res.skipped} skipped",
          flush=True)
    return 0 if res.failed == 0 and res.passed > 0 else 1


def cmd_docs(args):
    """Render Documentation/ (API reference included) to build/docs/html."""
    from . import deps, docs
    with Phase("setup"):
        deps.ensure(need=deps.NEEDS["docs"])
    (k,) = _kernels(["6.12"])
    with Phase("sphinx-build"):
        ok, out, html = docs.build_html(k)
    if out.strip():
        print(out.rstrip())
    if not ok:
        raise HarnessError("sphinx-build reported warnings (-W makes them "
                           "errors)", "fix the places named above")
    log(f"rendered: {html / 'index.html'}")
    return 0


def cmd_package(args):
    """Build the Debian packages (debian/) into build/package; lintian."""
    from . import deps, package
    with Phase("setup"):
        deps.ensure(need=deps.NEEDS["package"])
    with Phase("dpkg-buildpackage"):
        debs, changes, _ = package.build()
    with Phase("lintian"):
        errors, warnings, lines = package.lintian(changes)
    print("\n".join(lines))
    for d in debs.values():
        log(f"built: {d}")
    if errors:
        raise HarnessError(f"lintian: {len(errors)} error(s)", "see above")
    log(f"lintian: no error, {len(warnings)} warning(s)")
    return 0


def cmd_demo(args):
    """Boot 2 guests and show a sample, or each (testbed/demo.py)."""
    from . import deps, demo
    with Phase("setup"):
        deps.ensure(need=deps.NEEDS["demo"])
    (k,) = _kernels([args.kernel])
    return demo.run(args, k)


def cmd_bench(args):
    """Benchmarks live in testbed/bench_<name>.py, each with main(args)."""
    import importlib
    mod = importlib.import_module(
        f"testbed.bench_{args.which.replace('-', '_')}")
    if args.kernel is None:
        args.kernel = getattr(mod, "DEFAULT_KERNEL", "6.1")
    return mod.main(args)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="kvlab", description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("setup", help="install dependencies")
    sub.add_parser("docs", help="render Documentation/ to build/docs/html")
    sub.add_parser("package", help="build the Debian packages into "
                                   "build/package (and run lintian)")
    p = sub.add_parser("demo", help="boot 2 guests and show a sample: SOR "
                       "on the DSM (dsm, the default), a kfcache mount read "
                       "(fcache), a process moved (migrate), or all")
    p.add_argument("what", nargs="?", default="dsm",
                   choices=("dsm", "fcache", "migrate", "all"))
    p.add_argument("--kernel", default="6.1")
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--port-base", type=int, default=None,
                   help="UDP ports for the guest link (default: free ones)")
    p = sub.add_parser("test", help="run the suites")
    p.add_argument("--suite", help=f"comma list of: {','.join(SUITES)}")
    p.add_argument("--full", action="store_true",
                   help="every suite on every kernel (the core and every "
                        "rotation group)")
    p.add_argument("--rotation", type=int, default=None,
                   help=f"the core and rotation group N (0-{len(ROTATION) - 1}) "
                        "instead of the commit's")
    p = sub.add_parser("build", help="build modules against distro headers")
    p.add_argument("--kernel", action="append", default=None)
    p = sub.add_parser("bench", help="side-by-side benchmarks in guests")
    p.add_argument("which", choices=["rtt", "protect", "dsm-defer",
                                        "dsm-fault", "dsm-apps", "fcache",
                                        "migrate"])
    p.add_argument("--kernel", default=None,
                   help="6.1 or 6.12 (default: the benchmark's own, else 6.1)")
    p.add_argument("--quick", action="store_true",
                   help="fewer repetitions (a smoke run, not a measurement)")
    p.add_argument("--rounds", type=int, default=None,
                   help="dsm-fault, dsm-apps: counted rounds (default: theirs)")
    p.add_argument("--conditions", default=None,
                   help="dsm-apps: comma list of 2n-idle,2n-loaded,2n-threads,"
                        "4n-idle,4n-loaded,4n-threads (default: all)")
    args = ap.parse_args(argv)
    if args.cmd == "build" and not args.kernel:
        args.kernel = ["6.1", "6.12"]
    try:
        return {"setup": cmd_setup, "docs": cmd_docs, "demo": cmd_demo,
                "test": cmd_test, "package": cmd_package,
                "build": cmd_build, "bench": cmd_bench}[args.cmd](args)
    except HarnessError as e:
        die(e)
    except KeyboardInterrupt:
        die("interrupted")


if __name__ == "__main__":
    sys.exit(main())
