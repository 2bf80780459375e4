"""Where a kdsm read fault's time goes, from the guests' tracefs.

One K-mode run of kdsm-faults on a formed 4-node cluster with kdsm's
tracepoints (samples/kdsm/kdsm_trace.h) and the scheduler's wake-up
events on; the requester (node 1) and the home (node 2) each read their
own trace (guest clocks differ: only intervals within one guest are
used).  Scenario "read, O = H" comes first in kdsm-faults, so node 1's
first --iters read faults are its faults.  Per fault:

  at R: kdsm_fault -> kvmsg_send         the request posted
        kvmsg_send -> kvmsg_recv           the round trip as R sees it:
                                           the wire both ways, H's handler
                                           and its 4 KB RDMA write
        kvmsg_recv -> kdsm_fault_done      the reply handled, page mapped
        kdsm_fault_done -> sched_wakeup -> sched_switch to the task
  at H: kdsm_request -> kdsm_serve      the home's handler (softirq in K)
  R's user-level latency (kdsm-faults' R column) minus the traced span:
        the trap, the fault path before kdsm_fault, the return to user.
"""
import re
import statistics

TRACE = "/sys/kernel/tracing"
LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+):\s+"
                  r"(\w+):\s+(.*)$")


def _start(node, events, filters=()):
    """Tracing on in @node for @events; every step must succeed (a kdsm
    built without its tracepoints, a filter the kernel rejects)."""
    cmds = [f"[ -d {TRACE}/events ] || mount -t tracefs nodev {TRACE}",
            f"echo 0 > {TRACE}/tracing_on", f"echo > {TRACE}/trace",
            f"echo 4096 > {TRACE}/buffer_size_kb"]
    cmds += [f"echo '{f}' > {TRACE}/events/{ev}/filter" for ev, f in filters]
    cmds += [f"echo 1 > {TRACE}/events/{ev}/enable" for ev in events]
    cmds.append(f"echo 1 > {TRACE}/tracing_on")
    node.run_checked(" && ".join(cmds), timeout=60)


def _stop(node, events):
    r = node.run(f"echo 0 > {TRACE}/tracing_on; cat {TRACE}/trace; " +
                 "; ".join(f"echo 0 > {TRACE}/events/{ev}/enable"
                           for ev in events) +
                 f"; echo > {TRACE}/trace", timeout=120)
    out = []
    for ln in r.out.splitlines():
        m = LINE.match(ln)
        if m:
            f = dict(re.findall(r"(\w+)=(\S+)", m.group(6)))
            out.append((float(m.group(4)) * 1e6, m.group(5), int(m.group(2)),
                        f, m.group(6)))
    return out


def _first(evs, name, after, pred):
    return next((e for e in evs if e[1] == name and e[0] >= after and
                 pred(e)), None)


R_EVENTS = ["kdsm/kdsm_fault", "kdsm/kdsm_fault_done", "sched/sched_wakeup",
            "sched/sched_switch", "kvmsg/kvmsg_send", "kvmsg/kvmsg_recv"]
H_EVENTS = ["kdsm/kdsm_request", "kdsm/kdsm_serve"]


def read_fault_breakdown(nodes, iters, run_faults):
    """Trace one run of @run_faults() (returns node 1's kdsm-faults output
    and the user-level median) and return the medians in us, with the
    number of faults matched."""
    r, h = nodes[0], nodes[1]
    _start(r, R_EVENTS, [("sched/sched_wakeup", 'comm == "kdsm-faults"'),
                         ("sched/sched_switch",
                          'next_comm == "kdsm-faults"')])
    _start(h, H_EVENTS)
    try:
        user_us = run_faults()
    finally:
        rev = _stop(r, R_EVENTS)
        hev = _stop(h, H_EVENTS)
    faults = [e for e in rev if e[1] == "kdsm_fault" and "read" in e[4]]
    spans = {"fault_to_mapped": [], "wakeup_to_running": [],
             "home_handler": [], "network_and_reply": [],
             "fault_to_request_posted": [], "request_to_reply": [],
             "reply_to_mapped": [], "wire_both_ways": []}
    for t0, _, pid, f, _ in faults[:iters]:
        page = f.get("page")
        done = _first(rev, "kdsm_fault_done", t0,
                      lambda e: e[3].get("page") == page)
        if not done:
            continue
        wake = _first(rev, "sched_wakeup", done[0],
                      lambda e: e[3].get("pid") == str(pid))
        run = wake and _first(rev, "sched_switch", wake[0],
                              lambda e: e[3].get("next_pid") == str(pid))
        req = _first(hev, "kdsm_request", 0,
                     lambda e: e[3].get("page") == page and
                     e[3].get("peer") == "1")
        serve = req and _first(hev, "kdsm_serve", req[0],
                               lambda e: e[3].get("page") == page)
        span = done[0] - t0
        spans["fault_to_mapped"].append(span)
        sent = _first(rev, "kvmsg_send", t0, lambda e: True)
        got = sent and _first(rev, "kvmsg_recv", sent[0], lambda e: True)
        if got and got[0] <= done[0]:
            spans["fault_to_request_posted"].append(sent[0] - t0)
            spans["request_to_reply"].append(got[0] - sent[0])
            spans["reply_to_mapped"].append(done[0] - got[0])
        if run:
            spans["wakeup_to_running"].append(run[0] - done[0])
        if serve:
            spans["home_handler"].append(serve[0] - req[0])
            spans["network_and_reply"].append(span - (serve[0] - req[0]))
            if got and got[0] <= done[0]:
                spans["wire_both_ways"].append(got[0] - sent[0] -
                                               (serve[0] - req[0]))
    med = {k: round(statistics.median(v), 1) if v else None
           for k, v in spans.items()}
    med["matched_faults"] = len(spans["fault_to_mapped"])
    med["user_us"] = user_us
    both = med["fault_to_mapped"] is not None and \
        med["wakeup_to_running"] is not None
    med["trap_and_return"] = round(
        user_us - med["fault_to_mapped"] - med["wakeup_to_running"], 1) \
        if user_us and both else None
    return med
