"""The method every side-by-side benchmark follows.

Under TCG only ratios measured side by side mean anything, and the guests
drift (page cache, JIT-like TCG translation caches warming up, the host's
other load), so:

  1. warm-up rounds run every method once and are thrown away;
  2. each counted round runs every method once, in an order rotated by one
     per round, so no method always runs first or last;
  3. a ratio is computed per round (both sides from the same round) and
     reported as the median of the per-round ratios with its min and max;
  4. every round of every method is kept for the JSON;
  5. a method that fails (its server does not start, its client errs)
     fails the benchmark: it is reported, never dropped silently.
"""
import statistics


def rotated(items, rnd):
    """@items in the order of round @rnd: rotated left by @rnd."""
    k = rnd % len(items) if items else 0
    return list(items[k:]) + list(items[:k])


def spread(values):
    """{median, min, max, rounds} of a list of numbers, None-free."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"median": None, "min": None, "max": None, "rounds": values}
    return {"median": round(statistics.median(vals), 3),
            "min": round(min(vals), 3), "max": round(max(vals), 3),
            "rounds": [None if v is None else round(v, 3) for v in values]}


def per_round_ratio(num, den):
    """Per-round num[i] / den[i] for two equally long lists of numbers
    (None where either side is missing), summarised by spread()."""
    out = []
    for a, b in zip(num, den):
        out.append(a / b if a and b else None)
    return spread(out)


def fmt(s, unit=""):
    """'0.93 (0.90-0.97)' for a spread()."""
    if s["median"] is None:
        return "-"
    return f"{s['median']}{unit} ({s['min']}-{s['max']})"
