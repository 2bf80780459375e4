"""kvmem in guests: the C++ behaviour tests (tools/kvmem/kvmem_test.cpp)
against kvmem.ko on a Debian kernel, two vCPUs per guest so that the
stale-TLB test runs its writer and revoker on different CPUs."""
import re

from .common import HarnessError, build_dir
from . import initramfs, kbuild


def overlay_for(kernel, workdir, extra_bins=()):
    """kvmem.ko and its test client (W=1 build for this kernel) plus test
    binaries."""
    from . import suites
    mods = kbuild.build(kernel.headers, build_dir() / "kbuild" / kernel.abi,
                        tests=True)
    bdir = suites.meson_build()
    files = {f"/kvlab/modules/{m}": mods[m]
             for m in ("kvmem.ko", "kvmemclient.ko")}
    for b in ("tools/kvmem/kvmem-test",) + tuple(extra_bins):
        initramfs.add_binary(files, bdir / b)
    return initramfs.build_overlay(files, workdir / "overlay.cpio")


def suite_kvmem(res, kernel, name):
    from .cluster import Cluster
    from .suites import _fresh_workdir
    workdir = _fresh_workdir(name)
    overlay = overlay_for(kernel, workdir)
    try:
        with Cluster(kernel, nodes=2, workdir=workdir, overlay=overlay,
                     smp=2) as c:
            kvmem_checks(res, name, c.nodes[0])
        res.add(name, "guest console clean", True)
    except HarnessError as e:
        res.add(name, "guest run", False, e)


def kvmem_checks(res, name, n):
    """Load kvmem on node @n, run every kvmem-test case, unload."""
    r = n.run("insmod /kvlab/modules/kvmem.ko && "
              "insmod /kvlab/modules/kvmemclient.ko && "
              "ls -l /dev/kvmem /dev/kvmemclient", timeout=60)
    res.check(name, "kvmem and its test client load, /dev/kvmem and "
              "/dev/kvmemclient exist", r.rc == 0, r.out)
    r = n.run("nproc; /kvlab/bin/kvmem-test --gtest_color=no",
              timeout=600)
    cases = re.findall(r"^\[\s+(OK|FAILED|SKIPPED)\s+\] (\S+)\.(\S+) \(",
                       r.out, re.M)
    for status, suite, case in cases:
        if status == "SKIPPED":
            m = re.search(rf"\[ RUN\s+\] {suite}\.{case}\n(.*?)"
                          rf"\[\s+SKIPPED\s+\] {suite}\.{case}", r.out, re.S)
            res.skip(name, f"{suite}.{case}",
                     (m.group(1).strip().splitlines() or ["no reason"])[-1]
                     if m else "no reason printed")
            continue
        detail = ""
        if status == "FAILED":
            m = re.search(rf"\[ RUN\s+\] {suite}\.{case}\n(.*?)"
                          rf"\[\s+FAILED\s+\] {suite}\.{case}",
                          r.out, re.S)
            detail = m.group(1)[-2000:] if m else r.out[-2000:]
        res.add(name, f"{suite}.{case}", status == "OK", detail)
    res.check(name, "kvmem-test ran its cases and passed",
              len(cases) >= 10 and r.rc == 0,
              f"{len(cases)} cases, rc {r.rc}\n" + r.out[-3000:])
    r = n.run("rmmod kvmemclient && rmmod kvmem && ! test -e /dev/kvmem",
              timeout=120)
    res.check(name, "rmmod kvmem", r.rc == 0, r.out)
