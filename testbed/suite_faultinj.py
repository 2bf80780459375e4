"""The fault-injection suite (faultinj-debug; issue 26, item 3).

Two guests boot the debug KUnit kernel (KASAN, lockdep, kmemleak, and
the fault-injection options of testbed/kunit/debug.config).  Node 0
serves kping and krdma; node 1 runs their clients, each an insmod whose
module init does the whole operation:

  listen    kping server (node 1, another port): domain, listen
  connect   kping client: domain, connect, 20 round trips, close
  rdma      krdma client: region, grant, RDMA read and write, atomics,
            revoke, a read through the revoked rkey

Three kinds of trial inject one failure into an operation:

  failslab, fail_page_alloc (orders from 4: krdma's region)
      on node 1, limited to the client's task (task-filter and
      /proc/self/make-it-fail, set before it execs insmod): one
      allocation fails, the first after a budget ("space") drawn at
      random between what a load whose init fails at once and what the
      whole operation allocate (both measured first, unperturbed), one
      draw in each of equal strata of that window: the failure lands in
      the module's init, in our code or below it.  The stack of the failed allocation (verbose=2) names
      the call site: the innermost frame in one of our modules, or
      "outside" (exec, the module loader) when none is.
  fail_function
      every function of ours marked ALLOW_ERROR_INJECTION returns once an
      error its contract allows (-ENOMEM for most), on the client's node or on the server's (any context: these
      run in softirq and work items too).

Each trial must end within its bound, with the operation either done
(its success line) or refused with an error the caller sees (insmod
names the errno); nothing of it may stay loaded or referenced, and no
report may reach a console other than the injection's own notice.
After each operation's trials the servers must be idle again (every
endpoint gone) and serve a clean client; at the end every module unloads
and kmemleak finds nothing on either node.

The draws come from KVLAB_FAULT_SEED (printed; random when unset), the
number of budget trials per operation and kind from KVLAB_FAULT_TRIALS
(default 5).  The table of the run is written to
build/testbed/faultinj-debug/table.txt.
"""
import contextlib
import os
import random
import re

from .common import REPO, HarnessError, log
from .suites import PORT, _debug_cluster, kmemleak_report, load_kverbs

DBG = "/sys/kernel/debug"
SUITE = "faultinj-debug"
OURS = ("kverbs", "kping", "krdma")
BUDGET = 1 << 30                    # "space" of the unperturbed run
INSMOD = "/tmp/insmod"              # a link to kmod (see Op.insmod)
PAGE_MIN_ORDER = 4                  # above slub_max_order (3)

# Our functions marked ALLOW_ERROR_INJECTION: the operation that drives
# each, the nodes it fails on (the client's, the server's or both) and
# the error it returns, one its contract allows; an operation reaches the
# functions of the ones before it too, so each is driven once.  The
# caller on the client's node must see that error.  Every marked function
# is here or in NOT_DRIVEN (checked against the sources).
BOTH = ("client", "server")
ENOMEM, ENODEV, ENOTCONN = 12, 19, 107
STRERROR = {ENOMEM: "Cannot allocate memory", ENODEV: "No such device",
            ENOTCONN: "Transport endpoint is not connected"}
FUNCTIONS = {
    "kverbs_listen": ("listen", ("client",), ENOMEM),
    "kverbs_domain_create": ("connect", ("client",), ENOMEM),
    # the server's domain is bound since its first connection: a bind
    # there returns 0 before anything can fail
    "kverbs_domain_bind": ("connect", ("client",), ENOMEM),
    "kverbs_device_attach_domain": ("connect", ("client",), ENODEV),
    "kverbs_domain_map_regions": ("connect", ("client",), ENOMEM),
    "kverbs_ep_connect": ("connect", ("client",), ENOMEM),
    "kverbs_ep_setup_qp": ("connect", BOTH, ENOMEM),
    "kverbs_sq_alloc": ("connect", BOTH, ENOMEM),
    "kverbs_sq_post_locked": ("connect", BOTH, ENOMEM),
    "kvmsg_post_recv": ("connect", BOTH, ENOMEM),
    "kvmsg_reserve": ("connect", BOTH, ENOTCONN),
    "kverbs_region_create": ("rdma", BOTH, ENOMEM),
    "kverbs_region_grant": ("rdma", ("server",), ENOMEM),
    "kverbs_op_post": ("rdma", ("client",), ENOMEM),
    "kverbs_rdma_read": ("rdma", ("client",), ENOMEM),
    "kverbs_rdma_write": ("rdma", ("client",), ENOMEM),
}
NOT_DRIVEN = {
    "kverbs_auth_init": "keyed domains (kdsm, kfcache, kmigrate); the "
                        "servers here are unkeyed, where it cannot fail",
    "kverbs_rdma_read_pages": "kfcache, kmigrate",
    "kverbs_rdma_write_pages": "kdsm, kmigrate",
    "kvmem_region_create": "kdsm, kmigrate (kvmem.ko)",
    "kvmem_region_fd": "kdsm, kmigrate (kvmem.ko)",
}
# kvmsg_send() is not marked: it takes the buffer whatever it returns, so
# an injected return would leak it (kverbs_sq_post_locked() fails its
# post); nor kvmem_protect(), whose grants never fail and whose callers
# rely on it.


