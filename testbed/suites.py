"""The test suites behind `./kvlab test`.

Each suite records its cases in a Results; a HarnessError inside a suite is
one failed case naming the cause, and the run goes on with the next suite.
"""
import os
import re
import shutil
import tarfile
import time
import traceback
from pathlib import Path

from .common import (REPO, HarnessError, build_dir, cache_dir,
                     require_tool, run)
from . import console, dkms, kbuild, kernels, rdma_res
from .knobs import kverbs_params
from .suite_auth import auth_checks

KERNEL_SOURCE_GLOBS = ["kverbs/*.[ch]", "kmsg/*.[ch]", "kmem/*.[ch]", "bench/*/*.[ch]", "samples/*/*.[ch]", "kunit/*.[ch]",
                       "include/kverbs/*.h", "include/uapi/kverbs/*.h",
                       "compat/probes/*.c"]
PORT = 18515
# Modules the KUnit modules link against, loaded first, in this order.
KUNIT_LIBS = ["kverbs.ko", "kvmem.ko"]
# KUnit cases that may skip, as "suite.case" globs (a parameterised case's
# entries are "suite.case/param"; "suite.case" covers them all), each with
# why it may.  Any other skip fails suite_kunit, as does a suite of
# kunit/*_kunit.c that did not run or a case that never reported: the
# expected suites are read from the sources (kunit.suite_names), not
# listed here.  Empty: no case calls kunit_skip()/kunit_mark_skipped()
# (grep kunit/); every case tests code that needs no device or option the
# KUnit kernels lack.
KUNIT_SKIPPABLE = {
}


# ---------------------------------------------------------------- user space
def meson_build():
    """Configure (once) and build the C++ user space; return the build dir."""
    bdir = build_dir() / "meson"
    # ccache (meson uses it when on PATH) hashes absolute paths and the
    # working directory by default, so each fresh clone (CI's) missed
    # every entry: rewrite paths under the checkout as relative ones and
    # leave the directory out, so clones at other paths share the cache.
    os.environ.setdefault("CCACHE_BASEDIR", str(REPO))
    os.environ.setdefault("CCACHE_NOHASHDIR", "1")
    if not (bdir / "build.ninja").exists():
        run(["meson", "setup", str(bdir), str(REPO)], timeout=300)
    run(["meson", "compile", "-C", str(bdir)], timeout=900)
    return bdir


def suite_unit(res):
    bdir = meson_build()
    p = run(["meson", "test", "-C", str(bdir), "--print-errorlogs"],
            timeout=600, check=False)
    print(p.stdout[-3000:])
    ok = re.search(r"^Ok:\s+(\d+)", p.stdout, re.M)
    fail = re.search(r"^Fail:\s+(\d+)", p.stdout, re.M)
    n_ok = int(ok.group(1)) if ok else 0
    res.check("unit", f"meson test ({n_ok} ok)",
              p.returncode == 0 and n_ok > 0 and
              (not fail or fail.group(1) == "0"), p.stdout[-2000:])
    # Each gtest case, from the JUnit log meson writes.
    junit = bdir / "meson-logs" / "testlog.junit.xml"
    if junit.exists():
        import xml.etree.ElementTree as ET
        for tc in ET.parse(junit).getroot().iter("testcase"):
            name = f"{tc.get('classname')}.{tc.get('name')}"
            bad = tc.find("failure") is not None or tc.find("error") is not None
            skipped = tc.find("skipped")
            if skipped is not None and not bad:
                # exit 77 or GTEST_SKIP: counted as a skip, with its reason
                out = tc.find("system-out")
                said = (skipped.get("message") or
                        (out.text if out is not None and out.text else "")
                        ).strip().splitlines()
                why = next((ln for ln in said if "SKIP" in ln), None) or \
                    (said[-1] if said else "skipped, no reason given")
                res.skip("unit", name, why)
                continue
            res.add("unit", name, not bad)
    _default_install(res, bdir)


# What `meson install` puts on a system by default: the operator's tools,
# the libraries with their headers and pkg-config files; no test, benchmark
# or demo program (those need -Dinstall_tests=true; issue 28).
INSTALLED_TOOLS = {"kvping", "kdsmctl", "kfcachectl", "kmigrate"}


def _default_install(res, bdir):
    dest = bdir / "install-check"
    shutil.rmtree(dest, ignore_errors=True)
    p = run(["meson", "install", "-C", str(bdir), "--no-rebuild",
             "--destdir", str(dest)], timeout=300, check=False)
    files = [f.relative_to(dest) for f in dest.rglob("*") if f.is_file()]
    shutil.rmtree(dest, ignore_errors=True)
    bins = {f.name for f in files if f.parent.name == "bin"}
    other = [str(f) for f in files if f.parent.name != "bin" and
             not re.search(r"/(include/(kverbs|kvwire|kvgenl|kdsm|kmigrate)/"
                           r"[\w.-]+\.hp?p?|lib/[\w-]+/(lib\w+\.a|pkgconfig/"
                           r"\w+\.pc)|share/man/man[18]/\w+\.[18]|"
                           r"share/bash-completion/completions/\w+|"
                           r"lib/systemd/system/[\w-]+\.service)$",
                           "/" + str(f))]
    pages = {f.name for f in files if f.parent.parent.name == "man"}
    comp = {f.name for f in files if f.parent.name == "completions"}
    res.check("unit", "meson install: the four tools with their manual "
              "pages and bash completions, libraries, headers and pkg-config "
              "files only (no test or benchmark program)",
              p.returncode == 0 and bins == INSTALLED_TOOLS and not other and
              {n.split(".")[0] for n in pages} == INSTALLED_TOOLS and
              comp == INSTALLED_TOOLS,
              f"{p.stdout[-1500:]}\nbin: {sorted(bins)}\nman: "
              f"{sorted(pages)}\ncompletions: {sorted(comp)}\nother: {other}")


# ------------------------------------------------------------ harness tests
def suite_harness(res):
    import unittest
    loader = unittest.TestLoader()
    suite = loader.loadTestsFromNames(["testbed.selftest.test_harness",
                                       "testbed.selftest.test_ktap",
                                       "testbed.selftest.test_console"])

    class Collect(unittest.TextTestResult):
        def addSuccess(self, test):
            super().addSuccess(test)
            res.add("harness", test.id().rsplit(".", 2)[-1], True)

        def addFailure(self, test, err):
            super().addFailure(test, err)
            res.add("harness", test.id().rsplit(".", 2)[-1], False,
                    self._exc_info_to_string(err, test))

        def addError(self, test, err):
            super().addError(test, err)
            res.add("harness", test.id().rsplit(".", 2)[-1], False,
                    self._exc_info_to_string(err, test))

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            res.skip("harness", test.id().rsplit(".", 2)[-1], reason)

    unittest.TextTestRunner(resultclass=Collect, verbosity=0).run(suite)


# --------------------------------------------------------------- style/W=1
def checkpatch():
    """checkpatch.pl from the newest of Debian's linux-source tarballs (the
    strictest: 6.12's warns where 6.1's does not), extracted once per
    tarball, so every machine checks with the same one."""
    tar = kernels.newest_linux_source("checkpatch")
    dst = cache_dir() / f"checkpatch-{tar.name.split('.tar')[0]}"
    script = dst / "scripts" / "checkpatch.pl"
    if script.exists():
        return script
    want = ("scripts/checkpatch.pl", "scripts/spelling.txt",
            "scripts/const_structs.checkpatch")
    with tarfile.open(tar) as tf:
        for m in tf:
            if m.name.split("/", 1)[-1] in want:
                m.name = m.name.split("/", 1)[1]
                tf.extract(m, dst)
    return script


