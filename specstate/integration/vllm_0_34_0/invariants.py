"""The vLLM 0.34.0 family's invariants: the SGLang invariants' intent (shapes, KV accounting, graph
buffer rows, the switch's key) over the vLLM state (``specstate/model/vllm_0_34_0/``).

Reported as the shared :class:`~specstate.invariants._core.Violation` (invariant, step, request,
field, expected, actual), each naming the vLLM code it mirrors. A registry of its own
(``VLLM_INVARIANTS``), not the SGLang ``always`` list: they read a vLLM state.
``tests/test_vllm_invariants.py`` holds, for each, a violating case and a positive control.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from specstate.invariants._core import Violation
from specstate.model.vllm_0_34_0.config import VllmEngineConfig, cdiv
from specstate.model.vllm_0_34_0.state import FINISHED, RUNNING, StepRecord, VState

__all__ = ["VllmInvariant", "VLLM_INVARIANTS", "check_step", "vllm_invariant_names"]

Check = Callable[[VState, VllmEngineConfig, StepRecord], "Violation | None"]


@dataclass(frozen=True)
class VllmInvariant:
    name: str
    doc: str
    mirrors: str
    check: Check


VLLM_INVARIANTS: dict[str, VllmInvariant] = {}


def _inv(name: str, mirrors: str) -> Callable[[Check], Check]:
    def deco(fn: Check) -> Check:
        VLLM_INVARIANTS[name] = VllmInvariant(name, (fn.__doc__ or "").strip(), mirrors, fn)
        return fn
    return deco


def vllm_invariant_names() -> tuple[str, ...]:
    return tuple(VLLM_INVARIANTS)


@_inv("vllm_dsd_k_keyed_on_decode_rows", "v1/core/sched/scheduler.py::Scheduler.schedule")
def k_keyed_on_decode_rows(state: VState, config: VllmEngineConfig, rec: StepRecord) -> Violation | None:
    """With DSD on, the step's K (``num_spec_tokens_to_schedule``) is the schedule's K for the number of
    requests that draft after the step (those that sample: a non-final prefill chunk drafts nothing),
    not for every scheduled request (vllm#49548: a prefill chunk in the batch moves K)."""
    if state.lookup is None or not rec.samples:
        return None
    want = state.lookup[len(rec.samples)]
    if rec.k != want:
        chunks = [rid for rid, _ in rec.scheduled if rid not in rec.samples]
        return Violation("vllm_dsd_k_keyed_on_decode_rows", rec.step, None, "num_spec_tokens_to_schedule", want,
                         rec.k, f"{len(rec.samples)} drafting rows, {len(rec.scheduled)} scheduled (prefill chunks "
                         f"{chunks}): lookup[{len(rec.samples)}] = {want}, lookup[{len(rec.scheduled)}] = "
                         f"{state.lookup[len(rec.scheduled)]}")
    return None


@_inv("vllm_kv_block_accounting", "v1/core/kv_cache_manager.py::KVCacheManager.allocate_slots")
def kv_block_accounting(state: VState, config: VllmEngineConfig, rec: StepRecord) -> Violation | None:
    """Every block is free or held by one unfinished request (``BlockPool``: ``num_gpu_blocks - 1`` usable,
    the null block held back), and a running request holds the slots of its computed tokens."""
    held = sum(r.blocks for r in state.reqs if r.status != FINISHED)
    if held + state.free_blocks != config.num_gpu_blocks - 1:
        return Violation("vllm_kv_block_accounting", rec.step, None, "free_blocks + held", config.num_gpu_blocks - 1,
                         held + state.free_blocks, f"free {state.free_blocks}, held {held}")
    for rid in state.running:
        r = state.req(rid)
        need = cdiv(min(r.num_computed_tokens, config.max_model_len), config.block_size)
        if r.blocks < need:
            return Violation("vllm_kv_block_accounting", rec.step, rid, "blocks", f">= {need}", r.blocks,
                             f"num_computed_tokens {r.num_computed_tokens}, block_size {config.block_size}")
    return None


@_inv("vllm_decode_graph_rows", "v1/worker/gpu/cudagraph_utils.py::CudaGraphManager.dispatch")
def decode_graph_rows(state: VState, config: VllmEngineConfig, rec: StepRecord) -> Violation | None:
    """A FULL decode graph (one of uniform query length q) replays only a batch of decode rows (no row
    in its prompt: ``decode_graph_eligible``), and its rows hold the batch's requests and tokens
    (the #49918 class: a prompt chunk of K+1 tokens replaying the spec-verify graph)."""
    d = rec.dispatch
    if d is None:
        return None
    if d.mode == "FULL" and d.uniform_token_count is not None and not d.decode_graph_eligible:
        chunks = [rid for rid, _ in rec.scheduled if state.req(rid).num_computed_tokens - dict(rec.scheduled)[rid]
                  < state.req(rid).num_prompt_tokens]
        return Violation("vllm_decode_graph_rows", rec.step, chunks[0] if chunks else None, "cg_mode",
                         "PIECEWISE or NONE (a prompt row in the batch)", f"FULL decode graph q={d.uniform_token_count}",
                         f"prompt rows {chunks} replay the verify graph of {d.num_reqs} x {d.uniform_token_count}")
    if (d.num_reqs is not None and d.num_reqs < d.real_reqs) or d.num_tokens < d.real_tokens:
        return Violation("vllm_decode_graph_rows", rec.step, None, "graph rows", f">= {d.real_reqs} reqs, "
                         f">= {d.real_tokens} tokens", f"{d.num_reqs} reqs, {d.num_tokens} tokens")
    return None


@_inv("vllm_request_token_accounting", "v1/core/sched/scheduler.py::Scheduler._update_after_schedule")
def request_token_accounting(state: VState, config: VllmEngineConfig, rec: StepRecord) -> Violation | None:
    """The step's tokens fit the budget, the running set fits ``max_num_seqs``, a request verifies at
    most ``num_speculative_tokens`` drafts, and no request computes past its tokens (drafts and
    placeholders included) or outputs past ``max_tokens``."""
    total = sum(n for _, n in rec.scheduled)
    if total > config.max_num_batched_tokens:
        return Violation("vllm_request_token_accounting", rec.step, None, "total_num_scheduled_tokens",
                         f"<= {config.max_num_batched_tokens}", total)
    if len(state.running) > config.max_num_seqs:
        return Violation("vllm_request_token_accounting", rec.step, None, "len(running)", f"<= {config.max_num_seqs}",
                         len(state.running))
    for rid, n in rec.spec:
        if n > config.num_speculative_tokens:
            return Violation("vllm_request_token_accounting", rec.step, rid, "scheduled_spec_decode_tokens",
                             f"<= {config.num_speculative_tokens}", n)
    for r in state.reqs:
        if r.status == RUNNING and r.num_computed_tokens > r.num_tokens_with_spec + r.num_output_placeholders:
            return Violation("vllm_request_token_accounting", rec.step, r.rid, "num_computed_tokens",
                             f"<= {r.num_tokens_with_spec + r.num_output_placeholders}", r.num_computed_tokens)
        if r.num_output_tokens > r.max_tokens:
            return Violation("vllm_request_token_accounting", rec.step, r.rid, "num_output_tokens",
                             f"<= {r.max_tokens}", r.num_output_tokens)
    return None


def check_step(state: VState, config: VllmEngineConfig, rec: StepRecord,
               names: tuple[str, ...] | None = None) -> Violation | None:
    """The first invariant (registry order) the step breaks, else ``None``."""
    for name, inv in VLLM_INVARIANTS.items():
        if names is not None and name not in names:
            continue
        v = inv.check(state, config, rec)
        if v is not None:
            return v
    return None
