"""Unit tests for testbed/ktap.py on console output shaped like Linux 6.1+.

Run: python3 -m unittest testbed.selftest.test_ktap
"""
import unittest

from testbed import ktap

# Built-in run with no suites, then two modules loaded from /init, as printed
# by 6.1 (suite header via pr_info, timestamps, interleaved kernel noise).
MODULE_LOAD = """\
[    0.912345] Run /init as init process
[    0.950000] KTAP version 1
[    0.950001] 1..0
KVLAB-KUNIT init start
[    1.201000] kverbs: loading out-of-tree module taints kernel.
KVLAB-KUNIT insmod OK kverbs.ko
[    1.300100]     KTAP version 1
[    1.300200]     # Subtest: kverbs_domain
[    1.300300]     1..3
[    1.310000]     ok 1 domain_alloc
[    1.320000]     # domain_free: EXPECTATION FAILED at kverbs/domain_kunit.c:42
[    1.320000]     Expected refs == 0, but
[    1.320000]         refs == 1
[    1.320001]     not ok 2 domain_free
[    1.330000] random: crng init done
[    1.330500]     ok 3 domain_lookup # SKIP no rxe device
[    1.340000] # kverbs_domain: pass:1 fail:1 skip:1 total:3
[    1.340001] not ok 1 kverbs_domain
[    1.400000]     KTAP version 1
[    1.400001]     # Subtest: kverbs_cm
[    1.400002]     1..1
[    1.400003]     ok 1 cm_create_destroy
[    1.400004] ok 2 kverbs_cm
KVLAB-KUNIT insmod OK kverbs_kunit.ko
KVLAB-KUNIT init done
"""

# 6.1 parameterised case: nested level at 8 spaces, no plan, case line at 4.
PARAMS = """\
[    2.000000]     KTAP version 1
[    2.000000]     # Subtest: wire
[    2.000000]     1..2
[    2.000000]         KTAP version 1
[    2.000000]         # Subtest: wire_roundtrip
[    2.000000]         ok 1 u8
[    2.000000]         not ok 2 u64
[    2.000000]         ok 3 str # SKIP not supported
[    2.000000]     # wire_roundtrip: pass:1 fail:1 skip:1 total:3
[    2.000000]     not ok 1 wire_roundtrip
[    2.000000]     ok 2 wire_plain
[    2.000000] # wire: pass:1 fail:1 skip:0 total:2
[    2.000000] # Totals: pass:2 fail:1 skip:1 total:4
[    2.000000] not ok 1 wire
"""

# Newer kernels: "# Subtest:" before "KTAP version", "- " before names,
# "# module:" attribute line, no timestamps.
NEWER = """\
KTAP version 1
1..1
    # Subtest: ex
    # module: ex_test
    KTAP version 1
    1..2
    ok 1 - first
        # Subtest: second
        KTAP version 1
        1..2
        ok 1 - a
        ok 2 - b
    ok 2 - second
ok 1 - ex
"""

# Guest oopsed inside case 2: no more KTAP, suite never closed.
CRASH = """\
[    1.300100]     KTAP version 1
[    1.300200]     # Subtest: kverbs_qp
[    1.300300]     1..3
[    1.310000]     ok 1 qp_create
[    1.320000] BUG: kernel NULL pointer dereference, address: 0000000000000008
[    1.320001] #PF: supervisor read access in kernel mode
[    1.320002] Oops: 0000 [#1] PREEMPT SMP NOPTI
[    1.320003] Kernel panic - not syncing: Fatal exception
"""


