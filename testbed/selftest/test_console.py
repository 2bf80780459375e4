"""The console scanner (testbed/console.py) on recorded kernel output.

Each file in samples/ is a console excerpt of one report kind, in the
format a 6.1 guest prints it (timestamps, registers, stack, lockdep's
dependency chains...); clean_boot.log is a debug-kernel boot and KUnit
run that must yield nothing.  Run: python3 -m unittest
testbed.selftest.test_console
"""
import tempfile
import unittest
from pathlib import Path

from testbed import console

SAMPLES = Path(__file__).resolve().parent / "samples"

# sample -> the kinds scan_text must report, in order.  A report's own
# "Call Trace:" is not reported again (console.TRACE_WINDOW).
EXPECTED = {
    "warning.log": ["WARNING", "WARNING"],          # cut here + WARNING:
    "oops.log": ["BUG", "oops", "panic", "panic"],  # NULL deref, oops=panic
    "bug_atomic.log": ["BUG"],
    "kasan.log": ["KASAN"],
    "ubsan.log": ["UBSAN"],
    "kcsan.log": ["KCSAN"],
    "lockdep_circular.log": ["lockdep"],
    "lockdep_inconsistent.log": ["lockdep"],
    "lockdep_irq_order.log": ["lockdep"],
    "lockdep_rcu.log": ["lockdep"],
    "lockdep_bad_unlock.log": ["lockdep"],
    "sleep_in_atomic.log": ["lockdep"],
    "hung_task.log": ["hung task"],
    "soft_lockup.log": ["soft lockup"],
    "rcu_stall.log": ["soft lockup"],
    "wq_lockup.log": ["BUG"],                       # debug kernels' watchdog
    "kmemleak.log": ["kmemleak"] * 3,               # summary + 2 objects
    "page_alloc_failure.log": ["page allocation failure"],
    "call_trace.log": ["call trace"],
    # failslab's notice and stack (verbose=2): faultinj-debug expects it
    "fault_injection.log": ["fault injection"],
    # slub_debug=FZPU on a 6.12 guest, then the double fault it precedes
    "slub_poison.log": ["slab corruption", "oops"],
}

# Every headline kernel/locking/lockdep.c (6.1) can print, plus the
# older "INFO:" spelling and its RCU/might_sleep siblings.
LOCKDEP_LINES = [
    "WARNING: possible circular locking dependency detected",
    "WARNING: possible recursive locking detected",
    "INFO: possible recursive locking detected",
    "WARNING: possible irq lock inversion dependency detected",
    "WARNING: HARDIRQ-safe -> HARDIRQ-unsafe lock order detected",
    "WARNING: SOFTIRQ-safe -> SOFTIRQ-unsafe lock order detected",
    "WARNING: HARDIRQ-READ-safe -> HARDIRQ-unsafe lock order detected",
    "WARNING: inconsistent lock state",
    "WARNING: bad unlock balance detected!",
    "WARNING: bad contention detected!",
    "WARNING: held lock freed!",
    "WARNING: lock held when returning to user space!",
    "WARNING: kworker/0:1/12 still has locks held!",
    "WARNING: Nested lock was not taken",
    "WARNING: chain_key collision",
    "WARNING: suspicious RCU usage",
    "INFO: trying to register non-static key.",
    "BUG: Invalid wait context",
    "DEBUG_LOCKS_WARN_ON(chain_key != curr->curr_chain_key)",
    "BUG: sleeping function called from invalid context at "
    "kernel/locking/mutex.c:580",
]


def kinds(text):
    return [f.kind for f in console.scan_text(text)]


class Samples(unittest.TestCase):
    def test_every_sample_has_an_expectation(self):
        files = {p.name for p in SAMPLES.glob("*.log")}
        self.assertEqual(files - {"clean_boot.log"}, set(EXPECTED))

    def test_reports(self):
        for name, want in EXPECTED.items():
            with self.subTest(sample=name):
                path = SAMPLES / name
                found = console.scan(path)
                self.assertEqual([f.kind for f in found], want,
                                 "\n".join(map(str, found)))
                self.assertTrue(all(f.path == str(path) for f in found))

    def test_clean_boot(self):
        found = console.scan(SAMPLES / "clean_boot.log")
        self.assertEqual(found, [], "\n".join(map(str, found)))

    def test_clean_boot_has_the_lures(self):
        """The clean sample keeps the lines a looser pattern would flag."""
        text = (SAMPLES / "clean_boot.log").read_text()
        for lure in ("Lock dependency validator", "RCU lockdep checking",
                     "kmemleak: Kernel memory leak detector initialized",
                     "hung_task_timeout_secs", "oops=panic",
                     "kasan: KernelAddressSanitizer initialized"):
            self.assertIn(lure, text)


