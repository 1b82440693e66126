"""Scenarios of the v2 family (sglang 0.5.17, ``specstate.model.sglang_0_5_17``), merged into
``specstate.scenarios.SCENARIOS``.

- ``adaptive-sweep``: the seed's concurrency sweep C = 1..250 under the adaptive config replayed
  on the H200 (``H200_ADAPTIVE_CONFIG``: 3 steps up to batch size 5, steps 0 from 6), topk 1,
  4 draft tokens, ``cuda_graph_max_bs`` 16, ``max_running_requests`` 48; each level's requests
  finish at different steps, so the batch crosses batch size 5 both ways within a level.
- ``static-sweep``: the same sweep on a static launch (no ``--speculative-adaptive``: the H200's
  3 steps on every decode), with the seed's threshold 5 for a switch patch to read
  (``sglang_0_5_17/static.py``; upstream reads no threshold).
- ``paged-adaptive``: the adaptive switch at ``--page-size 16``: the decode over-allocation in
  whole pages (``eagle_prepare_for_decode``), verifies crossing page boundaries, a shared prefix
  matched in whole pages and finished requests inserted into the page-aligned tree;
  ``paged-context``: one request at ``--page-size 16`` decoding to a context length of 128, where
  the page-aligned over-allocation nears the end of its ``req_to_token`` row (the row's paged
  headroom, ``SpecConfig.req_to_token_row_width``).
- one scripted story per v2 known bug (``bug:<variant>``), the shortest that shows it.
"""

from __future__ import annotations

import random

from typing import Callable

from specstate.check import Run
from specstate.model import Abort, Arrive, SpecConfig, Step
from specstate.errors import InternalError
from specstate.model.families import get_family
from specstate.model.variants import get_variant
from specstate.sweep import seed_sweep

__all__ = ["V2_SCENARIOS", "ADAPTIVE_CONFIG", "SMALL_V2", "STATIC_CONFIG"]

#: the graph config of the family of ``upstream-adaptive`` (its ``Family.graph_config``: an H200's
#: adaptive launch), asked of the family, not imported from its release folder
_GRAPH_CONFIG = get_family(get_variant("upstream-adaptive").family_name).graph_config
if _GRAPH_CONFIG is None:
    raise InternalError("Expected the family of upstream-adaptive to give a graph config (Family.graph_config)")
ADAPTIVE_CONFIG: SpecConfig = _GRAPH_CONFIG
#: 3 steps up to batch size 2, steps 0 from 3; graphs up to 4; a roomy pool
SMALL_V2 = ADAPTIVE_CONFIG.with_(cuda_graph_max_bs=4, max_running_requests=8, target_kv_pool_size=512,
                                 draft_kv_pool_size=512, chunked_prefill_size=64,
                                 speculative_adaptive_config='{"1": {"candidate_steps": [3]}, "3": {"candidate_steps": [0]}}')
#: the H200's launch without ``--speculative-adaptive`` (3 steps, topk 1, graphs to 16), threshold 5
STATIC_CONFIG = ADAPTIVE_CONFIG.with_(speculative_adaptive=False, speculative_adaptive_config=None,
                                      disable_batch_threshold=5)
#: one slot whose only candidate (7) is not the startup step count (3)
SEVEN = SMALL_V2.with_(speculative_adaptive_config='{"1": {"candidate_steps": [7]}}')


def _adaptive_sweep(run: Run, rng: random.Random) -> None:
    """The seed's sweep (``specstate.sweep.seed_sweep``), here under the adaptive config."""
    seed_sweep(run, rng)


def _static_sweep(run: Run, rng: random.Random) -> None:
    """The seed's sweep on a static launch."""
    seed_sweep(run, rng)


def _past_threshold(run: Run, rng: random.Random) -> None:
    """Six requests (one above the threshold 5) decode: the patch's steps 0."""
    _play(run, [Arrive(8, 40) for _ in range(6)] + [Step(accept=(2,) * 6)] * 3)


def _play(run: Run, actions: list) -> None:
    for a in actions:
        run.apply(a)


