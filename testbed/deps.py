"""Debian packages the harness needs, installed on demand.

A warm run costs one dpkg-query.  The 6.12 kernel comes from
bookworm-backports, whose apt source is added when missing, pointing at the
same archive as the main suite.
"""
import os
import re
from pathlib import Path

from .common import HarnessError, log, run

# What building the tree and booting guests needs: every command.
BASE = [
    "qemu-system-x86", "util-linux", "procps",
    "busybox-static", "cpio", "xz-utils", "zstd", "kmod",
    "vde2", "rdma-core", "rdmacm-utils", "ibverbs-utils",
    "ibverbs-providers", "iproute2", "build-essential", "libelf-dev",
    "libssl-dev", "dwarves", "rsync", "meson",
    "ninja-build", "pkg-config", "libgtest-dev", "libgmock-dev",
    "libbenchmark-dev", "libibverbs-dev", "librdmacm-dev", "python3",
    # keyctl in the guests: the pre-shared keys of authenticated domains
    "keyutils",
    # the tools' JSON output (status -j) and --key-file (add_key)
    "nlohmann-json3-dev", "libkeyutils-dev",
    # meson finds it on PATH: a fresh clone (CI's) rebuilds the user space
    # from ~/.cache/ccache instead of compiling it again (about 3 minutes
    # of the core on 2 cores)
    "ccache",
]
# The KUnit and debug kernels, built from Debian's sources (the debug
# kernel on 6.12's, from bookworm-backports), and checkpatch.
KERNEL_SOURCES = ["linux-source-6.1", "linux-source-6.12", "bc", "flex",
                  "bison"]
# The dkms suite's throw-away DKMS trees.
DKMS = ["dkms"]
# testbed/fcache_env.py: guest disks, NFS server and client, fio; CRIU,
# the user-level reference of bench migrate (copied into guests).
FCACHE_MIGRATE = ["e2fsprogs", "nfs-kernel-server", "nfs-common", "netbase",
                  "fio", "criu"]
# The style suite and ./kvlab docs: Documentation/ rendered by Sphinx; the
# tools' manual pages (rst2man); the netlink specs checked by the kernel's
# ynl-gen-c (testbed/netlink_specs.py).
DOCS = ["python3-sphinx", "python3-docutils", "python3-yaml",
        "python3-jsonschema"]
# ... and ynl run in the integration guests (Debian's python3.11 and
# PyYAML copied in)
YNL = ["python3.11", "python3-yaml"]
# ./kvlab package and the package suite: debian/ built and checked, its
# systemd units verified (systemd-analyze), the packages installed in a
# clean chroot (testbed/package_install.py).
PACKAGING = ["dpkg-dev", "debhelper", "dh-dkms", "lintian", "systemd",
             "mmdebstrap", "python3-docutils"]

# What each command installs (issue 28, item 5: a demo installs no NFS
# server); `setup`, `test` and `bench` take everything, PACKAGES.
NEEDS = {
    "build": BASE,
    "demo": BASE,
    "docs": BASE + DOCS + ["linux-source-6.1"],   # its Sphinx extension
    "package": BASE + PACKAGING,
}
# Every package a require_tool(tool, package) call in testbed/ names is
# here, so `./kvlab setup` (and `./kvlab test`) installs it and no tool is
# assumed present (testbed/selftest/test_harness.py ToolsDeclared checks):
# e.g. qemu-system-x86_64 <- qemu-system-x86, setpriv <- util-linux,
# pgrep <- procps.
PACKAGES = list(dict.fromkeys(BASE + KERNEL_SOURCES + DKMS + FCACHE_MIGRATE +
                              DOCS + PACKAGING + YNL))

BACKPORTS = Path("/etc/apt/sources.list.d/bookworm-backports.sources")
BACKPORTS_TEXT = """Types: deb
URIs: {uri}
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
DEFAULT_URI = "http://deb.debian.org/debian"


def missing(packages):
    """The subset of `packages` that is not installed."""
    p = run(["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n"]
            + list(packages), check=False)
    have = {l.split()[0] for l in p.stdout.splitlines()
            if l.endswith(" installed")}
    return [p for p in packages if p not in have]


def installed_version(package):
    """Installed version of `package`, or None."""
    p = run(["dpkg-query", "-W", "-f", "${db:Status-Status} ${Version}",
             package], check=False)
    st = p.stdout.split()
    return st[1] if p.returncode == 0 and st[:1] == ["installed"] else None


def _main_uri():
    """Archive URI of the main bookworm suite (whatever mirror the admin
    chose), so backports come from the same place."""
    for src in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for stanza in src.read_text(errors="replace").split("\n\n"):
            uri = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            suites = re.search(r"^Suites:(.*)$", stanza, re.M)
            if uri and suites and "bookworm" in suites.group(1).split():
                return uri.group(1)
    lst = Path("/etc/apt/sources.list")
    if lst.is_file():
        for line in lst.read_text(errors="replace").splitlines():
            m = re.match(r"deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+bookworm\s", line)
            if m:
                return m.group(1)
    return DEFAULT_URI


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


OS_RELEASE = Path("/etc/os-release")


def check_host(os_release=None):
    """Refuse, before anything is installed or written, a host that is not
    Debian 12: the harness boots Debian's own 6.1 and 6.12 kernels, builds
    against their headers and installs from bookworm and
    bookworm-backports, none of which another release provides."""
    try:
        text = Path(os_release or OS_RELEASE).read_text(errors="replace")
    except OSError as e:
        raise HarnessError(f"cannot tell which system this is ({e})",
                           "the lab runs on Debian 12 (bookworm) only")
    rel = dict(re.findall(r'^(\w+)="?([^"\n]*)"?$', text, re.M))
    if rel.get("ID") != "debian" or rel.get("VERSION_ID") != "12":
        name = rel.get("PRETTY_NAME") or rel.get("ID") or "unknown"
        raise HarnessError(
            f"this host is {name}, not Debian 12 (bookworm); nothing was "
            "changed", "the lab installs Debian 12's packages and kernels: "
            "run it on a Debian 12 machine or container")


def ensure(extra=(), need=None):
    """Install whatever of @need (default: PACKAGES, everything) and @extra
    is missing (Debian 12 only)."""
    check_host()
    want = list(PACKAGES if need is None else need) + list(extra)
    lacking = missing(want)
    if not lacking and _has_backports():
        return
    if os.geteuid() != 0:
        what = (f"missing Debian packages: {' '.join(lacking)}" if lacking else
                "the apt source bookworm-backports (kernel 6.12) is missing")
        raise HarnessError(what, "run ./kvlab setup as root, or install "
                           "them with apt-get (6.12 also needs "
                           f"bookworm-backports in {BACKPORTS.parent})")
    if not _has_backports():
        log(f"adding {BACKPORTS}")
        BACKPORTS.write_text(BACKPORTS_TEXT.format(uri=_main_uri()))
        global _updated
        _updated = False
        apt_update()
    if lacking:
        apt_update()
        log(f"installing {' '.join(lacking)}")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        run(["apt-get", "install", "-y", "--no-install-recommends"] + lacking,
            env=env, timeout=3000)
