"""Parse KUnit's KTAP v1 output from a kernel console log.

Input is a whole console log: lines may carry a printk timestamp
("[    1.234567] ", optionally "[    T1] " caller id), other kernel messages
are interleaved, and output may stop mid-suite when the guest crashed.

KTAP nests by indentation (4 spaces per level in KUnit):

    KTAP version 1                  <- top level (built-in run; modules loaded
    1..1                               later print only the suite part)
        KTAP version 1
        # Subtest: my_suite         <- suite: opens a level at indent 4
        1..2
        ok 1 case_a                 <- case result, indent 4
            KTAP version 1
            # Subtest: param_case   <- parameterised case: level at indent 8
            ok 1 param-0
            not ok 2 param-1
        not ok 2 param_case         <- closes the indent-8 level
    # my_suite: pass:1 fail:1 skip:0 total:2
    ok 1 my_suite                   <- closes the suite, indent 0

parse() returns leaf results only, as (suite, case, status) with status one of
"pass", "fail", "skip", "crashed". A parameterised case is reported per
parameter as "case/param". A level that opened but never got its closing
result line (crash, timeout, truncated log) yields one "crashed" entry.
"""
import re

_TS = re.compile(r"^\[\s*\d+\.\d+\](?:\[\s*[CT]\d+\])? ?")
_VERSION = re.compile(r"^K?TAP version \d+\s*$")
_SUBTEST = re.compile(r"^# Subtest: (.+?)\s*$")
_PLAN = re.compile(r"^1\.\.(\d+)\s*$")
_RESULT = re.compile(r"^(ok|not ok) (\d+)(?: -)?(?: ([^#]*?))?\s*(?:#\s*(.*))?$")

STATUSES = ("pass", "fail", "skip", "crashed")


class _Level:
    """One open subtest whose children print at `indent`."""

    def __init__(self, indent, name=None):
        self.indent = indent
        self.name = name
        self.plan = None
        self.results = 0        # child result lines seen
        self.children = False   # a nested level opened inside this one

    @property
    def fresh(self):
        return self.results == 0 and not self.children and self.plan is None


def _status(okword, directive):
    d = (directive or "").strip().upper()
    if d.startswith("SKIP") or d.startswith("TODO"):
        return "skip"
    return "pass" if okword == "ok" else "fail"


def _strip(line):
    """Remove the printk timestamp/caller prefix and the line ending; keep
    the indentation, which carries the nesting."""
    line = line.rstrip("\r\n").replace("\r", "")
    line = _TS.sub("", line, count=1)
    return line.expandtabs(4)


def parse(text):
    cases = []
    stack = []              # open levels, increasing indent; root has indent 0

    def names():
        return [lv.name for lv in stack if lv.indent > 0 and lv.name]

    def record(path, status):
        if not path:
            return
        suite, rest = path[0], "/".join(path[1:])
        cases.append((suite, rest, status))

    def truncate(min_indent):
        """Close levels with indent >= min_indent that never got a result.
        Only the innermost unfinished level is reported (once per crash)."""
        reported = False
        while stack and stack[-1].indent >= min_indent:
            lv = stack[-1]
            path = names()
            stack.pop()
            if lv.indent == 0 or reported:
                continue
            done = f"{lv.results} of {lv.plan}" if lv.plan is not None \
                else f"{lv.results}"
            record(path + [f"(crashed after {done} results)"]
                   if len(path) == 1 else path, "crashed")
            reported = True

    for raw in text.splitlines():
        line = _strip(raw)
        body = line.lstrip(" ")
        indent = len(line) - len(body)
        if not body:
            continue
        if _VERSION.match(body):
            top = stack[-1] if stack else None
            if top is not None and top.indent == indent and top.fresh:
                continue            # "# Subtest:" came first (newer kernels)
            truncate(indent)
            if stack:
                stack[-1].children = True
            stack.append(_Level(indent))
            continue
        m = _SUBTEST.match(body)
        if m:
            top = stack[-1] if stack else None
            if top is not None and top.indent == indent and top.fresh \
                    and top.name is None:
                top.name = m.group(1)
                continue
            truncate(indent)
            if stack:
                stack[-1].children = True
            stack.append(_Level(indent, m.group(1)))
            continue
        m = _PLAN.match(body)
        if m:
            if stack and stack[-1].indent == indent:
                stack[-1].plan = int(m.group(1))
            continue
        m = _RESULT.match(body)
        if not m:
            continue                # diagnostics ("# ..."), kernel noise
        okword, _num, name, directive = m.groups()
        name = (name or "").strip() or f"#{_num}"
        status = _status(okword, directive)
        # Levels deeper than this line are closed by it. The one directly
        # below (indent > this) is the subtest this line reports on.
        closed = None
        while stack and stack[-1].indent > indent:
            closed = stack.pop()    # last popped = the level just below
        parent = stack[-1] if stack and stack[-1].indent == indent else None
        if parent is not None:
            parent.results += 1
        leaf = closed is None or (closed.results == 0 and not closed.children)
        if not leaf:
            continue                # its children were recorded already
        path = names() + [name]
        if parent is None and indent > 0:
            # result with no enclosing "# Subtest:" (noise-damaged header)
            path = ["?"] + [name]
        record(path, status)

    truncate(0)
    return cases


def count(cases):
    """{status: number} over parse() output, every status present."""
    out = dict.fromkeys(STATUSES, 0)
    for _suite, _case, status in cases:
        out[status] = out.get(status, 0) + 1
    return out
