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

(``seed-stale-spec-info`` is an alias of ``naive-threshold`` in ``policies.py``.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specstate.model import scheduler as _s
from specstate.model.actions import Abort
from specstate.model.batch import EMPTY_BATCH, ScheduleBatch
from specstate.model.kv import free_slots
from specstate.model.request import FinishReason, ReqStatus
from specstate.model.tx import Tx
from specstate.model.variants import Variant, register
from specstate.model.worker import idle_draft_input, new_draft_input, plain_decode

if TYPE_CHECKING:
    from specstate.model.ops import Ops
    from specstate.model.state import ModelState

__all__ = ["KNOWN_BUGS"]


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
    info = new_draft_input(tx.config, ext.rows) if ext.rows else idle_draft_input(tx.config)
    return tx.with_running(tx.state.running.evolve(spec_info=info))


def decision_counting_prefill_rows(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> bool:
    """Counts queued prefill rows (waiting + chunked) with the decode rows."""
    s = tx.state
    rows = batch.batch_size + len(s.waiting) + (1 if s.chunked_rid is not None else 0)
    return tx.config.speculation_allowed(rows)


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
)