def read_symvers(path):
    """(symbol, module, namespace) of each export in a Module.symvers."""
    out = []
    for line in Path(path).read_text().splitlines():
        f = line.split("\t")
        if len(f) >= 4:
            out.append((f[1], Path(f[2]).name, f[4] if len(f) > 4 else ""))
    return out


def export_problems(ours, kernel_syms):
    """Why each of our exports could be mistaken for, or collide with, a
    kernel symbol: its prefix (up to the first '_') starts a kernel export,
    or it is not in the KVERBS namespace."""
    taken = {s.split("_", 1)[0] for s in kernel_syms if "_" in s}
    bad = []
    for sym, _mod, ns in ours:
        prefix = sym.split("_", 1)[0]
        if sym in kernel_syms:
            bad.append(f"{sym}: also exported by the kernel")
        elif prefix in taken:
            hit = sorted(s for s in kernel_syms
                         if s.startswith(prefix + "_"))[:2]
            bad.append(f"{sym}: prefix {prefix}_ is the kernel's "
                       f"({', '.join(hit)})")
        if ns != "KVERBS":
            bad.append(f"{sym}: namespace {ns or 'none'}, not KVERBS")
    return bad


# kverbs/ is the lower layer: it reaches kvmsg only through the hooks in
# kverbs_upper_ops and completions, and never touches kvmsg's state.
# main.c, the module's glue, is the one file that names both.
LAYER_RX = re.compile(r"\bkvmsg_\w+|->msg\b|\.msg\.")


def layer_violations(root):
    """Lines of kverbs/*.c (but main.c) that call or touch kvmsg."""
    bad = []
    for p in sorted((root / "kverbs").glob("*.c")):
        if p.name == "main.c":
            continue
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if LAYER_RX.search(line):
                bad.append(f"{p.relative_to(root)}:{i}: {line.strip()}")
    return bad


def suite_style(res, kernels):
    files = sorted(str(p.relative_to(REPO)) for g in KERNEL_SOURCE_GLOBS
                   for p in REPO.glob(g))
    p = run(["perl", str(checkpatch()), "--strict", "--no-tree", "--terse",
             "--show-types", "-f"] + files, cwd=REPO, timeout=300,
            check=False)
    issues = [l for l in p.stdout.splitlines()
              if re.match(r"^\S+:\d+: (ERROR|WARNING|CHECK)", l)]
    res.check("style", f"checkpatch --strict ({len(files)} files)",
              p.returncode == 0 and not issues and files,
              f"exit code {p.returncode}\n" + "\n".join(issues) +
              "\n" + (p.stdout or "")[-1500:])
    bad = layer_violations(REPO)
    res.check("style", "kverbs/ calls kvmsg only through its hooks",
              not bad, "\n".join(bad))
    m = re.search(r"^project\('kverbs'.*?version:\s*'([^']+)'",
                  (REPO / "meson.build").read_text(), re.S | re.M)
    res.check("style", "the tools' version (meson.build) is dkms.conf's",
              m is not None and m.group(1) == dkms.version(),
              f"meson.build {m and m.group(1)}, dkms.conf {dkms.version()}")
    from . import netlink_specs
    try:
        bad = netlink_specs.spec_problems()
    except HarnessError as e:
        bad = [str(e)]
    res.check("style", "each family's YAML spec (Documentation/netlink/"
              "specs) describes its uapi header: every name ynl-gen-c "
              "renders from it has our header's value", not bad,
              "\n".join(bad))
    for k in kernels:
        try:
            mods = kbuild.build(k.headers, build_dir() / "kbuild" / k.abi,
                                bench=True)
            res.add("style", f"W=1 build, no warnings, {k.abi}", True)
        except HarnessError as e:
            res.add("style", f"W=1 build, no warnings, {k.abi}", False, e)
            continue
        missing = genl_alias_problems(mods)
        res.check("style", "every module with a generic netlink family "
                  "names it in MODULE_ALIAS_GENL_FAMILY, so modprobe loads "
                  f"it for its tool ({', '.join(GENL_MODULES)}), {k.abi}",
                  not missing, "\n".join(missing))
        vers = module_versions(mods, kbuild.SHIPPED_MODULES)
        res.check("style", f"every shipped module's MODULE_VERSION is "
                  f"dkms.conf's {dkms.version()}, {k.abi}",
                  len(vers) == len(kbuild.SHIPPED_MODULES) and
                  set(vers.values()) == {dkms.version()}, str(vers))
        ours = [e for e in read_symvers(build_dir() / "kbuild" / k.abi /
                                        "Module.symvers")
                if e[1] != "vmlinux"]
        kern = {e[0] for e in read_symvers(k.headers / "Module.symvers")}
        bad = export_problems(ours, kern)
        res.check("style", f"{len(ours)} exports: own prefixes, KVERBS "
                  f"namespace, none clashing with {len(kern)} kernel "
                  f"exports of {k.abi}", ours and kern and not bad,
                  "\n".join(bad))
        ok, why = client_module_builds(k, build_dir() / "kbuild" / k.abi)
        res.check("style", "the documented echo server builds out of tree "
                  f"against include/ alone and imports KVERBS, {k.abi}",
                  ok, why)
    # 6.12's kernel-doc: its :export: knows EXPORT_SYMBOL_NS_GPL.
    k = max(kernels, key=lambda k: tuple(map(int, k.series.split("."))))
    _docs(res, files, k, build_dir() / "kbuild" / k.abi)


def _docs(res, files, kernel, kbuild_dir):
    """kernel-doc over our sources; Sphinx -W over Documentation/; every
    export of the modules built in @kbuild_dir rendered in the API
    reference."""
    from . import docs
    try:
        script = docs.kernel_doc_script(kernel)
    except HarnessError as e:
        res.add("style", "kernel-doc -none -Wall", False, e)
        return
    bad = docs.kernel_doc_problems(script, files)
    res.check("style", f"kernel-doc -none -Wall over {len(files)} files: no "
              "warning (parameters, members and Return: described)",
              not bad, "\n".join(bad[:40]))
    try:
        ok, out, html = docs.build_html(kernel)
    except HarnessError as e:
        res.add("style", "sphinx-build -W over Documentation/", False, e)
        return
    res.check("style", "sphinx-build -W over Documentation/ (kernel-doc "
              "extension): no warning", ok, out[-3000:])
    if not ok:
        return
    exports = {e[0] for e in read_symvers(kbuild_dir / "Module.symvers")
               if e[1] != "vmlinux"}
    shown = docs.rendered_functions(html / "kverbs-api-ref.html")
    missing = sorted(exports - shown)
    res.check("style", f"the rendered API reference documents all "
              f"{len(exports)} exports", exports and not missing,
              "not rendered: " + ", ".join(missing))


# module -> the uapi header whose *_GENL_NAME is its family
GENL_MODULES = {"kdsm.ko": "kdsm.h", "kmigrate.ko": "kmigrate.h",
                "kfcache_srv.ko": "kfcache.h"}


def genl_alias_problems(mods):
    """What keeps the kernel from loading each GENL_MODULES module when
    its family is asked for: its alias must be the one the kernel requests
    (net-pf-16-proto-16-family-NAME, NAME from the uapi header)."""
    modinfo = require_tool("modinfo", "kmod")
    bad = []
    for mod, hdr in GENL_MODULES.items():
        m = re.search(r'^#define\s+\w+_GENL_NAME\s+"([^"]+)"',
                      (REPO / "include/uapi/kverbs" / hdr).read_text(), re.M)
        if m is None or mod not in mods:
            bad.append(f"{mod}: no family name in {hdr} or not built")
            continue
        want = f"net-pf-16-proto-16-family-{m.group(1)}"
        have = run([modinfo, "-F", "alias", str(mods[mod])],
                   timeout=60).stdout.split()
        if want not in have:
            bad.append(f"{mod}: aliases {have}, not {want}")
    return bad


