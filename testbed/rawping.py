"""rawping (bench/rawping), the raw ib_core limit, from the benchmarks.

page_exchange_us(): a request, a 4 KB RDMA write of a page into the
requester's memory, then the reply (rawping page=1), one at a time: the
least any remote page fetch over RC costs on these guests, with no
framework and no file system in the way.  The faster of plain and inline
sends, as the best raw ib_core can do.

page_read_us(): one 4 KB RDMA read of a page from the server's memory,
one at a time (rawping read=1): the least a post-copy page fault of
kmigrate costs.  The faster of a softirq CQ and a busy-polled one
(poll=1), likewise.
"""
import re

from .common import HarnessError

PORT = 18519


def page_exchange_us(client, server, count, port=PORT):
    """Median us of @count page exchanges from @client to @server (their
    overlay must hold /kvlab/modules/rawping.ko)."""
    best = None
    for inline in (0, 1):
        for n in (client, server):
            n.run("rmmod rawping 2>/dev/null; dmesg -c >/dev/null",
                  timeout=60)
        r = server.run(f"insmod /kvlab/modules/rawping.ko port={port} "
                       f"page=1 inline_send={inline}", timeout=60)
        if r.rc:
            raise HarnessError("rawping page=1 server did not start", r.out)
        r = client.run(f"insmod /kvlab/modules/rawping.ko server={server.ip} "
                       f"port={port} count={count} size=32 outstanding=1 "
                       f"page=1 check=0 inline_send={inline}; echo rc=$?; "
                       "dmesg | grep 'rawping: result'", timeout=600)
        for n in (client, server):
            n.run("rmmod rawping", timeout=60)
        m = re.search(r"median_ns=(\d+)", r.out)
        if "rc=0" not in r.out or not m:
            raise HarnessError("rawping page=1 failed", r.out[-2000:])
        us = int(m.group(1)) / 1000
        best = us if best is None else min(best, us)
    return best


def page_read_us(client, server, count, port=PORT):
    """Median us of @count 4 KB RDMA reads by @client of @server's page
    (their overlay must hold /kvlab/modules/rawping.ko)."""
    best = None
    for poll in (0, 1):
        for n in (client, server):
            n.run("rmmod rawping 2>/dev/null; dmesg -c >/dev/null",
                  timeout=60)
        r = server.run(f"insmod /kvlab/modules/rawping.ko port={port} "
                       "read=1", timeout=60)
        if r.rc:
            raise HarnessError("rawping read=1 server did not start", r.out)
        r = client.run(f"insmod /kvlab/modules/rawping.ko server={server.ip} "
                       f"port={port} count={count} read=1 check=0 "
                       f"poll={poll}; echo rc=$?; "
                       "dmesg | grep 'rawping: result'", timeout=600)
        for n in (client, server):
            n.run("rmmod rawping", timeout=60)
        m = re.search(r"median_ns=(\d+)", r.out)
        if "rc=0" not in r.out or not m:
            raise HarnessError(f"rawping read=1 poll={poll} failed",
                               r.out[-2000:])
        us = int(m.group(1)) / 1000
        best = us if best is None else min(best, us)
    return best
