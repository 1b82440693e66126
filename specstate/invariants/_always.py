"""The ``always`` invariants, one function each, in the order they are reported.

Families (``shared/reference/known-bugs.md``): mode consistency, per-mode token counts,
post-verify row counts, graph padding, KV accounting in both pools, draft KV in step before
drafting, a stable switch decision; plus the worker not crashing at all.
"""

from __future__ import annotations

import bisect
import operator
from itertools import compress, islice, repeat
from operator import is_not
from typing import Any, Callable, Iterator, NamedTuple

from specstate.invariants._core import Violation, invariant
from specstate.model.graph_buffers import BufferRead, Writer
from specstate.model.kv import held_slots
from specstate.model.modes import ForwardMode, Worker
from specstate.model.request import ReqStatus
from specstate.model.spec_info import SPEC_FOR_MODE as _SPEC_FOR_MODE, EagleDraftInput, batch_fields
from specstate.model.records import ForwardRecord
from specstate.model.step import StepOutcome

__all__: list[str] = []


def _v(o: StepOutcome, name: str, field: str, expected: object, actual: object, rid: int | None = None,
       detail: str = "", shapes: dict | None = None) -> Violation:
    return Violation(name, o.state.step_index, rid, field, expected, actual, detail, shapes or {})


@invariant("worker-crash", "eagle_worker.py::EAGLEWorker.forward_batch_generation (scheduler event_loop_normal dies)")
def worker_crash(o: StepOutcome) -> Iterator[Violation]:
    """The worker never raises: no shape mismatch, no stale-field access, no allocation failure."""
    if o.crash is not None:
        c = o.crash
        yield _v(o, "worker-crash", c.where, "no exception", f"{c.error_class}: {c.message}", shapes=c.shapes)


@invariant("graph-input-rows", "cuda_graph_runner.py::CudaGraphRunner.replay_prepare "
           "(raw_num_token = raw_bs * num_tokens_per_bs), cuda_graph_runner.py::DecodeInputBuffers.populate_from_forward_batch")
def graph_input_rows(o: StepOutcome) -> Iterator[Violation]:
    """Every batch field copied into a CUDA-graph slice has exactly the slice's rows (target:
    ``raw_bs x num_tokens_per_bs``), checked before the copy, so a replay that crashed on it is
    reported too; a 1-row field that would broadcast silently into the slice is a violation as
    well. Reported with where the field's rows came from (the batch's provenance)."""
    for f in o.forwards:
        for name, rows in f.graph_slices:
            src = getattr(f, name)
            if src is not None and src[:1] == (rows,):
                continue
            prov = getattr(f, f"{name}_from", None)
            where = prov.describe() if prov is not None else "built for this forward"
            how = "a None field" if src is None else ("broadcast from 1 row" if src[:1] == (1,) else "a size mismatch")
            yield _v(o, "graph-input-rows", f"{f.phase}.{name}", f"({rows},) (raw_bs {f.batch_size})",
                     src, rid=prov.rids[0] if prov is not None and len(prov.rids) == 1 else None,
                     detail=f"{how}; {name} {where}", shapes={"slice": [rows], name: None if src is None else list(src)})


def _kind_ok(f: ForwardRecord, want: type | None) -> bool:
    """``isinstance`` (a variant's subclass is its base's kind); a record without the class
    (a real recording) compares the class name."""
    if want is None:
        return f.spec_info is None
    if f.spec_info_type is not None:
        return issubclass(f.spec_info_type, want)
    return f.spec_info == want.__name__


