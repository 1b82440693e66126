"""Scheduler-side operations of one ``Scheduler.event_loop_normal`` iteration.

Mirrors ``sglang/srt/managers/scheduler.py`` (``get_next_batch_to_run``,
``get_new_batch_prefill``, ``update_running_batch``, ``abort_request``), ``schedule_policy.py``
(``PrefillAdder``, reduced to its budgets), ``schedule_batch.py`` (``filter_batch``,
``merge_batch``, ``retract_decode``, ``release_req``, ``prepare_for_decode``,
``mix_with_running``, ``check_decode_mem``) and ``scheduler_output_processor_mixin.py``
(``process_batch_result_prefill``, ``process_batch_result_decode``).

Every function here is a default implementation of one named operation in
:class:`specstate.model.ops.Ops`; call other operations through ``ops`` so a variant's
override of one is seen by all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specstate.model.actions import Abort, Arrive
from specstate.model.batch import EMPTY_BATCH, ScheduleBatch
from specstate.model.kv import alloc_slots, release_kv_cache
from specstate.model.modes import ForwardMode
from specstate.model.request import FinishReason, Req, ReqStatus
from specstate.model.runner import guarded
from specstate.model.spec_info import EagleDraftInput, SpecInfo
from specstate.model.tensors import cat_rows, shape_of, take_rows, zeros
from specstate.model.tx import Tx

if TYPE_CHECKING:
    from specstate.model.ops import Ops
    from specstate.model.state import ModelState

__all__ = [
    "arrive", "abort", "get_next_batch_to_run", "merge_last_batch", "schedule_prefill",
    "update_running_batch", "filter_batch", "filter_spec_info", "merge_batch", "merge_spec_info",
    "check_decode_mem", "retract_decode", "prepare_for_decode", "process_batch_result_prefill",
    "process_batch_result_decode", "check_finished", "idle",
]


# -- arrivals and aborts --------------------------------------------------------------

def arrive(ops: "Ops", tx: Tx, action: Arrive) -> Tx:
    """``Scheduler.handle_generate_request`` -> ``_add_request_to_queue``."""
    s = tx.state
    req = Req(rid=len(s.reqs), prompt_len=action.prompt_len, max_new_tokens=action.max_new_tokens)
    if req.prompt_len + s.config.decode_reserve_per_req > s.config.kv_pool_size:
        # managers/utils.py::validate_input_length (max_req_input_len < max_total_num_tokens):
        # aborted at once; the model's bound adds one decode step's reserve so that an
        # admitted request can always make progress
        gone = req.evolve(status=ReqStatus.ABORTED, finish_reason=FinishReason.ABORT)
        return tx.with_state(s.evolve(reqs=s.reqs + (gone,))).log("abort", "input too long for the KV pool", req.rid)
    return tx.with_state(s.evolve(reqs=s.reqs + (req,), waiting=s.waiting + (req.rid,)))


def abort(ops: "Ops", tx: Tx, action: Abort) -> Tx:
    """``Scheduler.abort_request``: drop from the waiting queue, or mark ``to_finish``."""
    s = tx.state
    req = s.req(action.rid)
    if req.done:
        return tx.log("abort-ignored", f"request {req.rid} already {req.status.value}", req.rid)
    if req.rid in s.waiting and req.status == ReqStatus.WAITING:
        gone = req.evolve(status=ReqStatus.ABORTED, finish_reason=FinishReason.ABORT)
        tx = tx.with_state(s.evolve(waiting=tuple(r for r in s.waiting if r != req.rid)))
        return tx.with_reqs(gone).log("abort", "removed from the waiting queue", req.rid)
    return tx.with_reqs(req.evolve(to_abort=True)).log("abort", "to_finish = FINISH_ABORT", req.rid)


# -- choosing the next batch ----------------------------------------------------------

def get_next_batch_to_run(ops: "Ops", tx: Tx) -> tuple[Tx, ScheduleBatch | None]:
    """``Scheduler.get_next_batch_to_run``: merge the last prefill, prefer a new prefill,
    else update the running decode batch."""
    tx = ops.merge_last_batch(ops, tx)
    prefill = ops.schedule_prefill(ops, tx)
    if prefill is not None:
        return prefill
    if tx.state.running.is_empty():
        return tx, None
    tx = ops.update_running_batch(ops, tx)
    running = tx.state.running
    return tx, (None if running.is_empty() else running)


def merge_last_batch(ops: "Ops", tx: Tx) -> Tx:
    """The ``last_batch.forward_mode.is_extend()`` branch of ``get_next_batch_to_run``."""
    s = tx.state
    last = s.last_batch
    if last is None:
        return tx
    tx = tx.with_state(s.evolve(last_batch=None))
    keep = [i for i, rid in enumerate(last.rids) if s.req(rid).live and rid != s.chunked_rid]
    tx, last = ops.filter_batch(ops, tx, last, keep, False)
    if last.is_empty():
        return tx
    if tx.state.running.is_empty():
        return tx.with_running(last.evolve(chunked_rid=None))
    return tx.with_running(ops.merge_batch(ops, tx.state.running, last))


def schedule_prefill(ops: "Ops", tx: Tx) -> tuple[Tx, ScheduleBatch] | None:
    """``Scheduler.get_new_batch_prefill`` with ``PrefillAdder``'s budgets (running slots,
    ``chunked_prefill_size`` tokens, KV slots for the extend plus one decode step's reserve)."""
    s = tx.state
    cfg = s.config
    candidates = ([s.chunked_rid] if s.chunked_rid is not None else []) + [r for r in s.waiting if r != s.chunked_rid]
    running_live = sum(1 for rid in s.running.rids if s.req(rid).live)
    budget = cfg.chunked_prefill_size
    available = s.kv_available
    picked: list[tuple[int, int, int]] = []  # (rid, prefix_len, extend_len)
    for rid in candidates:
        req = s.req(rid)
        if running_live + len(picked) >= cfg.max_running_requests or budget == 0:
            break
        prefix = req.kv_committed_len if rid == s.chunked_rid else 0
        extend = min(req.fill_len - prefix, budget)
        reserve = cfg.decode_reserve_per_req * (running_live + len(picked) + 1)
        if extend + reserve > available:
            break
        picked.append((rid, prefix, extend))
        budget -= extend
        available -= extend
    if not picked:
        return None
    return _build_prefill(ops, tx, picked)


