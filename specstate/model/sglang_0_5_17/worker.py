"""The v2 speculative worker of sglang 0.5.17 with adaptive speculation.

Mirrors ``speculative/eagle_worker_v2.py::EAGLEWorkerV2.forward_batch_generation``::

    extend: target EXTEND (capture FULL) -> EagleDraftWorker._draft_extend_for_prefill
    decode: activate_step_by_batch(bs)                 # AdaptiveController: route, apply_runtime_state
            steps == 0 ? _build_trivial_verify_input   # a 1-node tree: the bonus token
                       : EagleDraftWorker.draft         # draft DECODE (graph, or steps - 1 eager forwards)
            verify (eagle_worker_common.py::run_eagle_verify)   # TARGET_VERIFY, accept lengths
            EagleDraftWorker._draft_extend_for_decode   # DRAFT_EXTEND_V2 over the whole window

No slot is allocated here (the scheduler over-allocated them, ``sglang_0_5_17.scheduler.eagle_prepare_for_decode``);
draft, verify and draft extend write KV at ``req_to_token[seq_len : seq_len + n]``
(``eagle_utils.py::eagle_prepare_for_verify``: ``assign_extend_cache_locs_uniform_func``;
``eagle_worker_common.py::prepare_for_draft``: ``assign_draft_cache_locs_contiguous``), where
``seq_len`` is the device's (``FutureMap.resolve_seq_lens_cpu``): the committed length plus what
the batch still in flight accepted. The result waits in ``OverlapState.launched`` for the next
iteration's ``process_batch_result``.

Graph runners decide by ``can_run_graph`` (``DecodeCudaGraphRunner.can_run_graph``,
``EAGLEDraftCudaGraphRunner.can_run_graph``, ``EAGLEDraftExtendCudaGraphRunner.can_run_graph``): the
batch fits the largest captured size and ``spec_info.num_tokens_per_req`` equals the runner's
captured width.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specstate.model.batch import ScheduleBatch
from specstate.model.bs_compare import at_most
from specstate.model.modes import CaptureHiddenMode, ForwardMode, Worker
from specstate.model.runner import ForwardBatch, GraphRunner, check_once, guarded, run_forward
from specstate.model.spec_info import EagleDraftExtendInput, EagleDraftInput, EagleVerifyInput
from specstate.model.state import Decision
from specstate.model.tensors import cat, reshaped, sliced
from specstate.model.tx import Tx
from specstate.model.sglang_0_5_17.runtime import RuntimeState
from specstate.model.sglang_0_5_17.scheduler import overlap, with_overlap
from specstate.model.sglang_0_5_17.spec_info import EagleDraftInputV2, next_draft_input, resolve
from specstate.model.sglang_0_5_17.state import PendingResult

if TYPE_CHECKING:
    from specstate.model.ops_table import Ops

__all__ = ["forward_batch_generation_v2", "activate_step_by_batch", "record_decision", "on_verify_complete", "apply_runtime_state",
           "device_seq_lens",
           "can_run_graph", "draft_v2", "build_trivial_verify_input", "verify_v2", "draft_extend_for_decode",
           "draft_extend_for_prefill"]


def can_run_graph(runner: GraphRunner | None, fb: ForwardBatch) -> bool:
    """``can_run_graph``: the uniform-width check, then ``batch_size <= max_bs``."""
    if runner is None:
        return False
    width = getattr(fb.spec_info, "num_tokens_per_req", -1)
    if width > 0 and width != runner.num_tokens_per_bs:
        return False
    return at_most(fb.batch_size, runner.max_bs)


def device_seq_lens(tx: Tx, rids: tuple[int, ...]) -> tuple[int, ...]:
    """``FutureMap.resolve_seq_lens_cpu``: ``new_seq_lens_buf`` published by the batch in flight."""
    pending = overlap(tx.state).pending
    return tuple(tx.state.req(r).kv_committed_len + (pending.accepted(r) if pending else 0) for r in rids)


def _fb(mode: ForwardMode, rids: tuple[int, ...], seq_lens: tuple[int, ...], tokens: int, loc: int,
        spec: object, capture: CaptureHiddenMode, extend_lens: tuple[int, ...] | None = None) -> ForwardBatch:
    return ForwardBatch(mode, rids, seq_lens, (tokens,), (tokens,), (loc,), spec, capture,  # type: ignore[arg-type]
                        extend_lens)


def _writes(tx: Tx, rids: tuple[int, ...], ends: tuple[int, ...]) -> dict[str, object]:
    return {"kv_write_end": ends, "kv_allocated": tuple(tx.state.req(r).kv_allocated_len for r in rids)}


# -- dispatch ----------------------------------------------------------------------------

def forward_batch_generation_v2(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> Tx:
    """``EAGLEWorkerV2.forward_batch_generation`` + ``Scheduler.run_batch``'s bookkeeping."""
    eos = tuple(r for r in batch.rids if tx.state.req(r).eos_pending)
    tx = tx.with_reqs(*(tx.state.req(r).evolve(eos_pending=False) for r in eos))
    if batch.forward_mode.is_extend():
        tx, batch = ops.forward_target_extend(ops, tx, batch)
        tx = ops.draft_extend_for_prefill(ops, tx, batch)
        done = tx.state.last_batch
        assert done is not None
        return with_overlap(tx, launched=PendingResult("prefill", done, (), eos, overlap(tx.state).active_steps, 1,
                                                       tx.state.step_index))
    return _decode(ops, tx, eos)


