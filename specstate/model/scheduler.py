"""Scheduler-side operations of one ``Scheduler.event_loop_normal`` iteration.

Mirrors ``sglang/srt/managers/scheduler.py`` (``get_next_batch_to_run``,
``_get_new_batch_prefill_raw``, ``get_num_allocatable_reqs``, ``update_running_batch`` with
``new_token_ratio``, ``stash_chunked_request``, ``_add_request_to_queue``, ``abort_request``),
``schedule_batch.py`` (``filter_batch``, ``merge_batch``, ``retract_decode``, ``release_req``,
``prepare_for_decode``, ``prepare_for_extend``, ``mix_with_running``, ``check_decode_mem``) and
``scheduler_output_processor_mixin.py`` (``process_batch_result_prefill``,
``process_batch_result_decode``). Admission itself (``PrefillAdder``) is ``admission.py``; the
radix cache ``radix.py`` / ``prefix_cache.py``.

Every function here is a default implementation of one named operation in
:class:`specstate.model.ops.Ops`; call other operations through ``ops`` so a variant's
override of one is seen by all.
"""

from __future__ import annotations

from itertools import filterfalse
from typing import TYPE_CHECKING, Any

from specstate.model.actions import Abort, Arrive
from specstate.model.batch import EMPTY_BATCH, ScheduleBatch, kept_rows, set_rows
from specstate.model.bs_compare import room
from specstate.model.admission import Admission, schedule_admission
from specstate.model.kv import OutOfSlots, alloc_decode_slots, alloc_extend_slots
from specstate.model.modes import ForwardMode
from specstate.model.request import FinishReason, Req, ReqStatus
from specstate.model.runner import ModelledCrash, guarded
from specstate.model.spec_info import EagleDraftInput, SpecInfo, batch_fields
from specstate.model.tensors import cat_rows, leading_len, select_rows, take_rows
from specstate.model.tx import Tx

if TYPE_CHECKING:
    from specstate.model.config import SpecConfig
    from specstate.model.ops_table import Ops
    from specstate.model.state import ModelState

__all__ = [
    "event_loop_normal", "arrive", "validate_input_length", "abort", "get_next_batch_to_run", "merge_last_batch", "schedule_prefill", "prefill_from_admission",
    "update_running_batch", "filter_batch", "filter_spec_info", "merge_batch", "merge_spec_info",
    "check_decode_mem", "retract_decode", "prepare_for_decode", "process_batch_result_prefill",
    "process_batch_result_decode", "check_finished", "idle",
]


# -- one loop iteration ---------------------------------------------------------------

def event_loop_normal(ops: "Ops", tx: Tx) -> tuple[Tx, str, tuple[int, ...]]:
    """``Scheduler.event_loop_normal`` (one iteration; the v1 family's operation ``iteration``):
    the next batch, its forward, its result. Returns the batch kind and rows."""
    tx, batch = ops.get_next_batch_to_run(ops, tx)
    if batch is None:
        return ops.idle(ops, tx), "idle", ()
    kind = "prefill" if batch.forward_mode.is_extend() else "decode"
    try:
        tx = ops.forward_batch_generation(ops, tx, batch)
    except (ModelledCrash, OutOfSlots) as e:
        setattr(e, "batch", (kind, batch.rids, tx))  # which batch crashed
        raise
    if kind == "prefill":
        return ops.process_batch_result_prefill(ops, tx, tx.state.last_batch), kind, batch.rids
    return ops.process_batch_result_decode(ops, tx), kind, batch.rids


# -- arrivals and aborts --------------------------------------------------------------