def _build_prefill(ops: "Ops", tx: Tx, picked: list[tuple[int, int, int]]) -> tuple[Tx, ScheduleBatch]:
    """``ScheduleBatch.init_new`` + ``prepare_for_extend``: allocate the extend tokens."""
    s = tx.state
    total = sum(e for _, _, e in picked)
    s = alloc_slots(s, total, "prepare_for_extend")
    chunked = None
    reqs = []
    for rid, prefix, extend in picked:
        req = s.req(rid)
        is_chunk = prefix + extend < req.fill_len
        chunked = rid if is_chunk else chunked
        reqs.append(req.evolve(status=ReqStatus.PREFILLING if is_chunk else ReqStatus.RUNNING,
                               kv_allocated_len=req.kv_allocated_len + extend))
    s = s.with_reqs(reqs).evolve(
        waiting=tuple(r for r in s.waiting if r not in {p[0] for p in picked}),
        chunked_rid=chunked,
    )
    batch = ScheduleBatch(
        rids=tuple(r for r, _, _ in picked),
        forward_mode=ForwardMode.EXTEND,
        seq_lens=tuple(p + e for _, p, e in picked),
        req_pool_indices=tuple(r for r, _, _ in picked),
        input_ids=(total,), positions=(total,), out_cache_loc=(total,),
        extend_lens=tuple(e for _, _, e in picked),
        spec_info=None, chunked_rid=chunked,
    )
    tx = tx.with_state(s)
    if s.config.enable_mixed_chunk and not s.running.is_empty():
        # get_new_batch_prefill: filter_batch(v1_spec_info_filtered=True), then mix what is left
        keep = [i for i, rid in enumerate(s.running.rids) if s.req(rid).live]
        tx, running = ops.filter_batch(ops, tx, s.running, keep, True)
        tx = tx.with_running(running)
        if not running.is_empty():
            tx, batch = ops.mix_with_running(ops, tx, batch)
    return tx, batch