def _decode(ops: "Ops", tx: Tx, eos: tuple[int, ...]) -> Tx:
    batch = tx.state.running
    tx, steps = ops.activate_step_by_batch(ops, tx, batch)
    lens = device_seq_lens(tx, batch.rids)
    info = batch.spec_info if isinstance(batch.spec_info, EagleDraftInputV2) else next_draft_input(tx.config, ())
    info = resolve(tx.config, info)  # FutureMap._resolve_spec_extras at run_batch
    state = ops.runtime_states(ops, tx.config)[steps]
    if steps == 0:
        vinput = ops.build_trivial_verify_input(ops, tx, batch, lens)
    else:
        tx, vinput = ops.draft_v2(ops, tx, batch.evolve(spec_info=info), lens, state)
    tx, accept = ops.verify_v2(ops, tx, batch, vinput, lens, state)
    tx = ops.draft_extend_for_decode(ops, tx, batch, lens, accept, state)
    running = batch.evolve(seq_lens=lens, spec_info=next_draft_input(tx.config, batch.rids),
                           stored_seq_lens_sum=None)
    result = PendingResult("decode", running, accept, eos, steps, state.draft_tokens, tx.state.step_index)
    return with_overlap(tx.with_running(running), launched=result)


# -- the adaptive switch -------------------------------------------------------------------

