"""Hypothesis strategies for configs and workloads that push a decode batch across the
speculation threshold.

House style (Hypothesis ``guides/api-style.rst``): plural names, keyword-only options,
``min_size`` / ``max_size``, and every strategy shrinks towards the simplest case: one draft
step, ``topk`` 1, a roomy KV pool, fewer requests, short prompts, accept length 1 (no draft
accepted), no EOS.

Configs are always ones ``SpecConfig`` accepts: ``topk == 1`` forces
``num_draft_tokens == steps + 1``; otherwise ``num_draft_tokens <= topk + (steps - 1) *
topk**2 + 1``. A *tight* KV pool holds only a few requests' decode reserve, so decode runs
out of slots and ``retract_decode`` runs (the ``retract-during-spec`` witness).

Given a configuration (a user's launch flags, ``specstate.server_args``), ``configs_for(variant,
config=...)`` is ``fixed_configs(config)``: the same machine and workload strategies, with the
config draw replaced by that one config, so only workloads (arrivals, prompt and output lengths,
aborts, pool pressure) are drawn on it.

Workloads here are state-free action lists (``workloads``): aborts name a request that has
already arrived, accept tuples are sized for the largest possible decode batch. The state
machine (``machine.py``) draws the same pieces but sizes them from the live state.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

from hypothesis import strategies as st

from specstate.fuzz.static import is_static
from specstate.model import Abort, Action, Arrive, SpecConfig, Step, Variant

__all__ = ["configs", "adaptive_configs", "static_configs", "is_static", "configs_for", "fixed_configs", "prompt_lens", "max_new_tokens_values", "arrivals", "bursts", "accept_lengths",
           "eos_sets", "workloads", "ROOMY_KV"]

ROOMY_KV = 4096  #: a pool no small workload fills
CHUNK_SIZES = (64, 32, 16, 8, 3)  #: ``chunked_prefill_size`` choices, simplest (no chunking) first
#: explicit capture lists with gaps, so a graph replay pads (``padded-graph-batch``)
GRAPH_BS_GAPS = ((1, 2, 4), (1, 3), (2, 4, 8))


@st.composite
def _configs(draw: st.DrawFn, max_steps: int, max_topk: int, max_running: int, max_graph_bs: int,
             allow_tight_kv: bool) -> SpecConfig:
    steps = draw(st.integers(1, max_steps))
    topk = draw(st.integers(1, max_topk))
    if topk == 1:
        ndt = steps + 1
    else:
        ndt = draw(st.integers(2, min(topk + (steps - 1) * topk * topk + 1, 2 * (steps + 1) + 2)))
    running = draw(st.integers(2, max_running))
    # below the cap the batch can cross it; at the cap queued prefills wait beside a full
    # decode batch (what the switch-thrash bug needs)
    threshold = running if draw(st.booleans()) else draw(st.integers(1, running - 1))
    reserve = max(steps * topk, ndt)
    tight = allow_tight_kv and draw(st.booleans())
    pool = draw(st.integers(reserve * 2, reserve * 6 + 48)) if tight else ROOMY_KV
    return SpecConfig(
        speculative_num_steps=steps, speculative_eagle_topk=topk, speculative_num_draft_tokens=ndt,
        disable_batch_threshold=threshold, cuda_graph_max_bs=draw(st.integers(1, max_graph_bs)),
        max_running_requests=running, target_kv_pool_size=pool, draft_kv_pool_size=pool,
        chunked_prefill_size=draw(st.sampled_from(CHUNK_SIZES)),
        cuda_graph_bs_override=draw(st.sampled_from((None,) + GRAPH_BS_GAPS)))


def configs(*, max_steps: int = 3, max_topk: int = 3, max_running: int = 6, max_graph_bs: int = 8,
            allow_tight_kv: bool = True) -> st.SearchStrategy[SpecConfig]:
    """Valid ``SpecConfig``s with small sizes (shrinks to 1 step, topk 1, a roomy pool)."""
    return _configs(max_steps, max_topk, max_running, max_graph_bs, allow_tight_kv)


_FIRST_SLOTS = ((3,), (1,), (2,), (1, 3), (2, 3))
_LATER_SLOTS = ((0,), (0,), (0, 1), (0, 2), (1,), (0, 3))


@st.composite
def _adaptive_configs(draw: st.DrawFn, max_running: int, max_graph_bs: int, allow_tight_kv: bool) -> SpecConfig:
    """The v2 family's configs: ``--speculative-adaptive-config`` slots with candidate steps
    (0 included: drafting off), small EMA knobs so the acceptance EMA moves within a test case,
    an explicit capture list or none (routing pads only with one)."""
    import json

    steps = draw(st.integers(1, 3))
    running = draw(st.integers(2, max_running))
    keys = sorted({1, *draw(st.lists(st.integers(2, running), min_size=1, max_size=2, unique=True))})
    # the first slot drafts; later ones mostly turn drafting off (steps 0), at once or via the EMA
    slots = {str(k): {"candidate_steps": list(draw(st.sampled_from(_FIRST_SLOTS if i == 0 else _LATER_SLOTS)))}
             for i, k in enumerate(keys)}
    knobs = {"warmup_batches": draw(st.integers(0, 3)), "update_interval": draw(st.integers(1, 3)),
             "ema_alpha": draw(st.sampled_from((0.5, 0.2)))}
    reserve = 2 * max(steps, max(s for e in slots.values() for s in e["candidate_steps"]) + 1)
    pool = draw(st.integers(reserve * 3 + 8, reserve * 8 + 64)) if allow_tight_kv and draw(st.booleans()) else ROOMY_KV
    return SpecConfig(
        speculative_num_steps=steps, speculative_eagle_topk=1, speculative_num_draft_tokens=steps + 1,
        disable_batch_threshold=None, cuda_graph_max_bs=draw(st.integers(1, max_graph_bs)),
        max_running_requests=running, target_kv_pool_size=pool, draft_kv_pool_size=pool,
        chunked_prefill_size=draw(st.sampled_from(CHUNK_SIZES)),
        cuda_graph_bs_override=draw(st.sampled_from((None,) + GRAPH_BS_GAPS)), disable_overlap_schedule=False,
        speculative_adaptive_config=json.dumps({**knobs, **slots}, sort_keys=True))


def adaptive_configs(*, max_running: int = 6, max_graph_bs: int = 8,
                     allow_tight_kv: bool = True) -> st.SearchStrategy[SpecConfig]:
    """Valid configs of the v2 family (sglang 0.5.17, adaptive speculation, topk 1)."""
    return _adaptive_configs(max_running, max_graph_bs, allow_tight_kv)


@st.composite
def _static_configs(draw: st.DrawFn, max_running: int, max_graph_bs: int, allow_tight_kv: bool) -> SpecConfig:
    """The v2 family launched without ``--speculative-adaptive``: one step count, topk 1, no
    adaptive config; a threshold below or at the running cap (only a switch patch reads it)."""
    steps = draw(st.integers(1, 3))
    running = draw(st.integers(2, max_running))
    threshold = running if draw(st.booleans()) else draw(st.integers(1, running - 1))
    reserve = 2 * (steps + 1)
    pool = draw(st.integers(reserve * 3 + 8, reserve * 8 + 64)) if allow_tight_kv and draw(st.booleans()) else ROOMY_KV
    return SpecConfig(
        speculative_num_steps=steps, speculative_eagle_topk=1, speculative_num_draft_tokens=steps + 1,
        disable_batch_threshold=threshold, cuda_graph_max_bs=draw(st.integers(1, max_graph_bs)),
        max_running_requests=running, target_kv_pool_size=pool, draft_kv_pool_size=pool,
        chunked_prefill_size=draw(st.sampled_from(CHUNK_SIZES)),
        cuda_graph_bs_override=draw(st.sampled_from((None,) + GRAPH_BS_GAPS)), disable_overlap_schedule=False,
        speculative_adaptive=False)


def static_configs(*, max_running: int = 6, max_graph_bs: int = 8,
                   allow_tight_kv: bool = True) -> st.SearchStrategy[SpecConfig]:
    """Valid static configs of the v2 families (``SpecConfig.speculative_adaptive`` off)."""
    return _static_configs(max_running, max_graph_bs, allow_tight_kv)


def fixed_configs(config: SpecConfig) -> st.SearchStrategy[SpecConfig]:
    """Always ``config`` (a launch's): the fuzzer then draws only workloads on it."""
    return st.just(config)


def configs_for(variant: Variant | str, *, config: SpecConfig | None = None) -> st.SearchStrategy[SpecConfig]:
    """The config strategy of ``variant``'s engine family, or ``fixed_configs(config)`` when given."""
    from specstate.model import as_variant
    from specstate.model.families import get_family

    if config is not None:
        return fixed_configs(config)
    v = as_variant(variant)
    if is_static(v):
        return static_configs()
    if get_family(v.family_name).adaptive:  # only configs the variant's engine can start
        return adaptive_configs().filter(functools.partial(_starts, v))
    return configs()


def _starts(variant: Any, config: SpecConfig) -> bool:
    """Whether ``variant``'s engine starts on ``config`` (``Variant.configure`` runs its family's
    start): a refusal at start is the one error that names what ``upstream`` raises (the family's
    ``EngineStartRefused``, asked as ``integration/start_prediction.py`` asks it)."""
    from specstate.errors import InvalidConfig

    try:
        variant.configure(config)
    except InvalidConfig as e:
        if not hasattr(e, "upstream"):
            raise
        return False
    return True


def prompt_lens(*, max_short: int = 16, max_long: int = 96) -> st.SearchStrategy[int]:
    """Short prompts, or long ones that need several chunks of chunked prefill."""
    return st.one_of(st.integers(1, max_short), st.integers(max_short + 1, max_long))


def max_new_tokens_values(*, max_value: int = 24) -> st.SearchStrategy[int]:
    return st.integers(1, max_value)


def arrivals(*, max_long: int = 96, max_new: int = 24) -> st.SearchStrategy[Arrive]:
    return st.builds(Arrive, prompt_lens(max_long=max_long), max_new_tokens_values(max_value=max_new))


def bursts(*, min_size: int = 2, max_size: int = 8, max_new: int = 24) -> st.SearchStrategy[list[Arrive]]:
    """Several arrivals at once (the seed's concurrency levels, in small)."""
    return st.lists(arrivals(max_new=max_new), min_size=min_size, max_size=max_size)


@functools.lru_cache(maxsize=1024)
def accept_lengths(*, max_accept: int, max_rows: int) -> st.SearchStrategy[tuple[int, ...]]:
    """Per decode row accept lengths ``1 .. max_accept``; rows past the tuple accept 1.
    (Cached: the machine draws one per step; the same arguments give the same strategy, so
    the example stream is the one an uncached strategy gives.)"""
    return st.lists(st.integers(1, max_accept), max_size=max_rows).map(tuple)


def eos_sets(rids: Sequence[int]) -> st.SearchStrategy[tuple[int, ...]]:
    """A subset of ``rids`` whose next token is EOS (shrinks to none)."""
    return _eos_sets(tuple(sorted(rids)))


def _sorted_tuple(xs: list[int]) -> tuple[int, ...]:
    return tuple(sorted(xs))


@functools.lru_cache(maxsize=4096)
def _eos_sets(rids: tuple[int, ...]) -> st.SearchStrategy[tuple[int, ...]]:
    if not rids:
        return st.just(())
    return st.lists(st.sampled_from(rids), unique=True, max_size=len(rids)).map(_sorted_tuple)


@st.composite
def _workloads(draw: st.DrawFn, config: SpecConfig, min_size: int, max_size: int) -> list[Action]:
    n = draw(st.integers(min_size, max_size))
    out: list[Action] = []
    arrived = 0
    for _ in range(n):
        kind = draw(st.sampled_from(("step", "arrive", "burst", "abort")))
        if kind == "arrive" or arrived == 0:
            out.append(draw(arrivals()))
            arrived += 1
        elif kind == "burst":
            burst = draw(bursts(max_size=config.max_running_requests + 2))
            out.extend(burst)
            arrived += len(burst)
        elif kind == "abort":
            out.append(Abort(draw(st.integers(0, arrived - 1))))
        else:
            out.append(Step(accept=draw(accept_lengths(max_accept=config.max_accept_len,
                                                       max_rows=config.max_running_requests)),
                            eos=draw(eos_sets(range(arrived)))))
    return out


def workloads(config: SpecConfig, *, min_size: int = 1, max_size: int = 40) -> st.SearchStrategy[list[Action]]:
    """State-free action lists valid for any state reached from ``initial_state(config)``."""
    return _workloads(config, min_size, max_size)
