"""Debian packages from the tree (debian/): build, lintian, contents.

`./kvlab package` builds kverbs-dkms, kverbs-tools and libkverbs-dev into
build/package/ with dpkg-buildpackage (debhelper, dh-dkms) from a copy of
the tracked files, as a clean clone would have them; the `package` suite
does the same and checks what an operator gets: lintian without an error,
each package holding what it should and nothing of the tests.
"""
import os
import re
import shutil

from .common import REPO, HarnessError, build_dir, log, require_tool, run
from . import dkms

PACKAGES = ("kverbs-dkms", "kverbs-tools", "libkverbs-dev")
TOOLS = ("kdsmctl", "kfcachectl", "kmigrate", "kvping")
UNITS = ("lib/systemd/system/kfcache-server.service",
         "lib/systemd/system/kmigrate.service")
EXAMPLES = tuple(f"usr/share/doc/kverbs-tools/examples/{f}" for f in
                 ("kfcache.conf", "kmigrate-serve.conf", "kmigrate.default",
                  "modules-load.conf"))
LIBS = ("libkdsm.a", "libkmigrate.a", "libkvgenl.a", "libkvwire.a")
PKGCONFIG = ("kdsm.pc", "kmigrate.pc", "kvwire.pc")


def out_dir():
    return build_dir() / "package"


def _export(dest):
    """The tracked files of the tree, as they are in the working tree."""
    files = run(["git", "ls-files", "-z"], cwd=REPO).stdout.split("\0")
    for f in filter(None, files):
        src = REPO / f
        if not src.exists():        # deleted, not yet committed
            continue
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / f, follow_symlinks=False)


def build(timeout=1800):
    """Build the three packages in build/package/; {package: .deb path},
    the .changes path and the build's log."""
    require_tool("dpkg-buildpackage", "dpkg-dev")
    require_tool("dh", "debhelper")
    require_tool("dh_dkms", "dh-dkms")
    out = out_dir()
    shutil.rmtree(out, ignore_errors=True)
    src = out / "kverbs"
    src.mkdir(parents=True)
    _export(src)
    log(f"building {', '.join(PACKAGES)} in {out}")
    # the unit suite runs the meson tests; ccache as the unit build has it
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck parallel=2")
    p = run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, env=env,
            timeout=timeout, check=False)
    text = p.stdout + (p.stderr or "")
    (out / "build.log").write_text(text)
    if p.returncode:
        raise HarnessError(f"dpkg-buildpackage failed (exit {p.returncode})",
                           text[-3000:])
    ver = dkms.version()
    debs = {}
    for name in PACKAGES:
        hits = sorted(out.glob(f"{name}_{ver}_*.deb"))
        if not hits:
            raise HarnessError(f"no {name}_{ver}_*.deb in {out}", text[-2000:])
        debs[name] = hits[0]
    changes = sorted(out.glob(f"kverbs_{ver}_*.changes"))
    if not changes:
        raise HarnessError(f"no kverbs_{ver}_*.changes in {out}")
    return debs, changes[0], text


def contents(deb):
    """The paths a .deb installs (files and links, not directories)."""
    p = run(["dpkg-deb", "-c", str(deb)], timeout=60)
    paths = []
    for line in p.stdout.splitlines():
        path = line.split(None, 5)[-1].split(" -> ")[0]
        if not path.endswith("/"):
            paths.append(path[2:] if path.startswith("./") else path)
    return paths


def control(deb, field):
    return run(["dpkg-deb", "-f", str(deb), field], timeout=60).stdout.strip()


def lintian(changes):
    """lintian --pedantic's tags: (errors, warnings, every line)."""
    require_tool("lintian", "lintian")
    p = run(["lintian", "--pedantic", str(changes)], timeout=900, check=False)
    lines = [l for l in p.stdout.splitlines() if re.match(r"^[EWIPX]: ", l)]
    return ([l for l in lines if l.startswith("E: ")],
            [l for l in lines if l.startswith("W: ")], lines)


def tools_problems(paths):
    """kverbs-tools: exactly the four tools in /usr/bin, each with its
    manual page, the udev rule."""
    bins = sorted(p.rsplit("/", 1)[1] for p in paths
                  if p.startswith("usr/bin/"))
    bad = [] if bins == sorted(TOOLS) else [f"usr/bin holds {bins}, "
                                            f"not {sorted(TOOLS)}"]
    if not any(p.startswith(("lib/udev/rules.d/", "usr/lib/udev/rules.d/"))
               for p in paths):
        bad.append("no udev rule")
    pages = {m.group(1) for p in paths
             if (m := re.match(r"usr/share/man/man[18]/([\w-]+)\.[18]\.gz$", p))}
    bad += [f"no manual page for {t}" for t in TOOLS if t not in pages]
    comp = {p.rsplit("/", 1)[1] for p in paths
            if p.startswith("usr/share/bash-completion/completions/")}
    bad += [f"no bash completion for {t}" for t in TOOLS if t not in comp]
    bad += [f"missing {w}" for w in UNITS + EXAMPLES if w not in paths]
    bad += [f"a test or benchmark program: {p}" for p in paths
            if "libexec" in p or re.search(r"/(kdsm|udsm|kvbench)-", p)]
    return bad


