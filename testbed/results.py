"""Test outcomes collected across suites, and the closing summary line."""
import time


class Results:
    def __init__(self):
        self.cases = []          # (suite, name, ok, detail)
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

    def check(self, suite, name, cond, detail=""):
        self.add(suite, name, cond, detail)
        return cond

    @property
    def passed(self):
        return sum(1 for c in self.cases if c[2])

    @property
    def failed(self):
        return sum(1 for c in self.cases if not c[2])

    def timed(self, suite):
        return _Timer(self, suite)

    def summary(self):
        lines = ["", "phase times:"]
        for suite, secs in self.timings:
            lines.append(f"  {suite:<20} {secs:7.1f}s")
        fails = [c for c in self.cases if not c[2]]
        if fails:
            lines.append("failed:")
            lines += [f"  {s}: {n}" for s, n, _, _ in fails]
        lines.append(f"{self.passed} passed, {self.failed} failed")
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