class KtapTest(unittest.TestCase):
    def test_module_load_with_noise(self):
        cases = ktap.parse(MODULE_LOAD)
        self.assertEqual(cases, [
            ("kverbs_domain", "domain_alloc", "pass"),
            ("kverbs_domain", "domain_free", "fail"),
            ("kverbs_domain", "domain_lookup", "skip"),
            ("kverbs_cm", "cm_create_destroy", "pass"),
        ])
        self.assertEqual(ktap.count(cases),
                         {"pass": 2, "fail": 1, "skip": 1, "crashed": 0})

    def test_parameterised(self):
        self.assertEqual(ktap.parse(PARAMS), [
            ("wire", "wire_roundtrip/u8", "pass"),
            ("wire", "wire_roundtrip/u64", "fail"),
            ("wire", "wire_roundtrip/str", "skip"),
            ("wire", "wire_plain", "pass"),
        ])

    def test_newer_format(self):
        self.assertEqual(ktap.parse(NEWER), [
            ("ex", "first", "pass"),
            ("ex", "second/a", "pass"),
            ("ex", "second/b", "pass"),
        ])

    def test_crash_truncated(self):
        cases = ktap.parse(CRASH)
        self.assertEqual(cases[0], ("kverbs_qp", "qp_create", "pass"))
        self.assertEqual(len(cases), 2)
        suite, case, status = cases[1]
        self.assertEqual((suite, status), ("kverbs_qp", "crashed"))
        self.assertIn("1 of 3", case)

    def test_crash_inside_param_level(self):
        text = PARAMS.split("[    2.000000]         not ok 2")[0]
        cases = ktap.parse(text)
        self.assertEqual(cases, [
            ("wire", "wire_roundtrip/u8", "pass"),
            ("wire", "wire_roundtrip", "crashed"),
        ])

    def test_crash_then_next_suite(self):
        # A suite cut short, then output resumes with another suite (e.g. a
        # later module): the first counts as crashed, the second parses.
        text = CRASH.splitlines()[:4] + MODULE_LOAD.splitlines()[19:24]
        cases = ktap.parse("\n".join(text))
        self.assertEqual([c[2] for c in cases], ["pass", "crashed", "pass"])
        self.assertEqual(cases[2], ("kverbs_cm", "cm_create_destroy", "pass"))

    def test_suite_without_cases_and_skipped_suite(self):
        text = ("    KTAP version 1\n    # Subtest: empty\n    1..0\n"
                "ok 1 empty # SKIP suite init failed\n")
        self.assertEqual(ktap.parse(text), [("empty", "", "skip")])

    def test_caller_id_and_crlf(self):
        text = ("[    1.0][    T1]     # Subtest: s\r\n"
                "[    1.0][    T1]     ok 1 c\r\n[    1.0][    T1] ok 1 s\r\n")
        self.assertEqual(ktap.parse(text), [("s", "c", "pass")])

    def test_no_ktap(self):
        self.assertEqual(ktap.parse("Linux version 6.1\nok\nnot ok\n"), [])
        self.assertEqual(ktap.parse("KTAP version 1\n1..0\n"), [])


class ExportPrefixes(unittest.TestCase):
    """The style suite's export check flags a squatted prefix (the planted
    fault: the old kmsg_ names against printk's kmsg_dump_*)."""

    def test_clash_and_namespace(self):
        from testbed.suites import export_problems
        kernel = {"kmsg_dump_register", "kmem_cache_alloc", "printk"}
        ours = [("kmsg_reserve", "kverbs", "KVERBS"),
                ("kverbs_listen", "kverbs", "KVERBS"),
                ("kvmsg_send", "kverbs", ""),
                ("printk", "kverbs", "KVERBS")]
        bad = export_problems(ours, kernel)
        self.assertEqual(len(bad), 3, bad)
        self.assertIn("kmsg_reserve: prefix kmsg_", bad[0])
        self.assertIn("kvmsg_send: namespace none", bad[1])
        self.assertIn("printk: also exported", bad[2])

    def test_clean(self):
        from testbed.suites import export_problems
        self.assertEqual(export_problems(
            [("kvmsg_send", "kverbs", "KVERBS")], {"kmsg_dump_register"}), [])


class LayerCheck(unittest.TestCase):
    """The one-way layering check catches a planted upward call."""

    def test_planted(self):
        import tempfile
        from pathlib import Path
        from testbed.suites import layer_violations
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "kverbs").mkdir()
            (root / "kverbs" / "main.c").write_text("kvmsg_init();\n")
            (root / "kverbs" / "ep.c").write_text(
                "ok();\n\tkvmsg_ep_stop(ep);\n\tep->msg.kept = 0;\n")
            bad = layer_violations(root)
            self.assertEqual(len(bad), 2, bad)
            self.assertIn("ep.c:2", bad[0])
        from testbed.common import REPO
        self.assertEqual(layer_violations(REPO), [])


def suite(name, results, plan=None, indent="    "):
    """A module-loaded suite as 6.1 prints it: `results` are
    (case, "ok"/"not ok"/"skip") lines, `plan` defaults to their number."""
    plan = len(results) if plan is None else plan
    lines = [f"{indent}KTAP version 1", f"{indent}# Subtest: {name}",
             f"{indent}1..{plan}"]
    for i, (case, word) in enumerate(results, 1):
        if word == "skip":
            lines.append(f"{indent}ok {i} {case} # SKIP no device")
        else:
            lines.append(f"{indent}{word} {i} {case}")
    lines.append(f"ok 1 {name}")
    return "\n".join(f"[    1.{i:06d}] {l}" for i, l in enumerate(lines)) \
        + "\n"


