"""Peer authentication between two guests (kverbs/auth.c), set up as an
operator would: a logon key added with keyctl on each node, the kping
sample's auth_key= naming it.  Attacks come from an unprivileged local
account with the project's own user-level peer (kvping), and in test
builds from a kernel peer whose proof is broken on purpose.

Every refusal is checked on both sides: the attacker fails with the
documented error, the server counts it (debugfs auth_failures), logs it,
and its client code never saw the peer (kping's "node N connected" count
does not move).  Called from suites._integration_body and
suite_integration_debug with the kping server on n0 and kverbs loaded.
"""
import re

from .common import HarnessError
from .knobs import kverbs_params

KEY = "kverbs:lab"
SECRET = "kvlab-0123456789abcdef-shared-key"       # 33 bytes
WRONG_KEY = "kverbs:wrong"
WRONG_SECRET = "kvlab-0123456789abcdef-other-key!"  # same length
KVPING = "/kvlab/bin/kvping"
NOBODY = "/kvlab/bin/setpriv --reuid 65534 --regid 65534 --clear-groups"
EP_FILE = "/sys/kernel/debug/kverbs/kping-server.*/endpoints"
# kverbs' KVERBS_AUTH_TIMEOUT_MS, and what TCG may add to it
AUTH_TIMEOUT_S = 10
AUTH_TIMEOUT_SLACK_S = 15


def nobody_kvping(ip, port, opts):
    """A shell line: kvping as nobody to @ip:@port with @opts, then its
    exit status as rc=N (the samples' suites' crafted peer)."""
    return (f"{NOBODY} {KVPING} --server-addr {ip} --port {port} {opts}; "
            "echo rc=$?")


def _keys(n0, n1):
    """The same secret on both nodes under KEY; another one on n1."""
    for n in (n0, n1):
        n.run_checked(f"keyctl add logon {KEY} {SECRET} @u", timeout=30)
    n1.run_checked(f"keyctl add logon {WRONG_KEY} {WRONG_SECRET} @u",
                   timeout=30)


def _server(n0, kping, port_opts=""):
    r = n0.run("rmmod kping 2>/dev/null; " + kping(n0) + port_opts,
               timeout=120)
    if r.rc:
        raise HarnessError(f"{n0.name}: kping server did not load", r.out)


def _counts(n0):
    """(auth_failures, kping's connected lines) on the server."""
    r = n0.run(f"cat {EP_FILE}; dmesg | grep -c 'kping: node [0-9]* "
               "connected$'", timeout=30)
    m = re.search(r"auth_failures (\d+)", r.out)
    lines = r.out.strip().splitlines()
    conn = int(lines[-1]) if lines and lines[-1].isdigit() else -1
    return (int(m.group(1)) if m else -1), conn, r.out


def _counts_after(n0, want, tries=20):
    """_counts() once auth_failures reached @want, or after 10 s: an
    endpoint the server holds closes only when the client's goes."""
    for _ in range(tries):
        fails, conn, out = _counts(n0)
        if fails >= want:
            break
        n0.run("sleep 0.5", timeout=10)
    return fails, conn, out


