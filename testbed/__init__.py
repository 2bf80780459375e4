"""kverbs test harness: virtual RDMA clusters, KUnit runner, suites.

Python standard library only, in the manner of the kernel's own kunit.py.
"""
