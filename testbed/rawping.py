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


def _best_median_us(client, server, what, server_args, client_args, variants):
    """The best median (us) over @variants of one rawping run each: the
    server loaded with @server_args, the client with @client_args and the
    variant's own arguments; @what names the mode in errors."""
    best = None
    for v in variants:
        for n in (client, server):
            n.run("rmmod rawping 2>/dev/null; dmesg -c >/dev/null",
                  timeout=60)
        r = server.run(f"insmod /kvlab/modules/rawping.ko {server_args(v)}",
                       timeout=60)
        if r.rc:
            raise HarnessError(f"rawping {what} server did not start", r.out)
        r = client.run(f"insmod /kvlab/modules/rawping.ko server={server.ip} "
                       f"{client_args(v)}; echo rc=$?; "
                       "dmesg | grep 'rawping: result'", timeout=600)
        for n in (client, server):
            n.run("rmmod rawping", timeout=60)
        m = re.search(r"median_ns=(\d+)", r.out)
        if "rc=0" not in r.out or not m:
            raise HarnessError(f"rawping {what} ({v}) failed", r.out[-2000:])
        us = int(m.group(1)) / 1000
        best = us if best is None else min(best, us)
    return best


def page_exchange_us(client, server, count, port=PORT):
    """Median us of @count page exchanges from @client to @server (their
    overlay must hold /kvlab/modules/rawping.ko)."""
    return _best_median_us(
        client, server, "page=1",
        lambda inline: f"port={port} page=1 inline_send={inline}",
        lambda inline: f"port={port} count={count} size=32 outstanding=1 "
                       f"page=1 check=0 inline_send={inline}",
        (0, 1))


def page_read_us(client, server, count, port=PORT):
    """Median us of @count 4 KB RDMA reads by @client of @server's page
    (their overlay must hold /kvlab/modules/rawping.ko): the better of a
    softirq and a busy-polled CQ."""
    return _best_median_us(
        client, server, "read=1",
        lambda poll: f"port={port} read=1",
        lambda poll: f"port={port} count={count} read=1 check=0 poll={poll}",
        (0, 1))
