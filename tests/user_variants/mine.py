"""A user's own variants, loaded by tests as ``tests.user_variants.mine:...``."""

from dataclasses import dataclass

from specstate.variant import BatchShape, EagleDraftInput, Variant, naive_fallback_decode, new_draft_input


class SmallThreshold:
    """speculate only up to 1 request, otherwise the corrected fallback"""

    base = "fixed-threshold"

    def decide_speculation(ops, tx, batch):  # noqa: N805 - operations take the Ops table first
        return batch.batch_size <= 1


BROKEN = Variant("broken", "naive fallback at every size", overrides={
    "decide_speculation": lambda ops, tx, batch: False, "fallback_decode": naive_fallback_decode})

NOT_A_VARIANT = 42


@dataclass(frozen=True)
class MyDraftInput(EagleDraftInput):
    """A user's draft input: per-request accept lengths ride along (one row per request)."""

    accept_length: BatchShape = (0,)


class SubclassedDraftInput:
    """the corrected fallback, with the user's own EagleDraftInput subclass"""

    base = "fixed-threshold"

    def new_draft_input(ops, config, rows):  # noqa: N805 - operations take the Ops table first
        base = new_draft_input(config, rows)
        return MyDraftInput(**{f: getattr(base, f) for f in base.__dataclass_fields__}, accept_length=(len(rows),))