def module_versions(mods, names):
    """{module: `modinfo -F version`} of the built modules in @names."""
    modinfo = require_tool("modinfo", "kmod")
    out = {}
    for n in names:
        path = mods.get(n)
        if path is None:
            continue
        out[n[:-3]] = run([modinfo, "-F", "version", str(path)],
                          timeout=60).stdout.strip()
    return out


def doc_example(rst):
    """The C code block of Documentation/kverbs-api.rst's minimal echo
    server: the last `.. code-block:: c` of the file, dedented."""
    lines = rst.read_text().splitlines()
    start = max(i for i, l in enumerate(lines) if l == ".. code-block:: c")
    code = []
    for l in lines[start + 1:]:
        if l and not l.startswith("   "):
            break
        code.append(l[3:])
    return "\n".join(code).strip() + "\n"


def client_module_builds(k, kverbs_build, include=None, tag="tree"):
    """Build the documented echo server the way a client module author
    would: its own directory, -I our include/ (or @include) and nothing
    else (no probe results), modpost against kverbs' Module.symvers in
    @kverbs_build.  A missing namespace import fails modpost."""
    d = build_dir() / "client-module" / tag / k.abi
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    (d / "echo.c").write_text(doc_example(REPO / "Documentation" /
                                          "kverbs-api.rst"))
    (d / "Kbuild").write_text(f"obj-m := echo.o\n"
                              f"ccflags-y := -I{include or REPO / 'include'}\n")
    p = run(["make", "-C", str(k.headers), f"M={d}", "W=1",
             f"KBUILD_EXTRA_SYMBOLS={kverbs_build / 'Module.symvers'}",
             "modules"], timeout=300, check=False)
    out = p.stdout or ""
    if p.returncode or re.search(r"warning:|error:|ERROR", out):
        return False, out[-3000:]
    p = run(["modinfo", "-F", "import_ns", str(d / "echo.ko")], check=False)
    return p.stdout.strip() == "KVERBS", f"import_ns: {p.stdout.strip()!r}"


# --------------------------------------------------------------------- DKMS
def suite_dkms(res, kernels):
    before = dkms.host_state()
    try:
        _suite_dkms(res, kernels)
    finally:
        after = dkms.host_state()
        changed = sorted(set(before) ^ set(after))
        res.check("dkms", "the host's /var/lib/dkms, /usr/src and "
                  "/lib/modules/*/updates are as they were (the lab's DKMS "
                  "trees are under build/dkms)", not changed,
                  "\n".join(changed[:20]))


def _suite_dkms(res, kernels):
    dkms.add()
    for k in kernels:
        try:
            mods = dkms.install(k.abi)
        except HarnessError as e:
            res.add("dkms", f"dkms install -k {k.abi}", False, e)
            continue
        res.add("dkms", f"dkms install -k {k.abi}", True,
                ", ".join(p.name for p in mods.values()))
        d = dkms.updates_dir(k.abi)
        unshipped = {m.split(".")[0] for m in
                     kbuild.KUNIT_MODULES + kbuild.BENCH_MODULES +
                     kbuild.TEST_MODULES}
        tests = [p.name for p in d.iterdir()
                 if p.name.split(".")[0] in unshipped] if d.exists() else []
        res.check("dkms", f"no test or benchmark module installed for "
                  f"{k.abi}", not tests, f"found {tests}")
        for name, path in mods.items():
            p = run(["modinfo", "-F", "vermagic", str(path)])
            res.check("dkms", f"{name} vermagic matches {k.abi}",
                      p.stdout.split()[0] == k.abi, p.stdout)
        # Issue 27: a client builds against the installed kverbs alone:
        # the Module.symvers DKMS kept (scripts/dkms.postbuild) and the
        # headers in /usr/src, no path into the checkout
        kept = dkms.kept_symvers(k.abi)
        syms = kept.read_text() if kept.exists() else ""
        res.check("dkms", f"DKMS keeps Module.symvers for {k.abi}, every "
                  "export in the KVERBS namespace",
                  "\tkvmsg_send\t" in syms and all(
                      "\tKVERBS" in l for l in syms.splitlines() if l),
                  f"{kept}: {syms[:500]}")
        if syms:
            ok, why = client_module_builds(k, kept.parent, dkms.src_dir() /
                                           "include", tag="dkms")
            res.check("dkms", "the documented echo server builds against "
                      f"the DKMS-installed kverbs only, {k.abi}", ok, why)
    _client_dkms(res, kernels)


def _client_dkms(res, kernels):
    """examples/kvreq, a client module with its own Kbuild and dkms.conf,
    built by DKMS against the installed kverbs alone (the integration
    suites load it beside kverbs and run it against kping)."""
    from_checkout = [l for l in (dkms.CLIENT_DIR / "dkms.conf").read_text()
                     .splitlines() + (dkms.CLIENT_DIR / "Kbuild").read_text()
                     .splitlines() if str(REPO) in l or ".." in l]
    res.check("dkms", "the client's dkms.conf and Kbuild name no path into "
              "a kverbs checkout", not from_checkout, "\n".join(from_checkout))
    try:
        got = dkms.client_install([k.abi for k in kernels])
    except HarnessError as e:
        res.add("dkms", f"dkms install {dkms.CLIENT} (BUILD_DEPENDS kverbs)",
                False, e)
        return
    for k in kernels:
        path = got.get(k.abi)
        ns = run(["modinfo", "-F", "import_ns", str(path)],
                 check=False).stdout.strip() if path else ""
        dep = run(["modinfo", "-F", "depends", str(path)],
                  check=False).stdout.strip() if path else ""
        res.check("dkms", f"dkms install {dkms.CLIENT} for {k.abi}: built "
                  "against the installed kverbs, imports KVERBS, depends on "
                  "kverbs", path is not None and ns == "KVERBS" and
                  dep == "kverbs", f"{path}: import_ns {ns!r}, depends {dep!r}")


# -------------------------------------------------------------------- KUnit
def suite_kunit(res, variant="default"):
    """Our KUnit modules on the KUnit kernel; "debug" adds KASAN, lockdep,
    DEBUG_ATOMIC_SLEEP and kmemleak, whose reports fail the run.

    Passing cases are not enough: every suite of kunit/*_kunit.c must run
    its whole plan, and a case may skip only if KUNIT_SKIPPABLE says so
    (a counted skip; any other skip fails). See ktap.verify()."""
    from . import ktap, kunit
    name = "kunit" if variant == "default" else f"kunit-{variant}"
    kk = kunit.kernel(variant)
    mods = kbuild.build(kk.build, build_dir() / "kbuild" / f"kunit-{variant}",
                        kunit=True)
    # Libraries first (in dependency order), then every KUnit module.
    order = [mods[m] for m in KUNIT_LIBS if m in mods]
    order += [mods[m] for m in sorted(mods) if m.endswith("_kunit.ko")]
    r = kunit.run(kk, order, build_dir() / "kunit" / variant)
    for suite, case, status in r.cases:
        full = ktap.case_name(suite, case)
        if status != "skip":
            res.add(name, full, status == "pass", status)
            continue
        said = r.ktap.reasons.get((suite, case)) or "no reason given"
        glob = ktap.skip_declared(suite, case, KUNIT_SKIPPABLE)
        if glob:
            res.skip(name, full, f"{KUNIT_SKIPPABLE[glob]}; test: {said}")
        else:
            res.add(name, full, False, f"skipped ({said}), but not "
                    "declared in KUNIT_SKIPPABLE (testbed/suites.py)")
    # Undeclared skips failed above; every other problem is a failed case.
    expected = kunit.suite_names()
    problems = [p for p in ktap.verify(r.ktap, expected, KUNIT_SKIPPABLE)
                if p.kind != "undeclared skip"]
    for p in problems:
        res.add(name, f"KTAP: {p}", False, f"log {r.log}")
    if not problems:
        res.add(name, f"every suite of kunit/ ran its whole plan "
                f"({', '.join(sorted(expected))})", True)
    res.check(name, "console clean", not r.findings,
              "\n".join(map(str, r.findings)))


