"""The file set kfcache's tests and benchmark serve: generated on the host,
deterministic, with the shapes a file cache gets wrong (sizes at and
around page and batch boundaries, holes, sparse files, a large file, many
small files, deep paths, odd names, links inside and out of the export).

make_tree(dir) writes it and returns the manifest {relative path: md5} of
its regular files.  Sparse files are written with holes (seek), so an
ext4 image made from the tree (fcache_env.make_disk) keeps them sparse.
"""
import hashlib
import random
from pathlib import Path

PAGE = 4096
BATCH = 32 * PAGE            # KFC_READ_MAX_PAGES pages: one READ


def _write_sparse(path, size, extents, rnd):
    """@size bytes, data only at @extents [(offset, length)], holes
    elsewhere."""
    with open(path, "wb") as f:
        f.truncate(size)
        for off, n in extents:
            f.seek(off)
            f.write(rnd.randbytes(n))


def make_tree(root, big_mib=8, small_files=400, seed=1):
    """Write the tree under @root (created); return its manifest."""
    root = Path(root)
    rnd = random.Random(seed)
    root.mkdir(parents=True)
    (root / "big.bin").write_bytes(rnd.randbytes(big_mib << 20))
    sizes = {"empty": 0, "one": 1, "page-1": PAGE - 1, "page": PAGE,
             "page+1": PAGE + 1, "batch-1": BATCH - 1, "batch": BATCH,
             "batch+1": BATCH + 1, "odd": 3 * BATCH + 777}
    (root / "sizes").mkdir()
    for name, n in sizes.items():
        (root / "sizes" / name).write_bytes(rnd.randbytes(n))
    # holes between data, a hole at the end, a file that is all hole
    _write_sparse(root / "holes.bin", 5 * BATCH + 100,
                  [(0, 100), (2 * BATCH + 5, PAGE), (5 * BATCH, 100)], rnd)
    _write_sparse(root / "sparse.bin", 16 << 20,
                  [(3 << 20, 3 * PAGE), (9 << 20, 1)], rnd)
    _write_sparse(root / "allhole.bin", 2 << 20, [], rnd)
    d = root / "small"
    for i in range(small_files):
        sub = d / f"d{i % 20:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i:04d}").write_bytes(rnd.randbytes(rnd.randrange(0,
                                                                   9000)))
    deep = root.joinpath(*[f"l{i}" for i in range(12)])
    deep.mkdir(parents=True)
    (deep / "leaf.txt").write_text("deep leaf\n")
    (root / "name with spaces ü.txt").write_text("odd name\n")
    (root / "link-in").symlink_to("sizes/page+1")
    (root / "link-out").symlink_to("../../../etc/passwd")
    (root / "link-abs").symlink_to("/etc/passwd")
    (root / "coherence.txt").write_text("version 1\n")
    return manifest(root)


def manifest(root):
    """{relative path: md5} of the regular files under @root."""
    root = Path(root)
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(root))] = hashlib.md5(
                p.read_bytes()).hexdigest()
    return out


def parse_md5sum(text, prefix="./"):
    """md5sum output -> {path without @prefix: md5}."""
    out = {}
    for line in text.splitlines():
        parts = line.split("  ", 1)
        if len(parts) == 2 and len(parts[0]) == 32:
            path = parts[1]
            out[path[len(prefix):] if path.startswith(prefix) else path] = \
                parts[0]
    return out