def _down_then_up(run: Run, rng: random.Random) -> None:
    """Three requests (steps 0), one finishes early: two left (steps 3 again)."""
    _play(run, [Arrive(8, 12), Arrive(8, 40), Arrive(8, 40)] + [Step(accept=(2, 2, 2))] * 16)


def _up_then_down(run: Run, rng: random.Random) -> None:
    """Two requests decode with 3 steps, a third joins: steps 0."""
    _play(run, [Arrive(8, 40), Arrive(8, 40), Step(), Step(accept=(4, 4)), Step(accept=(4, 4)), Arrive(8, 40)]
          + [Step(accept=(4, 4, 4))] * 4)


def _two_decodes(run: Run, rng: random.Random) -> None:
    """One request, two decodes with 3 steps."""
    _play(run, [Arrive(8, 40), Step(), Step(accept=(2,)), Step(accept=(2,)), Step(accept=(2,))])


def _finish_in_flight(run: Run, rng: random.Random) -> None:
    """A request finishes in a decode while the next decode with it is already in flight."""
    _play(run, [Arrive(8, 3), Arrive(8, 30), Step(), Step(accept=(4, 1)), Step(accept=(4, 1)), Step(), Step()])


def _paged_adaptive(run: Run, rng: random.Random) -> None:
    """Two requests decode with 3 steps across page boundaries, a third shares the first's prompt
    (two whole pages of it matched) and pushes the batch to steps 0; one is aborted, the rest finish."""
    _play(run, [Arrive(40, 30), Arrive(21, 14), Step(), Step(accept=(4, 4)), Step(accept=(3, 2)),
                Arrive(40, 20, 0, 36)] + [Step(accept=(4, 3, 2))] * 6 + [Abort(1)] + [Step(accept=(4, 4))] * 14)


def _paged_context(run: Run, rng: random.Random) -> None:
    """One request of 100 prompt tokens decodes 4 tokens a step to the context length (128)."""
    _play(run, [Arrive(100, 60)] + [Step(accept=(4,))] * 10)


def _seven_steps(run: Run, rng: random.Random) -> None:
    """Three requests decode with 7 steps (8 draft tokens) under graphs captured up to 4."""
    _play(run, [Arrive(8, 40), Arrive(8, 40), Arrive(8, 40), Step(), Step(), Step()])


#: (name, summary, config, play), made ``Scenario``s by ``specstate.scenarios``
V2_SCENARIOS: tuple[tuple[str, str, SpecConfig, Callable[[Run, random.Random], None]], ...] = (
    ("adaptive-sweep", "the seed's sweep C = 1..250 under the H200 adaptive config (3 steps to bs 5, 0 from 6)",
             ADAPTIVE_CONFIG, _adaptive_sweep),
    ("static-sweep", "the seed's sweep C = 1..250 on a static launch (3 steps on every decode; threshold 5 for a "
             "switch patch)", STATIC_CONFIG, _static_sweep),
    ("static-past-threshold", "six requests decode past the threshold 5 (a switch patch's steps 0)", STATIC_CONFIG,
             _past_threshold),
    ("paged-adaptive", "the adaptive switch at --page-size 16: whole-page decode over-allocation, a prefix "
             "shared in pages, requests finished into the page-aligned tree", SMALL_V2.with_(page_size=16),
             _paged_adaptive),
    ("paged-context", "one request decoding to the context length 128 at --page-size 16 (the paged row "
             "headroom)", SMALL_V2.with_(page_size=16, context_len=128), _paged_context),
    ("bug:v2-alloc-follows-active-steps", "steps 0 for a while, then back to 3 steps", SMALL_V2, _down_then_up),
    ("bug:v2-downswitch-unclamped", "3 steps, then a third request: steps 0", SMALL_V2, _up_then_down),
    ("bug:v2-single-reserve", "one request, two decodes", SMALL_V2, _two_decodes),
    ("bug:v2-skip-zero-step-draft-extend", "steps 0 for a while, then back to 3 steps", SMALL_V2, _down_then_up),
    ("bug:v2-commit-after-finish", "a request finishes while its next decode is in flight", SMALL_V2,
             _finish_in_flight),
    ("bug:v2-chain-buffers-not-rebuilt", "7 steps with chain buffers built for the startup 3 steps", SEVEN,
             _seven_steps),
)
