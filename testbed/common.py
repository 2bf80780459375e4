"""Shared plumbing for the harness: errors, paths, logging, subprocess helpers.

Every failure the user can fix is raised as HarnessError naming the cause and
the fix; the CLI prints it and exits non-zero.
"""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class HarnessError(Exception):
    """A failure with a known cause and a fix to print."""

    def __init__(self, cause, fix=None):
        super().__init__(cause)
        self.cause = cause
        self.fix = fix

    def __str__(self):
        return self.cause + (f"\n  fix: {self.fix}" if self.fix else "")


def cache_dir():
    """Expensive artefacts (kernel debs, initramfs, KUnit kernel) live here,
    outside the repository, so a warm run is fast."""
    d = Path(os.environ.get("KVERBS_CACHE",
                            Path.home() / ".cache" / "kverbs"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def build_dir():
    """Per-checkout outputs (console logs, module builds, reports)."""
    d = Path(os.environ.get("KVERBS_BUILD", REPO / "build"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def log(msg):
    print(f"[kvlab] {msg}", flush=True)


def require_tool(name, package):
    """Fail clearly when an executable is missing."""
    path = shutil.which(name)
    if not path:
        raise HarnessError(
            f"required tool '{name}' was not found on PATH",
            f"apt-get install {package}  (or run ./kvlab setup)")
    return path


def run(cmd, *, cwd=None, env=None, timeout=600, check=True, capture=True,
        input=None):
    """Run a host command with a bounded time; return CompletedProcess."""
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout,
                           input=input, text=True,
                           stdout=subprocess.PIPE if capture else None,
                           stderr=subprocess.STDOUT if capture else None)
    except subprocess.TimeoutExpired as e:
        raise HarnessError(f"command timed out after {timeout}s: "
                           f"{' '.join(map(str, cmd))}",
                           "look at the output above; raise the timeout "
                           "only if the machine is merely slow") from e
    except FileNotFoundError as e:
        raise HarnessError(f"cannot execute {cmd[0]}: {e.strerror}",
                           "run ./kvlab setup to install dependencies") from e
    if check and p.returncode != 0:
        out = (p.stdout or "")[-4000:]
        raise HarnessError(f"command failed (exit {p.returncode}): "
                           f"{' '.join(map(str, cmd))}\n{out}")
    return p


class Phase:
    """Context manager printing how long a phase took."""

    def __init__(self, name):
        self.name = name
        self.t0 = 0.0
        self.elapsed = 0.0

    def __enter__(self):
        self.t0 = time.monotonic()
        log(f"phase {self.name}: start")
        return self

    def __exit__(self, et, ev, tb):
        self.elapsed = time.monotonic() - self.t0
        state = "done" if et is None else "FAILED"
        log(f"phase {self.name}: {state} in {self.elapsed:.1f}s")
        return False


def die(err):
    print(f"kvlab: error: {err}", file=sys.stderr, flush=True)
    sys.exit(2)
