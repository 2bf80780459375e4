"""Shared plumbing for the harness: errors, paths, logging, subprocess helpers.

Every failure the user can fix is raised as HarnessError naming the cause and
the fix; the CLI prints it and exits non-zero.
"""
import atexit
import os
import shutil
import signal
import subprocess
import sys
import threading
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


# ------------------------------------------------------- child process groups
# No child started by spawn() outlives the harness, by three layers: its
# caller reaps it in a `finally` (any exception, Ctrl-C included); atexit
# kills what is left on interpreter exit, and SIGTERM/SIGHUP are turned into
# SystemExit while children live so that path runs too; children run under
# `setpriv --pdeathsig KILL`, so even a SIGKILLed harness takes them along.
# (pdeathsig fires when the *thread* that started them ends: spawn and reap
# in one thread.  It is armed when setpriv runs, not at fork: a harness
# SIGKILLed in the milliseconds between them leaves the child behind.)
# Each child leads its own process group, so killing the
# group also kills whatever it started.
_LIVE = set()        # process groups (= leader pids) not reaped yet
_saved_handlers = {}


def _kill_all():
    for pgid in list(_LIVE):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _LIVE.discard(pgid)


atexit.register(_kill_all)


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def trap_signals():
    """Turn SIGTERM/SIGHUP into SystemExit (so `finally` blocks run) until
    untrap_signals(); only default handlers are replaced."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if sig not in _saved_handlers and \
                signal.getsignal(sig) is signal.SIG_DFL:
            _saved_handlers[sig] = signal.signal(sig, _terminate)


def untrap_signals():
    """Restore the handlers trap_signals() replaced, once no child lives."""
    if _LIVE or threading.current_thread() is not threading.main_thread():
        return
    for sig, old in list(_saved_handlers.items()):
        signal.signal(sig, old)
        del _saved_handlers[sig]


def spawn(cmd, **popen_kw):
    """Popen `cmd` as the leader of a new process group under the three
    layers above. Every spawn() must be paired with reap() in a finally."""
    wrap = [require_tool("setpriv", "util-linux"), "--pdeathsig", "KILL",
            "--"]
    trap_signals()
    p = subprocess.Popen(wrap + [str(c) for c in cmd],
                         start_new_session=True, **popen_kw)
    _LIVE.add(p.pid)
    return p


def reap(proc, timeout=10):
    """Kill proc's process group if it still runs and wait for it.
    Idempotent; safe from any thread."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        log(f"process {proc.pid} survived SIGKILL for {timeout}s "
            "(uninterruptible sleep?)")
    _LIVE.discard(proc.pid)
    untrap_signals()


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