# -- filter / merge -------------------------------------------------------------------

def filter_batch(ops: "Ops", tx: Tx, batch: ScheduleBatch, keep: list[int], has_been_filtered: bool) -> tuple[Tx, ScheduleBatch]:
    """``ScheduleBatch.filter_batch(keep_indices=..., v1_spec_info_filtered=...)``."""
    if len(keep) == batch.batch_size:
        return tx, batch
    if not keep:
        return tx, EMPTY_BATCH
    spec = batch.spec_info
    if spec is not None:
        tx, spec = ops.filter_spec_info(ops, tx, spec, keep, has_been_filtered)
    return tx, batch.evolve(
        rids=tuple(batch.rids[i] for i in keep),
        seq_lens=tuple(batch.seq_lens[i] for i in keep),
        req_pool_indices=tuple(batch.req_pool_indices[i] for i in keep),
        out_cache_loc=None, spec_info=spec,
        chunked_rid=batch.chunked_rid if batch.chunked_rid in {batch.rids[i] for i in keep} else None,
    )


def filter_spec_info(ops: "Ops", tx: Tx, spec: SpecInfo, keep: list[int], has_been_filtered: bool) -> tuple[Tx, SpecInfo]:
    """``EagleDraftInput.filter_batch``: truncate when verify already filtered, else select."""
    if not isinstance(spec, EagleDraftInput):
        return tx, spec
    n = len(keep)
    if has_been_filtered:
        if n != spec.num_rows:
            tx = tx.log("warning", f"length of new_indices: {n} != length of topk_p: {spec.num_rows}, this should not happen")
        return tx, spec.evolve(
            rows=spec.rows[:n], topk_p=take_rows(spec.topk_p, n), topk_index=take_rows(spec.topk_index, n),
            hidden_states=take_rows(spec.hidden_states, n), bonus_tokens=take_rows(spec.bonus_tokens, n),
        )

    def select(shape: tuple[int, ...]) -> tuple[int, ...]:
        import torch
        return shape_of(zeros(shape)[torch.tensor(keep, dtype=torch.int64)])

    shapes = {"topk_p": list(spec.topk_p), "new_indices": list(keep)}
    picked = guarded("eagle_info.py::EagleDraftInput.filter_batch", shapes, lambda: (
        select(spec.topk_p), select(spec.topk_index), select(spec.hidden_states), select(spec.bonus_tokens)))
    return tx, spec.evolve(rows=tuple(spec.rows[i] for i in keep), topk_p=picked[0], topk_index=picked[1],
                           hidden_states=picked[2], bonus_tokens=picked[3])


def merge_batch(ops: "Ops", running: ScheduleBatch, other: ScheduleBatch) -> ScheduleBatch:
    """``ScheduleBatch.merge_batch``: concatenate rows; ``if self.spec_info: merge``."""
    spec = running.spec_info
    if spec is not None:
        spec = ops.merge_spec_info(ops, spec, other.spec_info)
    return running.evolve(
        rids=running.rids + other.rids,
        seq_lens=running.seq_lens + other.seq_lens,
        req_pool_indices=running.req_pool_indices + other.req_pool_indices,
        out_cache_loc=None, spec_info=spec, forward_mode=ForwardMode.DECODE, chunked_rid=None,
    )


