"""One variant per row of ``shared/reference/known-bugs.md``: the bug, planted.

Each is the ``fixed-threshold`` policy (or upstream, where the bug is not about switching)
with one operation replaced by the buggy form the report describes, and names the invariant
that must catch it. The corrected behaviour is the default operation.

| variant                  | report                          | operation replaced      | caught by              |
|--------------------------|---------------------------------|-------------------------|------------------------|
| seed-stale-spec-info     | the seed                        | fallback_decode         | worker-crash           |
| finish-before-filter     | sglang#9252 #10991 #14742 #18760 | abort                   | spec-info-rows         |
| mixed-reuses-spec-loc    | sglang#6874 #26201              | mix_with_running        | token-counts           |
| kv-leak-spec-tail        | sglang#13826 #22151, sglang-jax#1147 | free_rejected_slots | kv-accounting          |
| draft-kv-stale-on-resume | vllm#53426, vllm-metal#716, sglang#23994 | fallback_decode | draft-kv-in-step       |
| switch-thrash            | vllm#49548                      | decide_speculation      | stable-switch-decision |
| stale-graph-padding      | sglang#10892 (#6309 #8296 #8336 #9888), #18984 | replay_prepare | graph-padding   |
| unfiltered-accept-length | sglang#18984, #17050            | new_draft_input, filter_spec_info | spec-info-rows |

(``seed-stale-spec-info`` is an alias of ``naive-threshold`` in ``policies.py``.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from specstate.model import scheduler as _s
from specstate.model.actions import Abort
from specstate.model.batch import EMPTY_BATCH, ScheduleBatch
from specstate.model.kv import free_slots
from specstate.model.replay import prepare_static_buffers
from specstate.model.spec_info import BatchShape, EagleDraftInput, SpecInfo
from specstate.model.tensors import select_rows, take_rows
from specstate.model.request import FinishReason, ReqStatus
from specstate.model.tx import Tx
from specstate.model.variant_registry import Variant, register
from specstate.model.sglang_0_5_12.worker import new_draft_input, plain_decode

if TYPE_CHECKING:
    from specstate.model.config import SpecConfig
    from specstate.model.graph_buffers import GraphBuffers
    from specstate.model.ops_table import Ops
    from specstate.model.records import GraphUse
    from specstate.model.runner import ForwardBatch, GraphRunner
    from specstate.model.state import ModelState

__all__ = ["KNOWN_BUGS", "EagleDraftInputWithAcceptLength"]


def abort_finishes_running_now(ops: "Ops", tx: Tx, action: Abort) -> Tx:
    """A running request finishes outside verify (``_abort_on_running_timeout``, or the
    last chunk finishing): verify never dropped its row, the scheduler's filter
    (``has_been_filtered=True``) truncates ``topk_p`` from the back."""
    s = tx.state
    req = s.req(action.rid)
    if req.status == ReqStatus.RUNNING and req.rid in s.running.rids:
        s, req = ops.release_kv_cache(ops, s, req.evolve(status=ReqStatus.FINISHED, finish_reason=FinishReason.ABORT))
        return tx.with_state(s.with_reqs([req])).log("abort", "finished before filter_batch", req.rid)
    return _s.abort(ops, tx, action)


def mix_reusing_spec_loc(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> tuple[Tx, ScheduleBatch]:
    """``mix_with_running`` concatenating the running batch's speculative ``out_cache_loc``
    (left by verify: one slot per *accepted* token) instead of one new slot per request."""
    running = tx.state.running
    loc = running.out_cache_loc or (0,)
    return tx.with_state(tx.state.evolve(running=EMPTY_BATCH)), _s._mixed(batch, running, loc)


def free_rejected_unfinished_only(ops: "Ops", s: "ModelState", rids: tuple[int, ...], n: int, accepted: list[int]) -> "ModelState":
    """Rejected draft slots of requests that finished in this verify are never freed."""
    kept = sum(n - a for rid, a in zip(rids, accepted) if s.req(rid).live)
    return free_slots(s, kept)


def fallback_without_draft_extend(ops: "Ops", tx: Tx) -> Tx:
    """The fallback decodes and rebuilds an ``EagleDraftInput`` but never runs draft-extend:
    the draft KV misses every token produced while speculation was off."""
    tx, ext = plain_decode(ops, tx)
    info = ops.new_draft_input(ops, tx.config, ext.rows)
    return tx.with_running(tx.state.running.evolve(spec_info=info))


def decision_counting_prefill_rows(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> bool:
    """Counts queued prefill rows (waiting + chunked) with the decode rows."""
    s = tx.state
    rows = batch.batch_size + len(s.waiting) + (1 if s.chunked_rid is not None else 0)
    return tx.config.speculation_allowed(rows)


def replay_without_padding_reset(ops: "Ops", runner: "GraphRunner", fb: "ForwardBatch", graphs: "GraphBuffers",
                                 iteration: int, config: "SpecConfig") -> "GraphUse":
    """``replay_prepare`` without the ``if bs != raw_bs: seq_lens.fill_(...); out_cache_loc.zero_()``
    (and the draft runners' resets): padding rows keep the previous replay's values."""
    return prepare_static_buffers(ops, runner, fb, graphs, iteration, config, reset_padding=False)


@dataclass(frozen=True)
class EagleDraftInputWithAcceptLength(EagleDraftInput):
    """A patch's draft input carrying per-request accept lengths (as older sglang and the v2
    worker do: ``accept_length``, one row per request)."""

    accept_length: BatchShape = (0,)  #: (b,)


def draft_input_with_accept_length(ops: "Ops", config: "SpecConfig", rows: tuple[int, ...]) -> EagleDraftInput:
    base = new_draft_input(config, rows)
    return EagleDraftInputWithAcceptLength(**{f: getattr(base, f) for f in base.__dataclass_fields__},
                                           accept_length=(len(rows),))


_ORIGINAL_ROW_FIELDS = ("topk_p", "topk_index", "hidden_states", "bonus_tokens")


def filter_listed_fields(ops: "Ops", tx: Tx, spec: SpecInfo, keep: list[int], has_been_filtered: bool) -> tuple[Tx, SpecInfo]:
    """``EagleDraftInput.filter_batch`` with its four fields written out: the patch's
    ``accept_length`` keeps every row."""
    if not isinstance(spec, EagleDraftInput):
        return tx, spec
    if has_been_filtered:
        n = len(keep)
        return tx, spec.evolve(rows=spec.rows[:n], **{f: take_rows(getattr(spec, f), n) for f in _ORIGINAL_ROW_FIELDS})
    return tx, spec.evolve(rows=tuple(spec.rows[i] for i in keep),
                           **{f: select_rows(getattr(spec, f), keep) for f in _ORIGINAL_ROW_FIELDS})


KNOWN_BUGS: tuple[Variant, ...] = (
    register(Variant(
        "finish-before-filter", "a request finishes between verify and filter_batch; the filter truncates topk_p",
        overrides={"abort": abort_finishes_running_now}, base="fixed-threshold",
        expected_invariant="spec-info-rows", reference="sglang#9252, #10991, #14742, #18760")),
    register(Variant(
        "mixed-reuses-spec-loc", "mix_with_running reuses the running batch's speculative out_cache_loc",
        overrides={"mix_with_running": mix_reusing_spec_loc}, config_changes={"enable_mixed_chunk": True},
        base="fixed-threshold", expected_invariant="token-counts", reference="sglang#6874, #26201")),
    register(Variant(
        "kv-leak-spec-tail", "rejected draft slots of requests finishing in verify are never freed",
        overrides={"free_rejected_slots": free_rejected_unfinished_only}, base="fixed-threshold",
        expected_invariant="kv-accounting", reference="sglang#13826, #22151; sglang-jax#1147")),
    register(Variant(
        "draft-kv-stale-on-resume", "while speculation is off the draft KV is not kept in step",
        overrides={"fallback_decode": fallback_without_draft_extend}, base="fixed-threshold",
        expected_invariant="draft-kv-in-step", reference="vllm#53426, vllm-metal#716; sglang#23994")),
    register(Variant(
        "switch-thrash", "the switch decision counts prefill rows, so it flips with the same decode rows",
        overrides={"decide_speculation": decision_counting_prefill_rows}, base="fixed-threshold",
        expected_invariant="stable-switch-decision", reference="vllm#49548")),
    register(Variant(
        "stale-graph-padding", "graph replay skips the padding-row reset: a shrinking batch reads a larger one's rows",
        overrides={"replay_prepare": replay_without_padding_reset}, base="fixed-threshold",
        expected_invariant="graph-padding", reference="sglang#10892 (fixes #6309, #8296, #8336, #9888); sglang#18984")),
    register(Variant(
        "unfiltered-accept-length", "a patch adds per-request accept_length to the draft input; filter_batch forgets it",
        overrides={"new_draft_input": draft_input_with_accept_length, "filter_spec_info": filter_listed_fields},
        base="fixed-threshold", expected_invariant="spec-info-rows", reference="sglang#18984; sglang#17050")),
)