def unit_problems(deb):
    """systemd-analyze verify of @deb's units, as extracted.  The build
    host lacks the package's own tools, so "Command /usr/bin/TOOL is not
    executable" is no problem for a TOOL the package ships; anything else
    is."""
    require_tool("systemd-analyze", "systemd")
    root = _extract(deb)
    units = [str(root / u) for u in UNITS if (root / u).exists()]
    if len(units) != len(UNITS):
        return [f"{len(units)} of {len(UNITS)} units in the package"]
    p = run(["systemd-analyze", "verify", "--man=no"] + units, check=False,
            timeout=120)
    mine = "|".join(TOOLS)
    return [l for l in ((p.stdout or "") + (p.stderr or "")).splitlines() if l.strip() and
            not re.search(rf"Command /usr/bin/({mine}) is not executable", l)
            ]


def dev_problems(paths):
    """libkverbs-dev: the static libraries, their pkg-config files and
    headers, no program."""
    names = {p.rsplit("/", 1)[1] for p in paths}
    bad = [f"missing {n}" for n in LIBS + PKGCONFIG if n not in names]
    bad += [f"a program: {p}" for p in paths if "/bin/" in p]
    if not any(p.startswith("usr/include/kverbs/") for p in paths):
        bad.append("no uapi header in usr/include/kverbs")
    return bad


def dkms_problems(paths):
    """kverbs-dkms: what scripts/dkms-src stages under /usr/src, nothing
    of the tests (kunit/, testbed/, tools/)."""
    root = f"usr/src/kverbs-{dkms.version()}/"
    want = run(["sh", str(REPO / "scripts/dkms-src"), "--list"],
               timeout=30).stdout.split()
    bad = [f"missing {root}{w}" for w in want
           if not any(p == root + w or p.startswith(root + w + "/")
                      for p in paths)]
    bad += [f"outside {root} and usr/share/doc: {p}" for p in paths
            if not p.startswith((root, "usr/share/doc/"))]
    bad += [f"a test's source: {p}" for p in paths
            if re.match(re.escape(root) + r"(kunit|testbed|tools|bench)/", p)]
    return bad


def suite_package(res):
    """Build the packages from the tracked files; lintian; contents; then
    install them in a clean chroot and run a sample from them
    (testbed/package_install.py)."""
    name = "package"
    try:
        debs, changes, _ = build()
    except HarnessError as e:
        res.add(name, "kverbs-dkms, kverbs-tools and libkverbs-dev build "
                "(dpkg-buildpackage, debhelper, dh-dkms)", False, e)
        return
    res.add(name, "kverbs-dkms, kverbs-tools and libkverbs-dev build "
            f"(dpkg-buildpackage, debhelper, dh-dkms): {changes.name}", True)
    errors, warnings, lines = lintian(changes)
    res.check(name, f"lintian --pedantic: no error ({len(warnings)} "
              "warning(s), listed in the detail)", not errors,
              "\n".join(lines) or "no tag")
    checks = (("kverbs-tools", tools_problems,
               "kverbs-tools: the four tools, their manual pages and bash "
              "completions, a udev rule, the systemd units and example "
              "configuration, no test program"),
              ("libkverbs-dev", dev_problems,
               "libkverbs-dev: static libraries, pkg-config files, headers"),
              ("kverbs-dkms", dkms_problems,
               "kverbs-dkms: the DKMS sources under /usr/src, no test"))
    for pkg, fn, what in checks:
        paths = contents(debs[pkg])
        bad = fn(paths)
        res.check(name, what, paths and not bad,
                  "\n".join(bad) + "\n--- contents\n" + "\n".join(paths))
    tools = debs["kverbs-tools"]
    bad = unit_problems(tools)
    res.check(name, "kverbs-tools' systemd units (kfcache-server, kmigrate) "
              "pass systemd-analyze verify", not bad, "\n".join(bad))
    res.check(name, "kverbs-tools creates the kverbs group its udev rule "
              "names (postinst: addgroup --system) and depends on adduser",
              "adduser" in control(tools, "Depends") and
              _postinst_adds_group(tools), control(tools, "Depends"))
    conf = _extract(debs["kverbs-dkms"]) / \
        f"usr/src/kverbs-{dkms.version()}/dkms.conf"
    res.check(name, "kverbs-dkms depends on dkms and carries the tree's "
              "dkms.conf, at its version",
              "dkms" in control(debs["kverbs-dkms"], "Depends") and
              control(debs["kverbs-dkms"], "Version") == dkms.version() and
              conf.exists() and
              conf.read_bytes() == (REPO / "dkms.conf").read_bytes(),
              control(debs["kverbs-dkms"], "Depends"))
    from . import kernels, package_install
    try:
        kernel = kernels.resolve("6.1")
    except HarnessError as e:
        res.add(name, "the guests' kernel (6.1)", False, e)
        return
    package_install.install_checks(res, name, debs, kernel)


def _extract(deb):
    """@deb's files under build/package/root-<package>."""
    root = out_dir() / f"root-{deb.name.split('_')[0]}"
    shutil.rmtree(root, ignore_errors=True)
    run(["dpkg-deb", "-x", str(deb), str(root)], timeout=120)
    return root


def _postinst_adds_group(deb):
    ctrl = out_dir() / "ctrl-kverbs-tools"
    shutil.rmtree(ctrl, ignore_errors=True)
    run(["dpkg-deb", "-e", str(deb), str(ctrl)], timeout=60)
    script = ctrl / "postinst"
    return script.exists() and bool(
        re.search(r"addgroup --system\b.*\bkverbs\b", script.read_text()))
