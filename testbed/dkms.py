"""Install kverbs through DKMS for a kernel, as an operator would.

The source tree handed to DKMS is the shipped subset (testbed.kbuild's
KERNEL_SOURCES): kunit/ is not in it, so test modules can never be built or
installed by DKMS.
"""
import lzma
import re
import shutil
from pathlib import Path

from .common import REPO, HarnessError, cache_dir, log, require_tool, run
from . import kbuild

PACKAGE = "kverbs"


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
    """(Re)register the current sources with DKMS."""
    require_tool("dkms", "dkms")
    ver = version()
    src = Path(f"/usr/src/{PACKAGE}-{ver}")
    run(["dkms", "remove", f"{PACKAGE}/{ver}", "--all"], check=False)
    # As the README tells an operator: make dkms-src, then dkms add.
    staged = run(["make", "-s", "-C", str(REPO), "dkms-src"]).stdout
    if staged.strip().splitlines()[-1:] != [str(src)]:
        raise HarnessError(f"make dkms-src staged {staged.strip()!r}, "
                           f"not {src}")
    run(["dkms", "add", str(src)])
    return src


def src_dir():
    """Where the operator's source tree lives (dkms add)."""
    return Path(f"/usr/src/{PACKAGE}-{version()}")


def kept_symvers(abi):
    """The Module.symvers scripts/dkms.postbuild kept for kernel @abi."""
    arch = run(["uname", "-m"]).stdout.strip()
    return Path(f"/var/lib/dkms/{PACKAGE}/{version()}/{abi}/{arch}/"
                "Module.symvers")


def _dkms_install(package, ver, abi):
    """dkms build + install of @package/@ver for kernel @abi; a failure
    raises with the end of DKMS's make.log."""
    p = run(["dkms", "install", f"{package}/{ver}", "-k", abi],
            timeout=900, check=False)
    if p.returncode != 0:
        log_path = Path(f"/var/lib/dkms/{package}/{ver}/build/make.log")
        tail = log_path.read_text()[-3000:] if log_path.exists() else ""
        raise HarnessError(f"dkms install {package} for {abi} failed:\n"
                           f"{p.stdout}\n{tail}")


def install(abi):
    """dkms build + install for kernel `abi`; return {name: installed path}."""
    _dkms_install(PACKAGE, version(), abi)
    return installed(abi)


def installed(abi):
    """The .ko files DKMS installed for `abi` (possibly .ko.xz/.ko.zst)."""
    d = Path(f"/lib/modules/{abi}/updates/dkms")
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
    """Copy examples/kvreq to /usr/src/kvreq-<version> (as its package
    would), dkms add it and install it for each kernel of @abis; return
    {abi: installed path}.  Its Makefile may name no path into this
    checkout: it builds from /usr/src and /var/lib/dkms only."""
    ver = client_version()
    src = Path(f"/usr/src/{CLIENT}-{ver}")
    run(["dkms", "remove", f"{CLIENT}/{ver}", "--all"], check=False)
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(CLIENT_DIR, src, ignore=shutil.ignore_patterns(
        "*.o", "*.ko", "*.cmd", "*.mod*", "Module.symvers", "modules.order"))
    run(["dkms", "add", str(src)])
    out = {}
    for abi in abis:
        _dkms_install(CLIENT, ver, abi)
        out[abi] = client_installed(abi)
    return out


def client_installed(abi):
    """The client module DKMS installed for @abi, or None."""
    d = Path(f"/lib/modules/{abi}/updates/dkms")
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