@invariant("mode-consistency", "cuda_graph_runner.py::CudaGraphRunner.can_run; triton_backend.py::TritonAttnBackend.init_forward_metadata")
def mode_consistency(o: StepOutcome) -> Iterator[Violation]:
    """Forward mode, ``spec_info`` type and the graph runner's capture agree: TARGET_VERIFY
    carries an ``EagleVerifyInput``, a target DECODE carries none, draft DECODE an
    ``EagleDraftInput``, DRAFT_EXTEND an ``EagleDraftExtendInput``; a graph replay uses a
    runner captured for this forward mode with this many tokens per request; a decode batch
    at rest carries an ``EagleDraftInput``."""
    for f in o.forwards:
        key = (f.worker, f.forward_mode)
        want = _SPEC_FOR_MODE.get(key, object)
        if want is not object and not _kind_ok(f, want):
            yield _v(o, "mode-consistency", f"{f.phase}.spec_info", want.__name__ if want else None, f.spec_info,
                     detail=f"{f.worker.value} {f.forward_mode.value} forward")
        g = f.graph
        if g is None:
            continue
        if g.capture_forward_mode != f.forward_mode:
            yield _v(o, "mode-consistency", f"{f.phase}.graph.capture_forward_mode", f.forward_mode.value,
                     g.capture_forward_mode.value, detail=f"runner {g.runner}")
        if f.worker == Worker.TARGET and f.input_ids[0] != g.raw_bs * g.num_tokens_per_bs:
            yield _v(o, "mode-consistency", f"{f.phase}.input_ids", g.raw_bs * g.num_tokens_per_bs, f.input_ids[0],
                     detail=f"runner {g.runner} captured {g.num_tokens_per_bs} tokens/request")
    running = o.state.running
    if o.batch_kind == "decode" and any(o.state.req(r).live for r in running.rids):
        if not isinstance(running.spec_info, EagleDraftInput):
            yield _v(o, "mode-consistency", "running.spec_info", "EagleDraftInput",
                     type(running.spec_info).__name__ if running.spec_info is not None else None,
                     detail="the next decode must be able to draft or fall back")


@invariant("token-counts", "schedule_batch.py::ScheduleBatch.prepare_for_extend; eagle_info.py::EagleVerifyInput.prepare_for_verify")
def token_counts(o: StepOutcome) -> Iterator[Violation]:
    """In every forward ``input_ids``, ``positions`` and ``out_cache_loc`` hold the tokens
    the mode implies: sum(extend_lens) for EXTEND/MIXED/DRAFT_EXTEND, bs for a plain DECODE,
    bs*draft_token_num for TARGET_VERIFY, bs*topk for drafting (``out_cache_loc``:
    bs*topk*steps)."""
    for f in o.forwards:
        if f.expected_tokens is None:
            continue
        exp = f.expected_tokens
        if f.extend_lens is not None and f.forward_mode in (ForwardMode.EXTEND, ForwardMode.MIXED, ForwardMode.DRAFT_EXTEND):
            if sum(f.extend_lens) != exp:
                yield _v(o, "token-counts", f"{f.phase}.extend_lens", exp, sum(f.extend_lens))
        if f.input_ids[0] != exp:
            yield _v(o, "token-counts", f"{f.phase}.input_ids", (exp,), f.input_ids)
        if f.positions is not None and f.positions[0] != exp:
            yield _v(o, "token-counts", f"{f.phase}.positions", (exp,), f.positions)
        loc_exp = f.expected_loc if f.expected_loc is not None else \
            exp * (o.state.config.speculative_num_steps if f.phase == "draft" else 1)
        if f.out_cache_loc is None or f.out_cache_loc[0] != loc_exp:
            yield _v(o, "token-counts", f"{f.phase}.out_cache_loc", (loc_exp,), f.out_cache_loc)


@invariant("spec-info-rows", "eagle_info.py::EagleVerifyInput.verify (unfinished_index); EagleDraftInput.filter_batch")
def spec_info_rows(o: StepOutcome) -> Iterator[Violation]:
    """The running batch's ``EagleDraftInput`` has exactly one row per unfinished request,
    in batch order, in every per-row field (``batch_fields``: ``topk_p``, ``topk_index``,
    ``hidden_states``, ``bonus_tokens`` and any a subclass adds), with the draft's hidden
    size; an empty batch gets zero-length tensors, never None. (v2: ``future_indices`` has one
    row per batch row, ``specstate.model.sglang_0_5_17.identities.spec_rows``.)"""
    own = o.state.overlap.identities  # a release's own identities replace the shared ones below
    if own is not None:
        for field, exp, got, rid, detail in own.spec_rows(o.state):
            yield _v(o, "spec-info-rows", field, exp, got, rid, detail)
        return
    running = o.state.running
    info = running.spec_info
    if running.is_empty() or not isinstance(info, EagleDraftInput):
        return
    cfg = o.state.config
    live = tuple(r for r in running.rids if o.state.req(r).live)
    if info.rows != live:
        yield _v(o, "spec-info-rows", "spec_info.rows", list(live), list(info.rows),
                 detail="row owners of topk_p/hidden_states vs unfinished requests")
    n = len(live)
    trailing = {"topk_p": (cfg.speculative_eagle_topk,), "topk_index": (cfg.speculative_eagle_topk,),
                "hidden_states": (cfg.draft_hidden_size,), "bonus_tokens": ()}
    for name in batch_fields(type(info)):
        shape = getattr(info, name)
        want = (n,) + trailing.get(name, tuple(shape[1:]) if shape else ())
        if shape is None or tuple(shape) != want:
            yield _v(o, "spec-info-rows", f"spec_info.{name}", want, shape)


