#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The command-line conventions every kverbs tool follows (kvcli.hpp):
-h/--help on stdout with status 0, -V/--version as "<tool> (kverbs)
<version>" with status 0, a bad number a usage error (status 2) that names
the option, and (tools with a status command) an unknown status option a
usage error that names it.  The JSON of status -j is checked where the
modules run (the guest suites parse it).
Run by meson test:  cli_conventions.py TOOL NAME VERSION OPT ARGS..."""
import subprocess
import sys


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def main():
    tool, name, version, opt, *bad = sys.argv[1:]
    errors = []
    for o in ("--help", "-h"):
        p = run([tool, o])
        if p.returncode != 0 or not p.stdout.startswith("usage:") or p.stderr:
            errors.append(f"{o}: status {p.returncode}, stdout {p.stdout[:80]!r}, "
                          f"stderr {p.stderr[:80]!r}")
    for o in ("--version", "-V"):
        p = run([tool, o])
        if p.returncode != 0 or p.stdout != f"{name} (kverbs) {version}\n":
            errors.append(f"{o}: status {p.returncode}, {p.stdout!r}")
    if name != "kvping":
        p = run([tool, "status", "--no-such-option"])
        if p.returncode != 2 or "--no-such-option" not in p.stderr:
            errors.append(f"status --no-such-option: status {p.returncode} (want 2), "
                          f"stderr {p.stderr[:200]!r}")
        if "-j|--json" not in run([tool, "--help"]).stdout:
            errors.append("--help does not offer status -j|--json")
    p = run([tool] + bad)
    if p.returncode != 2 or opt not in p.stderr or "not a number" not in p.stderr:
        errors.append(f"{' '.join(bad)}: status {p.returncode} (want 2), "
                      f"stderr {p.stderr[:200]!r} (want it to name {opt})")
    for e in errors:
        print(f"{name}: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
