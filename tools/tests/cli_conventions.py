#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The command-line conventions every kverbs tool follows (kvcli.hpp):
--help on stdout with status 0, --version as "<tool> (kverbs) <version>"
with status 0, and a bad number a usage error (status 2) that names the
option.  Run by meson test:  cli_conventions.py TOOL NAME VERSION OPT ARGS..."""
import subprocess
import sys


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def main():
    tool, name, version, opt, *bad = sys.argv[1:]
    errors = []
    p = run([tool, "--help"])
    if p.returncode != 0 or not p.stdout.startswith("usage:") or p.stderr:
        errors.append(f"--help: status {p.returncode}, stdout {p.stdout[:80]!r}, "
                      f"stderr {p.stderr[:80]!r}")
    p = run([tool, "--version"])
    if p.returncode != 0 or p.stdout != f"{name} (kverbs) {version}\n":
        errors.append(f"--version: status {p.returncode}, {p.stdout!r}")
    p = run([tool] + bad)
    if p.returncode != 2 or opt not in p.stderr or "not a number" not in p.stderr:
        errors.append(f"{' '.join(bad)}: status {p.returncode} (want 2), "
                      f"stderr {p.stderr[:200]!r} (want it to name {opt})")
    for e in errors:
        print(f"{name}: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
