"""Every abort path of sglang 0.5.17 in the v2 model, with its KV and tree effects
(``specstate/model/sglang_0_5_17/aborts.py``), and retraction in its own iteration: recorded through the real
0.5.17 hooks by the CPU stand-in (``tests/sim_sglang17.py``), which drives ``retract_decode``
inside ``get_next_batch_to_run`` as the real scheduler does, and conformed with 0 mismatches.

Every number is worked out in the comments (page size 1, EAGLE bigram keys: a prefix of ``n``
tokens is ``n - 1`` tree slots; the H200 config reserves ``2 * 4`` slots per decoding request)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specstate.integration.compare import load_records
from specstate.integration.sglang_0_5_17.conformance import check_recording, recorded_workload
from specstate.model import Abort, Arrive, Step, get_variant, initial_state, step
from specstate.model.request import FinishReason, ReqStatus
from specstate.model.sglang_0_5_17.variants import H200_CONFIG
from tests.sim_sglang17 import simulate

V2 = "upstream-adaptive"
POOL = 512
CFG = H200_CONFIG.with_(chunked_prefill_size=64, target_kv_pool_size=POOL, draft_kv_pool_size=POOL)


def _run(actions: list[Any], variant: str = V2) -> list[Any]:
    v = get_variant(variant)
    ops, s, out = v.ops(), initial_state(v.configure(CFG)), []
    for a in actions:
        o = step(s, a, ops)
        s = o.state
        out.append(o)
    return out


# -- the four abort paths in the model ------------------------------------------------------------

def test_an_abort_in_the_waiting_queue_pops_it_and_frees_nothing() -> None:
    out = _run([Arrive(40, 8), Abort(0), Step()])
    s = out[-1].state
    assert s.req(0).status == ReqStatus.ABORTED and s.waiting == () and s.kv_available == POOL
    assert out[-1].batch_kind != "prefill"


def test_an_abort_of_the_chunked_request_releases_it_at_the_next_iteration_without_insert() -> None:
    """A 200-token prompt in 64-token chunks: chunk 1 launched, chunk 2 launched (chunk 1 stashed:
    63 tree slots, locked by the request), the abort only marks it; the next iteration's
    ``process_pending_chunked_abort`` releases its 128 slots without inserting chunk 2: the
    tree keeps its 63 (now unlocked: evictable), 65 slots go back, no third chunk is launched."""
    out = _run([Arrive(200, 10), Step(), Step(), Abort(0), Step(), Step()])
    marked, aborted = out[3].state, out[4]
    assert marked.v2.chunked_abort == 0 and marked.chunked_rid == 0 and marked.req(0).status == ReqStatus.PREFILLING
    s = aborted.state
    assert aborted.batch_kind == "none" and aborted.processed == (0,)  # chunk 2's result, skipped
    assert s.req(0).status == ReqStatus.FINISHED and s.req(0).finish_reason == FinishReason.ABORT
    assert s.chunked_rid is None and s.v2.chunked_abort is None and not s.req(0).to_abort
    assert (s.kv_available, s.tree.evictable, s.tree.protected) == (POOL - 63, 63, 0)
    assert s.req(0).kv_allocated_len == 0 and s.req(0).kv_committed_len == 128  # kept (0.5.17's release)
    assert out[5].batch_kind == "idle"


def test_without_the_pending_chunked_abort_the_model_keeps_prefilling() -> None:
    """The model before 0.5.17's path: the abort sets ``to_finish``, and the request is prefilled
    to its end and inserted into the tree (what 15 GPU recordings showed as mismatches)."""
    from specstate.model.scheduler import abort, get_next_batch_to_run
    from specstate.model.variants import Variant

    v = get_variant(V2)
    old = Variant("old-chunked-abort", "", overrides={**v.overrides, "abort": abort,
                                                     "get_next_batch_to_run": get_next_batch_to_run},
                  family="sglang-0.5.17")
    ops, s = old.ops(), initial_state(v.configure(CFG))
    kinds = []
    for a in [Arrive(200, 10), Step(), Step(), Abort(0), Step(), Step()]:
        o = step(s, a, ops)
        s, kinds = o.state, kinds + [o.batch_kind]
    assert kinds[4:] == ["prefill", "prefill"] and s.chunked_rid is None


def test_an_abort_in_the_running_batch_decodes_once_more_and_inserts() -> None:
    """``to_finish``: the batch launched after the abort still holds the request; the result of
    the batch before finishes it (``update_finish_state``: the abort first) and
    ``release_kv_cache`` inserts its committed tokens: 40 prompt + 3 outputs, 42 committed, 41 tree
    slots (a bigram key)."""
    out = _run([Arrive(40, 30), Step(), Step(accept=(1,)), Step(accept=(1,)), Abort(0), Step(accept=(1,)), Step()])
    assert out[4].state.req(0).to_abort and out[5].batch_kind == "decode"
    s = out[5].state
    assert s.req(0).status == ReqStatus.FINISHED and s.req(0).finish_reason == FinishReason.ABORT
    assert (s.kv_available, s.tree.evictable, s.tree.protected) == (POOL - 41, 41, 0)


def test_the_out_of_memory_abort_releases_the_last_request_without_insert() -> None:
    """One request of a 300-token prompt in a 512-slot pool (``max_new_tokens`` clamped to 210):
    once ``committed + 8`` passes the pool even alone, ``retract_decode`` aborts it: its slots go
    back (nothing inserted: the tree keeps the prompt's 299 slots from the prefill, unlocked),
    ``kv_committed_len`` 0 (``Req.reset_for_retract``), the batch is empty, the ratio 0."""
    out = _run([Arrive(300, 1000)] + [Step(accept=(4,))] * 60)
    i = next(i for i, o in enumerate(out) if any(e.kind == "abort" for e in o.events))
    s = out[i].state
    assert s.req(0).status == ReqStatus.FINISHED and s.req(0).finish_reason == FinishReason.ABORT
    assert s.req(0).kv_committed_len == 0 and s.req(0).kv_allocated_len == 0 and s.running.is_empty()
    assert (s.kv_available, s.tree.evictable, s.tree.protected) == (POOL - 299, 299, 0)
    assert s.new_token_ratio == 0.0 and out[i].batch_kind == "none"


# -- recorded through the real hooks, conformed ---------------------------------------------------

#: a chunked prompt aborted after its second chunk; 12 requests that outgrow the pool (retraction
#: under overlap); then one request that cannot fit even alone (the out-of-memory abort)
WORKLOAD = ([Arrive(200, 10), Step(), Step(), Abort(0)] + [Step(accept=(4,) * 12)] * 3
            + [Arrive(16, 40) for _ in range(12)] + [Step(accept=(4,) * 12)] * 120
            + [Arrive(300, 1000)] + [Step(accept=(4,))] * 80)


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("aborts") / "aborts.jsonl"
    simulate(CFG, V2, WORKLOAD, str(out))
    return out


def test_the_recording_has_every_abort_path_and_retractions(recording: Path) -> None:
    recs = load_records(recording)
    retracts = [r for r in recs if r["ev"] == "retract"]
    assert sum(len(r["retracted"]) for r in retracts) >= 2 and sum(len(r["aborted"]) for r in retracts) == 1
    assert sum(1 for r in recs if r["ev"] == "abort") == 1 and sum(1 for r in recs if r["ev"] == "requeue") >= 2
    ends = [r for r in recs if r["ev"] == "end" and "sched" in r]
    assert any(r["sched"]["chunked"] is not None for r in ends)


def test_a_retract_line_comes_before_the_loop_line_of_its_iteration(recording: Path) -> None:
    """``retract_decode`` runs inside ``get_next_batch_to_run``; the ``loop`` line follows it."""
    recs = load_records(recording)
    for i, r in enumerate(recs):
        if r["ev"] == "retract":
            nxt = next(x for x in recs[i + 1:] if x["ev"] == "loop")
            assert nxt["loop"] == r["loop"] and (nxt["batch"] is not None or r["aborted"])


def test_the_recording_conforms_with_every_abort_and_retraction(recording: Path) -> None:
    rep = check_recording(recording)
    assert rep["mismatch_count"] == 0, rep["mismatches"]
    assert not rep["model_invariant_violations"]
    rec = recorded_workload(load_records(recording))
    assert sum(len(loop.retracted) for loop in rec.loops) >= 2 and sum(len(loop.aborted) for loop in rec.loops) == 1


def test_a_retraction_paired_with_the_iteration_before_does_not_conform(recording: Path) -> None:
    """The old pairing (the 0.5.17 conformance gave a ``retract`` line to the loop iteration
    before it): each retraction is then two mismatches, ``retracted: model () vs real (k,)`` at
    the iteration before and ``model (k,) vs real ()`` at its own."""
    from specstate.integration.compare import compare
    from specstate.integration.sglang_0_5_17.conformance import ModelBackend, RecordedBackend, config_from_header

    rec = recorded_workload(load_records(recording))
    for before, loop in zip(rec.loops, rec.loops[1:]):
        before.retracted, loop.retracted = before.retracted + loop.retracted, []
        before.aborted, loop.aborted = before.aborted + loop.aborted, []
    model = ModelBackend(config_from_header(rec.header), V2).observe(rec)
    mism = [m for m in compare(model, RecordedBackend().observe(rec)) if m.field in ("retracted", "aborted")]
    moved = sum(1 for x in load_records(recording) if x["ev"] == "retract")
    assert len(mism) == 2 * moved, [m.describe() for m in mism]


@pytest.mark.parametrize("variant", ["v2-single-reserve"])
def test_a_recording_of_another_variant_under_pressure_does_not_conform(tmp_path: Path, variant: str) -> None:
    out = tmp_path / "other.jsonl"
    simulate(CFG, variant, WORKLOAD, str(out))
    assert check_recording(out)["mismatch_count"] > 0