def marked_functions():
    """The functions our modules mark ALLOW_ERROR_INJECTION."""
    names = set()
    for d in ("kverbs", "kmsg", "kmem"):
        for f in (REPO / d).glob("*.c"):
            names |= set(re.findall(r"^ALLOW_ERROR_INJECTION\((\w+),",
                                    f.read_text(), re.M))
    return names


# Frames of the allocator and of fault injection itself, above the call
# site in a failed allocation's stack.
_ALLOC = re.compile(r"^(?:dump_stack|show_stack|should_fail|__should_fail|"
                    r"should_failslab|fail_dump|slab_pre_alloc_hook|"
                    r"kmem_cache_alloc|__kmem_cache_alloc|kmalloc|__kmalloc|"
                    r"kvmalloc|__kvmalloc|kzalloc|kcalloc|krealloc|"
                    r"__do_kmalloc|kmemdup|kstrdup|kasprintf|kvasprintf|"
                    r"alloc_pages|__alloc_pages|prepare_alloc_pages|"
                    r"should_fail_alloc_page|__folio_alloc|folio_alloc|"
                    r"__get_free_pages|get_zeroed_page|__vmalloc|vmalloc|"
                    r"alloc_slab_page|allocate_slab|new_slab|___slab_alloc|"
                    r"__slab_alloc|slab_alloc)")
# A reliable frame of a stack dump (unreliable ones start with "? ").
_FRAME = re.compile(r"^\s*(?:\[\s*\d+\.\d+\]\s*)?"
                    r"([A-Za-z_][\w.]*)\+0x[0-9a-f]+/0x[0-9a-f]+"
                    r"(?: \[(\w+)\])?")


def injection_site(dmesg):
    """The call site of the first injected failure in @dmesg: "fn [mod]"
    for the innermost frame in one of our modules, "outside: fn" for the
    first frame below the allocator when none is ours, None when no
    failure was reported (an allocation with __GFP_NOWARN fails
    silently)."""
    lines = dmesg.splitlines()
    at = next((i for i, l in enumerate(lines)
               if "FAULT_INJECTION: forcing a failure" in l), None)
    if at is None:
        return None
    frames = []
    for l in lines[at + 1:at + 80]:
        m = _FRAME.match(l)
        if m:
            frames.append((m.group(1), m.group(2)))
        elif frames and "</TASK>" in l:
            break
    for fn, mod in frames:
        if mod in OURS:
            return f"{fn} [{mod}]"
    below = [fn for fn, _ in frames if not _ALLOC.match(fn)]
    return "outside: " + (below[0] if below else "?")


def _insmod_error(out):
    """The errno text kmod's insmod printed, or None."""
    m = re.search(r"could not insert module \S+: (.+)", out)
    return m.group(1).strip() if m else None


class Op:
    """A client operation: its module, insmod line and success line."""

    def __init__(self, name, module, args, done, refused=None, kinds=()):
        self.name, self.module, self.args, self.done = name, module, args, done
        # args with which the module's init fails before it allocates, for
        # the trials of @kinds (failslab, fail_page_alloc)
        self.refused, self.kinds = refused, kinds

    def insmod(self):
        # kmod's insmod: busybox's retries a failed finit_module with
        # init_module, running the module's init a second time
        return f"{INSMOD} /kvlab/modules/{self.module}.ko {self.args}"


