"""Scan guest console logs for kernel reports that fail a run.

A test whose own check passed still fails when the guest printed an oops,
BUG, WARNING, KASAN, UBSAN, lockdep, kmemleak or hung-task report.
"""
import re
from pathlib import Path

PATTERNS = [
    ("oops", re.compile(r"\bOops\b|general protection fault|"
                        r"unable to handle (kernel|page)")),
    ("BUG", re.compile(r"\bBUG:|kernel BUG at")),
    ("WARNING", re.compile(r"WARNING: .*(CPU|at )|------------\[ cut here \]")),
    ("KASAN", re.compile(r"KASAN:")),
    ("UBSAN", re.compile(r"UBSAN:")),
    ("lockdep", re.compile(r"possible circular locking|possible recursive "
                           r"locking|inconsistent lock state|lockdep|"
                           r"suspicious RCU usage|"
                           r"sleeping function called from invalid")),
    ("hung task", re.compile(r"INFO: task .* blocked for more than|"
                             r"hung_task")),
    ("soft lockup", re.compile(r"soft lockup|rcu_sched detected stall|"
                               r"rcu: INFO: .*stall")),
    ("kmemleak", re.compile(r"kmemleak: \d+ new suspected memory leaks|"
                            r"unreferenced object 0x")),
    ("panic", re.compile(r"Kernel panic")),
]

# Lines that match a pattern above but are benign boot chatter.
BENIGN = [
    re.compile(r"lockdep: .*(disabled|turned off)"),
    re.compile(r"Lock dependency validator"),
    re.compile(r"RCU lockdep checking is enabled"),
    re.compile(r"hung_task_timeout_secs"),
    re.compile(r"kmemleak: Kernel memory leak detector initialized"),
    re.compile(r"kmemleak: Automatic memory scanning thread started"),
]


class Finding:
    def __init__(self, path, lineno, kind, line):
        self.path, self.lineno, self.kind, self.line = path, lineno, kind, line

    def __str__(self):
        return f"{self.path}:{self.lineno}: {self.kind}: {self.line.strip()}"


def scan_text(text, path="<console>"):
    found = []
    for n, line in enumerate(text.splitlines(), start=1):
        if any(b.search(line) for b in BENIGN):
            continue
        for kind, rx in PATTERNS:
            if rx.search(line):
                found.append(Finding(path, n, kind, line))
                break
    return found


def scan(path):
    path = Path(path)
    if not path.exists():
        return []
    return scan_text(path.read_text(errors="replace"), str(path))
