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

report() also returns, per suite, its plan ("1..N" right after the suite
header) and the number of result lines seen at the suite's level, and
verify() turns a report into the problems that fail a run even when every
result line said "ok": a suite that never ran, a case that never reported,
a skip nobody declared, a run in which nothing ran.
"""
import fnmatch
import re

_TS = re.compile(r"^\[\s*\d+\.\d+\](?:\[\s*[CT]\d+\])? ?")
_VERSION = re.compile(r"^K?TAP version \d+\s*$")
_SUBTEST = re.compile(r"^# Subtest: (.+?)\s*$")
_PLAN = re.compile(r"^1\.\.(\d+)\s*$")
_RESULT = re.compile(r"^(ok|not ok) (\d+)(?: -)?(?: ([^#]*?))?\s*(?:#\s*(.*))?$")

STATUSES = ("pass", "fail", "skip", "crashed")


class _Level:
    """One open subtest whose children print at `indent`."""

    def __init__(self, indent, name=None, suite=False):
        self.indent = indent
        self.name = name
        self.suite = suite      # a top-level suite (no named level above)
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


class Plan:
    """A suite's declared plan (None if it printed no "1..N") and how many
    results it printed at its own level (a parameterised case counts once,
    as in the plan)."""

    def __init__(self, plan=None, results=0):
        self.plan, self.results = plan, results

    def __eq__(self, other):
        return (self.plan, self.results) == (other.plan, other.results)

    def __repr__(self):
        return f"Plan({self.plan}, {self.results})"


class Report:
    """parse() output plus per-suite plans.
    cases:   [(suite, case, status)] as parse() returns them;
    suites:  {suite: Plan}; a suite printed twice (module loaded twice)
             has its plans and results added up;
    reasons: {(suite, case): directive text} for skipped entries."""

    def __init__(self, cases, suites, reasons=None):
        self.cases = cases
        self.suites = suites
        self.reasons = reasons or {}


def parse(text):
    """Leaf results [(suite, case, status)] of a console log."""
    return report(text).cases


def report(text):
    """parse() with each suite's plan and the skip reasons: a Report."""
    cases = []
    suites = {}
    reasons = {}
    stack = []              # open levels, increasing indent; root has indent 0

    def names():
        return [lv.name for lv in stack if lv.indent > 0 and lv.name]

    def record(path, status, directive=None):
        if not path:
            return
        suite, rest = path[0], "/".join(path[1:])
        cases.append((suite, rest, status))
        if status == "skip" and directive:
            reasons[(suite, rest)] = re.sub(r"^(?:SKIP|TODO)\s*", "",
                                            directive.strip(), flags=re.I)

    def closed(lv):
        """Account a level leaving the stack: a suite's plan and results."""
        if lv.suite:
            p = suites.setdefault(lv.name or "?", Plan())
            if lv.plan is not None:
                p.plan = (p.plan or 0) + lv.plan
            p.results += lv.results

    def opened(indent, name=None):
        """A new level: a suite iff it is the outermost indented one."""
        suite = indent > 0 and not any(lv.indent > 0 for lv in stack)
        if stack:
            stack[-1].children = True
        stack.append(_Level(indent, name, suite))

    def truncate(min_indent):
        """Close levels with indent >= min_indent that never got a result.
        Only the innermost unfinished level is reported (once per crash)."""
        reported = False
        while stack and stack[-1].indent >= min_indent:
            lv = stack[-1]
            path = names()
            closed(stack.pop())
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
            opened(indent)
            continue
        m = _SUBTEST.match(body)
        if m:
            top = stack[-1] if stack else None
            if top is not None and top.indent == indent and top.fresh \
                    and top.name is None:
                top.name = m.group(1)
                continue
            truncate(indent)
            opened(indent, m.group(1))
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
        below = None
        while stack and stack[-1].indent > indent:
            below = stack.pop()     # last popped = the level just below
            closed(below)
        parent = stack[-1] if stack and stack[-1].indent == indent else None
        if parent is not None:
            parent.results += 1
        leaf = below is None or (below.results == 0 and not below.children)
        if not leaf:
            continue                # its children were recorded already
        path = names() + [name]
        if parent is None and indent > 0:
            # result with no enclosing "# Subtest:" (noise-damaged header)
            path = ["?"] + [name]
        record(path, status, directive)

    truncate(0)
    return Report(cases, suites, reasons)


def count(cases):
    """{status: number} over parse() output, every status present."""
    out = dict.fromkeys(STATUSES, 0)
    for _suite, _case, status in cases:
        out[status] = out.get(status, 0) + 1
    return out


def case_name(suite, case):
    """"suite.case" as verify() and the skippable globs spell it; a
    suite-level entry (no case) is just "suite"."""
    return f"{suite}.{case}" if case else suite


def skip_declared(suite, case, skippable):
    """The first glob of `skippable` that allows this skip, or None.
    A glob matches "suite.case" or, for a parameterised case's entry
    "suite.case/param", also "suite.case" alone."""
    full = case_name(suite, case)
    bare = case_name(suite, case.split("/", 1)[0]) if case else full
    for pat in skippable:
        if fnmatch.fnmatchcase(full, pat) or fnmatch.fnmatchcase(bare, pat):
            return pat
    return None


class Problem:
    """One reason a KUnit run fails beyond its failed cases.
    kind: "missing suite", "no plan", "missing cases", "extra results",
    "undeclared skip" or "nothing ran"; name: the suite or suite.case."""

    def __init__(self, kind, name, detail):
        self.kind, self.name, self.detail = kind, name, detail

    def __str__(self):
        return f"{self.name}: {self.detail}" if self.name else self.detail

    def __repr__(self):
        return f"Problem({self.kind!r}, {self.name!r})"


def verify(source, expected_suites, skippable=()):
    """Problems of a KUnit run, [] when it is complete.

    source: console text, a Report, or a bare list of parse() cases (which
    carries no plans: then a missing case cannot be seen, only a missing
    suite, an undeclared skip or a run with nothing in it).
    expected_suites: every suite that must have run.
    skippable: "suite.case" globs of cases allowed to skip (see
    skip_declared); every other skip is a problem.

    A run where every case skipped, or no case reported at all, is a
    problem even if each skip was declared: it tested nothing.
    """
    if isinstance(source, str):
        source = report(source)
    if isinstance(source, Report):
        cases, suites = source.cases, source.suites
    else:
        cases, suites = list(source), None
    problems = []
    seen = {s for s, _c, _st in cases} | set(suites or ())
    for s in sorted(set(expected_suites) - seen):
        problems.append(Problem("missing suite", s,
                                "expected suite printed no KTAP (module "
                                "not loaded, or suite not registered?)"))
    for s, p in sorted((suites or {}).items()):
        if p.plan is None:
            problems.append(Problem("no plan", s, "suite printed no plan "
                                    "line (1..N): its completeness is "
                                    "unknown"))
        elif p.results < p.plan:
            problems.append(Problem("missing cases", s,
                                    f"{p.results} of {p.plan} planned "
                                    "results (a case never reported)"))
        elif p.results > p.plan:
            problems.append(Problem("extra results", s,
                                    f"{p.results} results for a plan of "
                                    f"{p.plan}"))
    for s, c, st in cases:
        if st == "skip" and not skip_declared(s, c, skippable):
            problems.append(Problem("undeclared skip", case_name(s, c),
                                    "skipped, but not declared skippable"))
    if not any(st != "skip" for _s, _c, st in cases):
        what = "every case skipped" if cases else "no case reported"
        problems.append(Problem("nothing ran", "", f"KUnit run tested "
                                f"nothing: {what}"))
    return problems