def _ops(n0, n1):
    ping = (f"server={n0.ip} port={PORT} node_id={n1.node_id} count=20 "
            "timeout_ms=5000")
    return [Op("listen", "kping", f"port={PORT + 100} node_id={n1.node_id}",
               r"listening on port"),
            # no fail_page_alloc: connect's task allocates no pages of
            # order PAGE_MIN_ORDER or more
            Op("connect", "kping", ping, r"20 round trips ok",
               refused=f"{ping} mode=x", kinds=("failslab",)),
            Op("rdma", "krdma", f"server={n0.ip} node_id={n1.node_id}",
               r"invalidated rkey refused",
               refused=f"server=x node_id={n1.node_id}",
               kinds=("failslab", "fail_page_alloc"))]


def _run_op(n1, op, make_it_fail):
    """Run @op on n1 (in a task marked make-it-fail if asked); unload its
    module if it stayed.  Return (rc, insmod's output, dmesg of the run,
    kverbs' reference count after)."""
    inner = f"exec {op.insmod()}"
    if make_it_fail:
        inner = "echo 1 > /proc/self/make-it-fail && " + inner
    r = n1.run(f"dmesg -c > /dev/null; sh -c '{inner}' > /tmp/op.out 2>&1; "
               "echo rc=$?; cat /tmp/op.out; echo KVLAB-FI-DMESG; "
               f"grep -q '^{op.module} ' /proc/modules && rmmod {op.module}; "
               "dmesg; echo KVLAB-FI-REFCNT; "
               "cat /sys/module/kverbs/refcnt", timeout=180)
    m = re.match(r"rc=(\d+)\n", r.out)
    if not m or "KVLAB-FI-DMESG\n" not in r.out or \
            "KVLAB-FI-REFCNT\n" not in r.out:
        raise HarnessError(f"{n1.name}: unreadable output of {op.name}:\n"
                           f"{r.out[-2000:]}")
    head, _, rest = r.out.partition("KVLAB-FI-DMESG\n")
    dmesg, _, refcnt = rest.partition("KVLAB-FI-REFCNT\n")
    return int(m.group(1)), head, dmesg, refcnt.strip()


def _arm_alloc(node, kind, space):
    d = f"{DBG}/{kind}"
    # orders from PAGE_MIN_ORDER only: below it the task's pages are its
    # own page faults (order 0) and SLUB's slabs (orders 1 to 3, tried
    # with __GFP_NOWARN and a fallback), whose numbers vary between
    # identical runs by more than the operation's share
    extra = (f"echo {PAGE_MIN_ORDER} > {d}/min-order; "
             f"echo N > {d}/ignore-gfp-highmem; "
             if kind == "fail_page_alloc" else "")
    r = node.run(f"{extra}echo Y > {d}/task-filter && "
                 f"echo N > {d}/ignore-gfp-wait && echo 1 > {d}/interval && "
                 f"echo 100 > {d}/probability && echo {space} > {d}/space && "
                 f"echo 2 > {d}/verbose && echo 1 > {d}/times", timeout=30)
    if r.rc != 0:
        raise HarnessError(f"{node.name}: arming {kind} failed: {r.out}")


def _disarm_alloc(node, kind):
    """Disarm @kind; return (hit, space left)."""
    d = f"{DBG}/{kind}"
    r = node.run(f"cat {d}/times {d}/space; echo 0 > {d}/times; "
                 f"echo 0 > {d}/probability", timeout=30)
    got = r.out.split()
    if len(got) != 2 or not all(g.lstrip("-").isdigit() for g in got):
        raise HarnessError(f"{node.name}: unreadable {kind} state: {r.out}")
    return got[0] == "0", int(got[1])


def _arm_function(node, fn, errno):
    d = f"{DBG}/fail_function"
    retval = hex((1 << 64) - errno)             # -errno as a u64
    r = node.run(f"echo {fn} > {d}/inject && echo {retval} > {d}/{fn}/retval "
                 f"&& echo N > {d}/task-filter && echo 1 > {d}/interval && "
                 f"echo 100 > {d}/probability && echo 0 > {d}/space && "
                 f"echo 1 > {d}/verbose && echo 1 > {d}/times", timeout=30)
    return r.rc == 0, r.out


def _disarm_function(node, fn):
    """Disarm @fn; return whether it was hit."""
    d = f"{DBG}/fail_function"
    r = node.run(f"cat {d}/times; echo 0 > {d}/times; "
                 f"echo '!{fn}' > {d}/inject 2>/dev/null", timeout=30)
    return r.out.split()[:1] == ["0"]


