"""Debian distro kernels for the guests: resolve, download, unpack, cache.

A series ("6.1", "6.12") maps to the newest linux-image-amd64 meta package
version of that series; its dependency names the image package, and the
matching headers package ("linux-headers-" + ABI) is installed on the host
for module builds and DKMS.  Image and headers therefore always share one
ABI, which is what the modules' vermagic is checked against.
"""
import re
import shutil
from pathlib import Path

from .common import HarnessError, cache_dir, log, run
from . import deps

SUPPORTED = ("6.1", "6.12")


class Kernel:
    def __init__(self, series, abi, image_pkg, root):
        self.series = series
        self.abi = abi
        self.image_pkg = image_pkg
        self.root = Path(root)
        self.moddir = self.root / "lib" / "modules" / abi
        self.vmlinuz = self.root / "boot" / f"vmlinuz-{abi}"
        self.config = self.root / "boot" / f"config-{abi}"
        self.headers = Path(f"/lib/modules/{abi}/build")

    def __repr__(self):
        return f"Kernel({self.series}, {self.abi})"


def _vkey(v):
    return [int(x) if x.isdigit() else x for x in re.split(r"[.\-+~]", v)]


def _image_package(series):
    def show():
        return run(["apt-cache", "show", "linux-image-amd64"],
                   check=False).stdout
    text = show()
    if "Version:" not in text:
        deps.apt_update()
        text = show()
    best = None
    for stanza in text.split("\n\n"):
        v = re.search(r"^Version: (\S+)", stanza, re.M)
        d = re.search(r"^Depends: (linux-image-\S+)", stanza, re.M)
        if not v or not d or not v.group(1).startswith(series + "."):
            continue
        if best is None or _vkey(v.group(1)) > _vkey(best[0]):
            best = (v.group(1), d.group(1))
    if not best:
        raise HarnessError(f"no Debian kernel of series {series} in the apt "
                           "lists", "check /etc/apt sources (6.12 needs "
                           "bookworm-backports) and run apt-get update")
    return best[1]


def resolve(series):
    """Return the cached, unpacked Kernel of `series`, fetching it once."""
    if series not in SUPPORTED:
        raise HarnessError(f"unknown kernel version '{series}'",
                           f"use one of: {', '.join(SUPPORTED)}")
    marker = cache_dir() / "kernels" / f"series-{series}"
    if marker.exists():
        abi, pkg = marker.read_text().split()
        k = Kernel(series, abi, pkg, cache_dir() / "kernels" / abi)
        if (k.root / ".unpacked").exists() and k.headers.exists():
            return k
    pkg = _image_package(series)
    abi = pkg[len("linux-image-"):]
    if abi.endswith("-unsigned"):
        abi = abi[:-len("-unsigned")]
    k = Kernel(series, abi, pkg, cache_dir() / "kernels" / abi)
    deps.ensure([f"linux-headers-{abi}"])
    if not (k.root / ".unpacked").exists():
        debs = cache_dir() / "debs"
        debs.mkdir(parents=True, exist_ok=True)
        found = sorted(debs.glob(f"{pkg}_*.deb"))
        if not found:
            log(f"downloading {pkg}")
            run(["apt-get", "download", pkg], cwd=debs, timeout=1800)
            found = sorted(debs.glob(f"{pkg}_*.deb"))
        if not found:
            raise HarnessError(f"apt-get download {pkg} produced no .deb")
        if k.root.exists():
            shutil.rmtree(k.root)
        k.root.mkdir(parents=True)
        log(f"unpacking {found[-1].name}")
        run(["dpkg-deb", "-x", str(found[-1]), str(k.root)], timeout=600)
        run(["depmod", "-b", str(k.root), abi], timeout=300)
        (k.root / ".unpacked").touch()
    if not k.vmlinuz.exists():
        raise HarnessError(f"{pkg} has no {k.vmlinuz.name}")
    marker.write_text(f"{abi} {pkg}\n")
    return k
