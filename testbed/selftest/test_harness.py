"""Bad input to the harness: a clear error naming cause and fix, a bounded
wait, and no QEMU process left behind; and the harness's own plumbing
(child processes, tools, timeouts, results).

Only the two never-boots tests start QEMU (about 10 s together); the rest
fail before any guest starts, or use a stand-in script for QEMU.  Run:
python3 -m unittest testbed.selftest.test_harness"""
import ast
import io
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
import unittest
from contextlib import redirect_stdout
from pathlib import Path
from unittest import mock

from testbed import common, deps, kernels, kunit
from testbed.cluster import Cluster, ConsoleError
from testbed.common import REPO, HarnessError, build_dir, require_tool
from testbed.results import Results


def qemu_procs(workdir):
    pgrep = require_tool("pgrep", "procps")
    p = subprocess.run([pgrep, "-f", f"qemu-system-x86_64.*{workdir}"],
                       stdout=subprocess.PIPE, text=True)
    return p.stdout.split()


def alive(pid):
    """True while pid runs (a zombie nobody reaped counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def comm(pid):
    """pid's command name, or None once it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


class HarnessBadInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.kernel = kernels.resolve("6.1")

    def workdir(self, name):
        d = build_dir() / "selftest" / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def test_unknown_kernel_version(self):
        with self.assertRaises(HarnessError) as cm:
            kernels.resolve("5.10")
        self.assertIn("unknown kernel version '5.10'", str(cm.exception))
        self.assertIn("6.1, 6.12", cm.exception.fix)

    def test_host_not_debian_12(self):
        """./kvlab refuses another system before it installs or writes
        anything (deps.ensure() checks first)."""
        cases = {
            'ID=debian\nVERSION_ID="12"\n': None,
            'PRETTY_NAME="Ubuntu 24.04 LTS"\nID=ubuntu\nVERSION_ID="24.04"\n':
                "Ubuntu 24.04 LTS",
            'PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nID=debian\n'
            'VERSION_ID="13"\n': "Debian GNU/Linux 13 (trixie)",
            'ID=debian\n': "debian",
        }
        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / "os-release"
            for text, name in cases.items():
                f.write_text(text)
                if name is None:
                    deps.check_host(f)
                    continue
                with self.assertRaises(HarnessError) as cm:
                    deps.check_host(f)
                self.assertIn(f"this host is {name}, not Debian 12",
                              str(cm.exception))
                self.assertIn("nothing was changed", str(cm.exception))
            with mock.patch.object(deps, "OS_RELEASE", f), \
                    mock.patch.object(deps, "run") as run:
                with self.assertRaises(HarnessError):
                    deps.ensure()
                run.assert_not_called()
            with self.assertRaises(HarnessError) as cm:
                deps.check_host(Path(d) / "missing")
            self.assertIn("cannot tell which system", str(cm.exception))

    def test_missing_tool(self):
        with tempfile.TemporaryDirectory() as empty, \
                mock.patch.dict(os.environ, {"PATH": empty}):
            with self.assertRaises(HarnessError) as cm:
                require_tool("qemu-system-x86_64", "qemu-system-x86")
            with self.assertRaises(HarnessError) as cm2:
                with Cluster(self.kernel, 2, self.workdir("notool")):
                    pass
        for e in (cm.exception, cm2.exception):
            self.assertIn("'qemu-system-x86_64' was not found", str(e))
            self.assertIn("apt-get install qemu-system-x86", e.fix)

    def test_missing_vde_switch(self):
        """More than two nodes need vde2; QEMU alone is not enough."""
        qemu = require_tool("qemu-system-x86_64", "qemu-system-x86")
        with tempfile.TemporaryDirectory() as bindir, \
                mock.patch.dict(os.environ, {"PATH": bindir}):
            os.symlink(qemu, Path(bindir) / "qemu-system-x86_64")
            wd = self.workdir("novde")
            with self.assertRaises(HarnessError) as cm:
                with Cluster(self.kernel, 4, wd):
                    pass
        self.assertIn("'vde_switch' was not found", str(cm.exception))
        self.assertIn("apt-get install vde2", cm.exception.fix)
        self.assertEqual(qemu_procs(wd), [])

    def test_port_in_use(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        wd = self.workdir("port")
        try:
            with self.assertRaises(HarnessError) as cm:
                with Cluster(self.kernel, 2, wd, port_base=port):
                    pass
        finally:
            s.close()
        self.assertIn(f"127.0.0.1:{port} is already in use",
                      str(cm.exception))
        self.assertIn("--port-base", cm.exception.fix)
        self.assertEqual(qemu_procs(wd), [])

    def test_guest_never_boots_in_time(self):
        wd = self.workdir("slow")
        t0 = time.monotonic()
        with self.assertRaises(HarnessError) as cm:
            with Cluster(self.kernel, 2, wd, boot_timeout=1):
                pass
        self.assertLess(time.monotonic() - t0, 30)
        self.assertIn("did not boot within 1s", str(cm.exception))
        self.assertIn("console", str(cm.exception))
        self.assertEqual(qemu_procs(wd), [])

    def test_guest_kernel_panics(self):
        wd = self.workdir("panic")
        t0 = time.monotonic()
        with self.assertRaises(HarnessError) as cm:
            with Cluster(self.kernel, 2, wd, boot_timeout=120,
                         append="rdinit=/nonexistent"):
                pass
        self.assertLess(time.monotonic() - t0, 60)
        self.assertIn("QEMU exited", str(cm.exception))
        self.assertIn("panic", str(cm.exception).lower())
        # A panic before init is ready is retried once, its consoles kept.
        self.assertIn("Kernel panic",
                      (wd / "node0.console.boot1.log").read_text(
                          errors="replace"))
        self.assertIn("Kernel panic",
                      (wd / "node0.console.log").read_text(errors="replace"))
        self.assertEqual(qemu_procs(wd), [])

    def test_too_few_nodes(self):
        with self.assertRaises(HarnessError):
            Cluster(self.kernel, 1, self.workdir("one"))


class ConsoleScan(unittest.TestCase):
    def test_cluster_exit_raises_on_findings(self):
        """A clean with-body still fails when a console shows a report."""
        with tempfile.TemporaryDirectory() as d:
            log = Path(d) / "node0.console.log"
            log.write_text("[ 1.0] ok\n[ 2.0] WARNING: CPU: 0 PID: 7 at "
                           "kverbs/cq.c:42 kv_cq_poll+0x10/0x20 [kverbs]\n")
            c = Cluster(kernels.Kernel("6.1", "x", "x", d), 2, Path(d))
            c.nodes.append(types.SimpleNamespace(
                console_path=log, sock=None, proc=None,
                unexpected=lambda found: found))
            self.assertEqual([f.kind for f in c.findings()], ["WARNING"])
            with self.assertRaises(ConsoleError) as cm:
                c.__exit__(None, None, None)
            self.assertIn("kverbs/cq.c:42", str(cm.exception))
    # The scanner itself: testbed/selftest/test_console.py.


FAKE_QEMU = """#!/bin/sh
# Stands in for QEMU: a guest that never finishes, with a child of its own.
sleep 300 &
echo "$$ $!" > "{pids}.tmp" && mv "{pids}.tmp" "{pids}"
wait
"""


class GuestProcesses(unittest.TestCase):
    """The KUnit guest (kunit._boot) is killed, with its whole process
    group, on every way out; a stand-in script plays QEMU."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = Path(self.tmp.name)
        self.pids = d / "pids"
        fake = d / "bin" / "qemu-system-x86_64"
        fake.parent.mkdir()
        fake.write_text(FAKE_QEMU.format(pids=self.pids))
        fake.chmod(0o755)
        path = f"{fake.parent}{os.pathsep}{os.environ.get('PATH', '')}"
        self.env = mock.patch.dict(os.environ, {"PATH": path})
        self.env.start()
        self.kk = kunit.KunitKernel("default", d, d / "bzImage", "6.1")

    def tearDown(self):
        self.env.stop()
        if self.pids.exists():      # never leave the stand-in running
            for pid in map(int, self.pids.read_text().split()):
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
        self.tmp.cleanup()

    def wait_pids(self):
        deadline = time.monotonic() + 10
        while not self.pids.exists():
            self.assertLess(time.monotonic(), deadline, "stand-in never ran")
            time.sleep(0.05)
        return [int(p) for p in self.pids.read_text().split()]

    def assert_gone(self, pids):
        deadline = time.monotonic() + 5
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual([p for p in pids if alive(p)], [])
        self.assertEqual(common._LIVE, set())

    def boot(self, timeout):
        d = Path(self.tmp.name)
        with redirect_stdout(io.StringIO()):
            return kunit._boot(self.kk, d / "initrd", d / "console.log",
                               timeout, "")

    def test_timeout_kills_group(self):
        self.assertTrue(self.boot(1))
        self.assert_gone(self.wait_pids())

    def test_interrupt_kills_group(self):
        def interrupted(proc, *a, **kw):
            self.wait_pids()            # the guest is up, then Ctrl-C
            raise KeyboardInterrupt

        with mock.patch.object(subprocess.Popen, "communicate",
                               interrupted):
            with self.assertRaises(KeyboardInterrupt):
                self.boot(60)
        self.assert_gone(self.wait_pids())

    def test_killed_harness_takes_child_along(self):
        """pdeathsig: a SIGKILLed harness (no finally, no atexit) still
        leaves no child behind."""
        code = ("import sys, time; sys.path.insert(0, sys.argv[1]); "
                "from testbed import common; "
                "p = common.spawn(['sleep', '60']); "
                "print(p.pid, flush=True); time.sleep(60)")
        harness = subprocess.Popen([sys.executable, "-c", code, str(REPO)],
                                   stdout=subprocess.PIPE, text=True)
        child = None
        try:
            child = int(harness.stdout.readline())
            # setpriv arms pdeathsig and then execs sleep: killing the
            # harness before that exec would test nothing (CI once did).
            deadline = time.monotonic() + 10
            while comm(child) != "sleep":
                self.assertLess(time.monotonic(), deadline,
                                "setpriv never exec'd the child")
                time.sleep(0.01)
            self.assertTrue(alive(child))
            harness.kill()
            harness.wait(10)
            self.assert_gone([child])
        finally:
            harness.kill()
            harness.wait(10)
            harness.stdout.close()
            if child and alive(child):
                os.kill(child, signal.SIGKILL)


class CommandNeeds(unittest.TestCase):
    """Each command installs only what it needs (issue 28, item 5): the
    demo no NFS server, CRIU, DKMS or kernel sources; ensure() asks apt
    for the missing ones of the command's set alone."""

    def test_demo_installs_little(self):
        demo = set(deps.NEEDS["demo"])
        for pkg in ("nfs-kernel-server", "criu", "dkms", "linux-source-6.1",
                    "lintian", "python3-sphinx"):
            self.assertNotIn(pkg, demo)
        for cmd, need in deps.NEEDS.items():
            self.assertLessEqual(set(need), set(deps.PACKAGES), cmd)

    def test_ensure_installs_the_set_only(self):
        calls = []

        def fake_run(argv, **kw):
            calls.append(argv)
            return mock.Mock(returncode=0, stdout="", stderr="")
        with mock.patch.object(deps, "check_host"), \
                mock.patch.object(deps, "missing",
                                  side_effect=lambda want: list(want)), \
                mock.patch.object(deps, "_has_backports", return_value=True), \
                mock.patch.object(deps, "apt_update"), \
                mock.patch.object(deps, "run", side_effect=fake_run), \
                mock.patch.object(deps.os, "geteuid", return_value=0):
            deps.ensure(need=deps.NEEDS["demo"])
        installed = [a for c in calls if c[:2] == ["apt-get", "install"]
                     for a in c if not a.startswith("-")][2:]
        self.assertEqual(installed, deps.NEEDS["demo"])


class ToolsDeclared(unittest.TestCase):
    """Every tool the harness runs is found through require_tool, whose
    package `./kvlab setup` installs: none is assumed present."""
    WATCHED = {"setpriv": "util-linux", "pgrep": "procps",
               "qemu-system-x86_64": "qemu-system-x86"}

    def calls(self, paths):
        """(file, tool, package) of every require_tool call, and every
        other string constant naming a watched tool."""
        calls, stray = [], []
        for path in paths:
            tree = ast.parse(path.read_text(), str(path))
            inside = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and getattr(
                        node.func, "id", getattr(node.func, "attr", "")) \
                        == "require_tool":
                    args = [a.value if isinstance(a, ast.Constant) else None
                            for a in node.args]
                    calls.append((path.name, *args[:2]))
                    inside.update(id(a) for a in node.args)
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and \
                        node.value in self.WATCHED and id(node) not in inside:
                    stray.append(f"{path.name}:{node.lineno}: {node.value}")
        return calls, stray

    def test_packages_installed_by_setup(self):
        code = sorted((REPO / "testbed").glob("*.py"))
        tests = sorted((REPO / "testbed" / "selftest").glob("*.py"))
        calls, stray = self.calls(code)
        # Test files may name a tool otherwise (e.g. a stand-in's name).
        calls += self.calls(tests)[0]
        self.assertEqual(stray, [], "run these through require_tool")
        for f, tool, pkg in calls:
            if tool is None:        # require_tool(name, pkg) passing through
                continue
            self.assertIn(pkg, deps.PACKAGES, f"{f}: {tool}")
        used = {(t, p) for _f, t, p in calls}
        for tool, pkg in self.WATCHED.items():
            self.assertIn((tool, pkg), used)


class GuestTimeout(unittest.TestCase):
    def kk(self, variant, config=None):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        d = Path(tmp.name)
        if config is not None:
            (d / ".config").write_text(config)
        return kunit.KunitKernel(variant, d, d / "bzImage", "6.1")

    def test_default_kernel_keeps_base(self):
        kk = self.kk("default", "CONFIG_KUNIT=y\n# CONFIG_KASAN is not set\n")
        self.assertEqual(kunit.guest_timeout(kk, 300), 300)

    def test_each_option_scales(self):
        self.assertEqual(kunit.guest_timeout(
            self.kk("debug", "CONFIG_KASAN=y\n"), 100), 200)
        self.assertEqual(kunit.guest_timeout(
            self.kk("debug", "CONFIG_LOCKDEP=y\n"), 100), 150)
        self.assertEqual(kunit.guest_timeout(
            self.kk("debug", "CONFIG_DEBUG_KMEMLEAK=y\n"), 1), 2)

    def test_built_debug_config(self):
        config = ("CONFIG_KASAN=y\nCONFIG_KASAN_GENERIC=y\n"
                  "CONFIG_PROVE_LOCKING=y\nCONFIG_LOCKDEP=y\n"
                  "CONFIG_DEBUG_KMEMLEAK=y\n")
        self.assertEqual(kunit.guest_timeout(self.kk("debug", config), 300),
                         1125)

    def test_unbuilt_kernel_uses_variant_fragments(self):
        base = kunit.guest_timeout(self.kk("default"), 300)
        debug = kunit.guest_timeout(self.kk("debug"), 300)
        self.assertEqual(base, 300)
        self.assertGreaterEqual(debug, 3 * base)


class SuiteNames(unittest.TestCase):
    def test_reads_suite_definitions_only(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            (d / "a_kunit.c").write_text(
                'static const struct c cases[] = {\n'
                '\t{ .name = "param", .x = 1 },\n};\n'
                '/* static struct kunit_suite old = { .name = "gone" }; */\n'
                'static struct kunit_suite a_suite = {\n'
                '\t.name = "alpha",\n\t.test_cases = a_cases,\n};\n'
                'static struct kunit_suite b_suite = {\n'
                '\t.test_cases = b_cases,\n\t.name = "beta",\n};\n'
                'kunit_test_suites(&a_suite, &b_suite);\n')
            (d / "helper.c").write_text(
                'static struct kunit_suite h = {\n\t.name = "nope",\n};\n')
            self.assertEqual(kunit.suite_names(d), {"alpha", "beta"})
            (d / "c_kunit.c").write_text(
                'static struct kunit_suite c = {\n\t.name = NAME,\n};\n')
            with self.assertRaises(HarnessError) as cm:
                kunit.suite_names(d)
            self.assertIn("c_kunit.c", str(cm.exception))

    def test_our_sources(self):
        names = kunit.suite_names()
        self.assertTrue(names)
        for n in names:
            self.assertRegex(n, r"^[a-z][a-z0-9_]*$")


class Rotation(unittest.TestCase):
    """CI's share of `./kvlab test --full`: the core plus one group."""

    def test_every_suite_once(self):
        from testbed import cli
        flat = cli.CORE_SUITES + [s for g in cli.ROTATION for s in g]
        self.assertEqual(len(flat), len(set(flat)))
        # every suite is in CI, or listed with the reason it is not
        out = list(cli.FULL_ONLY) + list(cli.NOT_IN_CI)
        self.assertEqual(sorted(flat + out), sorted(cli.SUITES))
        self.assertEqual(len(out), len(set(out)))
        self.assertFalse(set(flat) & set(out))
        self.assertTrue(all(cli.NOT_IN_CI.values()))
        self.assertTrue(all(cli.FULL_ONLY.values()))

    def test_consecutive_commits_walk_every_group(self):
        from testbed import cli
        seen = set()
        for n in range(100, 100 + len(cli.ROTATION)):
            done = subprocess.CompletedProcess([], 0, stdout=f"{n}\n")
            with mock.patch("subprocess.run", return_value=done):
                g, why = cli.rotation_group()
            self.assertIn(str(n), why)
            seen.add(g)
        self.assertEqual(seen, set(range(len(cli.ROTATION))))

    def test_explicit_group_checked(self):
        from testbed import cli
        self.assertEqual(cli.rotation_group(1)[0], 1)
        with self.assertRaises(HarnessError):
            cli.rotation_group(len(cli.ROTATION))

    def test_suite_excludes_full(self):
        from testbed import cli
        with self.assertRaises(SystemExit):
            with redirect_stdout(io.StringIO()):
                cli.main(["test", "--suite", "unit", "--full"])


class KernelDocCheck(unittest.TestCase):
    """The style suite's kernel-doc check catches a missing Return:."""

    DOC = ("/**\n * kvx_get - get a thing\n * @x: which\n *\n"
           " * Context: any.\n{ret} */\nint kvx_get(int x)\n{{\n"
           "\treturn x;\n}}\n")

    def test_missing_return_found(self):
        from testbed import docs
        script = docs.kernel_doc_script(kernels.resolve("6.12"))
        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / "planted.c"
            f.write_text(self.DOC.format(ret=" * Return: @x.\n"))
            self.assertEqual(docs.kernel_doc_problems(script, [f], cwd=d),
                             [])
            f.write_text(self.DOC.format(ret=""))
            bad = docs.kernel_doc_problems(script, [f], cwd=d)
            self.assertTrue(any("return value of 'kvx_get'" in l
                                for l in bad), bad)


class ResultsSkips(unittest.TestCase):
    def test_skip_counted_and_listed(self):
        res = Results()
        out = io.StringIO()
        with redirect_stdout(out):
            res.add("s", "a", True)
            res.add("s", "b", False, "boom")
            res.skip("kunit", "kvmsg.x", "no device")
        self.assertIn("  [SKIP] kunit: kvmsg.x (no device)", out.getvalue())
        self.assertEqual((res.passed, res.failed, res.skipped), (1, 1, 1))
        lines = res.summary().splitlines()
        self.assertEqual(lines[-1], "1 passed, 1 failed, 1 skipped")
        self.assertIn("skipped:", lines)
        self.assertIn("  kunit: kvmsg.x (no device)", lines)

    def test_no_skips(self):
        res = Results()
        with redirect_stdout(io.StringIO()):
            res.add("s", "a", True)
        self.assertEqual(res.summary().splitlines()[-1],
                         "1 passed, 0 failed, 0 skipped")
        self.assertNotIn("skipped:", res.summary())

    def test_setup_steps(self):
        """A set-up step done is no pass; failed, it fails its suite; the
        phase times give claims and set-up steps per suite."""
        res = Results()
        with redirect_stdout(io.StringIO()):
            with res.timed("s"):
                self.assertTrue(res.setup("s", "server loads", True))
                res.add("s", "a claim", True)
                self.assertFalse(res.setup("s", "client loads", False, "x"))
        self.assertEqual((res.passed, res.failed), (1, 1))
        text = res.summary()
        self.assertIn("  s: set-up: client loads", text)
        self.assertRegex(text, r"\n  s +\d+\.\ds +2 claims +1 set-up\n")

    def test_failure_detail_in_summary(self):
        """CI keeps only the log's tail: the summary repeats a failure's
        detail (a dead guest's console tail), long ones cut in the
        middle, the last lines kept."""
        res = Results()
        long = "\n".join(f"console {i}" for i in range(200))
        with redirect_stdout(io.StringIO()):
            res.add("s", "cluster run", False, "node0: guest stopped\n" + long)
            res.add("s", "other", False, "short reason")
        text = res.summary()
        self.assertIn("  s: cluster run\n        node0: guest stopped", text)
        self.assertIn("        console 199", text)
        self.assertNotIn("console 100\n", text)
        self.assertIn("        [...]", text)
        self.assertIn("  s: other\n        short reason", text)
        self.assertEqual(text.splitlines()[-1], "0 passed, 2 failed, 0 skipped")



class DsmFaultTable(unittest.TestCase):
    """bench dsm-fault reads kdsm-faults' table as faults.cpp prints it
    (header, its column names and the row format all taken from the
    source): R's median ("R med us"), not the mean before it; a MISMATCH
    or missing row, or a table without the median column, is no result."""

    def printf(self, start):
        """The string literals of the printf call beginning @start."""
        src = (REPO / "tools/kdsm/apps/faults.cpp").read_text()
        call = re.search(re.escape(start) + r".*?\);", src, re.S).group(0)
        return [x.replace("\\n", "\n") for x in re.findall(r'"([^"]*)"', call)]

    def table(self, mismatch=None):
        from testbed.bench_dsm_fault import ROWS
        head = self.printf('std::printf("%-42s %9s')
        row = self.printf('std::printf("%-42s %9u')[0]
        return head[0] % tuple(head[1:]) + "".join(row % (
            n, 3, 3.0, 1, 1.0, 0, 0.0, 812.5, 790.5,
            "  MISMATCH" if n == mismatch else "") for n in ROWS.values())

    def test_median_column(self):
        from testbed.bench_dsm_fault import MEDIAN_COLUMN, ROWS, parse_faults
        t = self.table()
        self.assertIn(MEDIAN_COLUMN, t.splitlines()[0])
        self.assertEqual(parse_faults(t), {k: 790.5 for k in ROWS})
        self.assertIsNone(parse_faults(self.table(ROWS["read"])))
        self.assertIsNone(parse_faults(t.replace(
            ROWS["write_k1"], "write, something else")))
        self.assertIsNone(parse_faults(t.replace(MEDIAN_COLUMN, "R p50 us")))


if __name__ == "__main__":
    unittest.main()
