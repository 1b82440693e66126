"""A user's own variants, loaded by tests as ``tests.user_variants.mine:...``."""

from specstate.model import Variant
from specstate.model.policies import naive_fallback_decode


class SmallThreshold:
    """speculate only up to 1 request, otherwise the corrected fallback"""

    base = "fixed-threshold"

    def decide_speculation(ops, tx, batch):  # noqa: N805 - operations take the Ops table first
        return batch.batch_size <= 1


BROKEN = Variant("broken", "naive fallback at every size", overrides={
    "decide_speculation": lambda ops, tx, batch: False, "fallback_decode": naive_fallback_decode})

NOT_A_VARIANT = 42