@invariant("graph-padding", "cuda_graph_runner.py::CudaGraphRunner.replay_prepare; cuda_graph_runner.py::DecodeInputBuffers.populate_from_forward_batch")
def graph_padding(o: StepOutcome) -> Iterator[Violation]:
    """A graph replay pads the batch to the smallest captured size >= bs; when the graph
    runs, every buffer it copied holds this iteration's rows up to the batch's extent, and
    every buffer the runner resets holds the fill value in the padding rows past it (a row
    an earlier, larger replay wrote is a stale read)."""
    capture = o.state.config.cuda_graph_bs
    for f in o.forwards:
        g = f.graph
        if g is None:
            continue
        i = bisect.bisect_left(capture, g.raw_bs)
        want = capture[i] if i < len(capture) else None
        if g.padded_bs != want:
            yield _v(o, "graph-padding", f"{f.phase}.padded_bs", want, g.padded_bs, detail=f"raw bs {g.raw_bs}")
        it = g.iteration
        for read in g.reads:
            rows, raw = read.rows, read.raw
            head = rows[:raw]
            if None in head or not set(map(_ITERATION, head)) <= {it} or (
                    read.resets and rows.count(None) != len(rows) - raw):
                yield from _buffer_rows(o, f.phase, g.runner, it, read)
            # else the common case, checked in C (no padding row written, every row of the batch this step's)


def _buffer_rows(o: StepOutcome, phase: str, runner: str, iteration: int, read: BufferRead) -> Iterator[Violation]:
    """The first bad row of a buffer the common-case check rejected."""
    rows = read.rows
    for row, held in enumerate(rows):
        if row < read.raw and (held is None or held.iteration != iteration):
            yield _v(o, "graph-padding", f"{phase}.{runner}.{read.name}[{row}]", f"written in step {iteration}",
                     _held(held), held.rid if held else None, detail=f"a row of this batch (< {read.raw}) not copied")
            return
        if row >= read.raw and read.resets and held is not None:
            yield _v(o, "graph-padding", f"{phase}.{runner}.{read.name}[{row}]", "fill value", _held(held), held.rid,
                     detail=f"padding row (>= {read.raw}) holds an earlier replay's row")
            return


_ITERATION: Callable[[Any], int] = operator.itemgetter(1)  #: ``Writer.iteration`` (of rows known not None)


def _held(held: Writer | None) -> str:
    return "fill value" if held is None else f"request {held.rid} of step {held.iteration}"


