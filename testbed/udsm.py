"""The user-level DSM (tools/udsm, Documentation/udsm.rst) in the guests:
its binaries, its variants, and the command line of one node.

udsm runs the kdsm applications unchanged against libudsm; a node is
configured through the environment (UDSM_*), one process per node, over
librdmacm/libibverbs on the guests' rxe devices."""
APPS = ("sor", "lu", "is", "tsp", "water", "nbody", "litmus", "faults")
BINS = tuple(f"tools/udsm/udsm-{a}" for a in APPS)
PORT = 18700                 # udsm's default; kdsm listens on 18600

# name: (UDSM_ACCESS, UDSM_PROGRESS)
VARIANTS = {"U-segv-block": ("segv", "block"),
            "U-segv-poll": ("segv", "poll"),
            "U-uffd-block": ("uffd", "block"),
            "U-uffd-poll": ("uffd", "poll")}
# exit status of a variant the kernel cannot run (uffd features missing)
UNSUPPORTED = 77


def env(nodes, n, variant, pages, placement="block", extra=""):
    """The UDSM_* assignments for guest @n of @nodes (ids 1..N in list
    order)."""
    access, progress = VARIANTS[variant]
    peers = ",".join(m.ip for m in nodes)
    return (f"UDSM_NODE={nodes.index(n) + 1} UDSM_PEERS={peers} "
            f"UDSM_PAGES={pages} UDSM_PLACEMENT={placement} "
            f"UDSM_ACCESS={access} UDSM_PROGRESS={progress} {extra}").strip()


def line(nodes, variant, app, args="", pages=640, extra=""):
    """A per-node command for suite_kdsm.spmd(): udsm-@app @args."""
    return lambda n: (f"{env(nodes, n, variant, pages, extra=extra)} "
                      f"/kvlab/bin/udsm-{app} {args}").strip()