# ---------------------------------------------------------- guest clusters
def guest_overlay(kernel, workdir):
    """Overlay with the DKMS-installed modules (decompressed for busybox
    insmod) and the user-space tools."""
    from . import initramfs
    mods = dkms.installed(kernel.abi)
    files = {}
    plain = {}
    for name, path in mods.items():
        ko = dkms.plain_ko(path, workdir / "modules")
        plain[name] = (path, ko)
        files[f"/kvlab/modules/{name}.ko"] = ko
    client = dkms.client_installed(kernel.abi)
    if client is not None:
        files[f"/kvlab/modules/{dkms.CLIENT}.ko"] = dkms.plain_ko(
            client, workdir / "modules")
    kvping = build_dir() / "meson" / "tools" / "kvping" / "kvping"
    if kvping.exists():
        initramfs.add_binary(files, kvping)
    # util-linux's, to drop privileges (suite_auth's unprivileged peer)
    initramfs.add_binary(files, "/usr/bin/setpriv")
    # Python and the kernel's ynl, to drive the families from their specs
    from . import netlink_specs
    files.update(netlink_specs.guest_files())
    out = initramfs.build_overlay(files, workdir / "overlay.cpio")
    return out, plain


def kping(node, server=None, **params):
    """The insmod line for the kping sample on `node`: the echo server, or
    a client of `server` (a Node) with extra module parameters."""
    # RNR retries are kverbs' module parameter, read at connect time.
    rnr = params.pop("rnr_retry", 7)
    args = [f"port={PORT}", f"node_id={node.node_id}"]
    if server is not None:
        args.insert(0, f"server={server.ip}")
    args += [f"{k}={v}" for k, v in params.items()]
    return (kverbs_params(rnr_retry=rnr) + " && "
            "insmod /kvlab/modules/kping.ko " + " ".join(args))


def _fresh_workdir(name):
    """build/testbed/<name>, emptied: console logs of this run only."""
    workdir = build_dir() / "testbed" / name
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    return workdir


def _dmesg_has(node, pattern):
    r = node.run("dmesg", timeout=30)
    return re.search(pattern, r.out) is not None, r.out


def suite_integration(res, kernel, name):
    from .cluster import Cluster
    workdir = _fresh_workdir(name)
    try:
        dkms.installed(kernel.abi)
    except HarnessError:
        dkms.add()
        dkms.install(kernel.abi)
    if dkms.client_installed(kernel.abi) is None:
        dkms.client_install([kernel.abi])
    overlay, plain = guest_overlay(kernel, workdir)
    try:
        with Cluster(kernel, nodes=2, workdir=workdir,
                     overlay=overlay) as c:
            _integration_body(res, name, c, plain)
        res.add(name, "guest consoles clean", True)
    except HarnessError as e:
        res.add(name, "cluster run", False, e)


def _integration_body(res, suite, c, plain):
    n0, n1 = c.nodes
    # The guests load exactly the files DKMS installed.
    for n in (n0, n1):
        r = n.run("insmod /kvlab/modules/kverbs.ko && "
                  "cat /sys/module/kverbs/srcversion", timeout=60)
        want = dkms.srcversion(plain["kverbs"][0])
        res.check(suite, f"{n.name}: DKMS-installed kverbs.ko loads",
                  r.rc == 0 and r.out.strip().splitlines()[-1:] == [want],
                  f"rc {r.rc}, srcversion {r.out.strip()!r}, "
                  f"installed {want}")
        ok, out = _dmesg_has(n, r"kverbs: device rxe0 added")
        res.check(suite, f"{n.name}: kverbs tracks rxe0", ok, out[-1500:])
        _nic_notifies_by_flags(res, suite, n)

    r = n0.run(kping(n0), timeout=60)
    res.setup(suite, "kping server listens", r.rc == 0, r.out)

    r = n1.run(kping(n1, n0, count=10000, size=512) +
               " && dmesg | grep 'kping:' | tail -n 3", timeout=600)
    res.check(suite, "kping 10000 round trips, 512 B, payload verified",
              r.rc == 0 and "10000 round trips ok" in r.out, r.out)
    n1.run("rmmod kping", timeout=30)
    from . import netlink_specs
    netlink_specs.ynl_checks(res, suite, n1)
    _messaging(res, suite, n0, n1)
    _user_space_peer(res, suite, n0, n1)
    _third_party_client(res, suite, n0, n1)
    # kverbs' authentication is the same code on both kernels: 6.1 (CI's
    # time) runs the keyed exchange and one refusal of each side
    auth_checks(res, suite, n0, n1, kping, full=suite != "integration-6.1")
    _device_removal(res, suite, n0, n1)

    # Clean unload on both nodes.
    for n in (n0, n1):
        r = n.run("rmmod krdma 2>/dev/null; rmmod kping; rmmod kverbs && "
                  "! lsmod | grep -q kverbs",
                  timeout=120)
        res.check(suite, f"{n.name}: rmmod kping kverbs", r.rc == 0, r.out)


# VIRTIO_RING_F_EVENT_IDX, bit 29 of a virtio device's feature string.
VIRTIO_RING_F_EVENT_IDX = 29


def _nic_notifies_by_flags(res, suite, node):
    """The link must not depend on a single kick (cluster.NIC_OPTS): the
    guest's NIC negotiated no event index."""
    r = node.run("cat /sys/class/net/eth0/device/features", timeout=30)
    bits = r.out.strip()
    res.check(suite, f"{node.name}: the NIC notifies by flags, not event "
              "index (one lost kick cannot stall the link)",
              r.rc == 0 and len(bits) > VIRTIO_RING_F_EVENT_IDX and
              bits[VIRTIO_RING_F_EVENT_IDX] == "0",
              f"rc {r.rc}, features {bits!r}")


def _user_space_peer(res, suite, n0, n1):
    """Bad private data from a user-space peer (kvping, libibverbs):
    refused, logged, no crash; then a good exchange with it."""
    kvping = "/kvlab/bin/kvping"
    have_kvping = n1.run(f"test -x {kvping}", timeout=10).rc == 0
    res.check(suite, "kvping tool present in guest", have_kvping)
    if have_kvping:
        for bad, text in [("magic", "bad magic"), ("version", "version"),
                          ("node", "node id 0"), ("depth", "depth"),
                          ("msg", "max message size")]:
            r = n1.run(f"{kvping} --server-addr {n0.ip} --port {PORT} "
                       f"--node-id {n1.node_id} --bad {bad} "
                       "--timeout-ms 10000", timeout=60)
            ok, log_ = _dmesg_has(n0, r"kping-server: rejecting connection "
                                      rf"from {re.escape(n1.ip)}:\d+: "
                                      rf".*{text}")
            res.check(suite, f"bad private data ({bad}) refused and logged",
                      r.rc == 3 and "rejected" in r.out and ok,
                      f"kvping rc {r.rc}: {r.out}\nserver log tail:\n"
                      + log_[-800:])
        r = n1.run(f"{kvping} --server-addr {n0.ip} --port {PORT} "
                   f"--node-id {n1.node_id} --count 500 --size 256 "
                   "--timeout-ms 10000", timeout=120)
        res.check(suite, "user-space kvping <-> kernel kping, 500 round "
                  "trips", r.rc == 0 and "500 round trips ok" in r.out,
                  r.out)
        # The acceptor answers with no more RDMA READ/atomic depth than
        # the request offered, each depth by its own (kvping offers 1 as
        # initiator, 4 as responder; the answer prints from its side).
        r = n1.run(f"{kvping} --server-addr {n0.ip} --port {PORT} "
                   f"--node-id {n1.node_id} --count 10 --rd-atomic 1/4 "
                   "--timeout-ms 10000", timeout=120)
        res.check(suite, "the kernel's accept clamps its RDMA READ depths to "
                  "the request's, each by its own (offered initiator 1, "
                  "responder 4: answered the same)", r.rc == 0 and
                  "RDMA READ depths: initiator 1 responder 4" in r.out, r.out)


