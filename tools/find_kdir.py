#!/usr/bin/env python3
"""Print the kernel build tree the modules should be built against.

The running kernel's tree wins; otherwise the newest installed one (the host
may run a kernel whose headers are not installed, e.g. in a container).
Prints nothing when no tree exists, so configuring user space never fails.
"""
import os
import re
from pathlib import Path


def version_key(name):
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", name)]


def main():
    running = Path("/lib/modules") / os.uname().release / "build"
    if (running / "Makefile").is_file():
        print(running)
        return
    trees = [p for p in Path("/lib/modules").glob("*/build")
             if (p / "Makefile").is_file()]
    if trees:
        newest = max(trees, key=lambda p: version_key(p.parent.name))
        print(newest)


if __name__ == "__main__":
    main()
