"""`rdma res` in a guest, as an operator reads it (issue 27): every kernel
object a kverbs client owns carries the client's (its domain's) name."""

import re


def qp_rows(out):
    """The connected RC QPs of `rdma res show qp` output."""
    return [l for l in out.splitlines() if l.startswith("link ") and
            re.search(r"\btype RC\b", l) and re.search(r"\bstate RTS\b", l)]


def owner_check(res, suite, node, owner):
    """Every connected RC QP on @node is named [@owner] in `rdma res show
    qp` (the suites run one client per node), and at least one exists."""
    r = node.run("rdma res show qp", timeout=30)
    rows = qp_rows(r.out)
    return res.check(suite, f"{node.name}: rdma res show qp names its "
                     f"connected QPs [{owner}]",
                     bool(rows) and all(f"[{owner}]" in l for l in rows),
                     r.out)
