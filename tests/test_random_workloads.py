"""Seeded random workloads (no Hypothesis): the correct policies hold every invariant,
including with mixed chunked prefill switched on (a path only a planted bug uses by default)."""

from __future__ import annotations

import pytest

from specstate.check import run_actions
from specstate.fuzz.generate import generate_case
from specstate.model import Variant

MIXING = Variant("mixed-right", "fixed-threshold with --enable-mixed-chunk", base="fixed-threshold",
                 config_changes={"enable_mixed_chunk": True})


@pytest.mark.parametrize("variant", ["fixed-threshold", pytest.param("steps0-verify", marks=pytest.mark.slow),
                                     pytest.param("always-spec", marks=pytest.mark.slow), MIXING],  # 4 CPU s each
                         ids=lambda v: v if isinstance(v, str) else v.name)
def test_correct_policies_on_seeded_random_workloads(variant: str | Variant) -> None:
    decodes = 0
    for seed in range(40):
        config, actions = generate_case(seed)
        r = run_actions(config, variant, actions)
        assert r.ok, f"seed {seed}: {r.first.describe()}"  # type: ignore[union-attr]
        decodes += r.stats["decode"]
    assert decodes > 1000  # the workloads really decoded


def test_the_naive_patch_crashes_exactly_when_it_falls_back() -> None:
    crashed = 0
    for seed in range(20):
        config, actions = generate_case(seed)
        r = run_actions(config, "naive-threshold", actions)
        fell_back = r.stats["fallback_decode"] > 0
        assert r.ok != fell_back, f"seed {seed}: ok={r.ok}, fallback decodes {r.stats['fallback_decode']}"
        if not r.ok:
            assert r.first is not None and r.first.invariant == "worker-crash"
            crashed += 1
    assert crashed >= 5