class Headlines(unittest.TestCase):
    def test_lockdep_headlines(self):
        for line in LOCKDEP_LINES:
            with self.subTest(line=line):
                self.assertEqual(kinds(f"[   12.345678] {line}\n"),
                                 ["lockdep"])

    def test_sanitizers_win_over_bug(self):
        text = ("[    3.0] BUG: KASAN: slab-out-of-bounds in f+0x1/0x2\n"
                "[    4.0] BUG: KCSAN: data-race in a / b\n"
                "[    5.0] UBSAN: shift-out-of-bounds in x.c:1:2\n"
                "[    6.0] watchdog: BUG: soft lockup - CPU#0 stuck for "
                "22s! [k:1]\n")
        self.assertEqual(kinds(text), ["KASAN", "KCSAN", "UBSAN",
                                       "soft lockup"])

    def test_mixed(self):
        text = ("[    1.0] ok\n"
                "[    2.0] WARNING: CPU: 0 PID: 1 at kverbs/ep.c:10 f+0x1/0x2\n"
                "[    3.0] BUG: KASAN: slab-use-after-free in x\n"
                "[    4.0] INFO: task kworker/0:1:12 blocked for more than "
                "120 seconds.\n"
                "[    5.0] WARNING: possible circular locking dependency "
                "detected\n")
        self.assertEqual(kinds(text), ["WARNING", "KASAN", "hung task",
                                       "lockdep"])

    def test_other_warning_at_line_start(self):
        """An unknown "WARNING:" headline still counts; "WARNING" inside
        a message does not."""
        self.assertEqual(kinds("[ 1.0] WARNING: stack recursion on stack "
                               "type 4\n"), ["WARNING"])
        self.assertEqual(kinds("[ 1.0] Spectre V2 : WARNING: Unprivileged "
                               "eBPF is enabled\n"), [])

    def test_caller_id_prefix(self):
        self.assertEqual(kinds("[    1.000000][    T1] WARNING: inconsistent "
                               "lock state\n"), ["lockdep"])

    def test_clean_lines(self):
        text = ("[    0.1] Lock dependency validator: Copyright (c) 2006\n"
                "[    0.2] rcu: \tRCU lockdep checking is enabled.\n"
                "[    0.3] kverbs: device rxe0 added\n"
                "[    0.4] Kernel command line: console=ttyS0 panic=-1 "
                "oops=panic\n")
        self.assertEqual(kinds(text), [])


class MissingLog(unittest.TestCase):
    # issue 26, item 7: a missing console log passed the scanner
    def test_missing_or_empty_log_is_a_finding(self):
        with tempfile.TemporaryDirectory() as d:
            missing = Path(d) / "node0.console.log"
            found = console.scan(missing)
            self.assertEqual([f.kind for f in found], ["missing console log"])
            missing.write_text("")
            self.assertEqual(len(console.scan(missing)), 1)
            missing.write_text("Linux version 6.1.0\n")
            self.assertEqual(console.scan(missing), [])


class CallTraceWindow(unittest.TestCase):
    def test_own_trace_not_repeated(self):
        text = "[ 1.0] WARNING: held lock freed!\n" + \
            "[ 1.1] x\n" * 50 + "[ 1.2] Call Trace:\n"
        self.assertEqual(kinds(text), ["lockdep"])

    def test_later_orphan_trace_reported(self):
        text = "[ 1.0] WARNING: held lock freed!\n" + \
            "[ 1.1] x\n" * console.TRACE_WINDOW + "[ 9.0] Call Trace:\n"
        self.assertEqual(kinds(text), ["lockdep", "call trace"])


class ExpectedReports(unittest.TestCase):
    """Node.expect_report(): a planted report is excused on its own
    console lines and kind only."""

    def test_window_and_kind(self):
        import tempfile
        import types
        from pathlib import Path
        from testbed.cluster import Node
        with tempfile.TemporaryDirectory() as d:
            c = types.SimpleNamespace(workdir=Path(d), sockdir=d)
            n = Node(c, 0)
            leak = "[ 5.0] kmemleak: 2 new suspected memory leaks (see x)\n"
            n.console_path.write_text("[ 1.0] boot\n")
            with n.expect_report("kmemleak"):
                with open(n.console_path, "a") as f:
                    f.write(leak + "[ 5.1] WARNING: held lock freed!\n")
            with open(n.console_path, "a") as f:
                f.write(leak)
            found = n.unexpected(console.scan(n.console_path))
            self.assertEqual([(f.kind, f.lineno) for f in found],
                             [("lockdep", 3), ("kmemleak", 4)])


class InjectionSite(unittest.TestCase):
    """faultinj-debug names an injected failure's call site from its
    stack: the innermost frame of ours, else the first below the
    allocator."""

    def test_outside(self):
        from testbed.suite_faultinj import injection_site
        text = (SAMPLES / "fault_injection.log").read_text()
        self.assertEqual(injection_site(text), "outside: mas_alloc_nodes")

    def test_ours_and_unreliable_frames(self):
        from testbed.suite_faultinj import injection_site
        text = ("[ 1.0] FAULT_INJECTION: forcing a failure.\n"
                "[ 1.0] name failslab, interval 1\n"
                "[ 1.0] Call Trace:\n [ 1.0]  <TASK>\n"
                "[ 1.0]  dump_stack_lvl+0x4c/0x5f\n"
                "[ 1.0]  should_failslab+0x5/0x10\n"
                "[ 1.0]  __kmalloc+0x42/0x150\n"
                "[ 1.0]  ? kverbs_listen+0x1/0x320 [kverbs]\n"
                "[ 1.0]  kvmsg_buf_alloc+0x28/0x90 [kverbs]\n"
                "[ 1.0]  kvmsg_ep_setup+0x1a1/0x400 [kverbs]\n"
                "[ 1.0]  kping_init+0x104/0x1000 [kping]\n"
                "[ 1.0]  </TASK>\n")
        self.assertEqual(injection_site(text), "kvmsg_buf_alloc [kverbs]")
        self.assertIsNone(injection_site("[ 1.0] nothing injected\n"))


if __name__ == "__main__":
    unittest.main()
