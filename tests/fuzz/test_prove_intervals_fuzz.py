"""The interval proof against the enumeration of every bound, bs <= 64, on random configs and
every built-in variant of both families (slow: ``-m fuzz``)."""

from __future__ import annotations

import random

import pytest

from tests.test_prove_intervals import V1, V2, assert_interval_proof_equals_enumeration, random_config

pytestmark = pytest.mark.fuzz

LISTS = ("config", "sglang", "every", "single", "one")


@pytest.mark.parametrize("variant", V1 + V2)
def test_interval_proof_equals_the_enumeration_up_to_64(variant: str) -> None:
    """One random config and capture list per variant (seeded by its name), bs 32..64."""
    from specstate.model.sglang_0_5_17.start import starts

    rng = random.Random(f"intervals-{variant}")
    cfg = random_config(rng)
    while variant in V2 and not starts(variant, cfg):  # only configs the engine starts (model/sglang_0_5_17/start.py)
        cfg = random_config(rng)
    assert_interval_proof_equals_enumeration(cfg, variant, rng.randint(32, 64), (rng.choice(LISTS),))