def auth_checks(res, suite, n0, n1, kping, test_build=False, full=True):
    """The checks; kping is suites.kping (the insmod line builder).
    @full: also another key, the user-space attacks and a keyed client
    against a server without a key."""
    _keys(n0, n1)
    _server(n0, kping, f" auth_key={KEY}")
    r = n0.run(f"cat {EP_FILE}", timeout=30)
    res.check(suite, "auth: the keyed kping server's domain shows its key",
              re.search(r"auth key \d+ auth_failures 0", r.out) is not None,
              r.out)

    fails0, conn0, _ = _counts(n0)
    r = n1.run(kping(n1, n0, count=200, auth_key=KEY) +
               " && rmmod kping && dmesg | grep 'kping:' | tail -n 2",
               timeout=300)
    fails, conn, out = _counts(n0)
    res.check(suite, "auth: a client holding the key makes 200 round trips; "
              "nothing counted as a failure",
              r.rc == 0 and "200 round trips ok" in r.out and
              fails == fails0 and conn == conn0 + 1, f"{r.out}\n{out}")

    _refused(res, suite, n0, n1, "a kernel client without a key",
             kping(n1, n0, count=10), "authentication asked for by one "
             "side only", r"rejecting connection from .*authentication")
    if not full:
        _server(n0, kping)
        return
    _refused(res, suite, n0, n1, "a kernel client with another key",
             kping(n1, n0, count=10, auth_key=WRONG_KEY),
             "failed authentication: the accept's proof is wrong", None)
    _user_space_attacks(res, suite, n0, n1, kping)
    if test_build:
        _broken_proofs(res, suite, n0, n1, kping)

    # The other way round: a keyed client, a server without a key.
    _server(n0, kping)
    r = n1.run(kping(n1, n0, count=10, auth_key=KEY) + "; echo rc=$?; "
               "dmesg | tail -n 5", timeout=120)
    res.check(suite, "auth: a keyed client refuses a server without the key "
              "(refused: authentication asked for by one side only)",
              "rc=0" not in r.out and "authentication asked for by one "
              "side only" in r.out, r.out)
    n1.run("rmmod kping 2>/dev/null", timeout=30)


def _refused(res, suite, n0, n1, who, cmd, client_log, server_log):
    """@cmd (a kping client insmod) must fail; the server counts one
    failure and its client code sees no connection."""
    fails0, conn0, _ = _counts(n0)
    r = n1.run(f"dmesg -c > /dev/null; {cmd}; echo rc=$?; dmesg", timeout=120)
    n1.run("rmmod kping 2>/dev/null", timeout=30)
    # busybox insmod tries init_module() after a failed finit_module():
    # each try is a connection, each refusal counted once.
    tries = len(re.findall(r"kping: connect to .* failed: -13", r.out))
    fails, conn, out = _counts_after(n0, fails0 + tries)
    ok = "rc=0" not in r.out and client_log in r.out and tries >= 1 and \
        fails == fails0 + tries and conn == conn0
    if server_log:
        ok = ok and re.search(server_log, n0.run("dmesg | tail -n 20",
                                                   timeout=30).out)
    res.check(suite, f"auth: {who} is refused with -EACCES before the "
              "server's client code runs (each try counted once, kping saw "
              "no connection)", ok,
              f"client:\n{r.out}\nserver (failures {fails0} -> {fails}, "
              f"connected {conn0} -> {conn}):\n{out}")


