"""Worker-side operations: the v1 ``EAGLEWorker`` and the decode policies around it.

Mirrors ``sglang/srt/speculative/eagle_worker.py::EAGLEWorker`` (``forward_batch_generation``,
``forward_target_extend``, ``forward_draft_extend``, ``_draft_preprocess_decode``,
``_draft_preprocess_idle``, ``draft``, ``verify``, ``forward_draft_extend_after_decode``) and
``eagle_info.py`` (``EagleVerifyInput.prepare_for_verify`` / ``verify``,
``EagleDraftInput.prepare_for_extend``, ``EagleDraftExtendInput.prepare_extend_after_decode``).

Per-request accept lengths are data (``Step.accept``), never sampled.

Shapes at each phase (bs requests, seq_lens L, topk k, steps s, draft tokens n, accepted a_i)::

    draft            out_cache_loc (bs*s*k,) temporary   positions (bs*k,)   topk_p (bs, k)
    verify           input_ids = draft_token (bs*n,)     out_cache_loc (bs*n,) allocated
                     custom_mask (n*(sum L + n*bs),)     retrieve_* (bs, n)
    after verify     out_cache_loc (sum a,)  seq_lens L + a   rejected bs*n - sum a slots freed
    draft extend     input_ids (sum a_unfinished,)  hidden (sum a, target_hidden*aux)
    next draft input topk_p/topk_index (b_unf, k), hidden (b_unf, draft_hidden), bonus (b_unf,)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specstate.model.batch import Provenance, ScheduleBatch, kept_rows, set_rows
from specstate.model.kv import alloc_decode_slots, alloc_extend_slots, alloc_slots, ceil_align, free_slots
from specstate.model.modes import CaptureHiddenMode, ForwardMode, Worker
from specstate.model.request import Req
from specstate.model.runner import ForwardBatch, check_once, default_graph_runners, guarded, guarded_once, run_forward, sglang_assert
from specstate.model.scheduler import append_tokens
from specstate.model.spec_info import EagleDraftExtendInput, EagleDraftInput, EagleVerifyInput
from specstate.model.state import Decision
from specstate.model.tensors import added, assign_prefix, reshaped
from specstate.model.tx import Tx

if TYPE_CHECKING:
    from specstate.model.config import SpecConfig
    from specstate.model.state import ModelState
    from specstate.model.ops_table import Ops
    from specstate.model.runner import GraphRunner

__all__ = [
    "graph_runners", "forward_batch_generation", "forward_target_extend", "forward_draft_extend",
    "decide_speculation", "decode", "speculative_decode", "draft", "verify",
    "forward_draft_extend_after_decode", "fallback_decode", "plain_decode", "free_rejected_slots", "idle_draft_input", "new_draft_input", "make_draft_input",
    "triton_decode_metadata",
]


def graph_runners(ops: "Ops", config: "SpecConfig") -> dict[str, "GraphRunner"]:
    """The CUDA-graph runners captured at start (``EAGLEWorker.init_cuda_graphs``)."""
    return default_graph_runners(config)


def new_draft_input(config: "SpecConfig", rows: tuple[int, ...]) -> EagleDraftInput:
    """``EagleDraftInput`` as ``capture_for_decode`` / ``forward_draft_extend_after_decode`` build it."""
    b, k = len(rows), config.speculative_eagle_topk
    return EagleDraftInput(rows=rows, topk_p=(b, k), topk_index=(b, k),
                           hidden_states=(b, config.draft_hidden_size), bonus_tokens=(b,),
                           capture_hidden_mode=CaptureHiddenMode.LAST, num_tokens_per_req=1)


def make_draft_input(ops: "Ops", config: "SpecConfig", rows: tuple[int, ...]) -> EagleDraftInput:
    """Operation ``new_draft_input``: the draft input the worker builds (``capture_for_decode``,
    ``forward_draft_extend_after_decode``, ``_draft_preprocess_idle`` for ``rows == ()``);
    a variant returns its own subclass here."""
    return new_draft_input(config, rows)


def idle_draft_input(config: "SpecConfig") -> EagleDraftInput:
    """``EAGLEWorker._draft_preprocess_idle`` -> ``EagleDraftInput.create_idle_input``."""
    return new_draft_input(config, ())


# -- dispatch -------------------------------------------------------------------------

def forward_batch_generation(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> Tx:
    """``EAGLEWorker.forward_batch_generation``: extend path or decode path."""
    if batch.forward_mode.is_extend():
        tx, batch = ops.forward_target_extend(ops, tx, batch)
        return ops.forward_draft_extend(ops, tx, batch)
    return ops.decode(ops, tx)


# -- prefill ---------------------------------------------------------------------------

def forward_target_extend(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> tuple[Tx, ScheduleBatch]:
    """``EAGLEWorker.forward_target_extend``: target EXTEND with capture FULL; the extend
    tokens' target KV is written."""
    fb = _fb(batch, CaptureHiddenMode.FULL)
    fr = run_forward("forward_target_extend", Worker.TARGET, fb, None, tx.config,
                     expected_tokens=sum(batch.extend_lens or ()))
    s = tx.state
    s = s.with_reqs(s.req(r).evolve(kv_committed_len=s.req(r).kv_committed_len + e)
                    for r, e in zip(batch.rids, batch.extend_lens or ()))
    return tx.with_state(s).record(fr), batch


