"""Correct variants: no invariant violation within the profile's budget, and every wanted
witness reached (a run that never crossed the threshold proves nothing)."""

from __future__ import annotations

import pytest
from hypothesis import settings

from specstate.fuzz.runner import fuzz_variant, record_failure, wanted_witnesses

pytestmark = pytest.mark.fuzz

CORRECT = (
    "always-spec",  # upstream v1: never switches (switch witnesses not wanted)
    "fixed-threshold",  # the corrected fallback
    "steps0-verify",  # upstream 0.5.14+: trivial 1-node verify
    "upstream-adaptive",  # the v2 family: sglang 0.5.17 as shipped (overlap scheduler, adaptive speculation)
    "upstream-static",  # the same launched without --speculative-adaptive (switch witnesses not wanted)
    "v2-static-switch",  # the seed's switch on EAGLEWorkerV2, corrected (static launches with a threshold)
)


@pytest.mark.parametrize("variant", CORRECT)
def test_correct_variant_holds_every_invariant(variant: str, specstate_settings: settings) -> None:
    report = fuzz_variant(variant, specstate_settings)
    if report.result is not None:
        path = record_failure(report)
        first = report.result.first
        pytest.fail(f"{variant} is a correct variant but {first.describe() if first else '?'}\n"
                    f"  minimised: {report.minimality}\n  reproduce with: specstate reproduce {path}")
    missing = report.missing(wanted_witnesses(variant))
    assert not missing, (f"{variant}: the fuzzer never reached the witnesses {sorted(missing)} "
                         f"(reached {sorted(report.witnesses)}); it did not explore the switch")


def test_user_subclass_of_the_draft_input_holds_every_invariant(specstate_settings: settings) -> None:
    """A user's variant with its own ``EagleDraftInput`` subclass (a patch-added per-row
    field) under the fuzzer: the field is filtered and merged through retractions and
    chunked prefills, the kind checks accept the subclass (a quarter of the budget)."""
    variant = "tests.user_variants.mine:SubclassedDraftInput"
    report = fuzz_variant(variant, settings(specstate_settings, max_examples=max(specstate_settings.max_examples // 4, 1)))
    assert report.result is None, report.result.first.describe() if report.result.first else "?"
    assert {"retract-during-spec", "padded-after-larger"} <= report.witnesses
