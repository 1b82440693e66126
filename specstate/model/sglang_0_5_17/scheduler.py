"""The overlap scheduler of sglang 0.5.17: one loop iteration, decode memory, results one late.

Mirrors ``managers/scheduler.py::Scheduler.event_loop_overlap``::

    batch = get_next_batch_to_run(running_batch, last_batch)  # last iteration's result NOT processed
    if batch: run_batch(batch)                                 # the device runs it now
    if last_batch: pop_and_process()                           # process_batch_result(last batch)
    elif batch is None: on_idle()
    last_batch = batch

so the scheduler decides each batch one result behind: a request that finished in the batch
still in flight is scheduled once more (its result is dropped: the ``req.finished() or
req.is_retracted`` guard of ``BatchResultProcessor.process_batch_result_decode``), and
``kv_committed_len`` lags the device's ``seq_lens`` by up to one verify. The shared operations
(admission, radix cache, filter / merge, ``update_running_batch``) run as in the v1 family; what
0.5.17 does differently is here:

- decode memory: ``ScheduleBatch._new_tokens_required_next_decode_spec_v2`` and
  ``eagle_utils.py::eagle_prepare_for_decode``: each request owns up to ``kv_committed_len +
  get_alloc_reserve_per_decode()`` slots (``allocation_sizing.py::get_alloc_reserve_per_decode``:
  twice ``get_alloc_len_per_decode``, ``max(steps * topk, max_speculative_num_draft_tokens)`` of
  the *startup* server arguments), never shrinking (``max(cur, ...)``); paged (``--page-size`` P > 1)
  the new length is rounded up to whole pages and the growth is allocated by
  ``alloc_paged_token_slots_extend`` from ``cur`` to ``nxt`` (``allocation.py::alloc_for_spec_decode``:
  the last partial page filled first, then new pages), so a running request always holds whole pages;
- retraction order: ``ScheduleBatch._get_decode_retraction_order`` (fewest outputs, then longest
  prompt, retracted first), and the batch keeps that order;
- results: ``BatchResultProcessor._resolve_spec_v2_tokens`` (feeds the adaptive controller,
  commits every accepted token), ``process_batch_result_decode`` (extends ``output_ids`` by the
  whole run, ``Req.update_finish_state``), ``process_batch_result_prefill``;
- ``EagleDraftInput.filter_batch`` selects ``future_indices`` rows (never truncates).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from specstate.model.admission import AddReqResult, add_one_req_checked
from specstate.model.config import SpecConfig
from specstate.model.kv import OutOfSlots, alloc_extend_slots, ceil_align
from specstate.model.radix import evict
from specstate.model.prefix_cache import release_kv_cache
from specstate.model.request import FinishReason, Req, ReqStatus
from specstate.model.runner import ModelledCrash, guarded, sglang_assert
from specstate.model.scheduler import filter_spec_info, retract_in_order, update_running_batch
from specstate.model.spec_info import SpecInfo
from specstate.model.tx import Tx
from specstate.model.sglang_0_5_17.adaptive import max_draft_tokens_of
from specstate.model.sglang_0_5_17.spec_info import EagleDraftInputV2, filter_future, merge_future
from specstate.model.sglang_0_5_17.state import OverlapState, PendingResult

if TYPE_CHECKING:
    from specstate.model.admission import Admission, _Budget
    from specstate.model.ops_table import Ops
    from specstate.model.state import ModelState

__all__ = ["event_loop_overlap", "overlap", "update_running_batch_v2", "eagle_prepare_for_decode",
           "alloc_len_per_decode", "alloc_reserve_per_decode", "check_decode_mem_v2", "decode_alloc_lens",
           "grow_allocations", "retract_decode_v2", "add_one_req_v2",
           "filter_spec_info_v2", "merge_spec_info_v2", "process_pending_result", "process_batch_result_prefill_v2",
           "process_batch_result_decode_v2", "resolve_spec_v2_tokens", "update_finish_state", "update_finish_state_op",
           "release_kv_cache_v2"]


def overlap(s: "ModelState") -> OverlapState:
    assert s.v2 is not None, "a v2 operation ran on a state without the v2 family's state"
    return cast(OverlapState, s.v2)  # the family's start (``start_overlap`` in the model's state.py) makes an OverlapState


def with_overlap(tx: Tx, **changes: object) -> Tx:
    return tx.with_state(tx.state.evolve(v2=overlap(tx.state).evolve(**changes)))


# -- one iteration ---------------------------------------------------------------------

def event_loop_overlap(ops: "Ops", tx: Tx) -> tuple[Tx, str, tuple[int, ...]]:
    """One ``Scheduler.event_loop_overlap`` iteration (the v2 family's operation ``iteration``):
    schedule, launch (the worker leaves its result in ``launched``), then process last
    iteration's result (``pending``); ``tx.processed`` names its rows."""
    pending = overlap(tx.state).pending
    tx, batch = ops.get_next_batch_to_run(ops, tx)
    kind, rids = "none", ()
    if batch is not None:
        kind, rids = ("prefill" if batch.forward_mode.is_extend() else "decode"), batch.rids
        try:
            tx = ops.forward_batch_generation(ops, tx, batch)
        except (ModelledCrash, OutOfSlots) as e:
            setattr(e, "batch", (kind, rids, tx))
            raise
    launched = overlap(tx.state).launched
    tx = with_overlap(tx, pending=None, launched=None)
    if pending is not None:
        tx = ops.process_pending_result(ops, tx, pending)
    elif batch is None:
        tx, kind = ops.idle(ops, tx), "idle"
    return with_overlap(tx, pending=launched), kind, rids


# -- decode memory ---------------------------------------------------------------------

def alloc_len_per_decode(config: SpecConfig) -> int:
    """``allocation_sizing.py::get_alloc_len_per_decode``: from the startup server arguments, so
    constant across runtime states (``ServerArgs.max_speculative_num_draft_tokens``: the largest
    candidate + 1; a static launch's own ``speculative_num_draft_tokens``). The family is topk 1, so
    upstream's paged topk > 1 branch (whole pages per branch) is never taken: the same at every
    page size."""
    steps = config.speculative_num_steps or 1
    return max(steps * config.speculative_eagle_topk, max_draft_tokens_of(config))


def alloc_reserve_per_decode(ops: "Ops", s: "ModelState") -> int:
    """``allocation_sizing.py::get_alloc_reserve_per_decode``: twice ``alloc_len_per_decode`` (the
    double buffer that absorbs the ``kv_committed_len`` lag of the overlap scheduler)."""
    return 2 * alloc_len_per_decode(s.config)


def check_decode_mem_v2(ops: "Ops", s: "ModelState", rids: tuple[int, ...]) -> tuple["ModelState", bool]:
    """``ScheduleBatch.check_decode_mem``: ``_new_tokens_required_next_decode_spec_v2`` (what
    ``eagle_prepare_for_decode`` would allocate: per request ``ceil_align(cur + x, P) -
    ceil_align(cur, P)`` with ``x = max(0, committed + reserve - cur)``, whole pages), evicting
    the shortfall from the tree."""
    reserve, page = ops.alloc_reserve_per_decode(ops, s), s.config.page_size
    need = 0
    for r in rids:
        cur = s.req(r).kv_allocated_len
        nxt = cur + max(0, s.req(r).kv_committed_len + reserve - cur)
        need += ceil_align(nxt, page) - ceil_align(cur, page)
    s = ops.evict_from_tree_cache(ops, s, need)
    return s, s.kv_available >= need


def evict_from_tree_cache_v2(ops: "Ops", state: "ModelState", num_tokens: int) -> "ModelState":
    """``mem_cache/common.py::evict_from_tree_cache`` (0.5.17): if fewer than ``num_tokens``
    slots are free, evict only the shortfall (``num_tokens - available``) of LRU leaves from
    the radix tree (0.5.12 evicted ``num_tokens``: the shared ``kv.evict_from_tree_cache_op``)."""
    if state.config.disable_radix_cache or state.kv_available >= num_tokens:
        return state
    tree, freed = evict(state.tree, num_tokens - state.kv_available)
    return state.evolve(tree=tree, kv_available=state.kv_available + freed)


def decode_alloc_lens(s: "ModelState", reserve: int) -> dict[int, int]:
    """Each running request's next ``kv_allocated_len``: ``max(cur, ceil_align(kv_committed_len +
    reserve, page_size))`` (``eagle_utils.py::eagle_prepare_for_decode``: "Whole-page accounting: the
    paged allocator hands out full pages, so round nxt up to the page boundary"; the identity at
    page size 1)."""
    page = s.config.page_size
    return {r: max(s.req(r).kv_allocated_len, ceil_align(s.req(r).kv_committed_len + reserve, page))
            for r in s.running.rids}


def grow_allocations(ops: "Ops", s: "ModelState", grown: dict[int, int]) -> "ModelState":
    """``allocation.py::alloc_for_spec_decode`` from ``cur = kv_allocated_len`` to ``grown``: when
    any row grows, ``alloc_token_slots(num_needed_tokens)`` at page size 1, else
    ``alloc_paged_token_slots_extend(cur, nxt)`` over every row (evicting ``num_needed + bs *
    page_size``, then the new pages); then ``kv_allocated_len = nxt``. A row that would shrink
    allocates nothing."""
    rows = [(s.req(r).kv_allocated_len, max(n, s.req(r).kv_allocated_len)) for r, n in grown.items()]
    if sum(end - start for start, end in rows) > 0:
        s = alloc_extend_slots(s, rows, "alloc_for_spec_decode", ops)
    return s.with_reqs(s.req(r).evolve(kv_allocated_len=n) for r, n in grown.items())


def eagle_prepare_for_decode(ops: "Ops", tx: Tx) -> Tx:
    """``eagle_prepare_for_decode`` -> ``allocation.py::alloc_for_spec_decode``: each running
    request grows to ``max(kv_allocated_len, kv_committed_len + 2 * alloc_len_per_decode)``, paged
    rounded up to whole pages (``decode_alloc_lens``)."""
    s = tx.state
    return tx.with_state(grow_allocations(ops, s, decode_alloc_lens(s, ops.alloc_reserve_per_decode(ops, s))))


def update_running_batch_v2(ops: "Ops", tx: Tx) -> Tx:
    """``Scheduler.update_running_batch`` (as v1) whose ``prepare_for_decode`` ends in
    ``spec_prepare_for_decode`` -> ``eagle_prepare_for_decode`` (the allocation)."""
    tx = update_running_batch(ops, tx)
    if tx.state.running.is_empty():
        return tx
    return ops.eagle_prepare_for_decode(ops, tx)


def retract_decode_v2(ops: "Ops", tx: Tx) -> Tx:
    """``ScheduleBatch.retract_decode`` with ``_get_decode_retraction_order``: keep the requests
    with the most outputs (then the shortest prompts); retract from the end of that order."""
    s = tx.state
    order = sorted(range(s.running.batch_size), reverse=True,
                   key=lambda i: (s.req(s.running.rids[i]).output_len, -s.req(s.running.rids[i]).prompt_len))
    return retract_in_order(ops, tx, order)


def add_one_req_v2(ops: "Ops", s: "ModelState", b: "_Budget", req: Req, adm: "Admission") -> tuple["ModelState", AddReqResult]:
    """``PrefillAdder.add_one_req``: 0.5.17 checks ``rem_input_tokens`` per request only with
    chunked prefill off (``rem_chunk_tokens is None``); the model's chunked prefill is always on."""
    return add_one_req_checked(s, b, req, adm, input_budget=False)


def filter_spec_info_v2(ops: "Ops", tx: Tx, spec: SpecInfo, keep: list[int], has_been_filtered: bool) -> tuple[Tx, SpecInfo]:
    """``EagleDraftInput.filter_batch`` with ``future_indices``: selects those rows only (the
    draft tensors are gathered again at the next launch); other spec inputs as v1."""
    if isinstance(spec, EagleDraftInputV2):
        return tx, filter_future(spec, keep)
    return filter_spec_info(ops, tx, spec, keep, has_been_filtered)


# -- results, one iteration late -------------------------------------------------------

def process_pending_result(ops: "Ops", tx: Tx, pending: PendingResult) -> Tx:
    """``Scheduler.process_batch_result`` of last iteration's batch (``pop_and_process``)."""
    if pending.kind == "prefill":
        tx = ops.process_batch_result_prefill(ops, tx, pending)
    else:
        tx = ops.process_batch_result_decode(ops, tx, pending)
    return tx.with_processed(pending.batch.rids)


def release_kv_cache_v2(ops: "Ops", s: "ModelState", req: Req, is_insert: bool = True) -> tuple["ModelState", Req]:
    """``mem_cache/common.py::release_kv_cache`` as 0.5.17 leaves the request: its slots go back
    (``req.kv = None``, so ``kv_allocated_len`` reads 0) but ``Req.kv_committed_len`` keeps its
    value: only ``Req.reset_for_retract`` zeroes it. A finished request the running batch still
    holds (until the next ``update_running_batch`` filters it) shows its last commit."""
    committed = req.kv_committed_len
    s, req = release_kv_cache(ops, s, req, is_insert)
    return s, req.evolve(kv_committed_len=committed)


def update_finish_state(req: Req, eos: bool) -> Req:
    """``Req.update_finish_state``: an abort first, then the length, then EOS."""
    reason = None
    if req.to_abort:
        reason = FinishReason.ABORT
    elif req.output_len >= req.max_new_tokens:
        reason = FinishReason.LENGTH
    elif eos:
        reason = FinishReason.EOS
    if reason is None:
        return req
    return req.evolve(status=ReqStatus.FINISHED, finish_reason=reason, eos_pending=False)


def update_finish_state_op(ops: "Ops", req: Req, eos: bool) -> Req:
    """The operation ``update_finish_state``: ``schedule_batch.py::Req.update_finish_state`` as
    the result processing calls it (``update_finish_state``; a later release overrides it)."""
    return update_finish_state(req, eos)


def process_batch_result_prefill_v2(ops: "Ops", tx: Tx, pending: PendingResult) -> Tx:
    """``BatchResultProcessor.process_batch_result_prefill``: finished or retracted rows and the
    chunked request's middle chunk are skipped; the others get their first token, then
    ``release_kv_cache`` or ``cache_unfinished_req``."""
    s = tx.state
    for rid in pending.batch.rids:
        req = s.req(rid)
        if req.done or req.is_retracted or rid == pending.batch.chunked_rid:
            continue
        req = ops.update_finish_state(ops, req.evolve(status=ReqStatus.RUNNING, output_len=req.output_len + 1),
                                      rid in pending.eos)
        if req.done:
            s, req = ops.release_kv_cache(ops, s, req)
        else:
            s, req = ops.cache_unfinished_req(ops, s, req)
        s = s.with_reqs([req])
    return tx.with_state(s)


def resolve_spec_v2_tokens(ops: "Ops", tx: Tx, pending: PendingResult) -> Tx:
    """``_resolve_spec_v2_tokens``: the adaptive controller gets every row's correct drafts
    (``on_verify_complete_cpu``); unfinished, unretracted rows commit their whole accepted run."""
    tx = ops.on_verify_complete(ops, tx, tuple(a - 1 for a in pending.accept), pending.batch.batch_size)
    s = tx.state
    commits = []
    for rid, a in zip(pending.batch.rids, pending.accept):
        req = s.req(rid)
        if not (req.done or req.is_retracted):
            commits.append(req.evolve(kv_committed_len=req.kv_committed_len + a))
    return tx.with_reqs(*commits) if commits else tx


def process_batch_result_decode_v2(ops: "Ops", tx: Tx, pending: PendingResult) -> Tx:
    """``BatchResultProcessor.process_batch_result_decode``: rows that finished (or were
    retracted) since the batch was scheduled are skipped; the others extend ``output_ids`` by
    the accepted run, ``update_finish_state``, and finished ones ``release_kv_cache``."""
    tx = ops.resolve_spec_v2_tokens(ops, tx, pending)
    s = tx.state
    for rid, a in zip(pending.batch.rids, pending.accept):
        req = s.req(rid)
        if req.done or req.is_retracted:
            continue
        req = ops.update_finish_state(ops, req.evolve(output_len=req.output_len + a), rid in pending.eos)
        if req.done:
            s, req = ops.release_kv_cache(ops, s, req)
        s = s.with_reqs([req])
    return tx.with_state(s)



def merge_spec_info_v2(ops: "Ops", mine: SpecInfo, other: SpecInfo | None) -> SpecInfo:
    """``EagleDraftInput.merge_batch`` with ``future_indices`` (``assert spec_info.future_indices
    is not None``, then one ``torch.cat``)."""
    if not isinstance(mine, EagleDraftInputV2):
        return mine
    guarded("eagle_info.py::EagleDraftInput.merge_batch", {"other": type(other).__name__},
            lambda: sglang_assert(isinstance(other, EagleDraftInputV2), "assert spec_info.future_indices is not None"))
    assert isinstance(other, EagleDraftInputV2)
    return merge_future(mine, other)
