"""Test outcomes collected across suites, and the closing summary line.

A skip is neither a pass nor a failure: it is counted and listed with its
reason, so a run that silently tests less shows it in its last line,
"N passed, N failed, N skipped".

A set-up step (a module loads, a server starts) is not a claim about the
product: done, it is listed but not counted as a pass; failed, it is a
failure of its suite ("set-up: ..."), since what it prepared was not
tested.  The phase times give each suite's claims checked.
"""
import time


# Lines of a failure's detail repeated in the summary.
FIRST_FAIL_LINES = 60
OTHER_FAIL_LINES = 12


class Results:
    def __init__(self):
        self.cases = []          # (suite, name, ok, detail)
        self.skips = []          # (suite, name, why)
        self.setups = []         # (suite, name) of set-up steps done
        self.timings = []        # (suite, seconds)

    def add(self, suite, name, ok, detail=""):
        self.cases.append((suite, name, bool(ok), detail))
        mark = "PASS" if ok else "FAIL"
        line = f"  [{mark}] {suite}: {name}"
        if detail and not ok:
            line += "\n" + "\n".join("        " + l
                                     for l in str(detail).splitlines()[:40])
        elif detail and len(str(detail)) < 100 and "\n" not in str(detail):
            line += f"  ({detail})"
        print(line, flush=True)

    def skip(self, suite, name, why):
        """A case that did not run, for a reason the suite accepts."""
        self.skips.append((suite, name, str(why)))
        print(f"  [SKIP] {suite}: {name} ({why})", flush=True)

    def check(self, suite, name, cond, detail=""):
        self.add(suite, name, cond, detail)
        return cond

    def setup(self, suite, name, cond, detail=""):
        """A set-up step: not a pass when done, a failure when not."""
        if not cond:
            self.add(suite, f"set-up: {name}", False, detail)
            return cond
        self.setups.append((suite, name))
        print(f"  [ OK ] {suite}: set-up: {name}", flush=True)
        return cond

    @property
    def passed(self):
        return sum(1 for c in self.cases if c[2])

    @property
    def failed(self):
        return sum(1 for c in self.cases if not c[2])

    @property
    def skipped(self):
        return len(self.skips)

    def timed(self, suite):
        return _Timer(self, suite)

    def summary(self):
        lines = ["", "phase times (claims checked, set-up steps):"]
        for suite, secs in self.timings:
            claims = sum(1 for c in self.cases if c[0] == suite)
            steps = sum(1 for s in self.setups if s[0] == suite)
            lines.append(f"  {suite:<20} {secs:7.1f}s  {claims:4d} claims"
                         f"  {steps:3d} set-up")
        fails = [c for c in self.cases if not c[2]]
        if self.skips:
            lines.append("skipped:")
            lines += [f"  {s}: {n} ({why})" for s, n, why in self.skips]
        if fails:
            # CI keeps only the tail of the log: each failure's detail
            # (for a dead guest, its console tail) is repeated here so the
            # kept part says what happened, the first failure in full.
            lines.append("failed:")
            for i, (s, n, _, detail) in enumerate(fails):
                lines.append(f"  {s}: {n}")
                text = str(detail).splitlines()
                keep = FIRST_FAIL_LINES if i == 0 else OTHER_FAIL_LINES
                if len(text) > keep:
                    text = text[:keep // 3] + ["        [...]"] + \
                        text[-(keep - keep // 3):]
                lines += ["        " + l for l in text]
        lines.append(f"{self.passed} passed, {self.failed} failed, "
                     f"{self.skipped} skipped")
        return "\n".join(lines)


class _Timer:
    def __init__(self, results, suite):
        self.results, self.suite, self.t0 = results, suite, 0.0

    def __enter__(self):
        self.t0 = time.monotonic()
        print(f"[kvlab] suite {self.suite}: start", flush=True)
        return self

    def __exit__(self, et, ev, tb):
        secs = time.monotonic() - self.t0
        self.results.timings.append((self.suite, secs))
        print(f"[kvlab] suite {self.suite}: {secs:.1f}s", flush=True)
        return False