def _user_space_attacks(res, suite, n0, n1, kping):
    """kvping as nobody: no key, then an authentication offer it cannot
    complete (a ping for a proof; nothing at all).  A keyed kernel client
    runs meanwhile and must not notice."""
    base = (f"{NOBODY} {KVPING} --server-addr {n0.ip} --port 18515 "
            f"--node-id {n1.node_id}")
    for what, opts, rc, server_log in (
            ("no authentication offered", "--count 5", 3,
             "authentication asked for by one side only"),
            ("an offer, then a ping instead of the proof",
             "--bad-msg noproof", 4, "a message before its proof")):
        fails0, conn0, _ = _counts(n0)
        r = n1.run(f"{base} {opts} --timeout-ms 10000; echo rc=$?",
                   timeout=60)
        fails, conn, out = _counts(n0)
        log = n0.run("dmesg | tail -n 10", timeout=30).out
        res.check(suite, f"auth: an unprivileged user-space peer ({what}) is "
                  f"refused (kvping exit {rc}), counted, logged; kping saw "
                  "no connection", f"rc={rc}" in r.out and
                  fails == fails0 + 1 and conn == conn0 and
                  server_log in log,
                  f"{r.out}\nserver: failures {fails0} -> {fails}, "
                  f"connected {conn0} -> {conn}\n{log}")

    _keyed_user_space(res, suite, n0, n1, base)
    _unproven_cap(res, suite, n0, n1, base)

    # A silent offer holds an endpoint until the deadline; valid peers
    # connect and work meanwhile.
    fails0, conn0, _ = _counts(n0)
    n1.run(f"({base} --bad-msg silent --timeout-ms "
           f"{(AUTH_TIMEOUT_S + AUTH_TIMEOUT_SLACK_S) * 1000}; echo rc=$?) "
           "> /tmp/silent.out 2>&1 &", timeout=30)
    r = n1.run(kping(n1, n0, count=200, auth_key=KEY) + " && rmmod kping",
               timeout=300)
    res.check(suite, "auth: a keyed client works while a silent "
              "unauthenticated peer holds a connection", r.rc == 0, r.out)
    r = n1.run("for i in $(seq 60); do grep -q rc= /tmp/silent.out && "
               "break; sleep 0.5; done; cat /tmp/silent.out",
               timeout=60)
    fails, conn, out = _counts(n0)
    log = n0.run("dmesg | tail -n 10", timeout=30).out
    res.check(suite, f"auth: the silent peer is closed at the {AUTH_TIMEOUT_S} "
              "s deadline (kvping exit 4), counted, logged; kping saw only "
              "the keyed client", "rc=4" in r.out and
              fails == fails0 + 1 and conn == conn0 + 1 and
              "no proof in time" in log,
              f"{r.out}\nserver: failures {fails0} -> {fails}, connected "
              f"{conn0} -> {conn}\n{log}")


def _keyed_user_space(res, suite, n0, n1, base):
    """kvping as nobody with the secret in a file (kvwire's proofs, as
    kverbs/auth.c computes them): the server proves the key to it, it
    proves its own, and pings work; with another secret it finds the
    server's proof wrong and leaves, and the server counts the peer that
    closed before its proof.  The positive case is what makes the keyed
    user-space checks of the samples mean anything."""
    n1.run(f"printf '%s' '{SECRET}' > /tmp/key.ok; printf '%s' "
           f"'{WRONG_SECRET}' > /tmp/key.bad; chmod 644 /tmp/key.ok "
           "/tmp/key.bad", timeout=30)
    fails0, conn0, _ = _counts(n0)
    r = n1.run(f"{base} --key-file /tmp/key.ok --count 20 --timeout-ms "
               "10000; echo rc=$?", timeout=60)
    fails, conn, out = _counts(n0)
    res.check(suite, "auth: a user-space peer (nobody's kvping) holding the "
              "secret proves it and pings; the server counted no failure",
              "rc=0" in r.out and "the server proved the key" in r.out and
              fails == fails0 and conn == conn0 + 1,
              f"{r.out}\nserver: failures {fails0} -> {fails}, connected "
              f"{conn0} -> {conn}")
    r = n1.run(f"{base} --key-file /tmp/key.bad --count 5 --timeout-ms "
               "10000; echo rc=$?", timeout=60)
    fails, conn2, out = _counts_after(n0, fails0 + 1)
    res.check(suite, "auth: with another secret it finds the server's proof "
              "wrong and leaves (exit 1); the server counts the peer that "
              "closed before its proof; kping saw no connection",
              "rc=1" in r.out and "proof is wrong" in r.out and
              fails == fails0 + 1 and conn2 == conn,
              f"{r.out}\nserver: failures {fails0} -> {fails}, connected "
              f"{conn} -> {conn2}")


