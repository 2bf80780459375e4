"""The kvtest suites (kvtest-debug, kvtest-debug-6.12): the review
regressions, each a scenario of kunit/kvtest.c (a test-only module that
uses kverbs as a client module would) on two guests booting a debug KUnit
kernel, with kverbs built for testing (its test_* parameters: delays that
open race windows, and test_undo bits that undo one fix each, so a check
can be shown failing).  Any report on a console fails the run.
"""
import re

from .common import HarnessError
from .knobs import kverbs_params
from .suite_auth import NOBODY
from .suites import _debug_cluster, _dmesg_has, kmemleak_report, load_kverbs


TEST_PORT = 18517


def kvtest(node, server=None, **params):
    """The insmod line for the kvtest scenario module (kunit/kvtest.c) on
    `node`: the echo server, or a client of `server`."""
    args = [f"port={TEST_PORT}", f"node_id={node.node_id}"]
    if server is not None:
        args.insert(0, f"server={server.ip}")
    args += [f"{k}={v}" for k, v in params.items()]
    # RNR retry 0: a flow-control bug fails instead of stalling.
    return (kverbs_params(rnr_retry=0) + " && "
            "insmod /kvlab/modules/kvtest.ko " + " ".join(args))


def _kvtest_pair(res, suite, n0, n1, what, server_params, client_params,
                 expect):
    """Load a kvtest server on n0 with `server_params`, run one client
    scenario on n1, unload both; the client must succeed and log
    `expect`."""
    mark0 = len(n0.run("dmesg", timeout=30).out.splitlines())
    mark1 = len(n1.run("dmesg", timeout=30).out.splitlines())
    r = n0.run("rmmod kvtest 2>/dev/null; " + kvtest(n0, **server_params),
               timeout=120)
    res.setup(suite, f"{what}: kvtest server loads", r.rc == 0, r.out)
    r = n1.run(f"{kvtest(n1, n0, **client_params)}; echo rc=$?; "
               f"dmesg | tail -n +{mark1 + 1} | grep -E 'kvtest|kverbs'; "
               "rmmod kvtest 2>/dev/null", timeout=600)
    log0 = "\n".join(n0.run("dmesg", timeout=30).out.splitlines()[mark0:])
    ok0 = re.search(r"kvtest: (greeting|region|recv during)|kv(erbs|msg): .*(dropping|credits "
                    r"beyond|failed)", log0) is not None
    res.check(suite, what, "rc=0" in r.out and expect in r.out and not ok0,
              f"client: {r.out}\nserver log:\n{log0[-1500:]}")
    r = n0.run("rmmod kvtest", timeout=120)
    res.check(suite, f"{what}: kvtest server unloads", r.rc == 0, r.out)


