"""The YAML specs of our generic netlink families
(Documentation/netlink/specs/, issue 28, item 3) against our uapi headers:
the kernel's own generator, ynl-gen-c from Debian's newest linux-source,
renders each spec's uapi header, and every name it defines must be in ours
with the same value (compiled, so expressions count, not spelling).  The
headers stay hand-written; the spec is what ynl and other tools read, and
this keeps the two from drifting apart."""
import re
import shutil
import sys
import tarfile
from pathlib import Path

from .common import REPO, build_dir, cache_dir, require_tool, run
from . import kernels

SPECS = REPO / "Documentation" / "netlink" / "specs"
WANT = ("tools/net/ynl/", "Documentation/netlink/genetlink")


def ynl_tree():
    """tools/net/ynl and the netlink schemas of the newest linux-source
    tarball, extracted once (ynl-gen-c wants a kernel tree around the
    spec: it looks for MAINTAINERS and ../genetlink*.yaml)."""
    tar = kernels.newest_linux_source("ynl-gen-c")
    dst = cache_dir() / f"ynl-{tar.name.split('.tar')[0]}"
    gen = dst / "tools" / "net" / "ynl" / "ynl-gen-c.py"
    if gen.exists():
        return dst
    part = dst.with_name(dst.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    with tarfile.open(tar) as tf:
        for m in tf:
            rel = m.name.split("/", 1)[-1]
            if rel.startswith(WANT) and (m.isfile() or m.isdir()):
                m.name = rel
                tf.extract(m, part)
    (part / "MAINTAINERS").touch()
    part.rename(dst)
    return dst


def _values(header, names, include):
    """{name: value as text} of @names, compiled against @header."""
    cc = require_tool("gcc", "build-essential")
    work = build_dir() / "netlink-specs"
    work.mkdir(parents=True, exist_ok=True)
    src = work / "values.c"
    lines = ["#include <stdio.h>", f'#include "{header}"', "int main(void)",
             "{"]
    for n, is_str in names:
        fmt = "%s" if is_str else "%lld"
        cast = "" if is_str else "(long long)"
        lines.append(f'\tprintf("{n} {fmt}\\n", {cast}({n}));')
    lines += ["\treturn 0;", "}"]
    src.write_text("\n".join(lines) + "\n")
    exe = work / "values"
    p = run([cc, "-I", str(include), "-o", str(exe), str(src)], check=False,
            timeout=120)
    if p.returncode:
        missing = sorted(set(re.findall(r"[\u2018'](\w+)[\u2019'] undeclared", p.stdout +
                                        (p.stderr or ""))))
        return None, missing or [(p.stdout + (p.stderr or ""))[-800:]]
    out = run([str(exe)], timeout=30).stdout
    return dict(l.split(" ", 1) for l in out.splitlines()), []


def _generated_names(text):
    """(name, is a string) of every enumerator and #define of a generated
    uapi header, its include guard and private __ names left out."""
    names = []
    for m in re.finditer(r"^\t([A-Z][A-Z0-9_]*)(?: = [^,]+)?,?$", text, re.M):
        names.append((m.group(1), False))
    for m in re.finditer(r"^#define ([A-Z][A-Z0-9_]*)\s+(\S.*)$", text, re.M):
        names.append((m.group(1), m.group(2).startswith('"')))
    return [(n, s) for n, s in names if not n.startswith("_")]


def spec_problems():
    """What differs between each spec's generated header and ours."""
    specs = sorted(SPECS.glob("*.yaml"))
    if not specs:
        return ["no spec in Documentation/netlink/specs"]
    tree = ynl_tree()
    bad = []
    for spec in specs:
        here = tree / "Documentation" / "netlink" / "specs"
        here.mkdir(parents=True, exist_ok=True)
        shutil.copy2(spec, here / spec.name)
        out = build_dir() / "netlink-specs" / f"{spec.stem}.h"
        out.parent.mkdir(parents=True, exist_ok=True)
        p = run([sys.executable, str(tree / "tools/net/ynl/ynl-gen-c.py"),
                 "--mode", "uapi", "--header", "--spec", str(here / spec.name),
                 "-o", str(out)], check=False, timeout=300)
        if p.returncode or not out.exists():
            bad.append(f"{spec.name}: ynl-gen-c failed: "
                       f"{(p.stdout + (p.stderr or ''))[-1500:]}")
            continue
        m = re.search(r"^uapi-header:\s*(\S+)", spec.read_text(), re.M)
        if not m:
            bad.append(f"{spec.name}: no uapi-header")
            continue
        ours = REPO / "include" / "uapi" / m.group(1)
        names = _generated_names(out.read_text())
        gen, err = _values(out.name, names, out.parent)
        if err:
            bad.append(f"{spec.name}: its own header does not compile: {err}")
            continue
        have, missing = _values(m.group(1), names, REPO / "include" / "uapi")
        if missing:
            bad.append(f"{spec.name}: {ours.relative_to(REPO)} lacks "
                       f"{', '.join(missing)}")
            continue
        bad += [f"{spec.name}: {n} is {have[n]} in "
                f"{ours.relative_to(REPO)}, {v} in the spec"
                for n, v in gen.items() if have.get(n) != v]
    return bad


# ---------------------------------------------------------- ynl in a guest
PYTHON = "/usr/bin/python3.11"
DIST = "/usr/lib/python3/dist-packages"
YNL = "/kvlab/ynl"          # cli.py and lib/ in the guest
GUEST_SPECS = "/kvlab/specs"

_MODS = """
import atexit, os, runpy, sys
out, script = sys.argv[1], sys.argv[2]
def dump():
    with open(out, "w") as f:
        for m in list(sys.modules.values()):
            p = getattr(m, "__file__", None)
            if p:
                f.write(p + "\\n")
atexit.register(dump)
sys.argv = sys.argv[2:]
sys.path.insert(0, os.path.dirname(script))
try:
    runpy.run_path(script, run_name="__main__")
except BaseException:
    pass
"""


def guest_files():
    """{guest path: host path} for running ynl's cli.py in a guest: Debian's
    python3, the modules cli.py imports (found by running it here, up to
    the family lookup that fails without our modules), PyYAML, ynl's lib
    and our specs."""
    from . import initramfs
    tree = ynl_tree()
    cli = tree / "tools" / "net" / "ynl" / "cli.py"
    mods = build_dir() / "netlink-specs" / "ynl-modules.txt"
    mods.parent.mkdir(parents=True, exist_ok=True)
    run([PYTHON, "-S", "-c", _MODS, str(mods), str(cli), "--spec",
         str(SPECS / "kdsm.yaml"), "--no-schema", "--do", "get"],
        env={"PYTHONPATH": DIST, "PATH": "/usr/bin:/bin"}, check=False,
        timeout=120)
    files = {}
    initramfs.add_binary(files, PYTHON, guest_dir="/usr/bin")
    for line in mods.read_text().split():
        p = Path(line)
        if p.is_file() and str(p).startswith(("/usr/lib/python3",)):
            files[str(p)] = p
    for p in (tree / "tools" / "net" / "ynl" / "lib").glob("*.py"):
        files[f"{YNL}/lib/{p.name}"] = p
    files[f"{YNL}/cli.py"] = cli
    for spec in SPECS.glob("*.yaml"):
        files[f"{GUEST_SPECS}/{spec.name}"] = spec
    return files


def ynl(node, family, args, timeout=60):
    """ynl's cli.py in @node for @family's spec: (status, output)."""
    r = node.run(f"PYTHONPATH={DIST} {PYTHON} -S {YNL}/cli.py --no-schema "
                 f"--spec {GUEST_SPECS}/{family}.yaml --output-json {args}",
                 timeout=timeout)
    return r.rc, r.out


def _json(text):
    import json
    try:
        return json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def ynl_checks(res, suite, node, port=18899):
    """ynl drives each family from its spec (issue 28, item 3): GET of
    kdsm and kmigrate; kfcache_srv's START, EXPORT, the EXPORT_GET dump,
    GET, a refused EXPORT whose extended ack ynl prints, UNEXPORT, STOP.
    Loads kvmem, kdsm, kfcache_srv and kmigrate beside kverbs, and unloads
    them."""
    import json
    import socket
    import struct
    r = node.run(" && ".join(f"insmod /kvlab/modules/{m}.ko" for m in
                             ("kvmem", "kdsm", "kfcache_srv", "kmigrate")),
                 timeout=60)
    if not res.check(suite, "ynl: kvmem, kdsm, kfcache_srv and kmigrate load",
                     r.rc == 0, r.out):
        return
    addr = (struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) +
            socket.inet_aton(node.ip) + bytes(8)).hex()
    steps = [("kdsm", "--do get"), ("kmigrate", "--do get"),
             ("kfcache_srv", f"--do start --json '{json.dumps({'addr': addr})}'"),
             ("kfcache_srv", "--do export --json "
              "'{\"name\": \"ynl\", \"path\": \"/tmp\"}'"),
             ("kfcache_srv", "--dump export-get"),
             ("kfcache_srv", "--do get"),
             ("kfcache_srv", "--do export --json "
              "'{\"name\": \"a/b\", \"path\": \"/tmp\"}'"),
             ("kfcache_srv", "--do unexport --json '{\"name\": \"ynl\"}'"),
             ("kfcache_srv", "--do stop")]
    outs = [ynl(node, fam, args) for fam, args in steps]
    log = "\n".join(f"$ ynl --family {fam} {args}\n{rc}: {out.strip()}"
                    for (fam, args), (rc, out) in zip(steps, outs))
    kdsm, kmig = _json(outs[0][1]), _json(outs[1][1])
    dump, get = _json(outs[4][1]), _json(outs[5][1])
    ok = (all(rc == 0 for i, (rc, _) in enumerate(outs) if i != 6) and
          isinstance(kdsm, dict) and kdsm.get("state") == "none" and
          isinstance(kmig, dict) and kmig.get("running") == 0 and
          dump == [{"name": "ynl", "path": "/tmp"}] and
          isinstance(get, dict) and get.get("running") == 1 and
          "stats" in get and outs[6][0] != 0 and
          "one non-empty path component" in outs[6][1])
    res.check(suite, "ynl drives each family from its YAML spec: GET of kdsm "
              "and kmigrate; kfcache_srv's start, export, the export dump, "
              "GET, a refusal with its extended ack, unexport, stop", ok, log)
    r = node.run("rmmod kmigrate kfcache_srv kdsm kvmem", timeout=60)
    res.check(suite, "ynl: the four modules unload", r.rc == 0, r.out)
