"""The v2 family (sglang 0.5.17) and its variants: upstream as shipped, and known bugs from
the upstream history of adaptive speculation, each replacing one operation.

| variant                          | report                          | operation replaced              | caught by        |
|----------------------------------|---------------------------------|---------------------------------|------------------|
| upstream-adaptive                | (sglang 0.5.17 as shipped)      |                                 | (correct)        |
| v2-alloc-follows-active-steps    | sglang#24055 (fix), #23336      | alloc_reserve_per_decode        | kv-accounting    |
| v2-downswitch-unclamped          | sglang#23336                    | + eagle_prepare_for_decode      | kv-accounting    |
| v2-single-reserve                | sglang#13478                    | alloc_reserve_per_decode        | kv-accounting    |
| v2-skip-zero-step-draft-extend   | sglang#23994; vllm#53420        | draft_extend_for_decode         | draft-kv-in-step |
| v2-commit-after-finish           | sglang#23456                    | resolve_spec_v2_tokens          | kv-accounting    |
| v2-chain-buffers-not-rebuilt     | sglang#26424                    | apply_runtime_state             | worker-crash     |

- *alloc follows the active steps*: ``get_alloc_len_per_decode`` read the server arguments that
  ``apply_runtime_state`` overrides, so the per-decode reservation followed the active runtime
  state; after an upswitch the first decode under the larger state had reserved the smaller
  state's slots and verify wrote KV past the request's allocation (0.5.17:
  ``max_speculative_num_draft_tokens`` of the startup arguments, constant across states).
- *downswitch unclamped*: the same, without the ``max(cur, ...)`` clamp of
  ``eagle_prepare_for_decode``: after a downswitch ``committed + 2 * alloc - allocated`` is
  negative and "allocating" it corrupts the allocator's count.
- *single reserve*: one ``alloc_len_per_decode`` instead of two: the double buffer absorbs the
  ``kv_committed_len`` lag of the overlap scheduler (``get_alloc_reserve_per_decode``).
- *skip zero-step draft extend*: ``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1``: at steps 0 the
  draft extend is skipped (``_stub_skipped_draft_extend``); an upswitch drafts over a stale draft KV.
- *commit after finish*: ``_resolve_spec_v2_tokens`` without the ``req.finished() or
  req.is_retracted`` guard: a request that finished while its next batch was in flight commits
  that batch's tokens after its KV was released.
- *chain buffers not rebuilt* (buffers sized per active candidate): the topk-1 fast path of
  ``draft_forward`` slices ``parent_list`` / ``top_scores_index`` from buffers preallocated at
  ``__init__`` for one step count (sglang#26424); 0.5.17's ``apply_runtime_state`` rebuilds them
  (``_rebuild_topk1_chain_buffers``); without it a switch to more steps builds the tree from
  too few picks. 0.5.17 itself cannot show it: a candidate above the startup step count is refused
  at engine start (``start.py``), so this variant also starts without those refusals.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any, Callable

from specstate.model.config import SpecConfig
from specstate.model.family_registry import Family, register_family
from specstate.model.kv import ceil_align
from specstate.model.tx import Tx
from specstate.model.sglang_0_5_17 import aborts as v2a
from specstate.model.sglang_0_5_17 import scheduler as v2s
from specstate.model.sglang_0_5_17 import worker as v2w
from specstate.model.sglang_0_5_17.adaptive import H200_ADAPTIVE_CONFIG, candidate_steps, initial_params
from specstate.model.sglang_0_5_17.runtime import RuntimeState
from specstate.model.sglang_0_5_17.start import start_engine
from specstate.model.sglang_0_5_17.state import PendingResult, routing_capture_list
from specstate.model.variant_registry import Variant, register

if TYPE_CHECKING:
    from specstate.model.batch import ScheduleBatch
    from specstate.model.ops_table import Ops
    from specstate.model.state import ModelState

__all__ = ["V2_FAMILY", "H200_CONFIG", "EXPLORE_CONFIG", "V2_OVERRIDES", "UPSTREAM_ADAPTIVE", "V2_KNOWN_BUGS", "prepare_v2", "switch_threshold", "batch_decision"]


def prepare_v2(config: SpecConfig) -> SpecConfig:
    """``adaptive_unsupported_reason``: EAGLE topk 1 (so ``steps + 1`` draft tokens); the overlap
    scheduler on; the v1 seed's threshold off: upstream's own switch decides. A v1 config (the
    seed's threshold T, no adaptive config: the built-in scenarios) gets the same switch as
    upstream's config: the server's step count up to batch size T, steps 0 from T + 1 (for the
    seed's T = 5 that is ``H200_ADAPTIVE_CONFIG``). A static config (``speculative_adaptive`` off:
    a launch without ``--speculative-adaptive``) keeps its threshold as it is: no upstream
    operation reads it, a user's switch patch on ``EAGLEWorkerV2`` does (``static.py``)."""
    adaptive, thr = config.speculative_adaptive_config, config.disable_batch_threshold
    if not config.speculative_adaptive:
        return config.with_(speculative_eagle_topk=1, speculative_num_draft_tokens=config.speculative_num_steps + 1,
                            disable_overlap_schedule=False)
    if adaptive is None and thr is not None:
        slots = {"1": {"candidate_steps": [0]}} if thr < 1 else \
            {"1": {"candidate_steps": [config.speculative_num_steps]}, str(thr + 1): {"candidate_steps": [0]}}
        adaptive = json.dumps(slots)
    return config.with_(speculative_eagle_topk=1, speculative_num_draft_tokens=config.speculative_num_steps + 1,
                        disable_batch_threshold=None, disable_overlap_schedule=False,
                        speculative_adaptive_config=adaptive)


def switch_threshold(config: SpecConfig) -> int | None:
    """The largest batch size routed to a drafting step count below the first one routed to
    steps 0 (as the slots start), or ``None`` when no batch size is (fuzz steering); a static
    config's own threshold (a user's switch patch reads it; upstream has no switch: ``None``)."""
    if not config.speculative_adaptive:
        return config.disable_batch_threshold
    params = initial_params(config.speculative_adaptive_config, config.speculative_num_steps,
                            routing_capture_list(config))
    for bs in range(1, config.max_running_requests + 1):
        if params.steps_for_batch(bs) == 0:
            return bs - 1 if bs > 1 else None
    return None


#: the server arguments replayed on the H200 (``../shared/gpu/sglang-0.5.17/README.md``): EAGLE-3, 3 steps,
#: topk 1, 4 draft tokens, ``cuda_graph_max_bs_decode=16``, the adaptive config of ``H200_ADAPTIVE_CONFIG``
H200_CONFIG = SpecConfig(speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4,
                         disable_batch_threshold=None, cuda_graph_max_bs=16, max_running_requests=48,
                         disable_overlap_schedule=False, speculative_adaptive_config=H200_ADAPTIVE_CONFIG)
#: ``specstate explore``: 2 steps up to 2 requests, steps 0 from 3; graphs at (1, 4) only (2 and 3
#: requests replay padded); a 32-slot pool (reservations of 2 x 3 slots per decoding request: retraction
#: while drafting is off within depth 7)
EXPLORE_CONFIG = SpecConfig(speculative_num_steps=2, speculative_eagle_topk=1, speculative_num_draft_tokens=3,
                            disable_batch_threshold=None, cuda_graph_max_bs=4, max_running_requests=8,
                            target_kv_pool_size=32, draft_kv_pool_size=32, chunked_prefill_size=64,
                            cuda_graph_bs_override=(1, 4), disable_overlap_schedule=False,
                            speculative_adaptive_config='{"1": {"candidate_steps": [2]}, "3": {"candidate_steps": [0]}}')

def batch_decision(config: SpecConfig) -> "functools.partial[Any]":
    """The switch rule as a function of the batch size (``Family.batch_decision``, read by
    ``prove``'s abstraction): the step count the routed slot of the initial adaptive params starts
    with (``AdaptiveParams.steps_for_batch``; ``adaptive.py``). A static config: the launch's step
    count and which side of its threshold ``bs`` is (a finer split than upstream needs, the one a
    user's switch patch needs: ``static.py``)."""
    if not config.speculative_adaptive:
        return functools.partial(_static_decision, config)
    params = initial_params(config.speculative_adaptive_config, config.speculative_num_steps,
                            routing_capture_list(config))
    return functools.partial(_steps_for_batch, params)


def _static_decision(config: SpecConfig, bs: int) -> tuple[int, bool]:
    return config.speculative_num_steps, config.speculation_allowed(bs)


def _steps_for_batch(params: "object", bs: int) -> int:
    return params.steps_for_batch(bs)  # type: ignore[attr-defined]


V2_FAMILY = register_family(Family(
    "sglang-0.5.17", "sglang 0.5.17: EAGLEWorkerV2 under the overlap scheduler, batch-size-aware adaptive speculation",
    "upstream-adaptive", prepare_v2, switch_threshold, explore_config=EXPLORE_CONFIG, graph_config=H200_CONFIG,
    start=start_engine, batch_decision=batch_decision))

#: the shared operations the v2 family replaces (its own ones are defaults in ``Ops``)
V2_OVERRIDES: dict[str, Callable[..., Any]] = {
    "iteration": v2s.event_loop_overlap, "forward_batch_generation": v2w.forward_batch_generation_v2,
    "abort": v2a.abort_v2, "get_next_batch_to_run": v2a.get_next_batch_to_run_v2,
    "update_running_batch": v2s.update_running_batch_v2, "check_decode_mem": v2s.check_decode_mem_v2,
    "retract_decode": v2s.retract_decode_v2, "add_one_req": v2s.add_one_req_v2,
    "filter_spec_info": v2s.filter_spec_info_v2, "merge_spec_info": v2s.merge_spec_info_v2,
    "process_batch_result_prefill": v2s.process_batch_result_prefill_v2,
    "process_batch_result_decode": v2s.process_batch_result_decode_v2, "release_kv_cache": v2s.release_kv_cache_v2,
    "evict_from_tree_cache": v2s.evict_from_tree_cache_v2,
}

UPSTREAM_ADAPTIVE = register(Variant(
    "upstream-adaptive",
    "sglang 0.5.17 as shipped: EAGLEWorkerV2, overlap scheduler, --speculative-adaptive (steps 0: trivial verify)",
    overrides=V2_OVERRIDES, correct=True, family="sglang-0.5.17"), "sglang-0.5.17")


# -- known bugs ------------------------------------------------------------------------------

def reserve_following_active_steps(ops: "Ops", s: "ModelState") -> int:
    """The reservation of the *active* runtime state (``server_args`` overridden by
    ``apply_runtime_state``: ``max(steps * topk, steps + 1)``, steps 0 counting as 1)."""
    steps = v2s.overlap(s).active_steps
    return 2 * max((steps or 1) * s.config.speculative_eagle_topk, steps + 1)


def prepare_for_decode_unclamped(ops: "Ops", tx: Tx) -> Tx:
    """``eagle_prepare_for_decode`` without ``max(cur, ...)``: ``kv_allocated_len`` may shrink;
    the slots past it are neither freed nor owned any more (``release_kv_cache`` frees only
    ``[committed, allocated)``): a leak."""
    s = tx.state
    reserve, page = ops.alloc_reserve_per_decode(ops, s), s.config.page_size
    grown = {r: ceil_align(s.req(r).kv_committed_len + reserve, page) for r in s.running.rids}
    return tx.with_state(v2s.grow_allocations(ops, s, grown))


def single_reserve(ops: "Ops", s: "ModelState") -> int:
    """One ``alloc_len_per_decode`` per decode, no double buffer for the overlap lag."""
    return v2s.alloc_reserve_per_decode(ops, s) // 2


def draft_extend_skipped_at_zero_steps(ops: "Ops", tx: Tx, batch: "ScheduleBatch", lens: tuple[int, ...],
                                       accept: tuple[int, ...], state: RuntimeState) -> Tx:
    """``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND``: no draft extend at steps 0."""
    if state.steps == 0:
        return tx
    return v2w.draft_extend_for_decode(ops, tx, batch, lens, accept, state)


def resolve_without_finished_guard(ops: "Ops", tx: Tx, pending: PendingResult) -> Tx:
    """``_resolve_spec_v2_tokens`` committing every row, finished or retracted ones too."""
    tx = ops.on_verify_complete(ops, tx, tuple(a - 1 for a in pending.accept), pending.batch.batch_size)
    s = tx.state
    return tx.with_reqs(*(s.req(r).evolve(kv_committed_len=s.req(r).kv_committed_len + a)
                          for r, a in zip(pending.batch.rids, pending.accept)))


def runtime_state_without_chain_rebuild(ops: "Ops", tx: Tx, steps: int) -> Tx:
    """``apply_runtime_state`` without ``_rebuild_topk1_chain_buffers``: the topk-1 chain buffers
    stay as built at ``__init__`` (for the startup step count)."""
    return tx.with_state(tx.state.evolve(v2=v2s.overlap(tx.state).evolve(active_steps=steps)))


def candidates_unchecked(ops: "Ops", config: SpecConfig) -> tuple[int, ...]:
    """A start that does not require ``--speculative-num-steps`` among the candidates."""
    return candidate_steps(config.speculative_adaptive_config)


def logits_for_every_candidate(ops: "Ops", config: SpecConfig) -> int:
    """A shared logits buffer sized for the largest candidate (no capture outgrows it)."""
    steps = max(set(candidate_steps(config.speculative_adaptive_config)) | {config.speculative_num_steps})
    return max(config.cuda_graph_bs) * (steps + 1)


#: the start the chain-buffer bug needs: 0.5.17 refuses every config that could show it (a
#: candidate above the startup step count fails ``GraphSharedOutput.get_logits_buffer``'s assert,
#: startup steps outside the candidates fail ``_init_adaptive_speculative_params``)
UNCHECKED_START = {"init_adaptive_speculative_params": candidates_unchecked,
                   "graph_shared_output": logits_for_every_candidate}


def _bug(name: str, summary: str, overrides: dict, invariant: str, reference: str) -> Variant:
    return register(Variant(name, summary, overrides=overrides, base="upstream-adaptive",
                            expected_invariant=invariant, reference=reference))


V2_KNOWN_BUGS: tuple[Variant, ...] = (
    _bug("v2-alloc-follows-active-steps", "the per-decode KV reservation follows the active runtime state; "
         "after an upswitch verify writes past the allocation",
         {"alloc_reserve_per_decode": reserve_following_active_steps}, "kv-accounting", "sglang#24055, #23336"),
    _bug("v2-downswitch-unclamped", "reservation follows the active state, no max(cur, ...): a downswitch "
         "\"allocates\" a negative count", {"alloc_reserve_per_decode": reserve_following_active_steps,
                                             "eagle_prepare_for_decode": prepare_for_decode_unclamped},
         "kv-accounting", "sglang#23336"),
    _bug("v2-single-reserve", "one alloc_len_per_decode per decode: the overlap lag of kv_committed_len "
         "is not absorbed", {"alloc_reserve_per_decode": single_reserve}, "kv-accounting", "sglang#13478"),
    _bug("v2-skip-zero-step-draft-extend", "SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND: an upswitch drafts over "
         "a stale draft KV", {"draft_extend_for_decode": draft_extend_skipped_at_zero_steps}, "draft-kv-in-step",
         "sglang#23994; vllm#53420"),
    _bug("v2-commit-after-finish", "a request that finished while its next batch was in flight commits that "
         "batch's tokens after release", {"resolve_spec_v2_tokens": resolve_without_finished_guard},
         "kv-accounting", "sglang#23456"),
    _bug("v2-chain-buffers-not-rebuilt", "the topk-1 chain buffers stay sized for the startup step count "
         "after a switch to more steps (an engine start without 0.5.17's refusals)",
         {"apply_runtime_state": runtime_state_without_chain_rebuild, **UNCHECKED_START},
         "worker-crash", "sglang#26424"),
)


from specstate.model.sglang_0_5_17 import static as _static  # noqa: F401,E402  (registers upstream-static and the switch patches)

#: this release's operations over ``DEFAULT_OPS`` (``Release.overrides``; ``specstate.variant.OVERRIDES_0_5_17``)
OVERRIDES = V2_OVERRIDES