def _regressions(res, suite, n0, n1):
    """Scenarios for defects found by review (issue 8); each failed before
    its fix, most of them only as a KASAN, lockdep or WARNING report on
    the debug kernel's console."""
    _kvtest_pair(res, suite, n0, n1, "passive side can send from "
                 "->connected (greeting arrives first)", {"greet": 1},
                 {"scenario": "greet"}, "greeting from ->connected")
    # Depth 13: the old send queue of depth + 2 = 15 WRs is a power of two
    # minus one, so rxe's rounding leaves no slack to hide an overflow.
    _kvtest_pair(res, suite, n0, n1, "depth 13: 13 unsignaled RDMA writes "
                 "and 13 sends posted without waiting, then teardown", {},
                 {"scenario": "sqfull", "depth": 13},
                 "13 RDMA writes and 13 sends posted")
    _kvtest_pair(res, suite, n0, n1, "kept message released by a work item "
                 "while its handler sleeps: 300 round trips, no double "
                 "repost", {"keep": 1}, {"scenario": "echo", "count": 300},
                 "echo: 300 round trips ok")
    # Teardown must not flush the deferral work from its own workqueue
    # (lockdep: possible recursive locking; a deadlock under memory
    # pressure): the client leaves while the server's handlers sleep.
    _kvtest_pair(res, suite, n0, n1, "a client leaves while the server's "
                 "deferred handlers run: the teardown waits for them "
                 "without recursion on one workqueue",
                 {"keep": 1, "hold_ms": 200},
                 {"scenario": "leave", "count": 12},
                 "leave: 12 messages sent")
    # The handlers (12 x 200 ms) still run when the teardown comes.
    bad, log_ = _dmesg_has(n0, r"possible recursive locking|WARNING:|"
                           r"circular locking")
    res.check(suite, "... and the server's log has no lockdep report or "
              "warning", not bad, log_[-3000:])
    _kvtest_pair(res, suite, n0, n1, "no ->recv runs while the passive "
                 "side's ->connected sleeps: 20 round trips sent at once",
                 {"slow": 1}, {"scenario": "echo", "count": 20},
                 "echo: 20 round trips ok")
    _kvtest_pair(res, suite, n0, n1, "a grant's key works on its own "
                 "connection only: a second connection's RDMA read with it "
                 "is refused", {}, {"scenario": "scope"},
                 "scope: the key works on its connection only")
    _kvtest_pair(res, suite, n0, n1, "an RDMA read, a page read and an "
                 "atomic without a completion callback are refused before "
                 "anything is posted; the connection still reads", {},
                 {"scenario": "nodone"}, "nodone: refused (-22, -22, -")
    # The same scenario with the fix undone (test builds' kverbs
    # test_undo=1) must fail: the check can fail.
    n0.run("rmmod kvtest 2>/dev/null; " + kvtest(n0), timeout=120)
    n1.run(kverbs_params(test_undo=1), timeout=10)
    r = n1.run(f"{kvtest(n1, n0, scenario='nodone')}; echo rc=$?; "
               f"rmmod kvtest 2>/dev/null; {kverbs_params(test_undo=0)}",
               timeout=120)
    n0.run("rmmod kvtest", timeout=120)
    res.check(suite, "... and with that fix undone (test_undo=1) the "
              "scenario fails: reads without a callback are posted",
              "rc=0" not in r.out and "nodone: read 0" in
              n1.run("dmesg | tail -n 30", timeout=30).out, r.out)
    # 65,536 pages: far beyond what rxe maps per MR (512, used as extents
    # of 256 with a page to spare), so the grant is many MRs and the reads
    # cross extents.
    _kvtest_pair(res, suite, n0, n1, "256 MiB region granted in extents, "
                 "pages across them read by RDMA", {"large": 256},
                 {"scenario": "large", "count": 256},
                 "large: 256 MiB region, 7 pages read in")
    _withholder(res, suite, n0, n1)
    _withholder(res, suite, n0, n1, undo=True)
    _late_invalidation(res, suite, n0, n1)
    _late_invalidation(res, suite, n0, n1, undo=True)
    _connect_deadline(res, suite, n0, n1)
    _connect_deadline(res, suite, n0, n1, undo=True)
    _listener_on_address(res, suite, n0, n1)
    _listen_vs_removal(res, suite, n0)
    _unbind_vs_reconnect(res, suite, n0, n1)


KVTEST_EPS = "/sys/kernel/debug/kverbs/kvtest-server.*/endpoints"


