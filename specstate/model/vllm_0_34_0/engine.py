"""The vLLM 0.34.0 engine as a pure state machine: ``step(state, action, ops, config) -> state``.

One engine step (``v1/engine/core.py::EngineCore.step``; under async scheduling
``v1/engine/core.py::EngineCore.step_with_batch_queue`` with a batch queue of two): the requests of
the action arrive (``v1/core/sched/scheduler.py::Scheduler.add_request``), the scheduler schedules
(``Scheduler.schedule``), the worker runs the batch (the fake runner of the CPU oracle: each
verified request accepts ``action.accept`` of its drafts), the scheduler takes the output
(``Scheduler.update_from_output``) and, synchronously, the new drafts
(``v1/core/sched/scheduler.py::Scheduler.update_draft_token_ids``).

Every operation is a named field of :class:`VOps`; a variant replaces some of them. The worker's
shape-carrying operations (verify widths, graph rows) go through ``specstate/model/tensors.py``, so
a width mismatch raises PyTorch's own error.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from specstate.errors import InvalidAction
from specstate.model import tensors as T
from specstate.model.vllm_0_34_0.config import VllmEngineConfig, build_dynamic_sd_schedule_lookup, cdiv
from specstate.model.vllm_0_34_0.graphs import CapturePlan, capture_plan, dispatch, gather_batch
from specstate.model.vllm_0_34_0.state import (FINISHED, PREEMPTED, RUNNING, WAITING, StepRecord, VAction, VReq,
                                               VState)

__all__ = ["VOps", "UPSTREAM_OPS", "start", "step", "Started", "choose_k_all_scheduled", "choose_k_decode_rows",
           "allocate_slots", "schedule", "update_from_output", "update_draft_token_ids", "verify_widths",
           "KEEP_RECORDS", "drafting_requests"]

#: how many step records a state keeps (``VState.records``: the invariants read the last two)
KEEP_RECORDS = 4


def choose_k_all_scheduled(state: VState, config: VllmEngineConfig, scheduled: tuple[tuple[int, int], ...],
                           samples: tuple[int, ...]) -> int:
    """``v1/core/sched/scheduler.py::Scheduler.schedule`` as shipped: ``num_spec_tokens_to_schedule =
    dynamic_sd_lookup[len(num_scheduled_tokens)]``, every scheduled request counted, prefill chunks
    included (vllm#49548)."""
    if state.lookup is not None and scheduled:
        return state.lookup[len(scheduled)]
    return config.num_speculative_tokens


def choose_k_decode_rows(state: VState, config: VllmEngineConfig, scheduled: tuple[tuple[int, int], ...],
                         samples: tuple[int, ...]) -> int:
    """The correction of vllm#49548: K keyed on the requests that draft after this step (those that
    sample: not a non-final prefill chunk, ``Scheduler.update_draft_token_ids`` drops a prefill
    chunk's drafts); a step where none does keeps upstream's key."""
    if state.lookup is not None and scheduled:
        return state.lookup[len(samples) or len(scheduled)]
    return config.num_speculative_tokens


def allocate_slots(state: VState, config: VllmEngineConfig, req: VReq, num_new_tokens: int,
                   num_lookahead_tokens: int, full_sequence_must_fit: bool = False) -> int | None:
    """``v1/core/kv_cache_manager.py::KVCacheManager.allocate_slots`` for one full-attention group, no
    prefix cache, no watermark: the request's blocks after the call (``None``: the pool is short).
    ``num_tokens_need_slot = min(num_computed + new + lookahead, max_model_len)``. An admission
    (``full_sequence_must_fit``: ``config/scheduler.py::SchedulerConfig.scheduler_reserve_full_isl``,
    on by default) first needs the whole request, ``min(num_tokens, max_model_len)``, to fit."""
    if full_sequence_must_fit:
        full = cdiv(min(req.num_tokens, config.max_model_len), config.block_size)
        if max(0, full - req.blocks) > state.free_blocks:
            return None
    need_tokens = min(req.num_computed_tokens + num_new_tokens + num_lookahead_tokens, config.max_model_len)
    need = cdiv(need_tokens, config.block_size)
    to_allocate = max(0, need - req.blocks)
    if to_allocate > state.free_blocks:
        return None
    return req.blocks + to_allocate


def drafts_unused(req: VReq, num_computed: int, num_new: int) -> bool:
    """``v1/core/sched/scheduler.py::Scheduler._drafts_unused``."""
    if num_computed + num_new < req.num_tokens:
        return True
    min_out = req.num_output_tokens + 1 + (1 if req.num_output_placeholders > 0 else 0)
    return min_out >= req.max_tokens


@dataclass(frozen=True)
class VOps:
    """The named operations a variant may replace."""

    choose_k: Callable[[VState, VllmEngineConfig, tuple[tuple[int, int], ...], tuple[int, ...]], int] = \
        choose_k_all_scheduled
    allocate_slots: Callable[..., int | None] = allocate_slots
    #: ``v1/worker/gpu/model_runner.py::GPUModelRunner.gather_batch_req_state``'s decode-graph flag
    decode_graph_eligible: Callable[[VState, StepRecord], bool] = field(default=None)  # type: ignore[assignment]
    #: the rejection sampler's draft columns for a verified row (``v1/worker/gpu/model_runner.py::GPUModelRunner.sample_tokens``)
    verify_columns: Callable[[VState, StepRecord, int], int] = field(default=None)  # type: ignore[assignment]
    #: ``config/vllm.py::VllmConfig.get_decode_cudagraph_query_lens``' guard for a one-token draft runner
    capture_guard: bool = True


def _eligible(state: VState, rec: StepRecord) -> bool:
    return gather_batch(state, rec).decode_graph_eligible


def _columns_scheduled(state: VState, rec: StepRecord, rid: int) -> int:
    """The drafts verified for ``rid``: ``scheduled_spec_decode_tokens[rid]``, already cut to the
    scheduled count (``Scheduler.schedule``: ``spec_token_ids[:num_scheduled_spec_tokens]``)."""
    return dict(rec.spec).get(rid, 0)


UPSTREAM_OPS = VOps(decode_graph_eligible=_eligible, verify_columns=_columns_scheduled)


@dataclass(frozen=True)
class Started:
    """The engine after ``LLMEngine`` start: its (possibly DSD-disabled) config, its initial state,
    the capture plan, and what start changed (``notes``)."""

    config: VllmEngineConfig
    state: VState
    plan: CapturePlan
    notes: tuple[str, ...] = ()


def start(config: VllmEngineConfig, ops: VOps = UPSTREAM_OPS) -> Started:
    """The engine start: ``config/vllm.py::VllmConfig._maybe_disable_dynamic_sd_for_data_parallel``
    (DSD off under data parallelism: static K), the scheduler's lookup
    (``v1/core/sched/scheduler.py::Scheduler.__init__``: ``build_dynamic_sd_schedule_lookup``), the
    block pool (``v1/core/block_pool.py::BlockPool.__init__``: one null block held back) and the
    worker's capture plan (``graphs.capture_plan``: raises where a capture's dummy batch asserts)."""
    config.validate()
    notes: list[str] = []
    if config.schedule is not None and config.data_parallel_size > 1:
        notes.append(f"data_parallel_size={config.data_parallel_size}: vLLM disables dynamic speculative decoding "
                     f"(config/vllm.py::VllmConfig._maybe_disable_dynamic_sd_for_data_parallel); static K = "
                     f"{config.num_speculative_tokens}")
        config = config.with_(schedule=None)
    lookup = None
    if config.schedule is not None and config.num_speculative_tokens > 0:
        lookup = build_dynamic_sd_schedule_lookup([list(e) for e in config.schedule], config.max_num_seqs,
                                                  config.num_speculative_tokens)
    plan = capture_plan(config, guard=ops.capture_guard)
    state = VState(free_blocks=config.num_gpu_blocks - 1, lookup=lookup)
    return Started(config, state, plan, tuple(notes))


def _add_requests(state: VState, arrive: tuple[tuple[int, int], ...], config: VllmEngineConfig) -> VState:
    """``Scheduler.add_request``: appended to ``waiting`` (FCFS)."""
    reqs, waiting = list(state.reqs), list(state.waiting)
    for prompt, max_tokens in arrive:
        if prompt < 1 or max_tokens < 1 or prompt + 1 > config.max_model_len:
            raise InvalidAction(f"Expected a request with 1 <= prompt < max_model_len ({config.max_model_len}) and "
                                f"max_tokens >= 1 but got ({prompt}, {max_tokens})")
        rid = len(reqs)
        reqs.append(VReq(rid, prompt, max_tokens))
        waiting.append(rid)
    return state.with_(reqs=tuple(reqs), waiting=tuple(waiting))


def _preempt(state: VState, req: VReq) -> tuple[VState, VReq]:
    """``v1/core/sched/scheduler.py::Scheduler._preempt_request``: blocks freed, computed tokens and
    drafts dropped, back to the front of ``waiting``."""
    out = req.with_(status=PREEMPTED, num_computed_tokens=0, num_spec_tokens=0, spec_k=None,
                    num_output_placeholders=0, blocks=0, num_stale_output_tokens=req.num_in_flight_tokens)
    state = state.put(out).with_(free_blocks=state.free_blocks + req.blocks, waiting=(req.rid,) + state.waiting)
    return state, out


@dataclass
class _Pass:
    """One ``Scheduler.schedule`` call's running totals (its locals)."""

    token_budget: int
    running: list[int]
    drafts_needed: bool
    scheduled: dict[int, int] = field(default_factory=dict)
    spec: dict[int, int] = field(default_factory=dict)
    spec_k: dict[int, int | None] = field(default_factory=dict)
    preempted: list[int] = field(default_factory=list)
    computed_before: dict[int, int] = field(default_factory=dict)

    def take(self, req: VReq, num_new: int) -> None:
        self.scheduled[req.rid] = num_new
        self.computed_before[req.rid] = req.num_computed_tokens
        self.token_budget -= num_new
        self.drafts_needed = self.drafts_needed or not drafts_unused(req, req.num_computed_tokens, num_new)


def _running_tokens(req: VReq, config: VllmEngineConfig, budget: int) -> int:
    """``Scheduler.schedule``'s ``num_new_tokens`` for a running request: what catches it up to
    ``num_tokens_with_spec + num_output_placeholders``, cut by the long-prefill threshold, the budget
    and ``max_model_len``."""
    num_new = req.num_tokens_with_spec + req.num_output_placeholders - req.num_computed_tokens
    if 0 < config.long_prefill_token_threshold < num_new:
        num_new = config.long_prefill_token_threshold
    num_new = min(num_new, budget)
    return min(num_new, config.max_model_len - req.num_computed_tokens - 1)


def _schedule_running(state: VState, config: VllmEngineConfig, ops: VOps, p: _Pass) -> VState:
    """``Scheduler.schedule``'s first loop: the RUNNING requests, preempting from the tail
    (``self.running.pop()``) while the pool is short."""
    i = 0
    while i < len(p.running) and p.token_budget > 0:
        req = state.req(p.running[i])
        if req.num_output_placeholders > 0 and \
                req.num_computed_tokens + 2 - req.num_output_placeholders >= req.num_prompt_tokens + req.max_tokens:
            i += 1  # async: the step in flight reaches max_tokens
            continue
        num_new = _running_tokens(req, config, p.token_budget)
        if num_new <= 0:
            i += 1
            continue
        while True:
            blocks = ops.allocate_slots(state, config, req, num_new, config.num_lookahead_tokens)
            if blocks is not None:
                break
            victim = state.req(p.running.pop())
            state, _ = _preempt(state, victim)
            p.preempted.append(victim.rid)
            if victim.rid == req.rid:
                break
        if blocks is None:
            break
        state = state.with_(free_blocks=state.free_blocks - (blocks - req.blocks))
        req = req.with_(blocks=blocks)
        p.take(req, num_new)
        i += 1
        if req.num_spec_tokens:
            n_spec = num_new + req.num_computed_tokens - req.num_tokens - req.num_output_placeholders
            if n_spec > 0:
                p.spec[req.rid] = min(req.num_spec_tokens, n_spec)
                p.spec_k[req.rid] = req.spec_k
            req = req.with_(num_spec_tokens=0, spec_k=None)
        state = state.put(req)
    return state


def _schedule_waiting(state: VState, config: VllmEngineConfig, ops: VOps, p: _Pass) -> VState:
    """``Scheduler.schedule``'s second loop (only when nothing was preempted): admit from the head of
    ``waiting`` while a slot, budget and blocks remain; a prompt beyond the budget is chunked."""
    waiting = list(state.waiting)
    skipped: list[int] = []
    while waiting and len(p.running) < config.max_num_seqs and p.token_budget > 0:
        req = state.req(waiting[0])
        if req.num_stale_output_tokens:
            skipped.append(waiting.pop(0))  # ``skip_request``: its stale output still in flight
            continue
        num_new = req.num_tokens - req.num_computed_tokens
        if 0 < config.long_prefill_token_threshold < num_new:
            num_new = config.long_prefill_token_threshold
        if not config.enable_chunked_prefill and num_new > p.token_budget:
            break
        num_new = min(num_new, p.token_budget)
        blocks = ops.allocate_slots(state, config, req, num_new, config.num_lookahead_tokens,
                                    full_sequence_must_fit=True)
        if blocks is None:
            break
        waiting.pop(0)
        p.running.append(req.rid)
        state = state.with_(free_blocks=state.free_blocks - (blocks - req.blocks))
        req = req.with_(blocks=blocks, status=RUNNING)
        p.take(req, num_new)
        state = state.put(req)
    return state.with_(waiting=tuple(skipped + waiting))  # ``waiting.prepend_requests(step_skipped_waiting)``


def schedule(state: VState, config: VllmEngineConfig, ops: VOps) -> tuple[VState, StepRecord]:
    """``v1/core/sched/scheduler.py::Scheduler.schedule`` (one KV group, FCFS, no prefix cache, no
    connector, no encoder, no LoRA), K chosen (``ops.choose_k``), then
    ``Scheduler._update_after_schedule`` (and under async scheduling
    ``v1/core/sched/async_scheduler.py::AsyncScheduler._update_after_schedule``)."""
    step_no = state.step + 1
    p = _Pass(config.max_num_batched_tokens, list(state.running), drafts_needed=not (config.num_lookahead_tokens > 0))
    state = _schedule_running(state, config, ops, p)
    if not p.preempted:
        state = _schedule_waiting(state, config, ops, p)
    state = state.with_(running=tuple(p.running))
    # which scheduled requests sample this step (``_update_after_schedule``'s ``is_prefill_chunk``)
    samples = tuple(rid for rid, n in p.scheduled.items()
                    if p.computed_before[rid] + n >= state.req(rid).num_tokens + state.req(rid).num_output_placeholders)
    sched = tuple(p.scheduled.items())
    k = ops.choose_k(state, config, sched, samples)
    rec = StepRecord(step=step_no, scheduled=sched, spec=tuple(p.spec.items()), spec_k=tuple(p.spec_k.items()),
                     samples=samples, k=k, skip_drafts=not p.drafts_needed, preempted=tuple(p.preempted))
    state = _update_after_schedule(state, config, rec)
    return state.with_(step=step_no, k_last=state.k_this, k_this=k, finished_pending=False), rec


def _update_after_schedule(state: VState, config: VllmEngineConfig, rec: StepRecord) -> VState:
    """``Scheduler._update_after_schedule``: computed tokens advance, ``is_prefill_chunk`` set; under
    async scheduling (``AsyncScheduler._update_after_schedule``) a sampling request gains ``1 +
    drafts`` output placeholders and ``K`` placeholder drafts."""
    spec = dict(rec.spec)
    for rid, n in rec.scheduled:
        req = state.req(rid)
        computed = req.num_computed_tokens + n
        chunk = computed < req.num_tokens + req.num_output_placeholders
        req = req.with_(num_computed_tokens=computed, is_prefill_chunk=chunk,
                        num_in_flight_tokens=req.num_in_flight_tokens + n)
        if config.async_scheduling and not chunk:
            req = req.with_(num_output_placeholders=req.num_output_placeholders + 1 + spec.get(rid, 0),
                            num_spec_tokens=rec.k, spec_k=rec.k)
        state = state.put(req)
    return state


def verify_widths(state: VState, rec: StepRecord, ops: VOps) -> None:
    """The rejection sampler's shapes (``v1/worker/gpu/model_runner.py::GPUModelRunner.sample_tokens``):
    per verified row, the target's ``1 + drafts`` logits positions against the draft buffer's
    ``1 + columns``, added elementwise on tiny tensors (``tensors.added``): a column count other than
    the row's drafts raises torch's ``The size of tensor a (..) must match the size of tensor b (..)``."""
    for rid, drafts in rec.spec:
        cols = ops.verify_columns(state, rec, rid)
        T.added((1, 1 + drafts), (1, 1 + cols))


def fake_runner(state: VState, rec: StepRecord, action: VAction) -> dict[int, int]:
    """The oracle's fake runner (``ModelRunnerOutput.sampled_token_ids``): a sampling request gets ``1 +
    accepted`` tokens, a non-final prefill chunk none."""
    spec = dict(rec.spec)
    return {rid: 1 + action.accepted(rid, spec.get(rid, 0)) for rid in rec.samples}


def _append_tokens(req: VReq, config: VllmEngineConfig, gen: int, stale: bool) -> tuple[VReq, bool]:
    """``Scheduler._update_request_with_output``: tokens appended one by one with
    ``v1/core/sched/utils.py::check_stop`` (length only: the fake runner never samples EOS); a stop
    trims the rest and, unless stale, rolls computed tokens back; placeholders resolved unless stale."""
    stopped, kept, out = False, gen, req.num_output_tokens
    for j in range(1, gen + 1):
        out += 1
        if req.num_prompt_tokens + out >= config.max_model_len or out >= req.max_tokens:
            stopped, kept = True, j
            break
    req = req.with_(num_output_tokens=out)
    if stopped and not stale:
        req = req.with_(num_computed_tokens=req.num_computed_tokens - (gen - kept))
    if not stale and req.num_output_placeholders > 0:
        req = req.with_(num_output_placeholders=req.num_output_placeholders - gen)
    return req, stopped


def update_from_output(state: VState, config: VllmEngineConfig, rec: StepRecord,
                       sampled: dict[int, int]) -> VState:
    """``v1/core/sched/scheduler.py::Scheduler.update_from_output``: the in-flight count drains (a
    preempted request's stale share with it: its output is still appended but moves no counter);
    rejected drafts roll back ``num_computed_tokens`` (and the placeholders); tokens append
    (``_append_tokens``); a finished request frees its blocks (``Scheduler._free_request``) and leaves
    ``running`` (or ``waiting``, a preempted one)."""
    spec = dict(rec.spec)
    finished: list[int] = []
    for rid, n in rec.scheduled:
        req = state.req(rid)
        if req.status == FINISHED:
            continue
        stale = req.num_stale_output_tokens > 0
        req = req.with_(num_in_flight_tokens=req.num_in_flight_tokens - n,
                        num_stale_output_tokens=max(0, req.num_stale_output_tokens - n) if stale else 0)
        gen = sampled.get(rid, 0)
        if spec.get(rid) and gen and not stale:
            rejected = spec[rid] - (gen - 1)
            if req.num_computed_tokens > 0:
                req = req.with_(num_computed_tokens=req.num_computed_tokens - rejected)
            if req.num_output_placeholders > 0:
                req = req.with_(num_output_placeholders=req.num_output_placeholders - rejected)
        if gen:
            req, stopped = _append_tokens(req, config, gen, stale)
            if stopped:
                state = state.with_(free_blocks=state.free_blocks + req.blocks)
                req = req.with_(status=FINISHED, blocks=0, num_spec_tokens=0, spec_k=None)
                finished.append(rid)
        state = state.put(req)
    if finished:
        gone = set(finished)
        state = state.with_(running=tuple(r for r in state.running if r not in gone),
                            waiting=tuple(r for r in state.waiting if r not in gone), finished_pending=True)
    return state


def drafting_requests(state: VState, rec: StepRecord) -> tuple[int, ...]:
    """The requests the worker returns drafts for (``DraftTokenIds.req_ids``): the batch's requests."""
    return tuple(rid for rid, _ in rec.scheduled)


def update_draft_token_ids(state: VState, rec: StepRecord) -> VState:
    """``v1/core/sched/scheduler.py::Scheduler.update_draft_token_ids`` (sync, ``EngineCore.post_step``):
    ``K`` drafts for each batch request still running; a prefill chunk's are dropped. With
    ``skip_drafts`` the worker proposes none (``GPUModelRunner.execute_model``: K = 0)."""
    if rec.skip_drafts:
        return state
    for rid in drafting_requests(state, rec):
        req = state.req(rid)
        if req.status == FINISHED:
            continue
        if req.is_prefill_chunk:
            req = req.with_(num_spec_tokens=0, spec_k=None)
        else:
            req = req.with_(num_spec_tokens=rec.k, spec_k=rec.k if rec.k else None)
        state = state.put(req)
    return state


def _remember(state: VState, rec: StepRecord) -> VState:
    return state.with_(records=(state.records + (rec,))[-KEEP_RECORDS:])


def step(state: VState, action: VAction, ops: VOps, config: VllmEngineConfig, plan: CapturePlan) -> VState:
    """One engine step. Sync: schedule, run, ``update_from_output``, ``update_draft_token_ids``.
    Async (``EngineCore.step_with_batch_queue``, queue of two): schedule and queue; process the oldest
    step's output when the queue is full or nothing is left to schedule."""
    state = _add_requests(state, action.arrive, config)
    if not config.async_scheduling:
        if not state.has_requests():
            return state
        state, rec = schedule(state, config, ops)
        rec = replace(rec, dispatch=dispatch(plan, state, rec, ops.decode_graph_eligible(state, rec)))
        verify_widths(state, rec, ops)
        state = update_from_output(state, config, rec, fake_runner(state, rec, action))
        state = update_draft_token_ids(state, rec)
        return _remember(state, rec)
    executed = False
    if state.has_requests():
        state, rec = schedule(state, config, ops)
        rec = replace(rec, dispatch=dispatch(plan, state, rec, ops.decode_graph_eligible(state, rec)))
        verify_widths(state, rec, ops)
        executed = rec.num_scheduled > 0
        state = _remember(state, rec).with_(in_flight=(rec,) + state.in_flight)
        if len(state.in_flight) < 2 and (executed or state.has_requests()):
            return state
    if not state.in_flight:
        return state
    oldest = state.in_flight[-1]
    state = state.with_(in_flight=state.in_flight[:-1])
    return update_from_output(state, config, oldest, fake_runner(state, oldest, action))
