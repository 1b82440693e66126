"""The v2 model against the real sglang 0.5.17 ``EAGLEWorkerV2`` with upstream's adaptive switch:
the H200 recordings in ``tests/data/gpu/v17`` (one engine, 27 workloads in a row; the command
and the figures: ``docs/results/upstream-0.5.17.md``), replayed on ``upstream-adaptive`` step by
step. CPU only."""

from __future__ import annotations

from pathlib import Path

import pytest

from specstate.integration.compare import load_records
from specstate.integration.sglang_0_5_17.conformance import check_recording

DATA = Path(__file__).parent / "data" / "gpu" / "v17"
FILES = sorted(DATA.glob("*.jsonl.gz"))
FRESH = {"steps": 3, "slots": {"1": [3, 2.0, 0], "6": [0, -1.0, 0]}}  # AdaptiveController.__init__, H200 config


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:  # type: ignore[type-arg]
    return {p.name: check_recording(p) for p in FILES}


def test_enough_recordings_from_the_real_engine() -> None:
    assert len(FILES) >= 20
    heads = [load_records(p)[0] for p in FILES]
    assert {h["sglang"] for h in heads} == {"0.5.17"}
    assert {h["worker"] for h in heads} == {"sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2"}


@pytest.mark.parametrize("name", [p.name for p in FILES])
def test_every_recording_conforms_step_by_step(reports: dict, name: str) -> None:  # type: ignore[type-arg]
    rep = reports[name]
    assert rep["iterations"] > 50 and rep["requests"] >= 5
    assert rep["mismatch_count"] == 0, rep["mismatches"]
    assert rep["model_invariant_violations"] == [], rep["model_invariant_violations"]
    assert rep["real_crash"] is None and rep["model_crash"] is None


def test_at_least_20_recordings_cross_the_switch_both_ways(reports: dict) -> None:  # type: ignore[type-arg]
    both = [n for n, r in reports.items() if r["switches"]["switch_down"] and r["switches"]["switch_up"]]
    assert len(both) >= 20, {n: r["switches"] for n, r in reports.items()}


def test_later_workloads_start_from_the_controller_the_earlier_ones_left() -> None:
    """The first workload meets a fresh controller; the later ones do not (the model must start
    from ``adaptive_start``, else thousands of mismatches: the results doc)."""
    starts = {p.name: load_records(p)[0]["adaptive_start"] for p in FILES}
    assert starts["seed-sweep.jsonl.gz"] == FRESH
    later = [s for n, s in starts.items() if n != "seed-sweep.jsonl.gz"]
    assert all(s != FRESH and s["slots"]["6"][2] > 0 for s in later)
    assert {s["steps"] for s in later} == {0, 3}  # some start with drafting off


def test_released_requests_in_the_running_batch_are_seen(reports: dict) -> None:  # type: ignore[type-arg]
    """The second finding: the real ``end`` line shows a finished request the batch still holds
    as ``(kv_committed_len, 0)``; the recordings must contain such lines for the regression to
    mean something."""
    seen = 0
    for p in FILES[:5]:
        for r in load_records(p):
            if r.get("ev") == "end" and "reqs" in r:
                reqs = r["reqs"]
                seen += sum(1 for c, a, f in zip(reqs["kv_committed"], reqs["kv_allocated"], reqs["finished"])
                            if f and c > 0 and a == 0)
    assert seen > 10