@invariant("kv-accounting", "mem_cache/allocator.py::TokenToKVPoolAllocator; scheduler_runtime_checker_mixin.py::SchedulerRuntimeCheckerMixin._check_all_pools")
def kv_accounting(o: StepOutcome) -> Iterator[Violation]:
    """Allocated slots == the radix tree's slots + the live requests' own slots (no leak;
    idle => only the tree holds slots); the tree's evictable/protected sizes add up over its
    nodes; between iterations each live request owns exactly its committed tokens; both
    pools write only owned slots; a running request's length is prompt + output - 1. (v2: at
    least its committed tokens, and no forward writes past them,
    ``specstate.model.sglang_0_5_17.identities``.)"""
    s = o.state
    slots, live_count, changed, changed_rids = _live_slots(o)
    owned = slots + s.tree.total
    if s.kv_allocated != owned:
        what = "idle" if not live_count else "live"
        yield _v(o, "kv-accounting", "token_to_kv_pool_allocator.allocated", owned, s.kv_allocated,
                 detail=f"{what}: {s.kv_allocated - owned:+d} slots unaccounted (memory leak)" if s.kv_allocated > owned else what)
    if s.tree is not o.before.tree or getattr(o.before, "_kv_memo", None) is None:  # an unchanged tree was checked
        total, locked = _tree_sizes(s.tree.nodes)
        if (s.tree.total, s.tree.protected) != (total, locked):
            yield _v(o, "kv-accounting", "tree_cache.evictable_size + protected_size", (total, locked),
                     (s.tree.total, s.tree.protected), detail="radix tree sizes out of step with its nodes")
    own = s.overlap.identities
    if own is not None:
        yield from _own_kv(o, own, changed_rids)
        return
    for r in changed:
        if r.kv_allocated_len != r.kv_committed_len:
            yield _v(o, "kv-accounting", "req.kv_allocated_len", r.kv_committed_len, r.kv_allocated_len, r.rid)
        if r.draft_kv_len > r.kv_allocated_len:
            yield _v(o, "kv-accounting", "req.draft_kv_len", f"<= {r.kv_allocated_len}", r.draft_kv_len, r.rid)
        if r.status == ReqStatus.RUNNING and r.kv_committed_len != r.prompt_len + r.output_len - 1:
            yield _v(o, "kv-accounting", "req.kv_committed_len", r.prompt_len + r.output_len - 1, r.kv_committed_len,
                     r.rid, detail="prompt + output - 1")
    for row, rid in enumerate(s.running.rids):
        r = s.req(rid)
        if r.live and row < len(s.running.seq_lens) and s.running.seq_lens[row] != r.kv_committed_len:
            yield _v(o, "kv-accounting", "batch.seq_lens", r.kv_committed_len, s.running.seq_lens[row], rid)


_NODE_KEY, _NODE_LOCK = operator.itemgetter(2), operator.itemgetter(3)  #: radix ``_Node`` fields


def _tree_sizes(nodes: tuple) -> tuple[int, int]:
    """(slots of every node, slots of the locked ones) summed over the radix tree's nodes, in C
    (the root's key is empty, so it adds nothing to either)."""
    keys = list(map(_NODE_KEY, nodes))
    return sum(map(len, keys)), sum(map(len, compress(keys, map(operator.gt, map(_NODE_LOCK, nodes), repeat(0)))))


def _own_kv(o: StepOutcome, own: Any, changed_rids: list[int] | None) -> Iterator[Violation]:
    """A release's own KV identities (``OverlapPart.identities``: sglang 0.5.17's ``identities.py``)."""
    found = [w for f in o.forwards for w in own.forward_writes(f)]
    reqs = _own_requests_to_check(o, own, changed_rids)
    found.extend(own.request_kv(o.state, reqs))
    found.extend(_req_to_token_rows(o.state, reqs))
    for field, exp, got, rid, detail in found:
        yield _v(o, "kv-accounting", field, exp, got, rid, detail)


def _req_to_token_rows(s: Any, reqs: list | None) -> Iterator[tuple[str, object, object, int, str]]:
    """Each live request's slots fit its ``req_to_token`` row: ``kv_allocated_len <=
    req_to_token.shape[1]`` (sglang 0.5.17's ``SchedulerInvariantChecker._check_kv_page_invariants``
    in ``managers/scheduler_components/invariant_checker.py``: ``committed <= allocated <=
    row_width``, on with ``SGLANG_CHECK_KV_PAGE_INVARIANTS``). The v2
    over-allocation (``eagle_prepare_for_decode``: ``kv_committed_len + 2 * (steps + 1)``) near the
    context length outgrows a row of ``context_len + 4 + num_draft_tokens`` from 9 steps on; the
    Triton ``assign_req_to_token_pool`` then writes the excess into the next request's row."""
    width = s.config.req_to_token_row_width
    for r in (s.reqs if reqs is None else reqs):
        if r.live and r.kv_allocated_len > width:
            yield ("req_to_token_pool.req_to_token[row]", f"<= {width} (row width: context_len + headroom)",
                   r.kv_allocated_len, r.rid, "the decode over-allocation outgrows the request's req_to_token row "
                   "(the row write lands in the next row; sglang PR #26972's wider headroom is for page size > 1)")


