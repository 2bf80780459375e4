"""Install kverbs through DKMS for a kernel, as an operator would, in a
throw-away DKMS tree of this checkout's.

The source tree handed to DKMS is the shipped subset (testbed.kbuild's
KERNEL_SOURCES): kunit/ is not in it, so test modules can never be built or
installed by DKMS.

The host's DKMS is never touched: every dkms command runs with its three
trees under build/dkms (TREE): the DKMS tree (var/lib/dkms), the source
tree (usr/src) and the install tree (lib/modules, whose <abi>/build links
to the kernel's headers), and without depmod.  So a host whose own kernel
is one of ours keeps its modules, and the host's /var/lib/dkms and
/usr/src keep whatever its administrator put there.
"""
import lzma
import os
import re
import shutil
from pathlib import Path

from .common import REPO, HarnessError, build_dir, require_tool, run

PACKAGE = "kverbs"


def tree():
    """The throw-away root of the lab's DKMS trees."""
    return build_dir() / "dkms"


def dkms_tree():
    """The lab's DKMS state (the host's /var/lib/dkms)."""
    return tree() / "var" / "lib" / "dkms"


def source_tree():
    """The lab's DKMS sources (the host's /usr/src)."""
    return tree() / "usr" / "src"


def install_tree(abi=None):
    """The lab's module trees (the host's /lib/modules), or @abi's."""
    t = tree() / "lib" / "modules"
    return t / abi if abi else t


def _dkms(args, abi=None, **kw):
    """Run dkms on the lab's trees; with @abi, for that kernel (its
    headers must be installed: /lib/modules/<abi>/build)."""
    require_tool("dkms", "dkms")
    for d in (dkms_tree(), source_tree(), install_tree()):
        d.mkdir(parents=True, exist_ok=True)
    cmd = ["dkms"] + args
    if abi is not None:
        headers = Path(f"/lib/modules/{abi}/build")
        if not headers.exists():
            raise HarnessError(f"no kernel headers for {abi} ({headers})",
                               f"apt-get install linux-headers-{abi}")
        kdir = install_tree(abi)
        kdir.mkdir(parents=True, exist_ok=True)
        link = kdir / "build"
        if not link.is_symlink():
            link.symlink_to(headers)
        cmd += ["-k", abi, "--kernelsourcedir", str(headers)]
    cmd += ["--dkmstree", str(dkms_tree()),
            "--sourcetree", str(source_tree()),
            "--installtree", str(install_tree()), "--no-depmod"]
    # dkms signs with (and first creates) /var/lib/dkms/mok.key whatever
    # --dkmstree says, unless framework.conf or the environment names a
    # key: the lab's is its own.
    env = dict(os.environ, mok_signing_key=str(tree() / "mok.key"),
               mok_certificate=str(tree() / "mok.pub"))
    return run(cmd, env=env, **kw)


def host_state():
    """What the host's own DKMS and module trees hold (names and times),
    for a check that the lab left them alone."""
    out = []
    roots = [Path("/var/lib/dkms"), Path("/usr/src")] + \
        sorted(Path("/lib/modules").glob("*/updates"))
    # depmod's output too (the lab runs dkms with --no-depmod)
    for p in sorted(Path("/lib/modules").glob("*/modules.dep*")):
        out.append(f"{p} {p.stat().st_mtime_ns}")
    for root in roots:
        if not root.exists():
            continue
        for p in sorted(root.rglob("*")) if root.name != "src" else \
                sorted(root.iterdir()):
            try:
                out.append(f"{p} {p.lstat().st_mtime_ns}")
            except OSError:
                pass
    return out


def version():
    text = (REPO / "dkms.conf").read_text()
    m = re.search(r'^PACKAGE_VERSION="([^"]+)"', text, re.M)
    if not m:
        raise HarnessError("dkms.conf has no PACKAGE_VERSION")
    return m.group(1)


def shipped_modules():
    """Module names dkms.conf installs."""
    text = (REPO / "dkms.conf").read_text()
    return re.findall(r'^BUILT_MODULE_NAME\[\d+\]="([^"]+)"', text, re.M)


def add():
    """(Re)register the current sources with the lab's DKMS."""
    ver = version()
    _dkms(["remove", f"{PACKAGE}/{ver}", "--all"], check=False)
    src = src_dir()
    # As the README tells an operator: make dkms-src, then dkms add.
    staged = run(["make", "-s", "-C", str(REPO), "dkms-src",
                  f"DESTDIR={tree()}"]).stdout
    if staged.strip().splitlines()[-1:] != [str(src)]:
        raise HarnessError(f"make dkms-src staged {staged.strip()!r}, "
                           f"not {src}")
    _dkms(["add", f"{PACKAGE}/{ver}"])
    return src