def _connect_deadline(res, suite, n0, n1, undo=False):
    """Issue 26, review defect 6d: a connect whose handshake ends as its
    deadline passes.  Test builds' test_connect_delay_ms=3000 makes the
    client's handshake end 3 s late and its deadline decision (1.5 s)
    sleep 3 s before it acts, so the handshake ends in between: the
    connect fails with -ETIMEDOUT and the client domain's ->connected and
    ->disconnected must not run.  @undo: the deadline decided outside
    ep->lock again (test_undo=16): both run for the failed endpoint."""
    what = ("with the fix undone (test_undo=16), " if undo else "") + \
        "a handshake ending after connect's deadline"
    n0.run("rmmod kvtest 2>/dev/null; " + kvtest(n0), timeout=120)
    set_ = kverbs_params(test_connect_delay_ms=3000,
                         test_undo=16 if undo else 0)
    reset = kverbs_params(test_connect_delay_ms=0, test_undo=0)
    r = n1.run(f"{set_}; {kvtest(n1, n0, scenario='deadline', count=1500)}; "
               f"echo rc=$?; {reset}; rmmod kvtest 2>/dev/null; "
               "dmesg | grep 'kvtest: deadline' | tail -n 1", timeout=120)
    n0.run("rmmod kvtest", timeout=120)
    if undo:
        ok = "rc=0" not in r.out and "inconsistent" in r.out and \
            "->connected 1" in r.out
        res.check(suite, f"{what}: the failed endpoint got ->connected "
                  "(the check can fail)", ok, r.out)
    else:
        res.check(suite, f"{what}: the connect fails (-ETIMEDOUT) and "
                  "the domain gets neither ->connected nor ->disconnected",
                  "rc=0" in r.out and "deadline: connect -110, ->connected "
                  "0, ->disconnected 0" in r.out, r.out)


def _late_invalidation(res, suite, n0, n1, undo=False):
    """Issue 26: rxe in 6.1 can lose the wake-up of a LOCAL_INV it fences
    behind earlier work requests, and a grant's revoke then waited (now
    10 s, then the connection fails).  On rxe kverbs nudges a send queue
    whose invalidation is 200 ms late (kverbs_sq_nudge(): a zero-length
    RDMA WRITE).  The lost wake-up is a race inside rxe that no module can
    force, so this is not its regression proof: it shows the nudge posted,
    accepted by the peer and completed where an invalidation is certain
    to be late.  The client's packets are delayed 300 ms (netem; kverbs'
    ack timeout is 0.54 s), so its revoke waits behind an RDMA read in
    flight; a nudge must be posted (kverbs_nudge, err=0), and the revoke,
    the read and an echo then complete.  rxe-only: a device that does not
    fence LOCAL_INV would finish before 200 ms.  @undo: no nudge
    (test_undo=64): the revoke still completes, with no nudge posted."""
    what = ("with the nudge undone (test_undo=64), " if undo else "") + \
        "a revoke behind an RDMA read in flight"
    T = "/sys/kernel/tracing"
    tc = "/usr/bin/tc qdisc {} dev eth0 root"
    n0.run("rmmod kvtest 2>/dev/null; " + kvtest(n0), timeout=120)
    r = n1.run(f"mount -t tracefs nodev {T} 2>/dev/null; echo > {T}/trace; "
               f"echo 1 > {T}/events/kverbs/kverbs_nudge/enable; "
               f"{kverbs_params(test_undo=64 if undo else 0)}; "
               f"ping -c 1 -W 5 {n0.ip} > /dev/null; "
               f"{tc.format('add')} netem delay 300ms && echo delayed; "
               f"{kvtest(n1, n0, scenario='late')}; echo rc=$?; "
               f"{tc.format('del')}; {kverbs_params(test_undo=0)}; "
               f"echo 0 > {T}/events/kverbs/kverbs_nudge/enable; "
               "rmmod kvtest 2>/dev/null; dmesg | grep 'kvtest: late' | "
               f"tail -n 1; grep -c 'kverbs_nudge:.*err=0$' {T}/trace; "
               f"grep 'kverbs_nudge:' {T}/trace | head -n 3", timeout=180)
    n0.run("rmmod kvtest", timeout=120)
    m = re.search(r"late: revoked in (\d+) ms behind a read, read 0, "
                  r"then 0\n(\d+)\n", r.out)
    late = "delayed" in r.out and m is not None and int(m.group(1)) >= 200
    nudged = m is not None and int(m.group(2)) > 0
    if undo:
        res.check(suite, f"{what}: the revoke waits over 200 ms for the "
                  "read and completes, no nudge (the check can fail)",
                  "rc=0" in r.out and late and not nudged, r.out)
    else:
        res.check(suite, f"{what}: the revoke waits over 200 ms, a nudge "
                  "is posted (kverbs_nudge err=0), the revoke, the read and "
                  "an echo complete", "rc=0" in r.out and late and nudged,
                  r.out)