def _own_requests_to_check(o: StepOutcome, own: Any, changed: list[int] | None) -> list | None:
    """The requests whose v2 identities may have changed in this step, ascending (``None``:
    all): those the step changed (``changed``, from :func:`_live_slots`; ``None``: unknown), and
    those that entered or left an in-flight prefill (its rows are exempt from ``prompt + output
    - 1``). The others were checked, unchanged, at an earlier step."""
    if changed is None:
        return None
    flipped = own.in_flight_prefill(o.before) ^ own.in_flight_prefill(o.state)
    after = o.state.reqs
    rids = sorted(set(changed).union(flipped)) if flipped else changed
    return [after[i] for i in rids]


_OWN_SLOTS = operator.attrgetter("own_slots")  #: ``Req.own_slots``: a request's slots at page size 1


class _LiveKv(NamedTuple):
    slots: int  #: own slots (paged: ``kv.held_slots``) summed over the live requests after the step
    live: int  #: live requests after the step (not ``count``: a tuple's method)
    changed: list  #: the live requests this step changed (all live ones when unknown)
    changed_rids: list[int] | None  #: every rid this step may have changed, ascending (``None``: unknown)


def _live_slots(o: StepOutcome) -> _LiveKv:
    """The live requests' KV after the step (:class:`_LiveKv`), kept incrementally: the sums ride on the state object
    (``_kv_memo``, not a field: equality and hashing ignore it), so a step costs what it
    changed (found by identity, in C), not every request ever seen. A state without the memo
    (the first step, a hand-built state) is summed in full and every live request checked."""
    before, after = o.before.reqs, o.state.reqs
    memo = getattr(o.before, "_kv_memo", None)
    idx: list[int] | None = None  # the rids this step may have changed (None: unknown)
    page = o.state.config.page_size
    own = _OWN_SLOTS if page == 1 else (lambda r: held_slots(r.kv_allocated_len, r.cache_protected_len, page))
    if memo is None or memo[0] is not before:
        live = [r for r in after if r.live]
        slots, count, changed = sum(map(own, live)), len(live), live
    else:
        n = len(before)
        known = o.state.changed_since(before)
        idx = [i for i in known if i < n] if known is not None else list(compress(range(n), map(is_not, before, after)))
        new = [after[i] for i in idx] + list(islice(after, n, None))
        slots, count = memo[1], memo[2]
        for i in idx:
            if before[i].live:
                slots, count = slots - own(before[i]), count - 1
        changed = [r for r in new if r.live]
        slots, count = slots + sum(map(own, changed)), count + len(changed)
        idx.extend(range(n, len(after)))
    object.__setattr__(o.state, "_kv_memo", (after, slots, count))
    return _LiveKv(slots, count, changed, idx)


@invariant("draft-kv-in-step", "eagle_worker.py::EAGLEWorker.draft (attends over the draft KV of seq_lens tokens)")
def draft_kv_in_step(o: StepOutcome) -> Iterator[Violation]:
    """Before drafting, the draft model's KV holds exactly the target's committed tokens
    for every request (draft-extend ran for every token produced, also while speculation
    was off)."""
    for f in o.forwards:
        if f.phase != "draft":
            continue
        own = o.state.overlap.identities
        if own is not None:
            for field, exp, got, rid, detail in own.draft_kv_covers(f):
                yield _v(o, "draft-kv-in-step", field, exp, got, rid, detail)
            continue
        for rid, want, got in zip(f.rids, f.seq_lens, f.draft_kv_lens):
            if want != got:
                yield _v(o, "draft-kv-in-step", "draft_kv_len", want, got, rid, detail="draft KV behind the target")


@invariant("stable-switch-decision", "the threshold rule: decide from decode rows only")
def stable_switch_decision(o: StepOutcome) -> Iterator[Violation]:
    """Two consecutive decode iterations over the same decode rows make the same switch
    decision (no flip-flopping driven by prefill rows); v2: given the same adaptive slots'
    step counts (the acceptance EMA may legitimately move them, ``Decision.context``)."""
    d = o.state.decisions
    if len(d) == 2 and d[1].step_index == o.state.step_index and (d[0].rids, d[0].context) == (d[1].rids, d[1].context) \
            and d[0].speculate != d[1].speculate:
        yield _v(o, "stable-switch-decision", "speculate", d[0].speculate, d[1].speculate,
                 detail=f"same decode rows {list(d[1].rids)} as step {d[0].step_index}")