def _depth_clamp_undone(res, suite, n0, n1):
    """The accept's RDMA READ depth clamp undone (test builds' kverbs
    test_undo=4): the check of _user_space_peer() must see it."""
    kvping = "/kvlab/bin/kvping"
    n0.run(kverbs_params(test_undo=4), timeout=10)
    r = n1.run(f"{kvping} --server-addr {n0.ip} --port {PORT} "
               f"--node-id {n1.node_id} --count 10 --rd-atomic 1/4 "
               "--timeout-ms 10000", timeout=120)
    n0.run(kverbs_params(test_undo=0), timeout=10)
    m = re.search(r"RDMA READ depths: initiator (\d+) responder (\d+)",
                  r.out)
    res.check(suite, "... and with the clamp undone (test_undo=4) the "
              "accept answers more than was offered (the check can fail)",
              m is not None and (m.group(1), m.group(2)) != ("1", "4"),
              r.out)


def _third_party_client(res, suite, n0, n1):
    """examples/kvreq, built by DKMS against the installed kverbs only,
    loaded beside it: request-reply round trips with the kping server."""
    r = n1.run(f"insmod /kvlab/modules/{dkms.CLIENT}.ko server={n0.ip} "
               f"port={PORT} count=200 && rmmod {dkms.CLIENT} && "
               "dmesg | grep 'kvreq:' | tail -n 2", timeout=120)
    res.check(suite, "the third-party client (examples/kvreq, built by DKMS "
              "against the installed kverbs alone) makes 200 round trips "
              "with kping", r.rc == 0 and
              "200 round trips with node" in r.out, r.out)


def _wait_connected(res, suite, n0, what):
    """Wait until the kping server lists a connected endpoint."""
    r = n0.run("for i in $(seq 60); do grep -q 'state connected' "
               "/sys/kernel/debug/kverbs/kping-server.*/endpoints && "
               "exit 0; sleep 0.5; done; exit 1", timeout=60)
    res.check(suite, what, r.rc == 0, r.out)


def _restart_server(n0, **params):
    """Reload the kping server with other module parameters."""
    return n0.run("rmmod kping 2>/dev/null; " + kping(n0, **params),
                  timeout=120)


EP_FILE = "/sys/kernel/debug/kverbs/kping-server.*/endpoints"


def _inflight(res, suite, n0, what):
    """Sample the server endpoint's in-flight sends (posted, not yet
    reclaimed) until some are seen: the teardown that follows must then
    reclaim real sends, not an idle queue."""
    r = n0.run(f"for i in $(seq 100); do grep -h -o 'inflight [0-9]*' "
               f"{EP_FILE} | grep -v 'inflight 0$' && break; done; "
               f"cat {EP_FILE}", timeout=120)
    res.check(suite, f"{what}: server has sends in flight before it",
              re.search(r"^inflight [1-9]", r.out, re.M) is not None,
              r.out[-1500:])
    m = re.search(r"closed_bufs (\d+)", r.out)
    return int(m.group(1)) if m else 0


def _server_reclaimed(res, suite, n0, what, before):
    """The server's endpoints are gone, freed (closed_bufs grew past
    @before, its value while they were live: the count is taken at the
    last reference, after the endpoint left the list), and every send
    buffer they had was free then (a send never reclaimed makes
    closed_bufs_free fall behind)."""
    r = n0.run(f"for i in $(seq 60); do grep -q '^ep ' {EP_FILE} || "
               f"{{ B=$(grep -o 'closed_bufs [0-9]*' {EP_FILE} | "
               "cut -d' ' -f2); [ \"${B:-0}\" -gt "
               f"{before} ] && break; }}; sleep 0.5; done; cat {EP_FILE}",
               timeout=60)
    m = re.search(r"closed_bufs (\d+) closed_bufs_free (\d+)", r.out)
    res.check(suite, f"{what}: every server send buffer free at teardown",
              m is not None and int(m.group(1)) > before and
              m.group(1) == m.group(2) and "\nep " not in r.out,
              f"closed_bufs before {before}\n" + r.out)
    if n0.run("test -e /sys/kernel/debug/kmemleak", timeout=10).rc == 0:
        leaks = kmemleak_report(n0)
        res.check(suite, f"{what}: kmemleak finds nothing", not leaks,
                  leaks[-3000:])


def kmemleak_report(node, settle=6):
    """kmemleak's report after two scans @settle seconds apart.  kmemleak
    reports an object only once it is older than its minimum age (5 s)
    and its checksum was stable across two scans, so one scan right after
    the fact finds nothing by design.  Returns '' when clean."""
    r = node.run("K=/sys/kernel/debug/kmemleak; echo scan > $K && "
                 f"sleep {settle} && echo scan > $K && cat $K", timeout=600)
    if r.rc:
        raise HarnessError(f"{node.name}: kmemleak scan failed", r.out)
    if r.out.strip():
        # Reported once: a later check must not fail for this leak too.
        node.run("echo clear > /sys/kernel/debug/kmemleak", timeout=120)
    return r.out.strip()


def _messaging(res, suite, n0, n1):
    """kvmsg behaviour between two guests: handler contexts, a burst far
    beyond the receive depth with RNR retry off, malformed headers,
    tracepoints, rdma restrack, a disconnect with sends in flight and
    one-sided operations."""
    _handler_modes(res, suite, n0, n1)
    _burst(res, suite, n0, n1)
    r = _restart_server(n0)
    res.check(suite, "server back in softirq mode", r.rc == 0, r.out)
    _tracepoints(res, suite, n0, n1)
    _bad_headers(res, suite, n0, n1)
    _kill_in_flight(res, suite, n0, n1)
    _krdma(res, suite, n0, n1)


def _handler_modes(res, suite, n0, n1):
    for mode in ("wq", "poll"):
        r = _restart_server(n0, mode=mode)
        res.check(suite, f"server in {mode} mode", r.rc == 0, r.out)
        r = n1.run(kping(n1, n0, count=1000, size=256, mode=mode,
                         outstanding=4) + " && rmmod kping", timeout=600)
        res.check(suite, f"{mode} handlers both sides: 1000 round trips, "
                  "4 outstanding", r.rc == 0, r.out)


def _burst(res, suite, n0, n1):
    """100 x depth in one one-way burst; rnr_retry 0 on both sides turns
    any message sent without a posted receive into a fatal error."""
    r = _restart_server(n0, rnr_retry=0, depth=16)
    res.check(suite, "server with rnr_retry 0, depth 16", r.rc == 0, r.out)
    r = n1.run(kping(n1, n0, count=10, burst=1600, size=256, depth=16,
                     rnr_retry=0) + " && rmmod kping", timeout=900)
    ok, log_ = _dmesg_has(n0, rf"node {n1.node_id}: burst of 1600, 1600 "
                          "in order and intact")
    res.check(suite, "burst of 100 x depth (1600 at depth 16), rnr_retry "
              "0: no loss, reordering or stall", r.rc == 0 and ok,
              f"client rc {r.rc}: {r.out}\nserver log:\n{log_[-1000:]}")


