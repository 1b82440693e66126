"""The sglang 0.5.23 family: its base, its overrides, its release range, its variants.

Derived from the 0.5.17 family (``specstate.model.sglang_0_5_17``, ``Family.base``): the 0.5.17 operations
(``V2_OVERRIDES``) with these replaced, each cited to 0.5.23's source in its module:

| operation | first release | module |
| --- | --- | --- |
| ``update_finish_state`` (EOS before length, capped) | 0.5.18 | ``finish`` |
| ``release_kv_cache`` (``owned_kv_len``: the tree gets at most the tokens through the stop) | 0.5.21 | ``finish`` |
| ``release_kv_cache``, ``cache_unfinished_req`` (the tree insert splits at the prompt boundary) | 0.5.20 / 0.5.22 | ``tree`` |
| ``get_next_batch_to_run`` (``enable_skip_finishing_decode``) | 0.5.22 | ``scheduler`` |
| ``get_next_batch_to_run`` (finished rows filtered at the start of every step) | 0.5.23 | ``scheduler`` |
| ``schedule_prefill`` (``calc_priority`` refreshes the waiting requests' tree paths every 32nd call) | 0.5.22 | ``admission`` |
| ``schedule_prefill`` (a continuing chunk's row counted back into the admission bound) | 0.5.23 | ``admission`` |
| ``schedule_prefill`` (``NO_TOKEN`` with no request to serve leaves ``batch_is_full`` clear) | 0.5.22 | ``admission`` |
| ``runtime_states`` (draft extend captured at each state's own width; read, not run) | 0.5.18 | ``runtime`` |
| ``Family.prepare`` (no adaptive config: upstream's default, slot 1 ``[1, 3, 5, 7]``) | 0.5.20 | here |
| ``graph_shared_output`` (the shared logits buffer sized for every candidate) | 0.5.19 | ``start`` |
| ``capture_runner`` (draft extend takes ``max_bs`` logits rows) | 0.5.20 | ``start`` |
| ``build_adaptive_runtime_state``, ``engine_start`` (the family's runtime states captured and pooled) | 0.5.18 | ``start`` |
| ``Family.start`` (the engine start runs first; a refusal names 0.5.23) | | ``start`` |

The default config: ``speculative/adaptive_spec_params.py::DEFAULT_ADAPTIVE_CONFIG``; with no
``--speculative-adaptive-config`` ``speculative/adaptive_spec_params.py::AdaptiveSpeculativeParams``
loads it. ``prepare_v23`` writes it into the config, so every 0.5.17 function that reads the
config's adaptive JSON (routing, candidate steps, ``max_speculative_num_draft_tokens``) sees it.

Release range: the releases in which every citation of this family names an unchanged symbol
(``specstate/citations.py``; ``tests/test_release_ranges.py``). 0.5.23 only: its own changes
(finished rows filtered every step) first ship in 0.5.23.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from specstate.model.config import SpecConfig
from specstate.model.family_registry import Family, ReleaseChange, register_family
from specstate.model.sglang_0_5_23.admission import schedule_prefill_v23
from specstate.model.sglang_0_5_23.finish import release_kv_cache_v23, update_finish_state_v23
from specstate.model.sglang_0_5_23.scheduler import get_next_batch_to_run_v23
from specstate.model.sglang_0_5_23.tree import cache_unfinished_req_v23
from specstate.model.sglang_0_5_23.ledger import GONE, UNREVIEWED
from specstate.model.sglang_0_5_23.runtime import runtime_states_own_width, runtime_states_startup_width
from specstate.model.sglang_0_5_23.start import START_OVERRIDES, start_engine_v23
from specstate.model.sglang_0_5_17.variants import (EXPLORE_CONFIG, H200_CONFIG, V2_OVERRIDES, batch_decision,
                                                     prepare_v2, switch_threshold)
from specstate.model.variant_registry import Variant, register

__all__ = ["DEFAULT_ADAPTIVE_CONFIG_0_5_23", "prepare_v23", "CHANGES", "FAMILY", "OVERRIDES", "UPSTREAM", "STARTUP_WIDTH"]

#: ``DEFAULT_ADAPTIVE_CONFIG`` of 0.5.20+ (0.5.17: slot 1 ``[1, 3, 7]``)
DEFAULT_ADAPTIVE_CONFIG_0_5_23: dict[str, dict[str, Any]] = {
    "1": {"candidate_steps": [1, 3, 5, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
}


def prepare_v23(config: SpecConfig) -> SpecConfig:
    """0.5.17's ``prepare_v2``; a config without an adaptive config (and without the v1 seed's
    threshold) gets 0.5.20's default written in; a static one (no ``--speculative-adaptive``) reads
    no adaptive config and gets none."""
    config = prepare_v2(config)
    if config.speculative_adaptive and config.speculative_adaptive_config is None:
        config = config.with_(speculative_adaptive_config=json.dumps(DEFAULT_ADAPTIVE_CONFIG_0_5_23))
    return config


#: the table above as data, each change with the first release that ships it (``--engine`` tells a user
#: of a release between 0.5.17 and 0.5.23 which of them their release has: ``model/release_gap.py``)
CHANGES: tuple[ReleaseChange, ...] = (
    ReleaseChange("0.5.18", "update_finish_state", "a stop token or EOS is checked before the length, and a stop "
                  "found past max_new_tokens is capped there"),
    ReleaseChange("0.5.18", "runtime_states", "each runtime state captures its draft extend at its own width "
                  "(read from code, not run)"),
    ReleaseChange("0.5.18", "build_adaptive_runtime_state", "the family's runtime states captured and pooled at start"),
    ReleaseChange("0.5.19", "graph_shared_output", "the shared logits buffer sized for every candidate step count"),
    ReleaseChange("0.5.20", "capture_runner", "the draft-extend graph takes max_bs logits rows"),
    ReleaseChange("0.5.20", "Family.prepare", "upstream's default adaptive candidates at slot 1 become [1, 3, 5, 7]"),
    ReleaseChange("0.5.20", "release_kv_cache", "a finished request's tree insert splits at the prompt boundary"),
    ReleaseChange("0.5.21", "release_kv_cache", "owned_kv_len: the tree gets at most the tokens through the stop"),
    ReleaseChange("0.5.22", "cache_unfinished_req", "every tree insert splits at the prompt boundary"),
    ReleaseChange("0.5.22", "get_next_batch_to_run", "under overlap a request its queued result finishes by length "
                  "is left out, and the decode skipped instead of retracting"),
    ReleaseChange("0.5.22", "schedule_prefill", "every 32nd prefill schedule with waiting requests walks their keys "
                  "through the tree (stamped most recent, split where a key ends inside a node) before admitting"),
    ReleaseChange("0.5.22", "schedule_prefill", "a prefill that fits no request beside an empty running batch "
                  "leaves batch_is_full clear (NO_TOKEN sets it only when a request can be served)"),
    ReleaseChange("0.5.23", "get_next_batch_to_run", "finished rows filtered at the start of every scheduling step"),
    ReleaseChange("0.5.23", "schedule_prefill", "a continuing chunk's row counted back into the admission bound"),
)

FAMILY = register_family(Family(
    "sglang-0.5.23", "sglang 0.5.23: the 0.5.17 family with 0.5.18-0.5.23's changes (finish order, owned KV, "
    "skip finishing decode, finished rows filtered every step, draft extend at its own width, the start's logits "
    "buffer sized for every candidate)",
    "upstream-v23", prepare_v23, switch_threshold, explore_config=EXPLORE_CONFIG, graph_config=H200_CONFIG,
    start=start_engine_v23, release_range=("0.5.23",), base="sglang-0.5.17", overridden_citations=GONE,
    unreviewed_citations=UNREVIEWED, changes=CHANGES, batch_decision=batch_decision))

#: the 0.5.17 family's operations with 0.5.23's replacements
OVERRIDES: dict[str, Callable[..., Any]] = {
    **V2_OVERRIDES,
    "update_finish_state": update_finish_state_v23,
    "release_kv_cache": release_kv_cache_v23,
    "cache_unfinished_req": cache_unfinished_req_v23,
    "get_next_batch_to_run": get_next_batch_to_run_v23,
    "schedule_prefill": schedule_prefill_v23,
    "runtime_states": runtime_states_own_width,
    **START_OVERRIDES,
}

UPSTREAM = register(Variant(
    "upstream-v23", "sglang 0.5.23 as shipped: EAGLEWorkerV2, overlap scheduler, adaptive speculation, "
    "0.5.18-0.5.23's scheduler and finish changes", overrides=OVERRIDES, correct=True, family="sglang-0.5.23"))

STARTUP_WIDTH = register(Variant(
    "upstream-v23-startup-width", "sglang 0.5.23 read the 0.5.17 way: every draft-extend graph at the startup "
    "width (steps 0 draft-extends eager); flip to this if the GPU shows the draft extend not replaying at steps 0",
    overrides={"runtime_states": runtime_states_startup_width}, base="upstream-v23", correct=True))


from specstate.model.sglang_0_5_23.static import SWITCH_V23 as _static  # noqa: F401,E402  (registers the static launch and switch patches)
