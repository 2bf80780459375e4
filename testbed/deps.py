"""Debian packages the harness needs, installed on demand.

A warm run costs one dpkg-query.  The 6.12 kernel comes from
bookworm-backports, whose apt source is added when missing.
"""
import os
from pathlib import Path

from .common import HarnessError, log, run

PACKAGES = [
    "qemu-system-x86", "busybox-static", "cpio", "xz-utils", "zstd", "kmod",
    "dkms", "vde2", "rdma-core", "rdmacm-utils", "ibverbs-utils",
    "ibverbs-providers", "iproute2", "build-essential", "bc", "flex",
    "bison", "libelf-dev", "libssl-dev", "dwarves", "rsync", "meson",
    "ninja-build", "pkg-config", "libgtest-dev", "libgmock-dev",
    "libbenchmark-dev", "libibverbs-dev", "librdmacm-dev", "python3",
    "linux-source-6.1",
]

BACKPORTS = Path("/etc/apt/sources.list.d/bookworm-backports.sources")
BACKPORTS_TEXT = """Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def missing(packages):
    p = run(["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n"]
            + list(packages), check=False)
    have = {l.split()[0] for l in p.stdout.splitlines()
            if l.endswith(" installed")}
    return [p for p in packages if p not in have]


def _has_backports():
    srcs = list(Path("/etc/apt").glob("sources.list.d/*")) + \
        [Path("/etc/apt/sources.list")]
    return any("bookworm-backports" in p.read_text(errors="replace")
               for p in srcs if p.is_file())


_updated = False


def apt_update():
    global _updated
    if not _updated:
        log("apt-get update")
        run(["apt-get", "update"], timeout=900)
        _updated = True


def ensure(extra=()):
    """Install whatever of PACKAGES + extra is missing."""
    want = PACKAGES + list(extra)
    need = missing(want)
    if not need and _has_backports():
        return
    if os.geteuid() != 0:
        raise HarnessError(f"missing Debian packages: {' '.join(need)}",
                           "run ./kvlab as root, or apt-get install them")
    if not _has_backports():
        log(f"adding {BACKPORTS}")
        BACKPORTS.write_text(BACKPORTS_TEXT)
        global _updated
        _updated = False
        apt_update()
    if need:
        apt_update()
        log(f"installing {' '.join(need)}")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        run(["apt-get", "install", "-y", "--no-install-recommends"] + need,
            env=env, timeout=3000)