def _withholder(res, suite, n0, n1, undo=False):
    """Issue 25, finding 3: a peer that keeps the credits it is given (an
    unprivileged kvping --withhold-ms) against a server whose deferred
    handler answers each message 4 times: the handler runs out of send
    buffers, and the endpoint is parked instead of the domain's deferral
    work waiting for that peer, so another client's round trips complete
    meanwhile.  @undo: the same with that fix undone (test builds'
    test_undo=8): the other client must fail, so the check can."""
    what = ("with the fix undone (test_undo=8), " if undo else "") + \
        "a peer keeping its credits"
    n0.run("rmmod kvtest 2>/dev/null; "
           f"{kverbs_params(test_undo=8 if undo else 0)}; "
           f"{kvtest(n0, fanout=4)}", timeout=120)
    wh = (f"{NOBODY} /kvlab/bin/kvping --server-addr {n0.ip} "
          f"--port {TEST_PORT} --node-id 200 --depth 4 --withhold-ms 120000")
    n1.run(f"({wh} > /tmp/withhold.log 2>&1 &)", timeout=30)
    # Undone, nothing parks: give the withholder time to take its credits.
    r = n0.run("for i in $(seq 60); do grep -q 'parked [1-9]' "
               f"{KVTEST_EPS} && break; sleep 0.5; done; cat {KVTEST_EPS}"
               if not undo else f"sleep 6; cat {KVTEST_EPS}", timeout=240)
    res.check(suite, f"{what}: it is connected", "peer_node 200 " in r.out,
              r.out)
    if not undo:
        res.check(suite, f"{what}: its endpoint is parked (the handler "
                  "found no send buffer)", re.search(r"parked [1-9]", r.out)
                  is not None, r.out)
    r = n1.run(f"{kvtest(n1, n0, scenario='echo', count=100)}; echo rc=$?; "
               "dmesg | grep 'kvtest:' | tail -n 3; rmmod kvtest "
               "2>/dev/null", timeout=300)
    ok = "rc=0" in r.out and "echo: 100 round trips ok" in r.out
    if undo:
        res.check(suite, f"{what}: another client gets no answer", not ok,
                  r.out)
    else:
        res.check(suite, f"{what}: another client's 100 round trips "
                  "complete meanwhile", ok, r.out)
    r = n1.run("cat /tmp/withhold.log; kill $(pidof kvping) && echo killed",
               timeout=30)
    if not undo:
        res.check(suite, f"{what}: the withholder was still connected",
                  "killed" in r.out and "kvping:" not in r.out, r.out)
    r = n0.run("for i in $(seq 100); do grep -q 'peer_node 200 ' "
               f"{KVTEST_EPS} || break; sleep 0.2; done; cat {KVTEST_EPS}; "
               f"{kverbs_params(test_undo=0)}; "
               "rmmod kvtest && echo unloaded", timeout=120)
    res.check(suite, f"{what}: its endpoint is torn down once it leaves, "
              "and the server unloads", "unloaded" in r.out and
              "peer_node 200 " not in r.out.split("unloaded")[0], r.out)


