"""kverbs' module parameters in a guest, as shell lines that set them:
rnr_retry and ack_timeout in every build, the test_* ones (delays that
hold a race window open, test_undo and test_auth bits) in test builds."""

PARAMS = "/sys/module/kverbs/parameters"


def kverbs_params(**values):
    """A shell line setting each of kverbs' parameters @values, in order:
    kverbs_params(test_undo=16, test_connect_delay_ms=3000)."""
    return "; ".join(f"echo {v} > {PARAMS}/{k}" for k, v in values.items())