class Trial:
    def __init__(self, op, kind, where, point):
        self.op, self.kind, self.where, self.point = op, kind, where, point
        self.hit = False
        self.errno = None           # fail_function: the error injected
        self.site = None
        self.outcome = None         # "done" or the caller's errno text
        self.problem = None

    def row(self):
        return (f"{self.op.name:8} {self.kind:16} {self.where:6} "
                f"{str(self.point):28} {'hit' if self.hit else 'not hit':8}"
                f" {self.site or '-':40} {self.outcome or '-'}"
                + (f"  PROBLEM: {self.problem}" if self.problem else ""))


def _ours(t):
    """Whether trial @t failed a call site in one of our modules."""
    return t.hit and bool(t.site) and t.site.endswith("]")


def _judge(t, rc, out, dmesg, refcnt, base_refcnt):
    """Set t.outcome and t.problem from one run."""
    err = _insmod_error(out)
    if rc == 0 and re.search(t.op.done, dmesg):
        t.outcome = "done"
        if t.kind == "fail_function" and t.where == "client" and t.hit:
            t.problem = "our function failed on the client's node and the " \
                "operation reported success"
    elif rc != 0 and err:
        t.outcome = err
        # our function failed on the client's own node: the caller must
        # learn that error, not a later one (a timeout); an allocation of
        # ours that failed must not surface as a timeout either
        want = STRERROR.get(t.errno)
        if t.kind == "fail_function" and t.where == "client" and t.hit \
                and err != want:
            t.problem = f"the caller saw {err!r}, not the injected {want!r}"
        if t.kind != "fail_function" and _ours(t) and \
                err == "Connection timed out":
            t.problem = "a failed allocation of ours surfaced as a timeout"
    elif rc != 0 and t.site and t.site.startswith("outside"):
        # exec or the shell failed before insmod ran: not our code, and
        # still an error the caller sees
        t.outcome = f"exit {rc}"
    else:
        t.problem = (f"rc {rc} with no error named and no success line: "
                     f"{out.strip()[-300:]}")
    if refcnt != base_refcnt:
        t.problem = (t.problem or "") + \
            f" kverbs refcnt {refcnt} after the trial (before {base_refcnt})"


def _servers_idle(res, n0, n1, op, base_refcnt):
    """Every server endpoint gone within the RC bound, and a clean client
    served."""
    r = n0.run(f"ls {DBG}/kverbs/*/endpoints > /dev/null || exit 2; "
               "for i in $(seq 120); do grep -q '^ep ' "
               f"{DBG}/kverbs/*/endpoints 2>/dev/null || exit 0; "
               f"sleep 0.5; done; cat {DBG}/kverbs/*/endpoints; exit 1",
               timeout=120)
    res.check(SUITE, f"{op.name}: after its trials the servers' endpoints "
              "are all gone within 60 s", r.rc == 0, r.out[-1500:])
    rc, out, dmesg, refcnt = _run_op(n1, op, False)
    res.check(SUITE, f"{op.name}: then a clean client completes",
              rc == 0 and re.search(op.done, dmesg) is not None and
              refcnt == base_refcnt, f"rc {rc} refcnt {refcnt}\n{out}\n"
              f"{dmesg[-1500:]}")


def _budget(res, n1, op, kind, args=None):
    """The units of @kind that @op (with @args instead of its own, if
    given) allocates in the client's task, from a run with an unreachable
    budget; None when the run did not behave as expected."""
    _arm_alloc(n1, kind, BUDGET)
    run = op if args is None else Op(op.name, op.module, args, op.done)
    rc, out, dmesg, _ = _run_op(n1, run, True)
    hit, left = _disarm_alloc(n1, kind)
    used = BUDGET - left
    # a refused load must be refused by its init (-EINVAL), not fail in
    # exec or in the module loader
    # (nothing at all may come before the init: pages of high order)
    ok = not hit and ((used > 0 and rc == 0 and re.search(op.done, dmesg))
                      if args is None else
                      _insmod_error(out) in
                      ("Invalid argument", "Invalid parameters"))
    return used if ok else None, f"rc {rc} hit {hit} used {used}\n{out}\n" \
        f"{dmesg[-1500:]}"