def activate_step_by_batch(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> tuple[Tx, int]:
    """``EAGLEWorkerV2.activate_step_by_batch`` -> ``AdaptiveController.activate_step_by_batch``:
    the routed slot's step count; ``apply_runtime_state`` when it is not the active one. The
    decision is recorded with every slot's current step count as its context. Without a
    controller (a static launch) the worker's own step count, unchanged."""
    v2 = overlap(tx.state)
    if v2.adaptive is None:  # static: ``if self.adaptive_controller is not None`` is false, nothing changes
        return record_decision(tx, batch, v2.active_steps, ())
    steps = v2.adaptive.steps_for_batch(batch.batch_size)
    if steps != v2.active_steps:
        tx = ops.apply_runtime_state(ops, tx, steps).log("switch", f"steps {v2.active_steps} -> {steps}")
    return record_decision(tx, batch, steps, tuple(slot.current_steps for _, slot in v2.adaptive.slots))


def record_decision(tx: Tx, batch: ScheduleBatch, steps: int, context: tuple[int, ...]) -> tuple[Tx, int]:
    """The decode's decision recorded (``ModelState.decisions``: the last two), ``context`` the
    slots' step counts (none without a controller)."""
    s = tx.state
    d = Decision(batch.rids, steps > 0, s.step_index, context)
    return tx.with_state(s.evolve(decisions=(s.decisions + (d,))[-2:])), steps


def on_verify_complete(ops: "Ops", tx: Tx, num_correct: tuple[int, ...], batch_size: int) -> Tx:
    """``EAGLEWorkerV2.on_verify_complete_cpu`` -> ``AdaptiveController.on_verify_complete``:
    feed the routed slot's EMA; a changed step count is applied at once (``_activate``)."""
    v2 = overlap(tx.state)
    if v2.adaptive is None:  # static: ``on_verify_complete_cpu`` feeds no controller
        return tx
    params, changed = v2.adaptive.on_verify_complete(num_correct, batch_size)
    tx = with_overlap(tx, adaptive=params)
    if changed is not None and changed != v2.active_steps:
        tx = ops.apply_runtime_state(ops, tx, changed).log("switch", f"steps {v2.active_steps} -> {changed} (EMA)")
    return tx


def apply_runtime_state(ops: "Ops", tx: Tx, steps: int) -> Tx:
    """``EAGLEWorkerV2.apply_runtime_state``: the state's runners become the worker's, and the
    draft worker rebuilds its topk-1 chain buffers for the new step count."""
    return with_overlap(tx, active_steps=steps, chain_steps=steps)


# -- draft, verify, draft extend -----------------------------------------------------------

def draft_v2(ops: "Ops", tx: Tx, batch: ScheduleBatch, lens: tuple[int, ...],
             state: RuntimeState) -> tuple[Tx, EagleVerifyInput]:
    """``EagleDraftWorker.draft``: ``prepare_for_draft`` (``bs * topk * steps`` cache locations
    from ``req_to_token`` at ``seq_len``), the draft graph or ``draft_forward`` (``steps - 1``
    eager forwards), then ``build_eagle_verify_input``."""
    cfg, bs, k, s = tx.config, batch.batch_size, tx.config.speculative_eagle_topk, state.steps
    assert isinstance(batch.spec_info, EagleDraftInput)
    info = batch.spec_info.evolve(positions=(bs * k,), num_tokens_per_req=k, capture_hidden_mode=CaptureHiddenMode.LAST)
    fb = _fb(ForwardMode.DECODE, batch.rids, lens, bs * k, bs * k * s, info, CaptureHiddenMode.LAST)
    fields = _writes(tx, batch.rids, tuple(L + k * s for L in lens))
    draft_lens = tuple(tx.state.req(r).draft_kv_len for r in batch.rids)
    if can_run_graph(state.draft_decode, fb):
        fr = run_forward("draft", Worker.DRAFT, fb, state.draft_decode, cfg, draft_kv_lens=draft_lens,
                         expected_tokens=bs * k, ops=ops, tx=tx, graph_decision=True,
                         record_fields={**fields, "expected_loc": bs * k * s})
        tx = tx.record(fr)
    else:
        step_fb = _fb(ForwardMode.DECODE, batch.rids, lens, bs * k, bs * k, info, CaptureHiddenMode.LAST)
        for _ in range(s - 1):
            tx = tx.record(run_forward("draft", Worker.DRAFT, step_fb, None, cfg, draft_kv_lens=draft_lens,
                                       expected_tokens=bs * k, own_attn_metadata=True, graph_decision=False,
                                       record_fields={**fields, "expected_loc": bs * k}))
    _chain_tree(tx, bs, s)
    return tx, _verify_input(batch.rids, lens, s, k, s + 1)


def _chain_tree(tx: Tx, bs: int, steps: int) -> None:
    """``draft_forward``'s topk-1 fast path: ``top_scores_index = _topk1_score_indices_prealloc[:bs]``
    (one column per step the buffers were built for); ``build_tree_kernel_efficient`` picks
    ``num_draft_tokens - 1 = steps`` of them behind the bonus token. Modelled as assembling the
    tree (bonus + picks) into ``bs * (steps + 1)`` tokens: buffers built for fewer steps are short
    (on the GPU the kernel reads past them: a wrong tree or an illegal memory access)."""
    width = overlap(tx.state).chain_steps
    shapes = {"top_scores_index": [bs, width], "num_draft_tokens": steps + 1, "bs": bs}
    check_once("eagle_utils.py::build_tree_kernel_efficient", ("chain-tree", bs, width, steps), lambda: shapes,
               lambda: reshaped(cat([(bs, 1), sliced((bs, width), 1, steps)], 1), (bs * (steps + 1),)))


def _verify_input(rids: tuple[int, ...], lens: tuple[int, ...], steps: int, topk: int, n: int) -> EagleVerifyInput:
    bs = len(rids)
    return EagleVerifyInput(rows=rids, draft_token=(bs * n,), custom_mask=(n * (sum(lens) + n * bs),),
                            positions=(bs * n,), retrieve_index=(bs, n), retrieve_next_token=(bs, n),
                            retrieve_next_sibling=(bs, n), spec_steps=steps, topk=topk, draft_token_num=n,
                            seq_lens_sum=sum(lens))


def build_trivial_verify_input(ops: "Ops", tx: Tx, batch: ScheduleBatch, lens: tuple[int, ...]) -> EagleVerifyInput:
    """``EAGLEWorkerV2._build_trivial_verify_input``: a 1-node tree rooted at the bonus token
    (``draft_token = bonus_tokens``, ``custom_mask`` of ``seq_lens_sum + bs``, ``positions = seq_lens``)."""
    bs = batch.batch_size
    return EagleVerifyInput(rows=batch.rids, draft_token=(bs,), custom_mask=(sum(lens) + bs,), positions=(bs,),
                            retrieve_index=(bs, 1), retrieve_next_token=(bs, 1), retrieve_next_sibling=(bs, 1),
                            spec_steps=0, topk=tx.config.speculative_eagle_topk, draft_token_num=1,
                            seq_lens_sum=sum(lens))


def verify_v2(ops: "Ops", tx: Tx, batch: ScheduleBatch, vinput: EagleVerifyInput, lens: tuple[int, ...],
              state: RuntimeState) -> tuple[Tx, tuple[int, ...]]:
    """``EAGLEWorkerV2.verify`` -> ``run_eagle_verify``: ``eagle_prepare_for_verify`` (``bs * n``
    cache locations at ``seq_len``), the TARGET_VERIFY forward, ``eagle_sample``: per row an
    accept length ``1 .. n`` (``Step.accept``, clipped), bonus included."""
    bs, n = batch.batch_size, vinput.draft_token_num
    fb = _fb(ForwardMode.TARGET_VERIFY, batch.rids, lens, bs * n, bs * n, vinput, CaptureHiddenMode.FULL)
    fr = run_forward("verify", Worker.TARGET, fb, state.target_verify, tx.config, expected_tokens=bs * n, ops=ops,
                     tx=tx, graph_decision=can_run_graph(state.target_verify, fb),
                     record_fields=_writes(tx, batch.rids, tuple(L + n for L in lens)))
    guarded("eagle_worker_common.py::run_eagle_verify", {"draft_token": list(vinput.draft_token), "bs": bs,
                                                         "draft_token_num": n},
            lambda: reshaped(vinput.draft_token, (bs, n)))
    accept = tuple(max(1, min(tx.accept[i] if i < len(tx.accept) else 1, n)) for i in range(bs))
    return tx.record(fr), accept


def draft_extend_for_decode(ops: "Ops", tx: Tx, batch: ScheduleBatch, lens: tuple[int, ...],
                            accept: tuple[int, ...], state: RuntimeState) -> Tx:
    """``EagleDraftWorker._draft_extend_for_decode`` -> ``prepare_for_draft_extend``: DRAFT_EXTEND_V2
    over the whole window (``num_draft_tokens`` per request, at the verify's cache locations,
    ``seq_lens + n``); the draft KV then covers ``seq_len + n`` positions."""
    cfg, bs, n = tx.config, batch.batch_size, state.draft_tokens
    ext = EagleDraftExtendInput(
        rows=batch.rids, hidden_states=(bs * n, cfg.extend_hidden_size), num_correct_drafts=(bs,),
        num_accept_tokens=(bs,), num_accept_tokens_cpu=accept, input_ids=(bs * n,),
        seq_lens=tuple(L + n for L in lens), req_pool_indices=(bs,), capture_hidden_mode=CaptureHiddenMode.LAST,
        num_tokens_per_req=n, positions=(bs * n,))
    fb = _fb(ForwardMode.DRAFT_EXTEND_V2, batch.rids, ext.seq_lens, bs * n, bs * n, ext, CaptureHiddenMode.FULL,
             (n,) * bs)
    fr = run_forward("draft_extend", Worker.DRAFT, fb, state.draft_extend, cfg,
                     draft_kv_lens=tuple(tx.state.req(r).draft_kv_len for r in batch.rids), expected_tokens=bs * n,
                     ops=ops, tx=tx, graph_decision=can_run_graph(state.draft_extend, fb),
                     record_fields=_writes(tx, batch.rids, ext.seq_lens))
    s = tx.state
    return tx.with_state(s.with_reqs(s.req(r).evolve(draft_kv_len=L) for r, L in zip(batch.rids, ext.seq_lens))).record(fr)


def draft_extend_for_prefill(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> Tx:
    """``EagleDraftWorker._draft_extend_for_prefill``: draft EXTEND over the extend tokens (an
    ``EagleDraftExtendInput`` of 1 token per request, capture LAST), the draft KV of the extend
    tokens written; ``next_draft_input`` with ``future_indices`` becomes ``batch.spec_info``."""
    cfg, total = tx.config, sum(batch.extend_lens or ())
    ext = EagleDraftExtendInput(rows=batch.rids, hidden_states=(total, cfg.extend_hidden_size),
                                num_correct_drafts=(0,), num_accept_tokens=(0,), num_accept_tokens_cpu=(),
                                input_ids=(total,), seq_lens=batch.seq_lens, req_pool_indices=(0,),
                                num_tokens_per_req=1)
    fb = _fb(ForwardMode.EXTEND, batch.rids, batch.seq_lens, total, total, ext, CaptureHiddenMode.LAST,
             batch.extend_lens)
    fr = run_forward("draft_extend_for_prefill", Worker.DRAFT, fb, None, cfg,
                     draft_kv_lens=tuple(tx.state.req(r).draft_kv_len for r in batch.rids), expected_tokens=total,
                     graph_decision=False)
    s = tx.state
    s = s.with_reqs(s.req(r).evolve(draft_kv_len=s.req(r).draft_kv_len + e)
                    for r, e in zip(batch.rids, batch.extend_lens or ()))
    launched = batch.evolve(spec_info=next_draft_input(cfg, batch.rids))
    return tx.with_state(s.evolve(last_batch=launched)).record(fr)