def _tracepoints(res, suite, n0, n1):
    r = n1.run("mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; "
               "T=/sys/kernel/tracing; echo > $T/trace; "
               "echo 1 > $T/events/kvmsg/enable && "
               "echo 1 > $T/events/kverbs/enable && "
               f"{kping(n1, n0, count=20)} && rmmod kping && echo 0 > "
               "$T/events/kvmsg/enable && echo 0 > $T/events/kverbs/enable "
               "&& cat $T/trace | grep -c kvmsg_ && "
               "grep -m1 kvmsg_send $T/trace && grep -m1 kvmsg_recv $T/trace "
               "&& grep -E 'kverbs_(cm_event|ep_state|ep_connect)' $T/trace",
               timeout=120)
    res.check(suite, "tracepoints kvmsg_send/kvmsg_recv fire",
              r.rc == 0 and "kvmsg_send:" in r.out and
              "kvmsg_recv:" in r.out, r.out[-1500:])
    # The connection's life by domain name and endpoint id: the CM's
    # CONNECT_RESPONSE (the QP is ours: kverbs answers the REP), then
    # CONNECTED, then teardown to CLOSED at rmmod.
    life = [re.search(p, r.out) for p in (
        r"kverbs_cm_event: .*CONNECT_RESPONSE",
        r"kverbs_ep_state: .*connecting -> connected",
        r"kverbs_ep_state: .*connected -> closing",
        r"kverbs_ep_state: .*closing -> closed")]
    res.check(suite, "kverbs tracepoints follow an endpoint from the CM's "
              "CONNECT_RESPONSE to CLOSED", r.rc == 0 and all(life),
              r.out[-2500:])
    n1.run("rmmod kping 2>/dev/null", timeout=30)


def _bad_headers(res, suite, n0, n1):
    """Malformed headers from a user-space peer: dropped, counted,
    logged, connection closed."""
    kvping = "/kvlab/bin/kvping"
    for bad, text in [("type", "unknown type"),
                      ("flags", "unknown flags"),
                      ("reserved", "reserved bits"),
                      ("len", "length does not match"),
                      ("credits", "credits beyond"),
                      ("seq", "out of sequence"),
                      ("short", "shorter than the header")]:
        r = n1.run(f"{kvping} --server-addr {n0.ip} --port {PORT} "
                   f"--node-id {n1.node_id} --bad-msg {bad} "
                   "--timeout-ms 10000", timeout=60)
        ok, log_ = _dmesg_has(n0, r"kping-server ep\d+: dropping message \d+ "
                                  rf"from node {n1.node_id}: .*{text}.*"
                                  "closing the connection")
        res.check(suite, f"malformed header ({bad}) dropped, logged, "
                  "connection closed", r.rc == 4 and ok,
                  f"kvping rc {r.rc}: {r.out}\nserver log tail:\n" +
                  log_[-800:])


def _kill_in_flight(res, suite, n0, n1):
    """A client killed with sends in flight: the server reclaims them."""
    n1.run(f"({kping(n1, n0, count=1000000, outstanding=8)}; "
           "echo rc=$?) > /tmp/kill.out 2>&1 &", timeout=30)
    _wait_connected(res, suite, n0, "8-outstanding client connected")
    _rdma_res_qp(res, suite, n0)
    before = _inflight(res, suite, n0, "kill with 8 in flight")
    # SIGKILL ends the insmod in the kernel's wait; the shell then
    # reports 128 + 9.
    r = n1.run("kill -9 $(pidof insmod); for i in $(seq 60); do "
               "grep -q rc= /tmp/kill.out && break; sleep 0.5; done; "
               "cat /tmp/kill.out; dmesg | grep kping | tail -n 2",
               timeout=90)
    res.check(suite, "client killed mid-run exits by the kill's signal "
              "(rc=137)", "rc=137" in r.out, r.out)
    r = n0.run("for i in $(seq 60); do grep -q 'state' "
               "/sys/kernel/debug/kverbs/kping-server.*/endpoints || "
               "exit 0; sleep 0.5; done; exit 1", timeout=60)
    res.check(suite, "server endpoint gone after the kill", r.rc == 0,
              r.out)
    _server_reclaimed(res, suite, n0, "kill with 8 in flight", before)


def _rdma_res_qp(res, suite, n0):
    """`rdma res show qp` lists the kping server's QP as a kernel RC QP
    in RTS (the same QP number debugfs shows)."""
    r = n0.run(f"cat {EP_FILE}; rdma res show qp", timeout=30)
    qpns = re.findall(r"^ep \d+ qpn (\d+) .*state connected", r.out,
                      re.M)
    rows = rdma_res.qp_rows(r.out)
    ours = [l for l in rows for q in qpns
            if re.search(rf"\blqpn {q}\b", l)]
    res.check(suite, "rdma res show qp lists the endpoint's QP, type RC, "
              "state RTS", bool(ours) and len(ours) == len(qpns), r.out)
    # Issue 27: an operator tells clients apart: the QP, the PD, the CQ
    # and the cm_ids carry the domain's (the client's) name, not kverbs'
    # or rdma_cm's
    res.check(suite, "rdma res show qp names the kping server's QPs "
              "[kping-server]", bool(ours) and
              all("[kping-server]" in l for l in ours), r.out)
    r = n0.run("rdma res show pd; rdma res show cq; rdma res show cm_id",
               timeout=30)
    res.check(suite, "rdma res names the kping server's PD, CQ and cm_ids "
              "after its domain ([kping-server]), none [kverbs]",
              len(re.findall(r"\[kping-server\]", r.out)) >= 3 and
              "[kverbs]" not in r.out, r.out)


def _krdma(res, suite, n0, n1, iwarp=False):
    """One-sided operations through per-region rkeys.  @iwarp: the device
    has no atomics (krdma says they were refused) and reads go through
    rdma_rw (issue 26, item 2)."""
    r = n0.run("insmod /kvlab/modules/krdma.ko", timeout=60)
    res.setup(suite, "krdma server loads", r.rc == 0, r.out)
    r = n1.run(f"insmod /kvlab/modules/krdma.ko server={n0.ip} "
               f"node_id={n1.node_id}; echo rc=$?; dmesg | grep krdma: && "
               "rmmod krdma", timeout=300)
    res.check(suite, "RDMA reads with a request right behind each: the "
              "data in place at each read's completion", "rc=0" in r.out and
              "read overlapped by a request: the data in place" in r.out,
              r.out)
    if iwarp:
        res.check(suite, "iWARP: RDMA read (rdma_rw registers the sink) "
                  "and write on registered regions; atomics refused "
                  "(-EOPNOTSUPP)", "rc=0" in r.out and "read and write ok; "
                  "atomics refused by the device (-95)" in r.out, r.out)
    else:
        res.check(suite, "RDMA read, write, compare-and-swap, fetch-and-add "
                  "on registered regions", "rc=0" in r.out and
                  "fetch-and-add ok" in r.out, r.out)
    res.check(suite, "access through an invalidated rkey refused",
              "rc=0" in r.out and "invalidated rkey refused" in r.out,
              r.out)
    r = n0.run("rmmod krdma", timeout=60)
    res.check(suite, "krdma server unloads", r.rc == 0, r.out)