def _alloc_trials(res, n1, op, kind, rng, ntrials, base_refcnt):
    """@ntrials trials of @op, each failing one allocation of @kind at a
    random point between the start of the module's init and the end of
    the operation: the budgets of a load whose init refuses its
    parameters at once (Op.refused) and of a whole unperturbed run."""
    pre, why_pre = _budget(res, n1, op, kind, op.refused)
    used, why = _budget(res, n1, op, kind)
    ok = pre is not None and used is not None
    res.setup(SUITE, f"{op.name}, {kind}: unperturbed runs under "
              f"make-it-fail (init started after {pre} units, operation "
              f"done after {used})", ok, f"{why_pre}\n{why}")
    if ok and used <= pre:
        res.skip(SUITE, f"{op.name}, {kind} trials", f"the operation "
                 f"allocates nothing of {kind}'s in its task ({pre} units "
                 f"before its init, {used} after)")
        ok = False
    trials = []
    for i in range(ntrials if ok else 0):
        # one point in each of @ntrials equal strata of the window, so the
        # trials cover it from the init's first allocations to its last
        lo = pre + (used - pre) * i // ntrials
        point = rng.randrange(lo, max(lo + 1,
                                      pre + (used - pre) * (i + 1) // ntrials))
        t = Trial(op, kind, "client", f"space {point}")
        _arm_alloc(n1, kind, point)
        rc, out, dmesg, refcnt = _run_op(n1, op, True)
        t.hit, _ = _disarm_alloc(n1, kind)
        t.site = injection_site(dmesg) or ("silent (__GFP_NOWARN)"
                                           if t.hit else None)
        _judge(t, rc, out, dmesg, refcnt, base_refcnt)
        log("  " + t.row())
        trials.append(t)
    return trials


def _function_trials(res, n0, n1, op, base_refcnt):
    trials = []
    for fn, (op_name, sides, errno) in FUNCTIONS.items():
        if op_name != op.name:
            continue
        for where in sides:
            node = n1 if where == "client" else n0
            t = Trial(op, "fail_function", where, fn)
            t.errno = errno
            try:
                ok, why = _arm_function(node, fn, errno)
                if not ok:
                    res.add(SUITE, f"fail_function accepts {fn} on "
                            f"{node.name} (ALLOW_ERROR_INJECTION)", False,
                            why)
                    continue
                rc, out, dmesg, refcnt = _run_op(n1, op, False)
            finally:
                t.hit = _disarm_function(node, fn)
            t.site = f"{fn} [kverbs]" if t.hit else None
            _judge(t, rc, out, dmesg, refcnt, base_refcnt)
            log("  " + t.row())
            trials.append(t)
    return trials


def _report(res, trials):
    """Checks over the trials, and the table."""
    for op in sorted({t.op.name for t in trials}):
        for kind in ("failslab", "fail_page_alloc", "fail_function"):
            ts = [t for t in trials if t.op.name == op and t.kind == kind]
            if not ts:
                continue
            bad = [t for t in ts if t.problem]
            if kind != "fail_function":
                res.check(SUITE, f"{op}, {kind}: some trial's injection "
                          "hit", any(t.hit for t in ts),
                          "\n".join(t.row() for t in ts))
            res.check(SUITE, f"{op}, {kind}: {len(ts)} trials, each done "
                      "or refused with an error named to the caller, "
                      "nothing left referenced", not bad,
                      "\n".join(t.row() for t in bad))
    for kind in ("failslab", "fail_page_alloc"):
        ts = [t for t in trials if t.kind == kind]
        if not ts:
            continue
        ours = sorted({t.site for t in ts if _ours(t)})
        log(f"{kind}: call sites of ours failed: {', '.join(ours) or '-'}")
        res.check(SUITE, f"{kind}: injections reached our code", ours,
                  "\n".join(t.row() for t in ts))
    for fn, (op_name, sides, _) in FUNCTIONS.items():
        ts = [t for t in trials if t.kind == "fail_function" and
              t.point == fn]
        missed = [w for w in sides if not any(t.where == w and t.hit
                                              for t in ts)]
        res.check(SUITE, f"fail_function {fn} reached by {op_name} on the "
                  f"{' and '.join(sides)} node{'s' if len(sides) > 1 else ''}",
                  not missed, f"not reached on the {', '.join(missed)} "
                  "node(s)\n" + "\n".join(t.row() for t in ts))
    marked = marked_functions()
    stray = sorted(marked ^ (set(FUNCTIONS) | set(NOT_DRIVEN)))
    res.check(SUITE, f"every function marked ALLOW_ERROR_INJECTION "
              f"({len(marked)}) is driven here or named with the sample "
              "that drives it", not stray, ("marked but in neither table, "
              "or in a table but not marked: " + ", ".join(stray))
              if stray else "")
    for fn, why in NOT_DRIVEN.items():
        res.skip(SUITE, f"fail_function {fn}", f"driven by {why}, not by "
                 "this suite's operations")


def _write_table(workdir, seed, trials):
    rows = [f"seed {seed}", ""] + [t.row() for t in trials]
    summary = {}
    for t in trials:
        k = (t.op.name, t.kind)
        s = summary.setdefault(k, {"trials": 0, "hit": 0, "ours": set(),
                                   "done": 0, "refused": 0})
        s["trials"] += 1
        s["hit"] += t.hit
        if _ours(t):
            s["ours"].add(t.site)
        if t.outcome == "done":
            s["done"] += 1
        elif t.outcome:
            s["refused"] += 1
    rows += ["", "op       kind             trials  hit  sites-ours  done  "
             "refused"]
    for (op, kind), s in sorted(summary.items()):
        rows.append(f"{op:8} {kind:16} {s['trials']:6} {s['hit']:4} "
                    f"{len(s['ours']):11} {s['done']:5} {s['refused']:8}")
    for kind in ("failslab", "fail_page_alloc", "fail_function"):
        rows += ["", f"{kind}: call sites of ours failed:"]
        rows += sorted({t.site for t in trials if t.kind == kind and
                        _ours(t)}) or ["-"]
    path = workdir / "table.txt"
    path.write_text("\n".join(rows) + "\n")
    log(f"fault-injection table: {path}")


def suite_faultinj_debug(res):
    seed = int(os.environ.get("KVLAB_FAULT_SEED") or
               random.SystemRandom().randrange(1 << 32))
    ntrials = int(os.environ.get("KVLAB_FAULT_TRIALS", "5"))
    log(f"{SUITE}: KVLAB_FAULT_SEED={seed} KVLAB_FAULT_TRIALS={ntrials}")
    rng = random.Random(seed)
    try:
        with _debug_cluster(SUITE, ("kverbs.ko", "kping.ko", "krdma.ko"),
                            ("/usr/bin/kmod",)) as c:
            n0, n1 = c.nodes
            load_kverbs(res, SUITE, c.nodes)
            r = n1.run(f"ln -sf /kvlab/bin/kmod {INSMOD}", timeout=30)
            res.setup(SUITE, "kmod's insmod", r.rc == 0, r.out)
            for n in c.nodes:
                r = n.run(f"ls -d {DBG}/failslab {DBG}/fail_page_alloc "
                          f"{DBG}/fail_function", timeout=30)
                res.setup(SUITE, f"{n.name}: failslab, fail_page_alloc and "
                          "fail_function in debugfs", r.rc == 0, r.out)
            r = n0.run("insmod /kvlab/modules/kping.ko "
                       f"port={PORT} node_id={n0.node_id} && "
                       "insmod /kvlab/modules/krdma.ko", timeout=120)
            res.setup(SUITE, "kping and krdma servers load", r.rc == 0,
                      r.out)
            base = n1.run("cat /sys/module/kverbs/refcnt",
                          timeout=30).out.strip()
            trials = []
            with contextlib.ExitStack() as stack:
                for n in c.nodes:
                    stack.enter_context(n.expect_report("fault injection"))
                for op in _ops(n0, n1):
                    for kind in op.kinds:
                        trials += _alloc_trials(res, n1, op, kind, rng,
                                                ntrials, base)
                    trials += _function_trials(res, n0, n1, op, base)
                    _servers_idle(res, n0, n1, op, base)
            _write_table(c.workdir, seed, trials)
            _report(res, trials)
            for n, mods in ((n0, "kping krdma kverbs"), (n1, "kverbs")):
                r = n.run(f"rmmod {mods}", timeout=300)
                leaks = kmemleak_report(n)
                res.check(SUITE, f"{n.name}: rmmod {mods}, then kmemleak "
                          "(two scans) finds nothing", r.rc == 0 and
                          not leaks, r.out + leaks[-3000:])
        res.add(SUITE, "guest consoles clean but for the injections' "
                "notices (KASAN, lockdep, ...)", True)
    except HarnessError as e:
        res.add(SUITE, "cluster run", False, e)