def _listener_on_address(res, suite, n0, n1):
    """An address-bound listener gets DEVICE_REMOVAL from rdma_cm; it must
    survive it (no use of the listener as an endpoint) and listen again
    once the device is back."""
    what = "address-bound listener"
    r = n0.run(kvtest(n0, addr=n0.ip), timeout=120)
    res.check(suite, f"{what}: kvtest listens on {n0.ip}", r.rc == 0, r.out)
    r = n1.run(kvtest(n1, n0, scenario="echo", count=10) +
               " && rmmod kvtest", timeout=300)
    res.check(suite, f"{what}: echo before device removal", r.rc == 0,
              r.out)
    r = n0.run("rdma link delete rxe0 && sleep 2 && rdma link add rxe0 "
               "type rxe netdev eth0 && sleep 1", timeout=120)
    res.check(suite, f"{what}: rdma link delete, then add", r.rc == 0,
              r.out)
    r = n1.run("for i in $(seq 20); do "
               f"{kvtest(n1, n0, scenario='echo', count=10)} && "
               "rmmod kvtest && exit 0; sleep 1; done; exit 1", timeout=400)
    ok, log0 = _dmesg_has(n0, r"listener .* (re-created|listening again)")
    res.check(suite, f"{what}: listening again on the new device, echo "
              "works", r.rc == 0 and ok, r.out + "\nserver log:\n" +
              log0[-1500:])
    r = n0.run("rmmod kvtest", timeout=120)
    res.check(suite, f"{what}: server unloads", r.rc == 0, r.out)


def _listen_vs_removal(res, suite, n0):
    """Issue 26, review defect 6b: the device goes away while an
    address-bound listener is being created, after its id listens and
    before it is published (test builds' test_listen_delay_ms=4000 holds
    it there).  The listener must destroy the id that got DEVICE_REMOVAL,
    so `rdma link delete` ends, and kverbs_listen() fail with
    -EADDRNOTAVAIL.  Before the fix the removal work looked at the
    listener's state (not yet listening), left the id alone, and the link
    delete waited for it for good.  test_undo=32 undoes the fix; that
    proof is not in the suite, since it leaves the guest's RDMA stack
    stuck in the link delete."""
    what = "rdma link delete while an address-bound listener starts"
    r = n0.run(f"{kverbs_params(test_listen_delay_ms=4000)}; "
               f"({kvtest(n0, addr=n0.ip)}; echo rc=$?) > /tmp/listen.out "
               "2>&1 & for i in $(seq 100); do rdma res show cm_id | "
               f"grep -q 'LISTEN.*:{TEST_PORT}' && break; sleep 0.1; done; "
               "echo polls=$i; rdma res show cm_id; t0=$(date +%s); "
               "timeout 60 rdma link delete rxe0; echo del=$? "
               "took=$(( $(date +%s) - t0 ))s; "
               "for i in $(seq 100); do grep -q rc= /tmp/listen.out && break; "
               "sleep 0.2; done; cat /tmp/listen.out; "
               f"{kverbs_params(test_listen_delay_ms=0)}; "
               "rdma link add rxe0 type rxe netdev eth0 && sleep 1; "
               "rmmod kvtest 2>/dev/null; dmesg | grep 'kvtest: listen on' "
               "| tail -n 2; dmesg | grep -E 'kverbs|rxe' | tail -n 8; true",
               timeout=180)
    # Busybox's insmod loads a module whose init failed a second time
    # (init_module() after finit_module()), which fails differently with
    # the device gone (-ENODEV): the first attempt's error is kvtest's
    # first "listen on" line.
    first = re.search(r"kvtest: listen on \S+: (-?\d+)", r.out)
    res.check(suite, f"{what}: the link delete ends and the listen fails "
              "(-EADDRNOTAVAIL)", "del=0" in r.out and "rc=0" not in
              r.out and "rc=" in r.out and first is not None and
              first.group(1) == "-99", r.out)


