"""Scan guest console logs for kernel reports that fail a run.

A test whose own check passed still fails when the guest printed an oops,
BUG, SLUB consistency, WARNING, KASAN, KCSAN, UBSAN, lockdep, kmemleak,
hung-task, lockup, page allocation failure or stray stack-trace report.

Each pattern matches a report's headline, not its body, so that boot
chatter naming the same subsystems ("Lock dependency validator", "kmemleak:
Kernel memory leak detector initialized", "...hung_task_timeout_secs=...")
never needs an exception. Patterns are searched in the message with its
printk timestamp removed; an anchored pattern (^) means "at the start of a
kernel message", the others match anywhere because the console can splice
two writers' output into one line.

Samples of every kind, and of a clean debug-kernel boot, are in
testbed/selftest/samples/ (checked by testbed/selftest/test_console.py).
"""
import re
from pathlib import Path

# printk prefix: "[    1.234567] ", optionally followed by a caller id.
_TS = re.compile(r"^\[\s*\d+\.\d+\](?:\[\s*[CT]\d+\])?\s?")

# Headlines printed by kernel/locking/lockdep.c (and its RCU and
# might_sleep() siblings) in 6.1 and later; older kernels said "INFO:"
# where they now say "WARNING:".
LOCKDEP_HEADLINES = [
    r"WARNING: possible circular locking dependency detected",
    r"(?:WARNING|INFO): possible recursive locking detected",
    r"WARNING: possible irq lock inversion dependency detected",
    r"WARNING: \S+-safe -> \S+-unsafe lock order detected",
    r"WARNING: inconsistent lock state",
    r"WARNING: bad unlock balance detected",
    r"WARNING: bad contention detected",
    r"WARNING: held lock freed",
    r"WARNING: lock held when returning to user space",
    r"WARNING: .+ still has locks held",
    r"WARNING: Nested lock was not taken",
    r"WARNING: chain_key collision",
    r"WARNING: suspicious RCU usage",
    r"INFO: trying to register non-static key",
    r"BUG: Invalid wait context",
    r"DEBUG_LOCKS_WARN_ON\(",
    r"sleeping function called from invalid context",
]

# (kind, pattern). The first pattern that matches a line names its kind,
# so the specific reports come before the generic BUG:/WARNING: headlines
# they are printed with ("BUG: KASAN: ...", "watchdog: BUG: soft lockup").
PATTERNS = [
    ("KASAN", re.compile(r"\bKASAN: ")),
    ("KCSAN", re.compile(r"\bKCSAN: ")),
    ("UBSAN", re.compile(r"\bUBSAN: ")),
    ("lockdep", re.compile("|".join(LOCKDEP_HEADLINES))),
    ("kmemleak", re.compile(r"kmemleak: \d+ new suspected memory leaks|"
                            r"unreferenced object 0x")),
    ("hung task", re.compile(r"INFO: task .* blocked for more than")),
    ("soft lockup", re.compile(r"BUG: soft lockup|hard LOCKUP|"
                               r"rcu_sched detected stall|"
                               r"rcu: INFO: .*stall")),
    ("page allocation failure", re.compile(r"page allocation failure: ")),
    # die() headline: "Oops: 0000 [#1] ...", "invalid opcode: 0000 [#1]",
    # "general protection fault, ...: 0000 [#1]".
    ("oops", re.compile(r"\bOops\b|: [0-9a-f]{4} \[#\d+\]|"
                        r"general protection fault|PANIC: double fault|"
                        r"unable to handle (?:kernel|page)")),
    # SLUB's consistency checks (slub_debug=FZPU): "BUG <cache> (Not
    # tainted): Poison overwritten", "... Object already free", ...
    ("slab corruption", re.compile(r"\bBUG \S+ \((?:Not tainted|"
                                   r"Tainted: [^)]*)\): ")),
    ("BUG", re.compile(r"\bBUG:|kernel BUG at")),
    ("WARNING", re.compile(r"WARNING: .*(?:CPU|at )|^WARNING: |"
                           r"-+\[ cut here \]-+")),
    ("panic", re.compile(r"Kernel panic")),
    # lib/fault-inject.c's notice of a failure it injected (verbose >= 1;
    # with verbose 2 its stack follows).  Only faultinj-debug injects,
    # inside Node.expect_report("fault injection").
    ("fault injection", re.compile(r"FAULT_INJECTION: forcing a failure")),
    # Safety net for dump_stack() callers whose headline none of the above
    # knows. See TRACE_WINDOW.
    ("call trace", re.compile(r"\bCall Trace:")),
]

# A "Call Trace:" within this many lines after another finding is that
# report's own stack (lockdep reports run to ~100 lines before it) and
# adds nothing; only a trace with no finding before it is reported.
TRACE_WINDOW = 300

# Lines that match a pattern above but are benign. Keep it to exact lines
# with a known cause: the patterns match headlines only, so boot chatter
# does not need entries here (testbed/selftest/samples/clean_boot.log).
BENIGN = []


class Finding:
    def __init__(self, path, lineno, kind, line):
        self.path, self.lineno, self.kind, self.line = path, lineno, kind, line

    def __str__(self):
        return f"{self.path}:{self.lineno}: {self.kind}: {self.line.strip()}"


def classify(line):
    """The report kind whose headline `line` is, or None."""
    msg = _TS.sub("", line.rstrip("\r\n"), count=1)
    if any(b.search(msg) for b in BENIGN):
        return None
    for kind, rx in PATTERNS:
        if rx.search(msg):
            return kind
    return None


def scan_text(text, path="<console>"):
    found = []
    last = None                 # line number of the latest finding
    window = TRACE_WINDOW       # lines after it whose trace is its own
    for n, line in enumerate(text.splitlines(), start=1):
        kind = classify(line)
        if kind is None:
            continue
        if kind == "call trace" and last is not None \
                and n - last <= window:
            continue
        found.append(Finding(path, n, kind, line))
        last = n
        # fault injection's notice is 4 lines before its own stack: a
        # trace further on is someone else's (faultinj-debug expects
        # notices all through its trials)
        window = 6 if kind == "fault injection" else TRACE_WINDOW
    return found


def scan(path):
    """The findings of the console log at @path.  A log that is missing or
    empty is a finding itself: a guest that booted always printed, so
    nothing to scan means the scan cannot vouch for the run."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return [Finding(str(path), 0, "missing console log",
                        "no console output to scan")]
    return scan_text(path.read_text(errors="replace"), str(path))
