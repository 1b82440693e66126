"""The sglang 0.5.12 family (the v1 family): ``EAGLEWorker`` under ``Scheduler.event_loop_normal``
(``--disable-overlap-schedule``), with the seed's batch-size threshold switch.

Its operations are the shared ``Ops`` table's defaults (``worker.py``), so it declares none; it
stands for 0.5.12 and 0.5.12.post1 (the releases whose source has every cited symbol unchanged:
0.5.11 and 0.5.13 differ; ``tests/test_release_ranges.py``), and every variant of it takes the
seed patch's ``--speculative-disable-batch-threshold`` (``SEED_THRESHOLD_FLAG``).
"""

from __future__ import annotations

from specstate.model.config import SpecConfig
from specstate.model.family_registry import Family, register_family
from specstate.model.variant_registry import SEED_THRESHOLD_FLAG

__all__ = ["FAMILY", "prepare"]


def prepare(config: SpecConfig) -> SpecConfig:
    """The v1 worker runs without the overlap scheduler (``disable_overlap_schedule=True``)."""
    return config if config.disable_overlap_schedule else config.with_(disable_overlap_schedule=True)


FAMILY = register_family(Family(
    "sglang-0.5.12", "sglang 0.5.12: the v1 EAGLEWorker, event_loop_normal, the seed's threshold switch",
    "fixed-threshold", prepare, lambda c: c.disable_batch_threshold, adaptive=False,
    release_range=("0.5.12", "0.5.12.post1"), patch_flags=(SEED_THRESHOLD_FLAG,)))