def _unbind_vs_reconnect(res, suite, n0, n1):
    """A client reconnecting in a loop while the server's device is
    deleted: no endpoint may bind to the dying CQ/PD.  The server's unbind
    is slowed down (test-only parameter) to open the window wide."""
    what = "unbind vs reconnect"
    r = n0.run(kvtest(n0) + " && " +
               kverbs_params(test_unbind_delay_ms=1000), timeout=120)
    res.setup(suite, f"{what}: server loads, unbind delay set", r.rc == 0,
              r.out)
    n1.run(f"({kvtest(n1, n0, scenario='reconnect', count=150)}; "
           "echo rc=$?) > /tmp/reconnect.out 2>&1 &", timeout=30)
    r = n0.run("sleep 3; rdma link delete rxe0 && sleep 3 && rdma link add "
               "rxe0 type rxe netdev eth0; " +
               kverbs_params(test_unbind_delay_ms=0), timeout=120)
    res.check(suite, f"{what}: rdma link delete during reconnects, then add",
              r.rc == 0, r.out)
    r = n1.run("for i in $(seq 600); do grep -q rc= /tmp/reconnect.out && "
               "break; sleep 0.5; done; cat /tmp/reconnect.out; "
               "dmesg | grep 'kvtest: reconnect'; rmmod kvtest",
               timeout=400)
    m = re.search(r"reconnect: (\d+) cycles, (\d+) ok, (\d+) failed", r.out)
    res.check(suite, f"{what}: the reconnect loop finishes, some cycles "
              "failed and later ones succeed", "rc=0" in r.out and m and
              int(m.group(2)) > 0 and int(m.group(3)) > 0, r.out)
    r = n1.run(kvtest(n1, n0, scenario="echo", count=10) +
               " && rmmod kvtest", timeout=300)
    res.check(suite, f"{what}: echo works after the device is back",
              r.rc == 0, r.out)
    r = n0.run("rmmod kvtest", timeout=120)
    res.check(suite, f"{what}: server unloads", r.rc == 0, r.out)



def _planted_freed_page(res, suite, n0, n1):
    """Test builds of kverbs check that every page of an RDMA operation is
    referenced at its post and completion (the 6.12 corruption hunt): an
    RDMA write from a page whose count kvtest froze at zero must give that
    WARNING (once per boot: WARN_ONCE)."""
    n0.run("rmmod kvtest 2>/dev/null; " + kvtest(n0), timeout=120)
    with n1.expect_report("WARNING"):
        r = n1.run(f"{kvtest(n1, n0, scenario='freed')}; echo rc=$?; "
                   "rmmod kvtest 2>/dev/null; dmesg | grep -E "
                   "'unreferenced|kvtest: freed' | tail -n 3", timeout=120)
    n0.run("rmmod kvtest", timeout=120)
    res.check(suite, "planted: an RDMA write from a freed page gives the "
              "page check's WARNING (test builds)", "rc=0" in r.out and
              "unreferenced at post" in r.out, r.out)


def suite_kvtest_debug(res, variant="debug"):
    """The review regressions on the debug KUnit kernel @variant (debug:
    6.1 source, debug-6.12), then rmmod and kmemleak."""
    name = f"kvtest-{variant}"
    try:
        with _debug_cluster(name, ("kverbs.ko", "kvtest.ko"),
                            ("tools/kvping/kvping", "/usr/bin/setpriv"),
                            variant=variant) as c:
            n0, n1 = c.nodes
            load_kverbs(res, name, c.nodes)
            _regressions(res, name, n0, n1)
            _planted_freed_page(res, name, n0, n1)
            for n in (n0, n1):
                r = n.run("rmmod kvtest 2>/dev/null; rmmod kverbs",
                          timeout=300)
                leaks = kmemleak_report(n)
                res.check(name, f"{n.name}: rmmod, then kmemleak (two "
                          "scans) finds nothing", r.rc == 0 and not leaks,
                          r.out + leaks[-3000:])
        res.add(name, "guest consoles clean (KASAN, lockdep, ...)", True)
    except HarnessError as e:
        res.add(name, "cluster run", False, e)