def forward_draft_extend(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> Tx:
    """``EAGLEWorker.forward_draft_extend``: a fresh ``EagleDraftInput`` (one row per
    request), ``prepare_for_extend`` (iterates ``extend_lens``), draft EXTEND writes the
    draft KV of the extend tokens, ``capture_for_decode`` fills ``topk_p`` / ``hidden_states``."""
    cfg = tx.config
    info = ops.new_draft_input(ops, cfg, batch.rids)
    guarded("eagle_info.py::EagleDraftInput.prepare_for_extend",
            {"bonus_tokens": list(info.bonus_tokens), "seq_lens": [len(batch.seq_lens)]},
            lambda: _assert_eq(info.bonus_tokens[0], len(batch.seq_lens)))
    # prepare_for_extend shifts each request's ids in place (same tensor, same rows)
    batch = kept_rows(batch.evolve(spec_info=info), "eagle_info.py::EagleDraftInput.prepare_for_extend",
                      tx.state.step_index, out_cache_loc=False)
    fr = run_forward("forward_draft_extend", Worker.DRAFT, _fb(batch, CaptureHiddenMode.LAST), None, cfg,
                     draft_kv_lens=_draft_lens(tx, batch.rids), expected_tokens=sum(batch.extend_lens or ()))
    s = tx.state
    s = s.with_reqs(s.req(r).evolve(draft_kv_len=s.req(r).draft_kv_len + e)
                    for r, e in zip(batch.rids, batch.extend_lens or ()))
    return _stash_prefill(tx.with_state(s).record(fr), batch)


def _stash_prefill(tx: Tx, batch: ScheduleBatch) -> Tx:
    # The prefill batch travels to ``process_batch_result_prefill`` through ``last_batch``.
    return tx.with_state(tx.state.evolve(last_batch=batch))


# -- decode ----------------------------------------------------------------------------

def decide_speculation(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> bool:
    """Upstream v1: always speculate (no switch)."""
    return True


def decode(ops: "Ops", tx: Tx) -> Tx:
    """The decode branch of ``forward_batch_generation``, with the switch: speculate, or take
    the variant's ``fallback_decode``."""
    batch = tx.state.running
    speculate = ops.decide_speculation(ops, tx, batch)
    s = tx.state
    tx = tx.with_state(s.evolve(decisions=(s.decisions + (Decision(batch.rids, speculate, s.step_index),))[-2:]))
    if speculate:
        return ops.speculative_decode(ops, tx)
    return ops.fallback_decode(ops, tx)


def speculative_decode(ops: "Ops", tx: Tx) -> Tx:
    """draft -> verify -> draft-extend (or the idle stub when every request finished)."""
    tx = ops.draft(ops, tx)
    tx, extend_input = ops.verify(ops, tx, ops.graph_runners(ops, tx.config)["target_verify"])
    return ops.forward_draft_extend_after_decode(ops, tx, extend_input)


def draft(ops: "Ops", tx: Tx) -> Tx:
    """``EAGLEWorker.draft`` after ``_draft_preprocess_decode``: temporary draft slots
    (``bs * steps * topk``, allocator restored after), draft DECODE forward, tree building
    into an ``EagleVerifyInput``."""
    cfg = tx.config
    batch = tx.state.running
    info = batch.spec_info
    guarded("eagle_worker.py::EAGLEWorker.draft", {"spec_info": type(info).__name__},
            lambda: sglang_assert(isinstance(info, EagleDraftInput), "assert isinstance(spec_info, EagleDraftInput)"))
    assert isinstance(info, EagleDraftInput)
    bs, k = batch.batch_size, cfg.speculative_eagle_topk
    n_loc = bs * cfg.draft_slots_per_req
    # alloc_token_slots / alloc_paged_token_slots_extend (backup_state=True): the tree eviction
    # stays, the allocation is undone by restore_state after drafting
    if cfg.page_size == 1:
        s = ops.evict_from_tree_cache(ops, tx.state, n_loc)
        alloc_slots(s, n_loc, "_draft_preprocess_decode", ops)
    else:
        s = draft_alloc_paged(ops, tx.state, batch.rids)
    tx = tx.with_state(s)
    info = info.evolve(positions=(bs * k,), capture_hidden_mode=CaptureHiddenMode.LAST, num_tokens_per_req=k)
    batch = batch.evolve(stored_seq_lens_sum=batch.seq_lens_sum)  # _draft_preprocess_decode recomputes it
    dbatch = set_rows(batch.evolve(out_cache_loc=(n_loc,), spec_info=info), tx.state.step_index,
                      out_cache_loc="eagle_worker.py::EAGLEWorker._draft_preprocess_decode")
    fb = _fb(dbatch, CaptureHiddenMode.LAST, input_ids=(bs * k,), positions=(bs * k,))
    runner = ops.graph_runners(ops, cfg)["draft_decode"]
    fr = run_forward("draft", Worker.DRAFT, fb, runner, cfg, draft_kv_lens=_draft_lens(tx, batch.rids),
                     expected_tokens=bs * k, own_attn_metadata=True, ops=ops, tx=tx)
    if fr.graph is None:
        a, b = (info.topk_index[0] * k,), (bs * k,)
        check_once("eagle_worker.py::EAGLEWorker.draft_forward", ("add", a, b),
                   lambda: {"input_ids": list(a), "positions": list(b)}, lambda: added(a, b))
    n = cfg.speculative_num_draft_tokens
    verify_input = EagleVerifyInput(
        rows=batch.rids, draft_token=(bs * n,), custom_mask=(n * (batch.seq_lens_sum + n * bs),),
        positions=(bs * n,), retrieve_index=(bs, n), retrieve_next_token=(bs, n), retrieve_next_sibling=(bs, n),
        spec_steps=cfg.speculative_num_steps, topk=k, draft_token_num=n, seq_lens_sum=batch.seq_lens_sum)
    return tx.record(fr).with_running(batch.evolve(spec_info=verify_input))


def verify(ops: "Ops", tx: Tx, runner: "GraphRunner") -> tuple[Tx, EagleDraftExtendInput]:
    """``EAGLEWorker.verify`` + ``EagleVerifyInput.prepare_for_verify`` / ``verify``."""
    cfg = tx.config
    batch = tx.state.running
    info = batch.spec_info
    assert isinstance(info, EagleVerifyInput)
    bs, n = batch.batch_size, info.draft_token_num
    # alloc_token_slots(bs * n), paged alloc_paged_token_slots_extend(seq_lens, seq_lens + n): the
    # draft tokens fill the last partial page, then new pages (they may cross a page boundary)
    s = alloc_extend_slots(tx.state, [(tx.state.req(r).kv_allocated_len, tx.state.req(r).kv_allocated_len + n)
                                      for r in batch.rids], "prepare_for_verify", ops)
    s = s.with_reqs(s.req(r).evolve(kv_allocated_len=s.req(r).kv_allocated_len + n) for r in batch.rids)
    info = info.evolve(num_tokens_per_req=cfg.speculative_num_steps + 1)
    vbatch = batch.evolve(forward_mode=ForwardMode.TARGET_VERIFY, input_ids=info.draft_token,
                          positions=info.positions, out_cache_loc=(bs * n,), spec_info=info)
    vbatch = set_rows(vbatch, tx.state.step_index, input_ids="eagle_info.py::EagleVerifyInput.prepare_for_verify",
                      out_cache_loc="eagle_info.py::EagleVerifyInput.prepare_for_verify")
    fr = run_forward("verify", Worker.TARGET, _fb(vbatch, CaptureHiddenMode.FULL), runner, cfg, expected_tokens=bs * n,
                     ops=ops, tx=tx)
    guarded("eagle_info.py::EagleVerifyInput.verify", {"draft_token": list(info.draft_token), "bs": bs, "draft_token_num": n},
            lambda: reshaped(info.draft_token, (bs, n)))
    tx = tx.with_state(s).record(fr)
    return _accept(ops, tx, vbatch, n, [min(tx.accept_len(i), n) for i in range(bs)])


def _accept(ops: "Ops", tx: Tx, vbatch: ScheduleBatch, n: int, accept: list[int]) -> tuple[Tx, EagleDraftExtendInput]:
    """The accept loop of ``EagleVerifyInput.verify``: append, ``check_finished``, free the
    rejected slots, ``seq_lens += accepted``; the draft-extend input keeps unfinished rows."""
    s = tx.state
    accepted: list[int] = []
    reqs: list[Req] = []
    for rid, a in zip(vbatch.rids, accept):
        req, got = append_tokens(s.req(rid), a)
        accepted.append(got)
        reqs.append(req.evolve(kv_committed_len=req.kv_committed_len + got,
                               kv_allocated_len=req.kv_committed_len + got))
    s = ops.free_rejected_slots(ops, s.with_reqs(reqs), vbatch.rids, n, accepted)
    seq_lens = tuple(L + a for L, a in zip(vbatch.seq_lens, accepted))
    unfinished = [i for i, r in enumerate(reqs) if r.live]
    ext = _extend_input(tx.config, [vbatch.rids[i] for i in unfinished], [accepted[i] for i in unfinished],
                        [seq_lens[i] for i in unfinished])
    # out_cache_loc[accept_index], or in the has_finished branch only the unfinished rows'
    has_finished = len(unfinished) < len(reqs)
    loc = sum(accepted[i] for i in unfinished) if has_finished else sum(accepted)
    running = vbatch.evolve(forward_mode=ForwardMode.DECODE, seq_lens=seq_lens, out_cache_loc=(loc,))
    running = set_rows(running, tx.state.step_index, out_cache_loc="eagle_info.py::EagleVerifyInput.verify")
    return tx.with_state(s.evolve(running=running)), ext


def free_rejected_slots(ops: "Ops", s: "ModelState", rids: tuple[int, ...], n: int, accepted: list[int]) -> "ModelState":
    """``token_to_kv_pool_allocator.free(batch.out_cache_loc[evict_mask])``: every slot of a
    rejected draft token returns to the pool, finished requests' included. Paged
    (``EagleVerifyInput.verify``, ``page_size > 1``): only whole empty pages go back, the page of
    the last accepted token stays (topk 1: ``spec_utils.py::align_evict_mask_to_page_size``;
    topk > 1: ``get_src_tgt_cache_loc``'s ``keep_len = ceil_align(seq_len + accepted)``), so a
    row frees ``ceil((seq_len + n) / P) - ceil((seq_len + accepted) / P)`` pages (``seq_len +
    accepted`` is the row's ``kv_committed_len`` now)."""
    page = s.config.page_size
    if page == 1:
        return free_slots(s, len(rids) * n - sum(accepted))
    freed = 0
    for rid, a in zip(rids, accepted):
        kept = s.req(rid).kv_committed_len
        freed += ceil_align(kept - a + n, page) - ceil_align(kept, page)
    return free_slots(s, freed)


def draft_alloc_paged(ops: "Ops", s: "ModelState", rids: tuple[int, ...]) -> "ModelState":
    """``EAGLEWorker._draft_preprocess_decode`` at ``page_size > 1``: topk 1 extends every row
    from ``seq_len`` by ``num_steps`` (``get_last_loc_large_page_size_top_k_1``); topk > 1
    duplicates the last partial page per branch (``get_last_loc_large_page_size_large_top_k``:
    ``num_new_pages_per_topk = ceil((seq_len % P + num_steps) / P)``, the row extends to
    ``seq_len // P * P + num_new_pages_per_topk * P * topk``); both through
    ``alloc_paged_token_slots_extend``. Returns the state after the eviction (the allocation
    itself is restored after drafting)."""
    cfg = s.config
    page, steps, k = cfg.page_size, cfg.speculative_num_steps, cfg.speculative_eagle_topk
    rows = []
    for rid in rids:
        seq = s.req(rid).kv_committed_len
        if k == 1:
            rows.append((seq, seq + steps))
        else:
            per_topk = -(-(seq % page + steps) // page)
            rows.append((seq, seq // page * page + per_topk * page * k))
    extend = sum(end - start for start, end in rows)
    s = ops.evict_from_tree_cache(ops, s, extend + len(rows) * page)
    alloc_extend_slots(s, rows, "_draft_preprocess_decode", ops)
    return s


def _extend_input(cfg: "SpecConfig", rids: list[int], accepted: list[int], seq_lens: list[int]) -> EagleDraftExtendInput:
    total, b = sum(accepted), len(rids)
    return EagleDraftExtendInput(
        rows=tuple(rids), hidden_states=(total, cfg.extend_hidden_size), num_correct_drafts=(b,),
        num_accept_tokens=(b,), num_accept_tokens_cpu=tuple(accepted), input_ids=(total,),
        seq_lens=tuple(seq_lens), req_pool_indices=(b,))


def forward_draft_extend_after_decode(ops: "Ops", tx: Tx, ext: EagleDraftExtendInput) -> Tx:
    """``EAGLEWorker.forward_draft_extend_after_decode``: DRAFT_EXTEND over the accepted
    tokens of unfinished requests (draft KV catches up), then a fresh ``EagleDraftInput``;
    ``_draft_preprocess_idle`` when none is left (upstream runs that on a ``batch.copy()``: the
    batch keeps verify's ``input_ids``). The batch keeps the draft extend's ``input_ids``
    (``EagleDraftExtendInput.prepare_extend_after_decode``: ``batch.input_ids = self.input_ids``)."""
    cfg = tx.config
    batch = tx.state.running
    if ext.input_ids[0] == 0:
        return tx.with_running(batch.evolve(spec_info=ops.new_draft_input(ops, cfg, ())))
    total = ext.input_ids[0]
    ext = ext.evolve(positions=(total,), bonus_tokens=(len(ext.rows),), num_tokens_per_req=cfg.speculative_num_steps + 1)
    # out_cache_loc is the one verify (or the fallback) left on the batch
    ebatch = batch.evolve(forward_mode=ForwardMode.DRAFT_EXTEND, rids=ext.rows, seq_lens=ext.seq_lens,
                          input_ids=ext.input_ids, positions=(total,), spec_info=ext,
                          extend_lens=ext.num_accept_tokens_cpu,
                          input_ids_from=Provenance(_AFTER_DECODE, tx.state.step_index, ext.rows, total))
    runner = ops.graph_runners(ops, cfg)["draft_extend"]
    fr = run_forward("forward_draft_extend_after_decode", Worker.DRAFT, _fb(ebatch, CaptureHiddenMode.LAST), runner,
                     cfg, draft_kv_lens=_draft_lens(tx, ext.rows), expected_tokens=total, ops=ops, tx=tx)
    s = tx.state
    s = s.with_reqs(s.req(r).evolve(draft_kv_len=L) for r, L in zip(ext.rows, ext.seq_lens))
    # prepare_extend_after_decode set batch.input_ids to the draft extend's (the accepted tokens of the
    # unfinished rows); the worker restores seq_lens and req_pool_indices after the forward, not input_ids
    after = batch.evolve(spec_info=ops.new_draft_input(ops, cfg, ext.rows), input_ids=ext.input_ids,
                         input_ids_from=ebatch.input_ids_from)
    return tx.with_state(s).record(fr).with_running(after)


_AFTER_DECODE = "eagle_info.py::EagleDraftExtendInput.prepare_extend_after_decode"


def fallback_decode(ops: "Ops", tx: Tx) -> Tx:
    """The corrected fallback (``fixed-threshold``): clear ``spec_info``; a plain DECODE of
    one token per request that runs eager (the target's graphs are TARGET_VERIFY only);
    outputs appended as ``verify`` does; then draft-extend over the one new token so the
    draft KV stays in step and a fresh ``EagleDraftInput`` exists when speculation resumes."""
    tx, ext = plain_decode(ops, tx)
    return ops.forward_draft_extend_after_decode(ops, tx, ext)


def plain_decode(ops: "Ops", tx: Tx) -> tuple[Tx, EagleDraftExtendInput]:
    """The target half of the fallback: ``spec_info`` cleared, ``input_ids`` = the bonus
    tokens, one new KV slot per request, an eager DECODE forward, then ``verify``'s
    bookkeeping for an accept length of 1. Returns the draft-extend input it implies."""
    cfg = tx.config
    batch = tx.state.running
    old = batch.spec_info
    bs = batch.batch_size
    bonus = old.bonus_tokens if isinstance(old, EagleDraftInput) else (bs,)
    s = alloc_decode_slots(tx.state, [tx.state.req(r).kv_allocated_len for r in batch.rids], "fallback_decode", ops)
    s = s.with_reqs(s.req(r).evolve(kv_allocated_len=s.req(r).kv_allocated_len + 1) for r in batch.rids)
    # _plain_decode_prepare: KV written at seq_lens, then seq_lens += 1 and seq_lens_sum recomputed;
    # the target forward attends over L + 1 tokens
    grown = tuple(L + 1 for L in batch.seq_lens)
    dbatch = batch.evolve(spec_info=None, input_ids=bonus, positions=(bs,), out_cache_loc=(bs,), seq_lens=grown,
                          stored_seq_lens_sum=sum(grown))
    dbatch = set_rows(dbatch, tx.state.step_index, input_ids="fixed-threshold fallback (the bonus tokens)",
                      out_cache_loc="fixed-threshold fallback (one slot per request)")
    triton_decode_metadata(dbatch)
    fr = run_forward("fallback_decode", Worker.TARGET, _fb(dbatch, CaptureHiddenMode.FULL),
                     ops.graph_runners(ops, cfg)["target_verify"], cfg, allow_graph=False, expected_tokens=bs)
    tx = tx.with_state(s.evolve(running=dbatch)).record(fr)
    return _accept(ops, tx, dbatch.evolve(seq_lens=batch.seq_lens), 1, [1] * bs)


def triton_decode_metadata(batch: ScheduleBatch) -> None:
    """``triton_backend.py::TritonAttnBackend.init_forward_metadata`` for a DECODE without
    ``spec_info``: ``kv_indices = torch.empty(seq_lens_sum)`` filled with ``sum(seq_lens)``
    entries by ``create_flashinfer_kv_indices_triton``. A stale (too small) stored
    ``seq_lens_sum`` is an out-of-bounds write on the GPU; here PyTorch's own size error."""
    stored, actual = batch.stored_sum, batch.seq_lens_sum

    def fill() -> None:  # kv_indices = torch.empty(stored); kv_indices[:actual] = (actual entries)
        assign_prefix((stored,), actual, (actual,))

    guarded_once("triton_backend.py::TritonAttnBackend.init_forward_metadata", ("kv_indices", stored, actual),
                 lambda: {"kv_indices": [stored], "seq_lens_sum": [actual]}, fill)


# -- helpers ---------------------------------------------------------------------------

def _fb(batch: ScheduleBatch, capture: CaptureHiddenMode, *, input_ids: tuple[int, ...] | None = None,
        positions: tuple[int, ...] | None = None) -> ForwardBatch:
    """``ScheduleBatch.get_model_worker_batch`` + ``ForwardBatch.init_new``."""
    return ForwardBatch(
        forward_mode=batch.forward_mode, rids=batch.rids, seq_lens=batch.seq_lens,
        input_ids=input_ids if input_ids is not None else batch.input_ids,
        positions=positions if positions is not None else batch.positions,
        out_cache_loc=batch.out_cache_loc, spec_info=batch.spec_info, capture_hidden_mode=capture,
        extend_lens=batch.extend_lens, input_ids_from=batch.input_ids_from if input_ids is None else None,
        out_cache_loc_from=batch.out_cache_loc_from)


def _draft_lens(tx: Tx, rids: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(tx.state.req(r).draft_kv_len for r in rids)


def _assert_eq(a: int, b: int) -> None:
    sglang_assert(a == b, f"{a} != {b}")
