"""Static speculation on sglang 0.5.17's ``EAGLEWorkerV2``, and the seed's switch written against it.

A launch without ``--speculative-adaptive`` (``SpecConfig.speculative_adaptive`` off) runs
``EAGLEWorkerV2`` with ``adaptive_controller = None`` (``EAGLEWorkerV2.__init__``):
``activate_step_by_batch`` and ``on_verify_complete_cpu`` do nothing, ``init_cuda_graphs`` registers
and builds no runtime state, so every decode drafts the launch's step count through the worker's
own runners (the family's operations read the config: ``state.initial_overlap_state``,
``worker.activate_step_by_batch``, ``runtime.runtime_states``, ``start.init_adaptive_speculative_params``,
``scheduler.alloc_len_per_decode``). The registered ``upstream-static`` is the family's upstream
variant with that config forced, for the built-in scenarios and the fuzzer.

The seed's idea on that worker ("disable speculation above batch size N", the flag
``--speculative-disable-batch-threshold N``), as a user who read the v2 worker writes it: the hook
upstream calls first in every decode, ``EAGLEWorkerV2.activate_step_by_batch`` (empty without the
controller), sets the worker to steps 0 above ``N`` and back to the launch's steps at or below it,
so that ``forward_batch_generation`` takes its own steps-0 path (``_build_trivial_verify_input``: a
1-token verify, then ``_draft_extend_for_decode`` keeping the draft KV warm) and no new runner is
captured. Two forms:

- ``v2-static-switch-naive``: sets ``self.speculative_num_steps`` only, as the routing half of the
  adaptive switch reads it. ``speculative_num_draft_tokens`` stays the launch's ``steps + 1``
  (``apply_runtime_state`` sets both, and the draft worker's, and the runners: the patch does
  none of that). The trivial verify runs (1 token per request, eager: its width is not the
  target graph's), but ``_draft_extend_for_decode`` builds its input with the stale width:
  ``num_tokens_per_req = self.speculative_num_draft_tokens`` and, in
  ``eagle_worker_common.py::prepare_for_draft_extend``, ``extend_lens = [num_draft_tokens] * bs``
  beside ``batch.input_ids = predict`` (the verify's ``bs`` tokens). ``ForwardBatch.init_new``
  computes ``bs * (steps + 1)`` positions from those lengths (``compute_position``); the
  draft-extend graph's ``can_run_graph`` sees its own width and accepts, and ``execute`` copies
  ``positions`` into ``buffers.positions[:num_tokens]`` with ``num_tokens = input_ids.shape[0] =
  bs``: ``The size of tensor a (bs) must match the size of tensor b (bs * (steps + 1))``. Above the
  largest captured size the draft extend runs eager on the same mismatched batch; the model
  flags it where ``_draft_extend_for_decode`` gathers ``next_token_logits[select_index]`` (indices
  ``i * (steps + 1) + accept - 1`` into ``bs`` rows: an ``IndexError`` from 2 rows on; read, not
  run: the draft model's own forward may fail earlier on the GPU).
- ``v2-static-switch``: sets the step count *and* the draft-token count, on the worker and on its
  draft worker (what ``apply_runtime_state`` sets besides the runners). The steps-0 verify and
  draft extend then agree on 1 token per request; both runners were captured at ``steps + 1``, so
  ``can_run_graph``'s uniform-width check sends both eager (``DecodeCudaGraphRunner.can_run_graph``,
  ``EAGLEDraftExtendCudaGraphRunner.can_run_graph``); the per-decode reservation reads the
  startup server arguments (``get_alloc_len_per_decode``: constant); the topk-1 chain buffers
  were built for the launch's step count, the only drafting count the patch returns to
  (``_rebuild_topk1_chain_buffers`` is not needed). The in-flight result keeps its own stride
  (``GenerationBatchResult.speculative_num_draft_tokens``, ``PendingResult.draft_tokens``).

Read against the 0.5.17 source for the real patch (``integration/sglang_0_5_17/switch_patch.py``):
upstream calls the hook with ``batch.seq_lens.shape[0]`` on every non-extend batch (idle ones
too: 0 rows, at or below any threshold); ``_draft_extend_for_decode`` is the *draft* worker's
(``EagleDraftWorker``) and reads its own ``speculative_num_draft_tokens``, which is why the naive
form's width stays stale; the naive form also hands ``run_eagle_verify`` the stale
``num_draft_tokens`` (the verify result's ``speculative_num_draft_tokens`` stride, and the c128 /
mamba commits a dense model does not have), which the draft-extend crash precedes. Both forms
assume ``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND`` off (its default, ``environ.py``): with it on,
steps 0 skips the draft extend (``_stub_skipped_draft_extend``) and the naive form would not
reach the crash.

Both keep the worker's runners: the steps-0 runtime state here is the launch's runners with the
patch's step and draft-token counts (``runtime_states_with_patch``), over the family's own
``runtime_states`` (0.5.23 registers them over its own, ``sglang_0_5_23/static.py``).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from specstate.model.batch import ScheduleBatch
from specstate.model.modes import CaptureHiddenMode, ForwardMode, Worker
from specstate.model.runner import guarded, run_forward
from specstate.model.spec_info import EagleDraftExtendInput
from specstate.model.tensors import select_rows
from specstate.model.tx import Tx
from specstate.model.variant_registry import SEED_THRESHOLD_FLAG, Variant, register
from specstate.model.sglang_0_5_17.runtime import RuntimeState, adaptive_runtime_states
from specstate.model.sglang_0_5_17.scheduler import overlap, with_overlap
from specstate.model.sglang_0_5_17.worker import _fb, _writes, can_run_graph, record_decision

if TYPE_CHECKING:
    from specstate.model.config import SpecConfig
    from specstate.model.ops_table import Ops

__all__ = ["switch_steps", "runtime_states_with_patch", "stale_width_draft_extend", "switch_overrides",
           "UPSTREAM_STATIC", "SWITCH_NAIVE", "SWITCH"]

_EXTEND_DECODE = "eagle_worker_v2.py::EagleDraftWorker._draft_extend_for_decode"


def switch_steps(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> tuple[Tx, int]:
    """The patched ``EAGLEWorkerV2.activate_step_by_batch``: steps 0 above the threshold
    (``SpecConfig.speculation_allowed``), the launch's steps at or below it; the chain buffers
    stay as built (``OverlapState.chain_steps``: the launch's count)."""
    cfg, v2 = tx.config, overlap(tx.state)
    steps = cfg.speculative_num_steps if cfg.speculation_allowed(batch.batch_size) else 0
    if steps != v2.active_steps:
        tx = with_overlap(tx, active_steps=steps).log("switch", f"steps {v2.active_steps} -> {steps} (the patch)")
    return record_decision(tx, batch, steps, ())


@functools.lru_cache(maxsize=256)
def _with_zero(base: Callable[..., dict[int, RuntimeState]], config: "SpecConfig",
               stale_width: bool) -> dict[int, RuntimeState]:
    states = base(None, config)
    own = states[config.speculative_num_steps]
    zero = replace(own, steps=0, draft_tokens=own.draft_tokens if stale_width else 1, draft_decode=None)
    return {**states, 0: zero}


def runtime_states_with_patch(base: Callable[..., dict[int, RuntimeState]], *,
                              stale_width: bool) -> Callable[["Ops", "SpecConfig"], dict[int, RuntimeState]]:
    """The operation ``runtime_states`` of a switch patch: the family's (``base``) plus steps 0 on
    the launch's runners (no capture: the patch builds none), whose draft-token count is 1
    (``stale_width`` off: the corrected form) or the launch's ``steps + 1`` (the naive form)."""
    def runtime_states(ops: "Ops", config: "SpecConfig") -> dict[int, RuntimeState]:
        return _with_zero(base, config, stale_width)

    runtime_states.__qualname__ = runtime_states.__name__ = f"runtime_states_with_patch({base.__name__})"
    return runtime_states


def stale_width_draft_extend(ops: "Ops", tx: Tx, batch: ScheduleBatch, lens: tuple[int, ...],
                             accept: tuple[int, ...], state: RuntimeState) -> Tx:
    """``_draft_extend_for_decode`` under the naive patch at steps 0: the window is the stale
    ``speculative_num_draft_tokens`` (``n``) while the verify produced 1 token per request:
    ``input_ids`` (``predict``), ``out_cache_loc`` and hidden states of ``bs`` rows, ``positions``
    and extend lengths of ``bs * n`` (``prepare_for_draft_extend``, ``ForwardBatch.init_new``)."""
    from specstate.model.sglang_0_5_17.worker import draft_extend_for_decode

    verified = state.steps + 1 if state.steps > 0 else 1  # draft_token_num of the verify input
    if verified == state.draft_tokens:
        return draft_extend_for_decode(ops, tx, batch, lens, accept, state)
    cfg, bs, n = tx.config, batch.batch_size, state.draft_tokens
    ext = EagleDraftExtendInput(
        rows=batch.rids, hidden_states=(bs * verified, cfg.extend_hidden_size), num_correct_drafts=(bs,),
        num_accept_tokens=(bs,), num_accept_tokens_cpu=accept, input_ids=(bs * verified,),
        seq_lens=tuple(L + n for L in lens), req_pool_indices=(bs,), capture_hidden_mode=CaptureHiddenMode.LAST,
        num_tokens_per_req=n, positions=(bs * n,))
    fb = replace(_fb(ForwardMode.DRAFT_EXTEND_V2, batch.rids, ext.seq_lens, bs * verified, bs * verified, ext,
                     CaptureHiddenMode.FULL, (n,) * bs), positions=(bs * n,))
    graph = can_run_graph(state.draft_extend, fb)
    fr = run_forward("draft_extend", Worker.DRAFT, fb, state.draft_extend, cfg,
                     draft_kv_lens=tuple(tx.state.req(r).draft_kv_len for r in batch.rids), expected_tokens=bs * n,
                     ops=ops, tx=tx, graph_decision=graph, record_fields=_writes(tx, batch.rids, ext.seq_lens))
    if not graph:  # next_token_logits[select_index]: arange(0, bs * n, n) + accept - 1 over bs rows
        rows = [i * n + a - 1 for i, a in enumerate(accept)]
        guarded(_EXTEND_DECODE, {"next_token_logits": [bs * verified], "select_index": rows, "num_draft_tokens": n},
                lambda: select_rows((bs * verified,), rows))
    s = tx.state
    return tx.with_state(s.with_reqs(s.req(r).evolve(draft_kv_len=L) for r, L in zip(batch.rids, ext.seq_lens))).record(fr)


def switch_overrides(base_runtime_states: Callable[..., dict[int, RuntimeState]], *,
                     naive: bool) -> dict[str, Callable[..., object]]:
    """The operations a switch patch replaces over a family's (``base_runtime_states``: its own)."""
    out: dict[str, Callable[..., object]] = {
        "activate_step_by_batch": switch_steps,
        "runtime_states": runtime_states_with_patch(base_runtime_states, stale_width=naive)}
    if naive:
        out["draft_extend_for_decode"] = stale_width_draft_extend
    return out


#: the config every static variant runs under (after the family's ``prepare``)
STATIC = {"speculative_adaptive": False}

UPSTREAM_STATIC = register(Variant(
    "upstream-static", "sglang 0.5.17 as shipped, launched without --speculative-adaptive: EAGLEWorkerV2 with "
    "no adaptive controller, the launch's step count on every decode", base="upstream-adaptive",
    config_changes=STATIC, correct=True, scenario="static-sweep"))

SWITCH_NAIVE = register(Variant(
    "v2-static-switch-naive", "the seed's switch on EAGLEWorkerV2 (static launch): steps 0 above the threshold, "
    "but only speculative_num_steps set: the draft extend keeps the launch's width and its graph replays a "
    "1-token-per-request batch", base="upstream-static", overrides=switch_overrides(adaptive_runtime_states, naive=True),
    flags=(SEED_THRESHOLD_FLAG,), expected_invariant="worker-crash", scenario="static-sweep"))

SWITCH = register(Variant(
    "v2-static-switch", "the seed's switch on EAGLEWorkerV2, corrected: steps 0 and 1 draft token above the "
    "threshold, on the worker and its draft worker (runners kept: steps 0 runs eager)", base="upstream-static",
    overrides=switch_overrides(adaptive_runtime_states, naive=False), flags=(SEED_THRESHOLD_FLAG,), correct=True,
    scenario="static-sweep"))
