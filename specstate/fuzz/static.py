"""Variants that run a v2 family's worker without its adaptive controller (a launch without
``--speculative-adaptive``): which they are, and the family's built-in configs made static for them.

A variant is static when its ``config_changes`` turn ``SpecConfig.speculative_adaptive`` off
(``upstream-static`` and the switch patches on ``EAGLEWorkerV2``, docs/model-v2.md "Static
speculation"). Those changes apply after the family's ``prepare``, which turns a built-in config's
threshold into an adaptive config; so the fuzzer, ``explore`` and ``graph`` hand such a variant the
same launch made static first, its threshold where the family's own switch first turns drafting off
(``Family.switch_threshold``), which only a switch patch reads. No hypothesis, no release named here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specstate.model import SpecConfig, Variant

__all__ = ["is_static", "static_config"]


def is_static(variant: "Variant | str") -> bool:
    """``variant``'s ``config_changes`` turn ``speculative_adaptive`` off."""
    from specstate.model import as_variant

    return as_variant(variant).all_config_changes().get("speculative_adaptive") is False


def static_config(config: "SpecConfig", variant: "Variant | str") -> "SpecConfig":
    """``config`` for a static ``variant`` (else as it is): no adaptive config, ``speculative_adaptive``
    off, the threshold at the family's switch of the prepared config (kept if it has none)."""
    from specstate.model import as_variant

    if not is_static(variant) or not config.speculative_adaptive:
        return config
    family = as_variant(variant).engine_family
    threshold = family.switch_threshold(family.prepare(config))
    return config.with_(speculative_adaptive=False, speculative_adaptive_config=None,
                        disable_batch_threshold=threshold if threshold is not None else config.disable_batch_threshold)
