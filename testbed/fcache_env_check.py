"""Self-check of testbed/fcache_env.py (not part of CI): boot two guests
per kernel series, NFS over RDMA and TCP from an ext4 disk, md5sum and
fio on the client; print the timings.

  python3 -m testbed.fcache_env_check [6.1] [6.12]
"""
import sys

from .common import HarnessError
from . import fcache_env, kernels


def main(argv):
    ok = True
    for series in argv or ["6.12", "6.1"]:
        k = kernels.resolve(series)
        try:
            # both orders: the first transport mounted meets colder caches
            t = fcache_env.smoke(k, transports=("rdma", "tcp", "tcp",
                                                "rdma"))
        except HarnessError as e:
            print(f"== {k.abi}: FAILED\n{e}", flush=True)
            ok = False
            continue
        print(f"== {k.abi}: OK")
        for name, v in t.items():
            if isinstance(v, float):
                print(f"  {name:32s} {v:7.1f} s")
            else:
                print(f"  {name:32s} {str(v).strip()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