def _device_removal(res, suite, n0, n1, dev="rxe0", kind="rxe"):
    """`rdma link delete` under a live connection: the client fails
    cleanly, the server reclaims everything, a new device works again."""
    n1.run(f"({kping(n1, n0, count=1000000, timeout_ms=3000, outstanding=8)}; "
           "echo rc=$?) > /tmp/bg.out 2>&1 &", timeout=30)
    _wait_connected(res, suite, n0, "long-running client connected")
    before = _inflight(res, suite, n0, "device removal with 8 in flight")
    r = n0.run(f"rdma link delete {dev} && sleep 2 && rdma link", timeout=60)
    res.check(suite, "rdma link delete with a live connection", r.rc == 0,
              r.out)
    ok, out = _dmesg_has(n0, rf"kverbs: device {dev} removed")
    res.check(suite, "server side: device removal completed", ok,
              out[-1500:])
    r = n1.run("for i in $(seq 120); do grep -q rc= /tmp/bg.out && break; "
               "sleep 0.5; done; cat /tmp/bg.out; dmesg | grep kping | "
               "tail -n 3", timeout=90)
    res.check(suite, "client: in-flight run fails with an error, no hang",
              "rc=" in r.out and "rc=0" not in r.out, r.out)
    _server_reclaimed(res, suite, n0, "device removal with 8 in flight",
                      before)
    r = n0.run(f"rdma link add {dev} type {kind} netdev eth0 && sleep 1 && "
               "dmesg | tail -n 5", timeout=60)
    res.check(suite, f"{dev} re-added", r.rc == 0, r.out)
    r = n1.run("rmmod kping 2>/dev/null; " + kping(n1, n0, count=200),
               timeout=180)
    res.check(suite, "exchange works again on the new device", r.rc == 0,
              r.out + _dmesg_has(n1, "x")[1][-800:])


def suite_cluster4(res, kernel):
    from .cluster import Cluster
    name = "cluster4"
    workdir = _fresh_workdir(name)
    overlay, _ = guest_overlay(kernel, workdir)
    try:
        with Cluster(kernel, nodes=4, workdir=workdir, overlay=overlay,
                     boot_timeout=180) as c:
            for n in c.nodes:
                r = n.run("insmod /kvlab/modules/kverbs.ko", timeout=60)
                res.setup(name, f"{n.name}: kverbs loads", r.rc == 0, r.out)
            server = c.nodes[0]
            r = server.run(kping(server, rnr_retry=0), timeout=60)
            res.setup(name, "server listens", r.rc == 0, r.out)
            for n in c.nodes[1:]:
                n.run(f"({kping(n, server, count=2000, outstanding=8, rnr_retry=0)}; "
                      "echo rc=$? ) > /tmp/all2one.out 2>&1 &", timeout=30)
            for n in c.nodes[1:]:
                r = n.run("for i in $(seq 240); do grep -q rc= "
                          "/tmp/all2one.out && break; sleep 0.5; done; "
                          "cat /tmp/all2one.out; dmesg | grep 'kping:' | "
                          "tail -n 2", timeout=180)
                res.check(name, f"{n.name} -> node0: 2000 round trips, 8 "
                          "outstanding, rnr_retry 0 (all-to-one)",
                          "rc=0" in r.out and
                          "2000 round trips ok" in r.out, r.out)
            r = server.run("rmmod kping && rmmod kverbs", timeout=120)
            res.check(name, "server unloads cleanly", r.rc == 0, r.out)
            _dead_peer(res, name, c.nodes[2], c.nodes[3])
        res.add(name, "guest consoles clean", True)
    except HarnessError as e:
        res.add(name, "cluster run", False, e)


# A dead peer ends a sending endpoint within kverbs' RC retry bound: 7
# transmissions at kverbs' ack timeout of 4.096 us * 2^17 (0.54 s) is
# 3.8 s; the check allows 10 s for TCG.  It fails if kverbs asks for 7
# retries (rxe retries forever) or leaves the RoCE CM's default ack
# timeout (2.1 s: about 15 s).
DEAD_PEER_BOUND_S = 10


def _dead_peer(res, suite, server, client):
    """Kill @server's guest while @client sends to it; the client's
    endpoint must leave the connected state within DEAD_PEER_BOUND_S."""
    for n in (server, client):     # earlier clients stay loaded
        n.run("rmmod kping 2>/dev/null", timeout=60)
    r = server.run(kping(server), timeout=60)
    res.check(suite, f"{server.name}: kping server for the dead-peer check",
              r.rc == 0, r.out)
    # A long run whose own reply timeout (120 s) cannot end it first.
    ping = kping(client, server, count=10000000, outstanding=8,
                 timeout_ms=120000)
    client.run(f"({ping}; echo rc=$?) > /tmp/dead.out 2>&1 &", timeout=30)
    eps = "/sys/kernel/debug/kverbs/kping-client.*/endpoints"
    r = client.run(f"for i in $(seq 100); do grep -q 'state connected' "
                   f"{eps} 2>/dev/null && exit 0; sleep 0.2; done; exit 1",
                   timeout=60)
    if not res.check(suite, f"{client.name}: connected to {server.name}",
                     r.rc == 0, r.out):
        return
    server.kill()
    t0 = time.monotonic()
    r = client.run(f"for i in $(seq {DEAD_PEER_BOUND_S * 5}); do "
                   f"grep -q 'state connected' {eps} 2>/dev/null || exit 0; "
                   "sleep 0.2; done; cat " + eps + "; exit 1",
                   timeout=DEAD_PEER_BOUND_S + 30)
    took = time.monotonic() - t0
    out = client.run("cat /tmp/dead.out; dmesg | grep -E 'kverbs|kping' | "
                     "tail -n 6", timeout=150).out
    res.check(suite, f"{client.name}: its endpoint to the killed "
              f"{server.name} fails within {DEAD_PEER_BOUND_S} s "
              f"(took {took:.1f} s)", r.rc == 0 and
              took <= DEAD_PEER_BOUND_S, r.out + out)
    # kping's client waits for its reply timeout (120 s) before it sees
    # the failed endpoint; the teardown reboots the guest under it.


def suite_smp(res, kernel, name):
    """Two-vCPU guests: selective polling and softirq completion handling
    on different CPUs of one domain must never process its CQ at the same
    time (completions would be handled out of order and the sequence check
    would close the connection)."""
    from .cluster import Cluster
    workdir = _fresh_workdir(name)
    try:
        dkms.installed(kernel.abi)
    except HarnessError:
        dkms.add()
        dkms.install(kernel.abi)
    overlay, _ = guest_overlay(kernel, workdir)
    try:
        with Cluster(kernel, nodes=2, workdir=workdir, overlay=overlay,
                     smp=2) as c:
            n0, n1 = c.nodes
            for n in (n0, n1):
                r = n.run("insmod /kvlab/modules/kverbs.ko && nproc",
                          timeout=60)
                res.setup(name, f"{n.name}: kverbs loads on 2 vCPUs",
                          r.rc == 0 and r.out.strip().endswith("2"), r.out)
            r = n0.run(kping(n0, mode="poll"), timeout=60)
            res.check(name, "poll-mode server (a polling kthread)",
                      r.rc == 0, r.out)
            # The client's insmod stays loaded after its run: unload it,
            # or the next client's insmod fails with EEXIST.
            r = n1.run(kping(n1, n0, mode="poll", outstanding=32,
                             count=20000, size=64) +
                       "; echo rc=$?; dmesg | grep -E 'kping:|kverbs:|kvmsg:' | "
                       "tail -n 4; rmmod kping", timeout=900)
            ok, log0 = _dmesg_has(n0, r"dropping message|out of sequence")
            res.check(name, "poll mode on both sides, 2 vCPUs, 32 "
                      "outstanding: 20000 round trips in order",
                      "rc=0" in r.out and "20000 round trips ok" in r.out
                      and not ok, r.out + "\nserver log:\n" + log0[-1500:])
            # Softirq handlers on one CPU while the client task sends
            # from the other; deferral to the workqueue, whose worker may
            # run on either CPU while the CQ's softirq runs on the other.
            for mode in ("softirq", "wq"):
                for n in (n0, n1):
                    n.run("dmesg -c > /dev/null", timeout=30)
                r = _restart_server(n0, mode=mode)
                res.check(name, f"{mode}-mode server", r.rc == 0, r.out)
                r = n1.run(kping(n1, n0, mode=mode, outstanding=32,
                                 count=10000, size=256, burst=2000) +
                           "; echo rc=$?; dmesg | grep -E 'kping:|kverbs:|"
                           "kvmsg:' | tail -n 4; rmmod kping", timeout=900)
                ok, log0 = _dmesg_has(n0, r"dropping message|out of sequence")
                burst_ok, _ = _dmesg_has(n0, rf"node {n1.node_id}: burst of "
                                         "2000, 2000 in order and intact")
                res.check(name, f"{mode} handlers, 2 vCPUs: a 2000-message "
                          "burst in order, then 10000 round trips with 32 "
                          "outstanding", "rc=0" in r.out and
                          "10000 round trips ok" in r.out and burst_ok and
                          not ok, r.out + "\nserver log:\n" + log0[-1500:])
            r = n0.run("cat /sys/kernel/debug/kverbs/kping-server.*/"
                       "endpoints; rmmod kping && rmmod kverbs", timeout=120)
            res.check(name, "server unloads", r.rc == 0, r.out)
        res.add(name, "guest consoles clean", True)
    except HarnessError as e:
        res.add(name, "cluster run", False, e)


