"""Debian distro kernels for the guests: resolve, download, unpack, cache.

A series ("6.1", "6.12") maps to the newest version of that series among
Debian's meta packages for it: linux-image-amd64 (bookworm's 6.1,
bookworm-backports' 6.12) and linux-image-<series>-amd64 (the 6.12 that
bookworm-security carries for Debian 12, which gets rxe's fixes before
backports does).  The meta package's dependency names the image package
and its exact version.  The matching headers package ("linux-headers-" + ABI) is
installed on the host at that same version, for module builds and DKMS:
our modules' vermagic and symbol versions are checked against the guest.
The image package itself is only unpacked, never installed on the host.

Cache layout (cache_dir()/kernels): series-<S> holds "<abi> <image pkg>
<policy>"; <abi>/.unpacked holds the image's package version.  A marker
written under another POLICY is stale: the series is resolved again.
"""
import os
import re
import shutil
from pathlib import Path

from .common import HarnessError, cache_dir, log, run
from . import deps

SUPPORTED = ("6.1", "6.12")

# Bump when the choice of kernel for a series changes, so cached choices
# are made again.  2: linux-image-<series>-amd64 considered.
POLICY = "2"


class Kernel:
    def __init__(self, series, abi, image_pkg, root, version=None):
        self.series = series
        self.abi = abi                  # e.g. 6.1.0-56-amd64
        self.version = version          # Debian version, e.g. 6.1.192-2
        self.image_pkg = image_pkg
        self.root = Path(root)
        self.moddir = self.root / "lib" / "modules" / abi
        self.vmlinuz = self.root / "boot" / f"vmlinuz-{abi}"
        self.config = self.root / "boot" / f"config-{abi}"
        self.headers = Path(f"/lib/modules/{abi}/build")

    def __repr__(self):
        return f"Kernel({self.series}, {self.abi})"


def newest_linux_source(what):
    """The newest of Debian's /usr/src/linux-source-*.tar.xz (by version,
    not name: 6.12 after 6.1), for @what (named in the error)."""
    tars = sorted(Path("/usr/src").glob("linux-source-*.tar.xz"),
                  key=lambda t: [int(x) for x in
                                 re.findall(r"\d+", t.name.split("-")[-1])])
    if not tars:
        raise HarnessError(f"no /usr/src/linux-source-*.tar.xz for {what}",
                           "apt-get install linux-source-6.12")
    return tars[-1]


def _newer(a, b):
    """Debian version order ('~' sorts first), exactly as dpkg defines it."""
    return run(["dpkg", "--compare-versions", a, "gt", b],
               check=False).returncode == 0


def _image_package(series):
    """(image package, exact version) behind the newest meta package."""
    metas = ["linux-image-amd64", f"linux-image-{series}-amd64"]

    def show():
        return run(["apt-cache", "show"] + metas, check=False).stdout
    text = show()
    if "Version:" not in text:
        deps.apt_update()
        text = show()
    best = None
    for stanza in text.split("\n\n"):
        v = re.search(r"^Version: (\S+)", stanza, re.M)
        d = re.search(r"^Depends: (linux-image-[^\s,(]+)"
                      r"(?:\s*\(= ([^)\s]+)\))?", stanza, re.M)
        if not v or not d or not v.group(1).startswith(series + "."):
            continue
        if best is None or _newer(v.group(1), best[0]):
            best = (v.group(1), d.group(1), d.group(2) or v.group(1))
    if not best:
        raise HarnessError(f"no Debian kernel of series {series} in the apt "
                           "lists", "check /etc/apt sources (6.12 needs "
                           "bookworm-backports) and run apt-get update")
    return best[1], best[2]


def _ensure_headers(abi, version):
    """Host headers of exactly the image's package version."""
    pkg = f"linux-headers-{abi}"
    deps.ensure([pkg], need=())
    have = deps.installed_version(pkg)
    if have != version:
        if os.geteuid() != 0:
            raise HarnessError(f"{pkg} {have} is installed but the guest "
                               f"kernel is {version}",
                               f"apt-get install {pkg}={version}")
        log(f"installing {pkg}={version} (had {have})")
        run(["apt-get", "install", "-y", "--no-install-recommends",
             "--allow-downgrades", f"{pkg}={version}"],
            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"),
            timeout=3000)
    if not Path(f"/lib/modules/{abi}/build").is_dir():
        raise HarnessError(f"{pkg} is installed but /lib/modules/{abi}/build "
                           "is missing", f"apt-get install --reinstall {pkg}")


def _unpack(kernel, deb):
    # Unpack beside the tree and swap it in, so a concurrent run still
    # reading the old tree never sees a half-extracted one.
    tmp = kernel.root.with_name(kernel.root.name + f".tmp{os.getpid()}")
    old = kernel.root.with_name(kernel.root.name + f".old{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log(f"unpacking {deb.name}")
    run(["dpkg-deb", "-x", str(deb), str(tmp)], timeout=600)
    run(["depmod", "-b", str(tmp), kernel.abi], timeout=300)
    (tmp / ".unpacked").write_text(kernel.version + "\n")
    if kernel.root.exists():
        os.rename(kernel.root, old)
    os.rename(tmp, kernel.root)
    shutil.rmtree(old, ignore_errors=True)


def _cached(series):
    """The Kernel recorded for `series` if it is complete, else None.
    No apt-cache here: a newer distro kernel is picked up only after the
    marker is removed, so consecutive runs test the same kernel."""
    marker = cache_dir() / "kernels" / f"series-{series}"
    try:
        abi, pkg, policy = marker.read_text().split()[:3]
        ver = (cache_dir() / "kernels" / abi / ".unpacked").read_text()
    except (OSError, ValueError):
        return None
    if policy != POLICY:
        return None
    k = Kernel(series, abi, pkg, cache_dir() / "kernels" / abi, ver.strip())
    if k.version and k.vmlinuz.exists() and k.headers.exists() and \
            deps.installed_version(f"linux-headers-{abi}") == k.version:
        return k
    return None


def resolve(series):
    """Return the cached, unpacked Kernel of `series`, fetching it once."""
    if series not in SUPPORTED:
        raise HarnessError(f"unknown kernel version '{series}'",
                           f"use one of: {', '.join(SUPPORTED)}")
    k = _cached(series)
    if k:
        return k
    pkg, ver = _image_package(series)
    abi = pkg[len("linux-image-"):]
    if abi.endswith("-unsigned"):
        abi = abi[:-len("-unsigned")]
    k = Kernel(series, abi, pkg, cache_dir() / "kernels" / abi, ver)
    _ensure_headers(abi, ver)
    unpacked = k.root / ".unpacked"
    if not unpacked.exists() or unpacked.read_text().strip() != ver:
        debs = cache_dir() / "debs"
        debs.mkdir(parents=True, exist_ok=True)
        deb = debs / f"{pkg}_{ver.replace(':', '%3a')}_amd64.deb"
        if not deb.exists():
            log(f"downloading {pkg}={ver}")
            run(["apt-get", "download", f"{pkg}={ver}"], cwd=debs,
                timeout=1800)
        if not deb.exists():
            raise HarnessError(f"apt-get download {pkg}={ver} produced no "
                               f"{deb.name}", "check access to the Debian "
                               "archive and run apt-get update")
        _unpack(k, deb)
    if not k.vmlinuz.exists():
        raise HarnessError(f"{pkg} has no {k.vmlinuz.name}")
    marker = cache_dir() / "kernels" / f"series-{series}"
    marker.write_text(f"{abi} {pkg} {POLICY}\n")
    return k