def merge_spec_info(ops: "Ops", mine: SpecInfo, other: SpecInfo | None) -> SpecInfo:
    """``EagleDraftInput.merge_batch``: take the other's rows when mine is an idle stub."""
    where = "eagle_info.py::EagleDraftInput.merge_batch"
    shapes: dict[str, Any] = {"self": type(mine).__name__, "other": type(other).__name__ if other is not None else None}
    if not isinstance(mine, EagleDraftInput):
        return mine
    if guarded(where, shapes, lambda: len(zeros(mine.topk_index)) == 0):
        assert isinstance(other, EagleDraftInput)
        return other
    if guarded(where, shapes, lambda: len(zeros(other.topk_index)) == 0):  # type: ignore[union-attr]
        return mine
    assert isinstance(other, EagleDraftInput)
    shapes.update(self_hidden=list(mine.hidden_states), other_hidden=list(other.hidden_states))
    return guarded(where, shapes, lambda: mine.evolve(
        rows=mine.rows + other.rows, topk_p=cat_rows(mine.topk_p, other.topk_p),
        topk_index=cat_rows(mine.topk_index, other.topk_index),
        hidden_states=cat_rows(mine.hidden_states, other.hidden_states),
        bonus_tokens=cat_rows(mine.bonus_tokens, other.bonus_tokens)))


