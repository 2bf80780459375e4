"""Bad input to the harness: a clear error naming cause and fix, a bounded
wait, and no QEMU process left behind.

Only the two never-boots tests start QEMU (about 10 s together); the rest
fail before any guest starts.  Run: python3 -m unittest
testbed.selftest.test_harness"""
import os
import socket
import subprocess
import tempfile
import time
import types
import unittest
from pathlib import Path
from unittest import mock

from testbed import console, kernels
from testbed.cluster import Cluster, ConsoleError
from testbed.common import HarnessError, build_dir, require_tool


def qemu_procs(workdir):
    p = subprocess.run(["pgrep", "-f", f"qemu-system-x86_64.*{workdir}"],
                       stdout=subprocess.PIPE, text=True)
    return p.stdout.split()


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
        with tempfile.TemporaryDirectory() as bindir, \
                mock.patch.dict(os.environ, {"PATH": bindir}):
            qemu = "/usr/bin/qemu-system-x86_64"
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
            c.nodes.append(types.SimpleNamespace(console_path=log,
                                                 sock=None, proc=None))
            self.assertEqual([f.kind for f in c.findings()], ["WARNING"])
            with self.assertRaises(ConsoleError) as cm:
                c.__exit__(None, None, None)
            self.assertIn("kverbs/cq.c:42", str(cm.exception))

    def test_reports_flagged(self):
        text = ("[    1.0] ok\n"
                "[    2.0] WARNING: CPU: 0 PID: 1 at kverbs/ep.c:10 f+0x1/0x2\n"
                "[    3.0] BUG: KASAN: slab-use-after-free in x\n"
                "[    4.0] INFO: task kworker/0:1:12 blocked for more than "
                "120 seconds.\n"
                "[    5.0] WARNING: possible circular locking dependency "
                "detected\n")
        kinds = [f.kind for f in console.scan_text(text)]
        self.assertEqual(kinds, ["WARNING", "BUG", "hung task", "lockdep"])

    def test_clean_boot_not_flagged(self):
        text = ("[    0.1] Lock dependency validator: Copyright (c) 2006\n"
                "[    0.2] rcu: RCU lockdep checking is enabled.\n"
                "[    0.3] kverbs: device rxe0 added\n")
        self.assertEqual(console.scan_text(text), [])


if __name__ == "__main__":
    unittest.main()