def src_dir():
    """The staged source tree (an operator's /usr/src/kverbs-<version>)."""
    return source_tree() / f"{PACKAGE}-{version()}"


def kept_symvers(abi):
    """The Module.symvers scripts/dkms.postbuild kept for kernel @abi."""
    arch = run(["uname", "-m"]).stdout.strip()
    return (dkms_tree() / PACKAGE / version() / abi / arch /
            "Module.symvers")


def _dkms_install(package, ver, abi):
    """dkms build + install of @package/@ver for kernel @abi; a failure
    raises with the end of DKMS's make.log."""
    p = _dkms(["install", f"{package}/{ver}"], abi, timeout=900,
              check=False)
    if p.returncode != 0:
        log_path = dkms_tree() / package / ver / "build/make.log"
        tail = log_path.read_text()[-3000:] if log_path.exists() else ""
        raise HarnessError(f"dkms install {package} for {abi} failed:\n"
                           f"{p.stdout}\n{tail}")


def install(abi):
    """dkms build + install for kernel `abi`; return {name: installed path}."""
    _dkms_install(PACKAGE, version(), abi)
    return installed(abi)


def updates_dir(abi):
    """Where DKMS installs modules for @abi (/lib/modules/<abi>/updates/dkms
    on an operator's machine)."""
    return install_tree(abi) / "updates" / "dkms"


def installed(abi):
    """The .ko files DKMS installed for `abi` (possibly .ko.xz/.ko.zst)."""
    d = updates_dir(abi)
    found = {}
    for name in shipped_modules():
        cands = [p for p in d.glob(f"{name}.ko*")]
        if not cands:
            raise HarnessError(f"DKMS did not install {name} for {abi} "
                               f"(nothing in {d})",
                               "run ./kvlab test --suite dkms")
        found[name] = cands[0]
    return found


# The third-party client (examples/kvreq): its own DKMS package, built
# against the installed kverbs only (BUILD_DEPENDS="kverbs").
CLIENT = "kvreq"
CLIENT_DIR = REPO / "examples" / CLIENT


def client_version():
    text = (CLIENT_DIR / "dkms.conf").read_text()
    m = re.search(r'^PACKAGE_VERSION="([^"]+)"', text, re.M)
    if not m:
        raise HarnessError(f"{CLIENT_DIR}/dkms.conf has no PACKAGE_VERSION")
    return m.group(1)


def client_install(abis):
    """Copy examples/kvreq to <source tree>/kvreq-<version> (as its
    package would put it in /usr/src), dkms add it and install it for each
    kernel of @abis; return {abi: installed path}.  Its dkms.conf may name
    no path into this checkout: it builds from DKMS's trees only."""
    ver = client_version()
    src = source_tree() / f"{CLIENT}-{ver}"
    _dkms(["remove", f"{CLIENT}/{ver}", "--all"], check=False)
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(CLIENT_DIR, src, ignore=shutil.ignore_patterns(
        "*.o", "*.ko", "*.cmd", "*.mod*", "Module.symvers", "modules.order"))
    _dkms(["add", f"{CLIENT}/{ver}"])
    out = {}
    for abi in abis:
        _dkms_install(CLIENT, ver, abi)
        out[abi] = client_installed(abi)
    return out


def client_installed(abi):
    """The client module DKMS installed for @abi, or None."""
    d = updates_dir(abi)
    cands = sorted(d.glob(f"{CLIENT}.ko*")) if d.exists() else []
    return cands[0] if cands else None


def plain_ko(path, outdir):
    """Return an uncompressed copy of a module for busybox insmod."""
    path, outdir = Path(path), Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".ko":
        dst = outdir / path.name
        shutil.copy2(path, dst)
        return dst
    dst = outdir / path.name.rsplit(".ko", 1)[0]
    dst = dst.with_suffix(".ko")
    if path.suffix == ".xz":
        dst.write_bytes(lzma.decompress(path.read_bytes()))
    elif path.suffix == ".zst":
        require_tool("zstd", "zstd")
        run(["zstd", "-q", "-d", "-f", "-o", str(dst), str(path)])
    else:
        raise HarnessError(f"unknown module compression: {path}")
    return dst


def srcversion(ko):
    """modinfo's srcversion of a module file (compressed or not)."""
    p = run(["modinfo", "-F", "srcversion", str(ko)])
    return p.stdout.strip()