COMPLETE = suite("alpha", [("a1", "ok"), ("a2", "ok"), ("a3", "ok")]) + \
    suite("beta", [("b1", "ok")])


class Plans(unittest.TestCase):
    def test_plans_and_results(self):
        r = ktap.report(MODULE_LOAD)
        self.assertEqual(r.suites, {"kverbs_domain": ktap.Plan(3, 3),
                                    "kverbs_cm": ktap.Plan(1, 1)})
        self.assertEqual(r.reasons,
                         {("kverbs_domain", "domain_lookup"): "no rxe device"})

    def test_parameterised_case_counts_once(self):
        self.assertEqual(ktap.report(PARAMS).suites,
                         {"wire": ktap.Plan(2, 2)})
        self.assertEqual(ktap.report(NEWER).suites, {"ex": ktap.Plan(2, 2)})

    def test_crash_leaves_plan_short(self):
        self.assertEqual(ktap.report(CRASH).suites,
                         {"kverbs_qp": ktap.Plan(3, 1)})


class Verify(unittest.TestCase):
    EXPECTED = {"alpha", "beta"}

    def kinds(self, source, expected=None, skippable=()):
        return [p.kind for p in ktap.verify(
            source, self.EXPECTED if expected is None else expected,
            skippable)]

    def test_complete_run(self):
        self.assertEqual(ktap.verify(COMPLETE, self.EXPECTED, ()), [])

    def test_missing_suite(self):
        text = suite("alpha", [("a1", "ok")])
        problems = ktap.verify(text, self.EXPECTED, ())
        self.assertEqual([(p.kind, p.name) for p in problems],
                         [("missing suite", "beta")])

    def test_missing_case(self):
        text = suite("alpha", [("a1", "ok"), ("a2", "ok")], plan=3) + \
            suite("beta", [("b1", "ok")])
        problems = ktap.verify(text, self.EXPECTED, ())
        self.assertEqual([(p.kind, p.name) for p in problems],
                         [("missing cases", "alpha")])
        self.assertIn("2 of 3", str(problems[0]))

    def test_no_plan_and_extra_results(self):
        text = COMPLETE.replace("1..3", "noise").replace("1..1", "1..0")
        self.assertEqual(self.kinds(text), ["no plan", "extra results"])

    def test_undeclared_skip(self):
        text = suite("alpha", [("a1", "ok"), ("a2", "skip"), ("a3", "ok")]) \
            + suite("beta", [("b1", "ok")])
        problems = ktap.verify(text, self.EXPECTED, ())
        self.assertEqual([(p.kind, p.name) for p in problems],
                         [("undeclared skip", "alpha.a2")])
        self.assertEqual(ktap.verify(text, self.EXPECTED, {"alpha.a2"}), [])
        self.assertEqual(ktap.verify(text, self.EXPECTED, {"alpha.*"}), [])
        self.assertEqual(self.kinds(text, skippable={"beta.*"}),
                         ["undeclared skip"])

    def test_declared_parameterised_skip(self):
        cases = [("s", "p/x", "skip"), ("s", "q", "pass")]
        self.assertEqual(ktap.verify(cases, {"s"}, {"s.p"}), [])
        self.assertEqual(ktap.skip_declared("s", "p/x", {"s.p/*"}), "s.p/*")
        self.assertIsNone(ktap.skip_declared("s", "p/x", {"s.q"}))

    def test_all_skip(self):
        text = suite("alpha", [("a1", "skip")]) + \
            suite("beta", [("b1", "skip")])
        self.assertEqual(self.kinds(text, skippable={"*"}), ["nothing ran"])
        self.assertEqual(self.kinds(text),
                         ["undeclared skip", "undeclared skip",
                          "nothing ran"])

    def test_zero_cases(self):
        self.assertEqual(self.kinds("no ktap here\n", expected=set()),
                         ["nothing ran"])
        self.assertEqual(self.kinds("KTAP version 1\n1..0\n"),
                         ["missing suite", "missing suite", "nothing ran"])

    def test_crashed_run(self):
        self.assertEqual(self.kinds(CRASH, expected={"kverbs_qp"}),
                         ["missing cases"])

    def test_cases_only(self):
        """A bare case list has no plans: only what it can show."""
        cases = ktap.parse(COMPLETE)
        self.assertEqual(ktap.verify(cases, self.EXPECTED, ()), [])
        self.assertEqual(self.kinds(cases[:1]), ["missing suite"])


if __name__ == "__main__":
    unittest.main()
