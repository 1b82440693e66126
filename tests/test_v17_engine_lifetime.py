"""What one real sglang 0.5.17 engine carries from one workload to the next, and what a released
request still shows: the regressions behind the first H200 conformance run (0/27 recordings
conformed, ``docs/results/upstream-0.5.17.md``).

- The adaptive controller (``AdaptiveController``: each slot's steps, EMA and batch count) and
  the active runtime state live as long as the engine; ``Scheduler.flush_cache`` keeps them. The
  recorder writes them into the header (``adaptive_start``) and the model starts from them.
- ``release_kv_cache`` sets ``req.kv = None`` but keeps ``Req.kv_committed_len``; a finished
  request stays in the running batch until the next ``update_running_batch``, so the ``end``
  line shows ``(committed, 0)`` for it.
"""

from __future__ import annotations

import json
from pathlib import Path

from specstate.integration.compare import load_records
from specstate.integration.sglang_0_5_17.conformance import check_recording
from specstate.model import Arrive, Step, get_variant, initial_state, step
from specstate.model.sglang_0_5_17.variants import H200_CONFIG
from tests.sim_sglang17 import simulate


def _wave(n: int, max_new: int, accept: int = 2) -> list:  # type: ignore[type-arg]
    """``n`` requests at once, then decode steps until all are done."""
    acts: list = [Arrive(24 + i, max_new) for i in range(n)]  # type: ignore[type-arg]
    return acts + [Step(accept=(accept,) * 48)] * (max_new + 8)


def _two_workloads(tmp_path: Path) -> tuple[Path, Path]:
    """Two workloads on one engine: 7 requests (steps 0, the trivial verify) then 2 (3 steps)."""
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    end = simulate(H200_CONFIG, "upstream-adaptive", _wave(7, 30), str(first), tag="first")
    simulate(H200_CONFIG, "upstream-adaptive", _wave(2, 30), str(second), tag="second", resume=end)
    return first, second


def test_the_header_carries_the_controller_and_the_model_starts_from_it(tmp_path: Path) -> None:
    first, second = _two_workloads(tmp_path)
    head1, head2 = load_records(first)[0], load_records(second)[0]
    assert head1["adaptive_start"] == {"steps": 3, "slots": {"1": [3, 2.0, 0], "6": [0, -1.0, 0]}}
    start = head2["adaptive_start"]
    assert start["steps"] == 0 and start["slots"]["6"][2] > 0, start  # the first workload ended at steps 0
    for path in (first, second):
        rep = check_recording(path)
        assert rep["mismatch_count"] == 0 and not rep["model_invariant_violations"], rep["mismatches"]


def test_a_recording_without_the_controller_state_does_not_conform(tmp_path: Path) -> None:
    """The model from a fresh controller disagrees with an engine that ran earlier work (the
    first H200 run: ``steps: model 3 vs real 0`` at the first launch)."""
    _, second = _two_workloads(tmp_path)
    records = load_records(second)
    del records[0]["adaptive_start"]
    rep = check_recording(second, records=records)
    assert rep["mismatch_count"] > 0
    assert any("steps" in m or "adaptive" in m for m in rep["mismatches"]), rep["mismatches"]


def test_a_released_request_keeps_its_committed_length() -> None:
    """``mem_cache/common.py::release_kv_cache``: slots back, ``kv_committed_len`` kept; the
    finished request is still in the running batch at the end of that iteration."""
    ops = get_variant("upstream-adaptive").ops()
    s = initial_state(get_variant("upstream-adaptive").configure(H200_CONFIG))
    s = step(s, Arrive(40, 5), ops).state
    seen = None
    for _ in range(12):
        s = step(s, Step(accept=(2,)), ops).state
        r = s.req(0)
        if r.done and 0 in s.running.rids:
            seen = (r.kv_committed_len, r.kv_allocated_len, r.output_len)
            break
    assert seen is not None, "the finished request left the running batch at once"
    committed, allocated, out = seen
    assert (committed, allocated) == (40 + out - 1, 0), seen


def test_a_retracted_request_commits_nothing() -> None:
    """``Req.reset_for_retract`` zeroes ``kv_committed_len`` (``release_req``)."""
    cfg = H200_CONFIG.with_(target_kv_pool_size=400, draft_kv_pool_size=400)
    ops = get_variant("upstream-adaptive").ops()
    s = initial_state(get_variant("upstream-adaptive").configure(cfg))
    for _ in range(4):  # two fit at first; growing, one is retracted
        s = step(s, Arrive(8, 200), ops).state
    retracted = None
    for _ in range(120):
        s = step(s, Step(accept=(4,) * 4), ops).state
        retracted = next((r for r in s.reqs if r.is_retracted and not r.done), None)
        if retracted is not None:
            break
    assert retracted is not None, "nothing was retracted"
    assert (retracted.kv_committed_len, retracted.kv_allocated_len) == (0, 0)


def test_the_header_schema_reads_the_controller(tmp_path: Path) -> None:
    from specstate.integration.conform import load as load_recording

    first, _ = _two_workloads(tmp_path)
    lines = first.read_text().splitlines()
    head = json.loads(lines[0])
    head["adaptive_start"]["slots"]["1"] = [3, 2.0]  # a slot needs steps, EMA and count
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([json.dumps(head)] + lines[1:]) + "\n")
    load_recording(first)
    try:
        load_recording(bad)
    except Exception as e:  # noqa: BLE001
        assert "adaptive_start" in str(e), e
    else:
        raise AssertionError("a header with a short slot was accepted")