def arrive(ops: "Ops", tx: Tx, action: Arrive) -> Tx:
    """``Scheduler.handle_generate_request``: ``init_req_max_new_tokens`` (on the prompt as it
    came), ``validate_input_length`` (the operation ``validate_input_length``: a prompt too long
    for the pool is queued as a one-token abort), ``_add_request_to_queue``; the prompt's tokens are
    symbolic (shared with ``action.prefix_of`` for the first ``shared_len``, see ``prefix_cache``).
    A prompt of ``context_len`` tokens or more never reaches the scheduler: the tokenizer manager
    refuses it (``tokenizer_manager.py::TokenizerManager._validate_one_request``)."""
    s = tx.state
    rid = len(s.reqs)
    segments: tuple[tuple[int, int], ...] = ((_ALL, rid),)
    if action.prefix_of is not None:
        segments = _cut(s.req(action.prefix_of).segments, action.shared_len) + segments
    cfg = s.config
    # Scheduler.init_req_max_new_tokens: clamp so that an admitted request always fits
    # (ceil_page(input_len) + max_new_tokens + page_size < max_total_num_tokens)
    page = cfg.page_size
    max_new = max(0, min(action.max_new_tokens, cfg.max_req_len - action.prompt_len - 1,
                         cfg.kv_pool_size - -(-action.prompt_len // page) * page - page - 1))
    req = Req(rid=rid, prompt_len=action.prompt_len, max_new_tokens=max_new, segments=segments)
    if req.prompt_len >= cfg.context_len:
        gone = req.evolve(status=ReqStatus.ABORTED, finish_reason=FinishReason.ABORT)
        return tx.with_state(s.with_new_req(gone)).log("abort", "input longer than the context length: refused by "
                                                                "the tokenizer manager", req.rid)
    req = ops.validate_input_length(ops, cfg, req)
    tx = tx.with_state(s.with_new_req(req, waiting=s.waiting + (req.rid,)))
    if req.to_abort:
        tx = tx.log("abort", "input too long for the KV pool: queued as one token, to_finish = FINISH_ABORT", req.rid)
    return tx


def validate_input_length(ops: "Ops", cfg: "SpecConfig", req: Req) -> Req:
    """``managers/utils.py::validate_input_length`` (``len(origin_input_ids) >= max_req_input_len``,
    ``max_req_input_len = max_req_len - 5``, ``tp_worker.py``; no ``--allow-auto-truncate``) and,
    on its error, ``schedule_batch.py::Req.set_finish_with_abort``: the prompt becomes one token
    (``origin_input_ids = [0]``, "to skip the long prefill") and ``to_finish = FINISH_ABORT``;
    ``max_new_tokens`` stays as ``init_req_max_new_tokens`` set it from the long prompt. The
    request is queued like any other: it is admitted as a one-token prefill (one KV slot) and
    finishes at that prefill's result (``Req.check_finished`` takes ``to_finish`` first); its
    EAGLE bigram key over one token is empty, so ``cache_finished_req`` inserts nothing and frees
    the slot. The same in 0.5.17 and 0.5.23 (``Scheduler.handle_generate_request``)."""
    if req.prompt_len < cfg.max_req_input_len:
        return req
    return req.evolve(prompt_len=1, to_abort=True)


_ALL = 1 << 62  # the last segment of a request's tokens is open-ended


def _cut(segments: tuple[tuple[int, int], ...], n: int) -> tuple[tuple[int, int], ...]:
    """The segments of the first ``n`` tokens."""
    out: list[tuple[int, int]] = []
    for end, owner in segments:
        out.append((min(end, n), owner))
        if end >= n:
            break
    return tuple(out)


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
    tx, prefill = ops.schedule_prefill(ops, tx)
    if prefill is not None:
        return tx, prefill
    if tx.state.running.is_empty():
        return tx, None
    tx = ops.update_running_batch(ops, tx)
    running = tx.state.running
    return tx, (None if running.is_empty() else running)


def merge_last_batch(ops: "Ops", tx: Tx) -> Tx:
    """The ``last_batch.forward_mode.is_extend()`` branch of ``get_next_batch_to_run``."""
    s = tx.state
    if s.chunked_rid is not None:
        # stash_chunked_request: the chunk prefilled last iteration goes into the radix tree
        s, req = ops.cache_unfinished_req(ops, s, s.req(s.chunked_rid))
        tx = tx.with_state(s.with_reqs([req]))
        s = tx.state
    last = s.last_batch
    if last is None:
        return tx
    tx = tx.with_state(s.evolve(last_batch=None))
    keep = [i for i, rid in enumerate(last.rids) if s.req(rid).live and rid != s.chunked_rid]
    last_bs = last.batch_size
    tx, last = ops.filter_batch(ops, tx, last, keep, False)
    if last.batch_size < last_bs:
        tx = tx.with_running(tx.state.running.evolve(batch_is_full=False))
    if last.is_empty():
        return tx
    step = s.step_index
    if tx.state.running.is_empty():  # ``self.running_batch = self.last_batch``: the prefill's tensors carry on
        return tx.with_running(kept_rows(last.evolve(chunked_rid=None, batch_is_full=False), _NEXT_BATCH, step))
    merged = ops.merge_batch(ops, tx.state.running, last)
    return tx.with_running(_merged_rows(merged, tx.state.running, step))


_PREPARE_FOR_EXTEND = "schedule_batch.py::ScheduleBatch.prepare_for_extend"
_NEXT_BATCH = "scheduler.py::Scheduler.get_next_batch_to_run"
_MERGE = "schedule_batch.py::ScheduleBatch.merge_batch"
_FILTER = "schedule_batch.py::ScheduleBatch.filter_batch"


def _merged_rows(merged: ScheduleBatch, running: ScheduleBatch, step: int) -> ScheduleBatch:
    """Provenance after ``merge_batch``: ``input_ids`` the running batch's own (kept), an
    ``out_cache_loc`` it set to ``None`` (as upstream's does)."""
    if merged.input_ids == running.input_ids and merged.input_ids_from is running.input_ids_from:
        merged = kept_rows(merged, _MERGE, step, out_cache_loc=False)
    if merged.out_cache_loc is None:
        merged = set_rows(merged, step, out_cache_loc=_MERGE)
    return merged


def schedule_prefill(ops: "Ops", tx: Tx) -> tuple[Tx, ScheduleBatch | None]:
    """``Scheduler._get_new_batch_prefill_raw``: the early exits (``batch_is_full``, empty
    queue, no request slot), ``PrefillAdder`` over the chunked request and the waiting queue
    in FCFS order (``admission.py``), then ``prepare_for_extend``. The tree's access times and
    splits from prefix matching persist even when nothing is admitted."""
    s = tx.state
    if (s.running.batch_is_full or not s.waiting) and s.chunked_rid is None:
        return tx, None
    if allocatable_reqs(s, s.running.batch_size) <= 0 and s.chunked_rid is None:
        return tx.with_running(s.running.evolve(batch_is_full=True)), None
    s, adm = schedule_admission(ops, s, allocatable_reqs(s, s.running.batch_size))
    return prefill_from_admission(ops, tx, s, adm)


def prefill_from_admission(ops: "Ops", tx: Tx, s: "ModelState", adm: Admission) -> tuple[Tx, ScheduleBatch | None]:
    """The end of ``_get_new_batch_prefill_raw`` once the adder ran: a full batch is remembered
    (``running_batch.batch_is_full``), and the picked requests become the extend batch
    (``ScheduleBatch.init_new`` + ``prepare_for_extend``)."""
    if adm.batch_is_full:
        s = s.evolve(running=s.running.evolve(batch_is_full=True))
    tx = tx.with_state(s)
    if not adm.picked:
        return tx, None
    return _build_prefill(ops, tx, adm.picked, adm.chunked_rid)


def allocatable_reqs(s: "ModelState", running_bs: int) -> int:
    """``Scheduler.get_num_allocatable_reqs``: ``pp_max_micro_batch_size`` (=
    ``max_running_requests``) minus the running batch's rows (finished rows not yet filtered
    count), capped by the free ``req_to_token_pool`` slots."""
    cfg = s.config
    return min(room(cfg.max_running_requests, running_bs), room(cfg.max_running_requests, s.req_slots_held()))


def _build_prefill(ops: "Ops", tx: Tx, picked: list[tuple[int, int, int]], chunked: int | None) -> tuple[Tx, ScheduleBatch]:
    """``ScheduleBatch.init_new`` + ``prepare_for_extend``: allocate the extend tokens (evicting
    from the radix tree if needed); ``kv_committed_len = kv_allocated_len = seq_len`` once the
    forward ran (the model counts the target KV written, so the prefix is committed here)."""
    s = tx.state
    total = sum(e for _, _, e in picked)
    # alloc_for_extend: alloc_token_slots (page size 1) / alloc_paged_token_slots_extend
    s = alloc_extend_slots(s, [(prefix, prefix + extend) for _, prefix, extend in picked], "prepare_for_extend", ops)
    reqs = []
    for rid, prefix, extend in picked:
        req = s.req(rid)
        is_chunk = rid == chunked
        reqs.append(req.evolve(status=ReqStatus.PREFILLING if is_chunk else ReqStatus.RUNNING,
                               kv_allocated_len=prefix + extend, kv_committed_len=prefix, draft_kv_len=prefix,
                               is_retracted=False))
    admitted = {p[0] for p in picked}
    s = s.with_reqs(reqs).evolve(
        waiting=tuple(filterfalse(admitted.__contains__, s.waiting)),
        chunked_rid=chunked,
    )
    batch = ScheduleBatch(
        rids=tuple(r for r, _, _ in picked),
        forward_mode=ForwardMode.EXTEND,
        seq_lens=tuple(p + e for _, p, e in picked),
        req_pool_indices=tuple(r for r, _, _ in picked),
        input_ids=(total,), positions=(total,), out_cache_loc=(total,),
        extend_lens=tuple(e for _, _, e in picked),
        spec_info=None, chunked_rid=chunked, stored_seq_lens_sum=sum(p + e for _, p, e in picked),
    )
    batch = set_rows(batch, s.step_index, input_ids=_PREPARE_FOR_EXTEND, out_cache_loc=_PREPARE_FOR_EXTEND)
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
        return tx, EMPTY_BATCH.evolve(batch_is_full=batch.batch_is_full)
    spec = batch.spec_info
    if spec is not None:
        tx, spec = ops.filter_spec_info(ops, tx, spec, keep, has_been_filtered)
    seq_lens = tuple(batch.seq_lens[i] for i in keep)
    out = batch.evolve(
        rids=tuple(batch.rids[i] for i in keep),
        seq_lens=seq_lens,
        req_pool_indices=tuple(batch.req_pool_indices[i] for i in keep),
        out_cache_loc=None, spec_info=spec, stored_seq_lens_sum=sum(seq_lens),
        chunked_rid=batch.chunked_rid if batch.chunked_rid in {batch.rids[i] for i in keep} else None,
    )
    # upstream's filter_batch leaves input_ids as they were (unfiltered) and sets out_cache_loc = None
    step = tx.state.step_index
    return tx, set_rows(kept_rows(out, _FILTER, step, out_cache_loc=False), step, out_cache_loc=_FILTER)


def filter_spec_info(ops: "Ops", tx: Tx, spec: SpecInfo, keep: list[int], has_been_filtered: bool) -> tuple[Tx, SpecInfo]:
    """``EagleDraftInput.filter_batch``: truncate when verify already filtered, else select;
    every per-row field (``batch_fields``, a subclass's additions included)."""
    if not isinstance(spec, EagleDraftInput):
        return tx, spec
    n = len(keep)
    names = batch_fields(type(spec))
    if has_been_filtered:
        if n != spec.num_rows:
            msg = f"length of new_indices: {n} != length of topk_p: {spec.num_rows}, this should not happen"
            if tx.config.strict_filter_check:
                guarded("eagle_info.py::EagleDraftInput.filter_batch", {"new_indices": [n], "topk_p": list(spec.topk_p)},
                        lambda: _raise(ValueError(msg)))
            tx = tx.log("warning", msg)
        return tx, spec.evolve(rows=spec.rows[:n], **{f: take_rows(getattr(spec, f), n) for f in names})
    shapes = {"topk_p": list(spec.topk_p), "new_indices": list(keep)}
    picked = guarded("eagle_info.py::EagleDraftInput.filter_batch", shapes,
                     lambda: {f: select_rows(getattr(spec, f), keep) for f in names})
    return tx, spec.evolve(rows=tuple(spec.rows[i] for i in keep), **picked)


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
        stored_seq_lens_sum=running.stored_sum + other.stored_sum,
    )


def merge_spec_info(ops: "Ops", mine: SpecInfo, other: SpecInfo | None) -> SpecInfo:
    """``EagleDraftInput.merge_batch``: take the other's rows when mine is an idle stub."""
    where = "eagle_info.py::EagleDraftInput.merge_batch"
    shapes: dict[str, Any] = {"self": type(mine).__name__, "other": type(other).__name__ if other is not None else None}
    if not isinstance(mine, EagleDraftInput):
        return mine
    if guarded(where, shapes, lambda: leading_len(mine.topk_index) == 0):
        assert isinstance(other, EagleDraftInput)
        return other
    if guarded(where, shapes, lambda: leading_len(other.topk_index) == 0):  # type: ignore[union-attr]
        return mine
    assert isinstance(other, EagleDraftInput)
    shapes.update(self_hidden=list(mine.hidden_states), other_hidden=list(other.hidden_states))
    names = batch_fields(type(mine))
    return guarded(where, shapes, lambda: mine.evolve(
        rows=mine.rows + other.rows, **{f: cat_rows(getattr(mine, f), getattr(other, f)) for f in names}))


def mix_with_running(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> tuple[Tx, ScheduleBatch]:
    """``ScheduleBatch.mix_with_running`` done right: one new cache location per running
    request (``--enable-mixed-chunk``; SGLang 0.5.12 forbids it with speculation)."""
    s = tx.state
    running = s.running
    s = alloc_decode_slots(s, [s.req(r).kv_allocated_len for r in running.rids], "mix_with_running", ops)
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
    """``Scheduler.update_running_batch``: drop finished rows, check decode memory (evicting
    from the tree), retract on pressure (``new_token_ratio`` from the survivors) or decay the
    ratio, reset ``batch_is_full`` when rows left, ``prepare_for_decode``."""
    s = tx.state
    initial_bs = s.running.batch_size
    keep = [i for i, rid in enumerate(s.running.rids) if s.req(rid).live]
    tx, running = ops.filter_batch(ops, tx, s.running, keep, True)
    tx = tx.with_running(running)
    if running.is_empty():
        return tx.with_running(running.evolve(batch_is_full=False))
    s, ok = ops.check_decode_mem(ops, tx.state, running.rids)
    tx = tx.with_state(s)
    if not ok:
        tx = ops.retract_decode(ops, tx)
    else:
        cfg = tx.config
        tx = tx.with_state(tx.state.evolve(new_token_ratio=max(tx.state.new_token_ratio - cfg.new_token_ratio_decay,
                                                               cfg.min_new_token_ratio)))
    if tx.state.running.batch_size < initial_bs:
        tx = tx.with_running(tx.state.running.evolve(batch_is_full=False))
    if tx.state.running.is_empty():
        return tx
    prepared = ops.prepare_for_decode(ops, tx.state.running)
    if prepared.input_ids == tx.state.running.input_ids:  # the speculative early return leaves both
        prepared = kept_rows(prepared, "schedule_batch.py::ScheduleBatch.prepare_for_decode", tx.state.step_index)
    return tx.with_running(prepared)


def check_decode_mem(ops: "Ops", state: "ModelState", rids: tuple[int, ...]) -> tuple["ModelState", bool]:
    """``ScheduleBatch.check_decode_mem``: ``new_tokens_required_next_decode`` (spec v1:
    ``max(steps * topk, draft_tokens)`` per request, paged rounded up to pages:
    ``SpecConfig.decode_reserve_per_req``), evicting from the tree first."""
    need = state.config.decode_reserve_per_req * len(rids)
    state = ops.evict_from_tree_cache(ops, state, need)
    return state, state.kv_available >= need


#: ``SGLANG_RETRACT_DECODE_STEPS`` (``environ.py``)
RETRACT_DECODE_STEPS = 20


def retract_decode(ops: "Ops", tx: Tx) -> Tx:
    """``ScheduleBatch.retract_decode`` + the caller's bookkeeping: with speculation, retract
    from the back (always keep one), each released without inserting into the tree and
    followed by an eviction of ``remaining * 20`` slots; abort the last one if even it does
    not fit; ``new_token_ratio`` from the survivors; re-queue at the back."""
    return retract_in_order(ops, tx, list(range(tx.state.running.batch_size)))


def retract_in_order(ops: "Ops", tx: Tx, keep: list[int]) -> Tx:
    """The retraction loop over the running rows in ``keep`` order (most preferred to keep
    first; the last is retracted first); the survivors stay in ``keep`` order
    (``filter_batch(keep_indices=...)``)."""
    s = tx.state
    rids = s.running.rids
    retracted: list[int] = []
    first = True
    while True:
        if not first:
            s, ok = ops.check_decode_mem(ops, s, tuple(rids[i] for i in keep))
            if ok:
                break
        if len(keep) == 1:
            break
        first = False
        rid = rids[keep.pop()]
        retracted.append(rid)
        s = _release_for_retract(ops, s, rid, len(keep))
        tx = tx.log("retract", "KV cache pool is full. Retract requests.", rid)
    if len(keep) <= 1:
        s, ok = ops.check_decode_mem(ops, s, tuple(rids[i] for i in keep))
        if not ok:
            rid = rids[keep.pop()]
            s, req = ops.release_kv_cache(ops, s, s.req(rid), is_insert=False)
            s = s.with_reqs([req.evolve(status=ReqStatus.FINISHED, finish_reason=FinishReason.ABORT, kv_committed_len=0)])
            tx = tx.log("abort", "Out of memory even after retracting all other requests", rid)
    tx = tx.with_state(s)
    tx, running = ops.filter_batch(ops, tx, s.running, keep, False)
    kept = [s.req(r) for r in running.rids]
    ratio = (sum(r.output_len for r in kept) + RETRACT_DECODE_STEPS * len(kept)) / (sum(r.max_new_tokens for r in kept) + 1)
    s = tx.state.evolve(running=running, new_token_ratio=min(1.0, ratio), waiting=tx.state.waiting + tuple(retracted))
    return tx.with_state(s)


def _release_for_retract(ops: "Ops", s: "ModelState", rid: int, remaining: int) -> "ModelState":
    """``ScheduleBatch.release_req``: ``release_kv_cache(is_insert=False)``, evict
    ``remaining * SGLANG_RETRACT_DECODE_STEPS`` slots, ``Req.reset_for_retract``."""
    s, req = ops.release_kv_cache(ops, s, s.req(rid), is_insert=False)
    s = ops.evict_from_tree_cache(ops, s, remaining * RETRACT_DECODE_STEPS)
    req = req.evolve(status=ReqStatus.WAITING, retractions=req.retractions + 1, is_retracted=True, kv_committed_len=0)
    return s.with_reqs([req])


def prepare_for_decode(ops: "Ops", batch: ScheduleBatch) -> ScheduleBatch:
    """``ScheduleBatch.prepare_for_decode``: with speculation it sets DECODE and returns
    early ("the decode batch is prepared inside forward_batch_speculative_generation"), before
    ``input_ids`` / ``out_cache_loc`` are set: the batch keeps what it carried."""
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
    request gets none; finished requests release their KV into the tree, the others are
    cached as unfinished (``cache_unfinished_req``). The batch becomes ``last_batch``."""
    s = tx.state
    for rid in batch.rids:
        req = s.req(rid)
        if rid == batch.chunked_rid or req.done:
            continue
        req, _ = append_tokens(req.evolve(status=ReqStatus.RUNNING), 1)
        if req.done:
            s, req = ops.release_kv_cache(ops, s, req)
        else:
            s, req = ops.cache_unfinished_req(ops, s, req)
        s = s.with_reqs([req])
    return tx.with_state(s.evolve(last_batch=batch))


def process_batch_result_decode(ops: "Ops", tx: Tx) -> Tx:
    """``process_batch_result_decode`` (spec v1 branch): outputs were appended in verify;
    ``_handle_finished_req`` releases the KV of requests that finished."""
    s = tx.state
    for rid in s.running.rids:
        req = s.req(rid)
        if req.done and req.kv_allocated_len:
            s, req = ops.release_kv_cache(ops, s, req)
            s = s.with_reqs([req])
    return tx.with_state(s)


def _raise(e: BaseException) -> None:
    raise e


def idle(ops: "Ops", tx: Tx) -> Tx:
    """No batch to run: ``SchedulerRuntimeCheckerMixin.on_idle`` when ``is_fully_idle`` (the
    memory-leak check is the ``kv-accounting`` invariant): ``new_token_ratio`` back to its
    initial value."""
    s = tx.state
    if s.running.is_empty() and s.chunked_rid is None and not s.waiting:
        tx = tx.with_state(s.evolve(new_token_ratio=s.config.init_new_token_ratio))
    return tx.log("idle", "no batch to run")
