#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Run a udsm application as a cluster of processes on this host (the unix
transport), and check every node's exit status and node 1's output.

  cluster.py --nodes N [--progress block|poll] [--access segv|uffd]
             [--transport unix|verbs] [--expect REGEX] [--env VAR=VALUE]...
             BIN ARGS...
             verbs: 2 nodes on this host, both at $UDSM_TEST_ADDR (an address
             of an RDMA device here); skipped without one
  cluster.py --bad-env VAR=VALUE [--expect REGEX] BIN
                                   the value is refused: status 2, VAR named
                                   (and REGEX in the message)
  cluster.py --nodes N --kill K --after S BIN ARGS...
                                   SIGKILL node K after S seconds: every other
                                   node exits 3 within seconds naming a lost
                                   node, K by at least one

Exit 0 on success, 1 on failure, 77 (skip) when the host cannot run it,
with the reason printed."""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

TIMEOUT_S = 50


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def bad_env(binary, assignment, expect=None):
    var, _, value = assignment.partition("=")
    if expect == "vm.max_map_count":
        with open("/proc/sys/vm/max_map_count") as f:
            if int(f.read()) // 2 >= int(value):
                skip(f"vm.max_map_count allows {var}={value} here")
    env = dict(os.environ, UDSM_TRANSPORT="unix", UDSM_DIR="/nonexistent",
               UDSM_PEERS="a,b", UDSM_NODE="1")
    env[var] = value
    p = subprocess.run([binary], env=env, capture_output=True, text=True,
                       timeout=TIMEOUT_S)
    if p.returncode != 2 or var not in p.stderr or \
            (expect and not re.search(expect, p.stderr)):
        print(f"{var}={value!r}: exit {p.returncode}, stderr {p.stderr!r}; "
              f"want exit 2 naming {var}" + (f" and /{expect}/" if expect else ""))
        return 1
    print(f"{var}={value!r} refused: {p.stderr.strip()}")
    return 0


def cluster(args):
    if not hasattr(os, "memfd_create"):
        skip("no memfd_create on this host")
    if args.transport == "verbs":
        addr = os.environ.get("UDSM_TEST_ADDR")
        devs = os.listdir("/sys/class/infiniband") \
            if os.path.isdir("/sys/class/infiniband") else []
        if not devs:
            skip("no RDMA device (/sys/class/infiniband is empty)")
        if not addr:
            skip("UDSM_TEST_ADDR unset: an IP address of an RDMA device here")
        if args.nodes != 2:
            skip("verbs on one host: 2 nodes (one listener per address and port)")
    with tempfile.TemporaryDirectory(prefix="udsm-") as d:
        if args.transport == "verbs":
            peers = ",".join([os.environ["UDSM_TEST_ADDR"]] * args.nodes)
        else:
            peers = ",".join(f"node{i}" for i in range(1, args.nodes + 1))
        procs = []
        for n in range(1, args.nodes + 1):
            env = dict(os.environ, UDSM_TRANSPORT=args.transport, UDSM_DIR=d,
                       UDSM_PEERS=peers, UDSM_NODE=str(n),
                       UDSM_PROGRESS=args.progress, UDSM_ACCESS=args.access,
                       UDSM_JOIN_MS="20000")
            env.update(v.split("=", 1) for v in args.env)
            out = open(os.path.join(d, f"out{n}"), "w+")
            procs.append((n, subprocess.Popen(args.cmd, env=env, stdout=out,
                                              stderr=subprocess.STDOUT), out))
        if args.kill:
            time.sleep(args.after)
            victim = procs[args.kill - 1][1]
            if victim.poll() is not None:
                print(f"node {args.kill} ended before the kill: run longer")
                return 1
            victim.kill()
            killed_at = time.monotonic()
        ok = True
        skipped = None
        named_victim = False
        for n, p, out in procs:
            try:
                rc = p.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                for _, q, _ in procs:
                    q.kill()
                rc = "timeout"
            out.seek(0)
            text = out.read()
            print(f"--- node {n}: exit {rc}\n{text}", end="")
            if args.kill and n != args.kill:
                took = time.monotonic() - killed_at
                # node K itself, or by a survivor's ABORT; in a cascade, a
                # survivor that ended on it first
                if rc != 3 or not re.search(r"lost node \d \(", text) or took > 10:
                    print(f"node {n}: want exit 3 naming a lost node within 10 s "
                          f"(after {took:.1f} s)")
                    ok = False
                named_victim = named_victim or f"lost node {args.kill} (" in text
                continue
            if args.kill:
                continue
            if rc == 77:  # this host's kernel cannot run the variant
                skipped = text.strip()
                continue
            if rc != 0:
                ok = False
            if n == 1 and args.expect and not re.search(args.expect, text):
                print(f"node 1's output lacks /{args.expect}/")
                ok = False
        if args.kill and not named_victim:
            print(f"no survivor named node {args.kill}")
            ok = False
        if skipped and ok:
            skip(skipped)
        return 0 if ok and not skipped else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--progress", default="block")
    ap.add_argument("--access", default="segv")
    ap.add_argument("--transport", default="unix")
    ap.add_argument("--expect")
    ap.add_argument("--bad-env")
    ap.add_argument("--env", action="append", default=[],
                    help="VAR=VALUE for every node, after the defaults")
    ap.add_argument("--kill", type=int, default=0)
    ap.add_argument("--after", type=float, default=2.0)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if args.bad_env:
        return bad_env(args.cmd[0], args.bad_env, args.expect)
    return cluster(args)


if __name__ == "__main__":
    sys.exit(main())