def mix_with_running(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> tuple[Tx, ScheduleBatch]:
    """``ScheduleBatch.mix_with_running`` done right: one new cache location per running
    request (``--enable-mixed-chunk``; SGLang 0.5.12 forbids it with speculation)."""
    s = tx.state
    running = s.running
    s = alloc_slots(s, running.batch_size, "mix_with_running")
    s = s.with_reqs(s.req(r).evolve(kv_allocated_len=s.req(r).kv_allocated_len + 1) for r in running.rids)
    return tx.with_state(s.evolve(running=EMPTY_BATCH)), _mixed(batch, running, (running.batch_size,))


def _mixed(batch: ScheduleBatch, running: ScheduleBatch, running_loc: tuple[int, ...]) -> ScheduleBatch:
    n = running.batch_size
    return batch.evolve(
        forward_mode=ForwardMode.MIXED,
        rids=batch.rids + running.rids,
        seq_lens=batch.seq_lens + tuple(L + 1 for L in running.seq_lens),
        req_pool_indices=batch.req_pool_indices + running.req_pool_indices,
        input_ids=cat_rows(batch.input_ids, (n,)),
        positions=cat_rows(batch.positions or (0,), (n,)),
        out_cache_loc=cat_rows(batch.out_cache_loc or (0,), running_loc),
        extend_lens=(batch.extend_lens or ()) + (1,) * n,
    )


# -- the running decode batch ---------------------------------------------------------

def update_running_batch(ops: "Ops", tx: Tx) -> Tx:
    """``Scheduler.update_running_batch``: drop finished rows, retract on KV pressure,
    ``prepare_for_decode``."""
    s = tx.state
    keep = [i for i, rid in enumerate(s.running.rids) if s.req(rid).live]
    tx, running = ops.filter_batch(ops, tx, s.running, keep, True)
    tx = tx.with_running(running)
    if running.is_empty():
        return tx
    if not ops.check_decode_mem(ops, tx.state, len(running.rids)):
        tx = ops.retract_decode(ops, tx)
    if tx.state.running.is_empty():
        return tx
    return tx.with_running(ops.prepare_for_decode(ops, tx.state.running))


def check_decode_mem(ops: "Ops", state: "ModelState", num_reqs: int) -> bool:
    """``ScheduleBatch.check_decode_mem`` with ``new_tokens_required_next_decode`` (spec v1)."""
    return state.kv_available >= state.config.decode_reserve_per_req * num_reqs


def retract_decode(ops: "Ops", tx: Tx) -> Tx:
    """``ScheduleBatch.retract_decode``: with speculation, retract from the back (keep one);
    abort the last one if even it does not fit."""
    s = tx.state
    keep = list(range(s.running.batch_size))
    first = True
    while first or not ops.check_decode_mem(ops, s, len(keep)):
        if len(keep) == 1:
            break
        first = False
        rid = s.running.rids[keep.pop()]
        s = _release_for_retract(s, rid)
        tx = tx.log("retract", "KV cache pool is full. Retract requests.", rid)
    if len(keep) <= 1 and not ops.check_decode_mem(ops, s, len(keep)):
        rid = s.running.rids[keep.pop()]
        s, req = release_kv_cache(s, s.req(rid))
        s = s.with_reqs([req.evolve(status=ReqStatus.FINISHED, finish_reason=FinishReason.ABORT)])
        tx = tx.log("abort", "Out of memory even after retracting all other requests", rid)
    tx = tx.with_state(s)
    tx, running = ops.filter_batch(ops, tx, s.running, keep, False)
    return tx.with_running(running)


def _release_for_retract(s: "ModelState", rid: int) -> "ModelState":
    """``ScheduleBatch.release_req`` + ``Req.reset_for_retract``; back to the waiting queue."""
    s, req = release_kv_cache(s, s.req(rid))
    req = req.evolve(status=ReqStatus.WAITING, retractions=req.retractions + 1)
    return s.with_reqs([req]).evolve(waiting=tuple(sorted(s.waiting + (rid,))))


def prepare_for_decode(ops: "Ops", batch: ScheduleBatch) -> ScheduleBatch:
    """``ScheduleBatch.prepare_for_decode``: with speculation it sets DECODE and returns
    early ("the decode batch is prepared inside forward_batch_speculative_generation")."""
    return batch.evolve(forward_mode=ForwardMode.DECODE)


# -- results --------------------------------------------------------------------------

def check_finished(req: Req) -> FinishReason | None:
    """``Req.check_finished`` after a token was appended."""
    if req.to_abort:
        return FinishReason.ABORT
    if req.eos_pending:
        return FinishReason.EOS
    if req.output_len >= req.max_new_tokens:
        return FinishReason.LENGTH
    return None


def append_tokens(req: Req, n: int) -> tuple[Req, int]:
    """Append up to ``n`` tokens one by one, stopping at the first finish (``verify``'s loop)."""
    for i in range(n):
        req = req.evolve(output_len=req.output_len + 1)
        reason = check_finished(req)
        if reason is not None:
            return req.evolve(status=ReqStatus.FINISHED, finish_reason=reason, eos_pending=False), i + 1
    return req, n


def process_batch_result_prefill(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> Tx:
    """``process_batch_result_prefill``: one sampled token per finished prefill; the chunked
    request gets none; finished requests release their KV. The batch becomes ``last_batch``."""
    s = tx.state
    for rid in batch.rids:
        req = s.req(rid)
        if rid == batch.chunked_rid:
            continue
        req, _ = append_tokens(req.evolve(status=ReqStatus.RUNNING), 1)
        if req.done:
            s, req = release_kv_cache(s, req)
        s = s.with_reqs([req])
    return tx.with_state(s.evolve(last_batch=batch))


def process_batch_result_decode(ops: "Ops", tx: Tx) -> Tx:
    """``process_batch_result_decode`` (spec v1 branch): outputs were appended in verify;
    ``_handle_finished_req`` releases the KV of requests that finished."""
    s = tx.state
    for rid in s.running.rids:
        req = s.req(rid)
        if req.done and req.kv_allocated_len:
            s, req = release_kv_cache(s, req)
            s = s.with_reqs([req])
    return tx.with_state(s)


def idle(ops: "Ops", tx: Tx) -> Tx:
    """No batch to run: ``SchedulerRuntimeCheckerMixin.on_idle`` (the memory-leak check is the
    ``kv-accounting`` invariant)."""
    return tx.log("idle", "no batch to run")