class _KunitGuestKernel:
    """A KUnit kernel booted as a cluster guest: RDMA is built in."""
    builtin_modules = True

    def __init__(self, kk):
        self.series = f"kunit-{kk.variant}"
        self.abi = kk.build.name
        self.vmlinuz = kk.bzimage


def _debug_cluster(name, modules, binaries, smp=1, variant="debug"):
    """A 2-guest cluster booting the debug KUnit kernel @variant (debug:
    6.1 source, debug-6.12) with @modules (names of its kbuild) and
    user-space @binaries (meson build paths)."""
    from . import initramfs, kunit
    from .cluster import Cluster
    kk = kunit.kernel(variant)
    mods = kbuild.build(kk.build, build_dir() / "kbuild" / f"kunit-{variant}",
                        kunit=True)
    workdir = _fresh_workdir(name)
    files = {f"/kvlab/modules/{n}": mods[n] for n in modules}
    for b in binaries:
        initramfs.add_binary(files, meson_build() / b)
    overlay = initramfs.build_overlay(files, workdir / "overlay.cpio")
    # q35: see testbed/kunit/debug.config (ACPI).
    # nosoftlockup: see testbed/kunit/debug.config (the guests' /init
    # arms the watchdog; Cluster checks that it did).
    return Cluster(_KunitGuestKernel(kk), nodes=2, workdir=workdir,
                   overlay=overlay, boot_timeout=kunit.guest_timeout(kk, 120),
                   mem_mb=1024, smp=smp, machine="q35",
                   append="nosoftlockup")


def load_kverbs(res, suite, nodes):
    """insmod the guests' kverbs.ko (a set-up step of @suite)."""
    for n in nodes:
        r = n.run("insmod /kvlab/modules/kverbs.ko", timeout=120)
        res.setup(suite, f"{n.name}: kverbs loads", r.rc == 0, r.out)


def suite_integration_debug(res, variant="debug"):
    """The two-guest exchange and device removal on the debug KUnit kernel
    (KASAN, lockdep, DEBUG_ATOMIC_SLEEP, kmemleak), which distro kernels
    cannot give; any report on a console fails the run.  @variant: debug
    (6.1 source) or debug-6.12 (integration-debug-6.12)."""
    name = f"integration-{variant}"
    try:
        with _debug_cluster(name, ("kverbs.ko", "kping.ko", "krdma.ko",
                                   "kvleak.ko"),
                            ("tools/kvping/kvping", "/usr/bin/setpriv"),
                            variant=variant) as c:
            n0, n1 = c.nodes
            load_kverbs(res, name, c.nodes)
            r = n0.run(kping(n0), timeout=120)
            res.setup(name, "kping server listens", r.rc == 0, r.out)
            r = n1.run(kping(n1, n0, count=500, size=512) +
                       " && rmmod kping", timeout=600)
            res.check(name, "kping 500 round trips under KASAN/lockdep",
                      r.rc == 0, r.out)
            # Every kernel-side check of the distro suites, then the
            # regressions that only this kernel can show.
            _messaging(res, name, n0, n1)
            _user_space_peer(res, name, n0, n1)
            _depth_clamp_undone(res, name, n0, n1)
            auth_checks(res, name, n0, n1, kping, test_build=True)
            _device_removal(res, name, n0, n1)
            for n in (n0, n1):
                r = n.run("rmmod krdma 2>/dev/null; rmmod kping 2>/dev/null; "
                          "rmmod kverbs",
                          timeout=300)
                leaks = kmemleak_report(n)
                res.check(name, f"{n.name}: rmmod, then kmemleak (two "
                          "scans) finds nothing", r.rc == 0 and not leaks,
                          r.out + leaks[-3000:])
            _kmemleak_catches(res, name, n0)
            _planted_reports(res, name, n1)
        res.add(name, "guest consoles clean (KASAN, lockdep, ...)", True)
    except HarnessError as e:
        res.add(name, "cluster run", False, e)


def _kmemleak_catches(res, suite, n):
    """The kmemleak check can fail: kvleak.ko (test-only) leaks on
    purpose and must be reported, by its own allocation function."""
    # The report names functions when it is read: unload only after.
    with n.expect_report("kmemleak"):
        r = n.run("insmod /kvlab/modules/kvleak.ko count=2", timeout=60)
        leaks = kmemleak_report(n)
        n.run("rmmod kvleak", timeout=60)
    res.check(suite, "planted leak (kvleak.ko) reported by the two-scan "
              "kmemleak check", r.rc == 0 and "unreferenced object" in leaks
              and "kvleak_alloc" in leaks, r.out + leaks[-3000:])
    n.run("echo clear > /sys/kernel/debug/kmemleak", timeout=120)


def _planted_reports(res, suite, n):
    """The console scan fails a run on a WARNING or a KASAN report: one of
    each, planted by kvleak.ko (test-only) in a real guest, must be found
    by the same scanner, by kind and on the lines it was printed."""
    for fault, kind in (("warn", "WARNING"), ("uaf", "KASAN")):
        with n.expect_report(kind):
            r = n.run(f"insmod /kvlab/modules/kvleak.ko fault={fault} && "
                      "rmmod kvleak", timeout=60)
        _k, first, last = n.expected[-1]
        found = [f for f in console.scan(n.console_path)
                 if first <= f.lineno <= last]
        res.check(suite, f"planted {kind} (kvleak.ko fault={fault}) found "
                  "by the console scan", r.rc == 0 and
                  any(f.kind == kind for f in found),
                  r.out + "\n" + "\n".join(str(f) for f in found))


def suite_kvmem_debug(res):
    """The kvmem behaviour tests on the debug kernel (KASAN, lockdep,
    kmemleak), two vCPUs per guest as on the distro kernels."""
    from .suite_kvmem import kvmem_checks
    name = "kvmem-debug"
    try:
        with _debug_cluster(name, ("kvmem.ko", "kvmemclient.ko"),
                            ("tools/kvmem/kvmem-test",),
                            smp=2) as c:
            kvmem_checks(res, name, c.nodes[0])
            leaks = kmemleak_report(c.nodes[0])
            res.check(name, "kmemleak (two scans) finds nothing", not leaks,
                      leaks[-3000:])
        res.add(name, "guest consoles clean (KASAN, lockdep, ...)", True)
    except HarnessError as e:
        res.add(name, "cluster run", False, e)


def run_suite(res, name, fn, *args):
    with res.timed(name):
        try:
            fn(res, *args)
        except HarnessError as e:
            res.add(name, "suite setup", False, e)
        except Exception:  # a harness bug must not hide the other suites
            res.add(name, "suite crashed", False, traceback.format_exc())
