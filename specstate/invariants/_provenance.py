"""Result provenance: under the overlap scheduler every consumer of a result reads the values of
the launch it belongs to (v2 family, sglang 0.5.17).

A batch launched in iteration ``i`` is processed in iteration ``i + 1``, after batch ``i + 1`` was
launched (``scheduler.py::Scheduler.event_loop_overlap``); by then the worker may run another
runtime state and the running batch holds other rows. The launch's values travel with the result
(``PendingResult``: the batch as launched, its size, accept lengths, step count, draft-token
stride, the step that launched it), and each consumer must read them, not the newest launch's:

- ``result-provenance`` (``always``), per consumer of the result processed in a step:
  - *KV commit* (``batch_result_processor.py::SchedulerBatchResultProcessor._resolve_spec_v2_tokens``):
    each unfinished, unretracted row of the launch commits exactly its own accept length;
  - *accept lengths* (``process_batch_result_decode``): its ``output_ids`` grow by the same run;
  - *the acceptance EMA* (``adaptive_spec_params.py::AdaptiveStepSlot.update``, fed by
    ``on_verify_complete_cpu(..., batch_size=len(batch.reqs))``): the controller afterwards is
    the controller before, fed the launch's ``accept - 1`` per row at the launch's batch size;
  - *finish checks* (``schedule_batch.py::Req.update_finish_state``): a row finishes on length
    only at its own ``max_new_tokens``, on EOS only when its own run ended in EOS;
  - *the stride* (``result.speculative_num_draft_tokens``): the draft tokens of the launch's runtime state.

Where 0.5.17 itself reads another launch's value it is upstream's behaviour, not a violation:
``AdaptiveStepSlot.update`` gates the EMA on the slot's ``current_steps`` *when the result is
processed*; if the result of the launch before switched that slot (``_recompute_params``), the
gate reads the newer step count: a steps-0 launch's zeros feed the EMA of a drafting slot, or a
drafting launch's acceptance is dropped. ``ema_gate_reads_another_launch`` names such a step
(docs/results/upstream-0.5.17.md, a minimal trace in ``tests/test_v2_provenance.py``).
"""

from __future__ import annotations

from typing import Iterator, Protocol

from specstate.invariants._core import Violation, invariant
from specstate.model.actions import Step
from specstate.model.batch import ScheduleBatch
from specstate.model.request import FinishReason, Req
from specstate.model.step import StepOutcome

__all__ = ["processed_result", "ema_gate_reads_another_launch"]

_NAME = "result-provenance"


class PendingResult(Protocol):
    """What this invariant reads of a result in flight (``OverlapPart.pending``; the overlap
    release's ``PendingResult`` answers it, ``model/sglang_0_5_17/state.py``), named here so that
    the shared invariant imports no release."""

    @property
    def kind(self) -> str: ...
    @property
    def batch(self) -> ScheduleBatch: ...
    @property
    def accept(self) -> tuple[int, ...]: ...
    @property
    def eos(self) -> tuple[int, ...]: ...
    @property
    def steps(self) -> int: ...
    @property
    def draft_tokens(self) -> int: ...
    @property
    def launch_step(self) -> int: ...


def processed_result(o: StepOutcome) -> PendingResult | None:
    """The result this step processed (launched by the step before), if any."""
    if not isinstance(o.action, Step) or o.crash is not None:
        return None
    return o.before.overlap.pending


def _released_here(o: StepOutcome) -> set[int]:
    """Rows that ``retract_decode`` (and its out-of-memory abort) or an abort released this step."""
    return {e.rid for e in o.events if e.kind in ("retract", "abort") and e.rid is not None}


def _v(o: StepOutcome, field: str, expected: object, actual: object, rid: int | None, detail: str) -> Violation:
    return Violation(_NAME, o.state.step_index, rid, field, expected, actual, detail, {})


@invariant(_NAME, "batch_result_processor.py::SchedulerBatchResultProcessor._resolve_spec_v2_tokens; "
                  "adaptive_spec_params.py::AdaptiveStepSlot.update (on_verify_complete_cpu(batch_size=len(batch.reqs)))")
def result_provenance(o: StepOutcome) -> Iterator[Violation]:
    """Each consumer of a result reads the launch it belongs to: commit, accept lengths, EMA, finish, stride."""
    p = processed_result(o)
    if p is None or p.kind != "decode":
        return
    yield from _stride(o, p)
    yield from _ema(o, p)
    skip = _released_here(o)
    for rid, a in zip(p.batch.rids, p.accept):
        b, r = o.before.req(rid), o.state.req(rid)
        if b.done or b.is_retracted or rid in skip or r.is_retracted:
            continue
        yield from _row(o, p, rid, a, b, r)


def _row(o: StepOutcome, p: PendingResult, rid: int, a: int, b: Req, r: Req) -> Iterator[Violation]:
    if r.kv_committed_len - b.kv_committed_len != a:
        yield _v(o, "commit.kv_committed_len", b.kv_committed_len + a, r.kv_committed_len, rid,
                 f"commits its own launch's accept length {a} (launched at step {p.launch_step})")
    if r.output_len - b.output_len != a:
        yield _v(o, "accept.output_len", b.output_len + a, r.output_len, rid,
                 f"output_ids grow by its own launch's run of {a}")
    if r.finish_reason == FinishReason.LENGTH and b.finish_reason is None and r.output_len < r.max_new_tokens:
        yield _v(o, "finish.length", f">= {r.max_new_tokens}", r.output_len, rid, "finished on length early")
    if r.finish_reason == FinishReason.EOS and b.finish_reason is None and rid not in p.eos:
        yield _v(o, "finish.eos", "an EOS in its own launch's run", "no EOS", rid, "finished on another launch's EOS")


def _stride(o: StepOutcome, p: PendingResult) -> Iterator[Violation]:
    if p.steps > 0 and p.draft_tokens != p.steps + 1:
        yield _v(o, "result.speculative_num_draft_tokens", p.steps + 1, p.draft_tokens, None,
                 f"the stride of the launch's runtime state (steps {p.steps})")


def _ema(o: StepOutcome, p: PendingResult) -> Iterator[Violation]:
    before, after = o.before.overlap, o.state.overlap
    if before.adaptive is None:
        return
    want, _ = before.adaptive.on_verify_complete(tuple(a - 1 for a in p.accept), p.batch.batch_size)
    if after.adaptive != want:
        key = want.slot_key(p.batch.batch_size)
        yield _v(o, "adaptive.slots", dict(want.slots), dict(after.adaptive.slots) if after.adaptive else None, None,
                 f"the EMA of slot {key} fed the launch's {p.batch.batch_size} rows (launched at step {p.launch_step})")


def ema_gate_reads_another_launch(o: StepOutcome) -> tuple[int, int] | None:
    """``(launch steps, slot current_steps)`` when the EMA of the slot fed by this step's result
    is gated on a step count other than the one its launch ran with (upstream's behaviour)."""
    p = processed_result(o)
    params = o.before.overlap.adaptive
    if p is None or p.kind != "decode" or params is None:
        return None
    gate = params.slot(params.slot_key(p.batch.batch_size)).current_steps
    return (p.steps, gate) if (gate > 0) != (p.steps > 0) else None