def _unproven_cap(res, suite, n0, n1, base):
    """Connections awaiting their proof are capped per host: kping's
    server (max_eps 8) lets half its endpoints, 4, be unproven, and a
    quarter, 2, from one host.  Two silent offers from n1 are held, a
    third is refused at once as busy, counted in auth_busy, logged with
    the per-host count; the two held end at the deadline."""
    ep_re = rf"peer_node {n1.node_id} peer \S+ state connected"
    # Earlier attempts still count until their teardown ends.
    n0.run(f"for i in $(seq 80); do grep -q 'peer_node {n1.node_id} ' "
           f"{EP_FILE} || break; sleep 0.25; done", timeout=60)
    busy0 = _busy(n0)
    hold = (AUTH_TIMEOUT_S + AUTH_TIMEOUT_SLACK_S) * 1000
    n1.run(f"for i in 0 1; do ({base} --bad-msg silent --timeout-ms {hold}; "
           "echo rc=$?) > /tmp/held$i.out 2>&1 & done", timeout=30)
    r = n0.run(f"for i in $(seq 40); do [ $(grep -cE '{ep_re}' {EP_FILE}) "
               f"-ge 2 ] && break; sleep 0.1; done; cat {EP_FILE}", timeout=60)
    held = len(re.findall(ep_re, r.out))
    r = n1.run(f"{base} --bad-msg silent --timeout-ms 10000; echo rc=$?",
               timeout=60)
    log = n0.run("dmesg | tail -n 10", timeout=30).out
    res.check(suite, "auth: with 2 connections of one host awaiting their "
              "proof (its cap), a third is refused at once (kvping exit 3), "
              "counted in auth_busy, logged", held == 2 and "rc=3" in r.out
              and _busy(n0) == busy0 + 1 and
              "2 from that host and 2 in all" in log,
              f"held {held}\n{r.out}\nauth_busy {busy0} -> {_busy(n0)}\n{log}")
    r = n1.run("for i in $(seq 80); do [ $(cat /tmp/held*.out | grep -c rc=) "
               "-ge 2 ] && break; sleep 0.5; done; cat /tmp/held*.out",
               timeout=90)
    res.check(suite, f"auth: the two held ones are closed at the "
              f"{AUTH_TIMEOUT_S} s deadline (kvping exit 4)",
              r.out.count("rc=4") == 2, r.out)


def _busy(n0):
    """The server domain's auth_busy count."""
    m = re.search(r"auth_busy (\d+)", n0.run(f"cat {EP_FILE}", timeout=30).out)
    return int(m.group(1)) if m else -1


def _broken_proofs(res, suite, n0, n1, kping):
    """Test builds: a kernel client whose proof is one bit off, or is
    the previous connection's (a replay), must fail the server's check;
    the accept's proof was good, so only the server can refuse it."""
    for bit, what in ((1, "one bit of the proof flipped"),
                      (2, "the previous connection's proof replayed")):
        # A good connection first: the proof a replay sends again.
        r = n1.run(kping(n1, n0, count=5, auth_key=KEY) + " && rmmod kping",
                   timeout=120)
        if r.rc:
            raise HarnessError(f"{n1.name}: keyed client before the "
                               f"{what} check failed", r.out)
        fails0, conn0, _ = _counts(n0)
        n1.run(kverbs_params(test_auth=bit), timeout=10)
        r = n1.run("dmesg -c > /dev/null; " +
                   kping(n1, n0, count=5, auth_key=KEY) +
                   "; echo rc=$?; dmesg", timeout=120)
        n1.run(kverbs_params(test_auth=0) + "; rmmod kping 2>/dev/null",
               timeout=30)
        # One connection per try of busybox insmod (see _refused); the
        # client accepted the server's proof, so each try connects on its
        # side and the server then closes it.
        tries = len(re.findall(r"kping: connected to node", r.out))
        fails, conn, out = _counts_after(n0, fails0 + tries)
        log = n0.run("dmesg | tail -n 10", timeout=30).out
        res.check(suite, f"auth: test_auth={bit} ({what}): the server "
                  "refuses the proof, counts it, and kping sees no "
                  "connection", "rc=0" not in r.out and tries >= 1 and
                  fails == fails0 + tries and conn == conn0 and
                  "wrong proof (another key, or a replay)" in log,
                  f"client:\n{r.out}\nserver: failures {fails0} -> {fails}, "
                  f"connected {conn0} -> {conn}\n{log}")
