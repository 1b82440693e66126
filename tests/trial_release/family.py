"""The trial release: the 0.5.17 family (its base) with one operation replaced.

``verify_v2`` is replaced by a wrapper that counts its calls and runs 0.5.17's own, so the
family behaves as 0.5.17 does (a saved 0.5.17 recording conforms) and a test can see that the
override, not the base's operation, is what ran. Everything else is the base's: its config
preparation, switch threshold, start, explore and graph configs, release range.

Importing this module registers the family (``sglang-trial``) and its default variant
(``trial-release``); ``TRIAL`` is also loadable as ``tests.trial_release.family:TRIAL``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from specstate.variant import FAMILY_0_5_17, OVERRIDES_0_5_17, DEFAULT_OPS, Variant, register, register_family

NAME = "sglang-trial"

#: calls of the override in this process (the test reads it)
CALLS = [0]

_BASE_VERIFY = OVERRIDES_0_5_17.get("verify_v2", DEFAULT_OPS.verify_v2)


def verify_v2_trial(ops: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
    """0.5.17's ``verify_v2``, counted."""
    CALLS[0] += 1
    return _BASE_VERIFY(ops, *args, **kwargs)


FAMILY = register_family(replace(
    FAMILY_0_5_17, name=NAME, summary="trial release: sglang 0.5.17 with verify_v2 counted (test only)",
    default_variant="trial-release", base=FAMILY_0_5_17.name, release_range=FAMILY_0_5_17.releases))

TRIAL = register(Variant("trial-release", "the trial release as shipped: 0.5.17 with verify_v2 counted",
                         overrides={**OVERRIDES_0_5_17, "verify_v2": verify_v2_trial}, correct=True, family=NAME))
