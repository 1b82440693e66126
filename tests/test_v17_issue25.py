"""Issue 25's H200 run (one device call, ``tests/data/gpu/v17/issue25``): three engines of sglang
0.5.17 from one plan (``specstate/integration/sglang_assets/plan-issue25/plan.txt`` through
``gpu_run_v17.sh``), then ``specstate replay --start-timeout 30``. CPU only: today's code judged
on what the GPU recorded.

- ``prefix`` (the H200 adaptive config, 2,048 slots, 64-token chunks): a prefix-sharing workload,
  an abort of the request being chunk-prefilled, two random workloads, an out-of-memory wave and
  a workload whose every request is over the context length. Its recordings conform with the
  model, ``prefix_lens`` / ``extend_lens`` included; the two last workloads fail the run, each
  with its reason, and the out-of-memory wave keeps its other request's result.
- ``nostart-defaults3`` (upstream's default adaptive config at 3 steps): the engine dies at graph
  capture with the shared-logits-buffer assertion; the driver's verdict names it, and the model
  refuses the same config at its start with the same class and sizes.
- ``defaults7`` (the same config at 7 steps): the engine and the model both start it.
- ``replay --start-timeout 30``: a start ended by the driver is a failure for the limit, and the
  model's start is not judged against an engine that neither started nor refused.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from specstate.integration.compare import load_records
from specstate.integration.sglang_0_5_17.conformance import check_recording
from specstate.integration.sglang_0_5_17.engine import engine_kwargs
from specstate.integration.start_prediction import compare_start, predict_start
from specstate.integration.verdicts import start_failure, workload_verdict

DATA = Path(__file__).parent / "data" / "gpu" / "v17" / "issue25"
FILES = sorted(DATA.glob("*.jsonl.gz"))


def _json(*parts: str) -> Any:
    return json.loads(DATA.joinpath(*parts).read_text())


def _workload(engine: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The workload as the host ran it and its ``host_result.json`` entry."""
    cfg = _json(engine, "host_config.json")
    host = _json(engine, "host_result.json")
    item = next(it["workload"] for it in cfg["workloads"] if it["workload"]["name"] == name)
    return item, next(w for w in host["workloads"] if w["name"] == name)


def test_the_plan_recorded_what_it_was_written_for() -> None:
    assert [p.name for p in FILES] == [
        "defaults7__random-0-0.jsonl.gz", "defaults7__tiny.jsonl.gz", "prefix__chunk-abort-2.jsonl.gz",
        "prefix__oom.jsonl.gz", "prefix__prefix.jsonl.gz", "prefix__random-0-0.jsonl.gz",
        "prefix__random-0-1.jsonl.gz"]


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_each_recording_conforms_with_the_model(path: Path) -> None:
    report = check_recording(path)
    assert report["mismatch_count"] == 0, report["mismatches"][:3]
    assert report["model_invariant_violations"] == []
    assert report["real_crash"] is None


def test_admission_lengths_were_recorded_and_compared() -> None:
    """Every prefill line carries ``prefix_lens`` and ``extend_lens``; the prefix-sharing workload
    and the random ones hit the radix tree (a shared prompt prefix, or the next chunk of a
    chunked prompt), so conformance compared real matches, not only zeros."""
    hits = {}
    for path in FILES:
        lines = [r for r in load_records(path) if "prefix_lens" in r]
        assert lines and all(len(r["prefix_lens"]) == len(r["extend_lens"]) for r in lines)
        hits[path.name] = sum(1 for r in lines for x in r["prefix_lens"] if x > 0)
    assert hits["prefix__prefix.jsonl.gz"] > 0 and hits["prefix__random-0-0.jsonl.gz"] > 0
    assert sum(hits.values()) >= 90, hits


def test_the_out_of_memory_wave_fails_the_run_and_keeps_the_other_result() -> None:
    workload, entry = _workload("prefix", "oom")
    verdict = workload_verdict(entry, workload, 2)
    assert verdict["counts"] == {"sent": 2, "aborted:out-of-memory": 1, "finished": 1, "admitted": 2}
    assert len(verdict["problems"]) == 1 and verdict["problems"][0].startswith("request om0solo aborted:out-of-memory")
    assert [r for r in entry["waves"][0]["reqs"] if r["rid"] == "om0side"][0]["n_out"] == 16
    recs = load_records(DATA / "prefix__oom.jsonl.gz")
    assert sum(len(r["aborted"]) for r in recs if r["ev"] == "retract") == 1  # retract_decode's abort


def test_a_workload_refused_before_the_scheduler_fails_the_run() -> None:
    workload, entry = _workload("prefix", "too-long")
    verdict = workload_verdict(entry, workload, None)
    assert verdict["counts"] == {"sent": 2, "refused": 2}
    assert verdict["problems"][0] == "no request of 2 reached the scheduler"
    assert all("exceeds the model's maximum context length of 4096" in p for p in verdict["problems"][1:])
    summary = _json("prefix", "summary.json")
    assert summary["ok"] is False and len(summary["problems"]) == 4


def test_an_engine_that_died_at_start_is_the_verdict_and_the_model_predicted_it() -> None:
    log = gzip.decompress((DATA / "nostart-defaults3" / "host.log.gz").read_bytes()).decode()
    start = start_failure(log, _json("nostart-defaults3", "host_result.json"))
    assert start is not None and start["phase"] == "graph capture" and start["cls"] == "AssertionError"
    assert start["msg"].startswith("shared logits buffer holds 64 rows but caller needs 128")
    overrides = _json("nostart-defaults3", "host_config.json")["engine_overrides"]
    model = predict_start(engine_kwargs(overrides), "upstream-adaptive")
    assert model["status"] == "refuses" and model["upstream"] == "AssertionError"
    assert "asked 128 rows, held 64" in model["why"]
    assert compare_start(model, start)["agrees"] is True


def test_the_same_defaults_at_seven_steps_start_on_both() -> None:
    overrides = _json("defaults7", "host_config.json")["engine_overrides"]
    assert _json("defaults7", "host_result.json")["engine_start_s"] is not None
    model = predict_start(engine_kwargs(overrides), "upstream-adaptive")
    assert model["status"] == "starts" and compare_start(model, None)["agrees"] is True


def test_a_start_ended_by_the_start_timeout_is_not_a_refusal() -> None:
    """What the H200 printed before the fix: the model's start 'disagreeing' with an engine the
    driver itself had ended; judged again today, it is not judged."""
    saved = _json("replay-start-timeout", "summary.json")
    assert saved["host_killed_because"] == "the engine did not start within --start-timeout 30 s"
    assert saved["start_error"]["cls"] is None
    model = saved["start_model"]["model"]
    assert model["status"] == "starts"
    assert compare_start(model, saved["start_error"])["agrees"] is None


def test_the_same_replay_after_the_fix_on_the_h200() -> None:
    """The replay again on the H200 with the fix: one problem, the limit's; the start not judged."""
    saved = _json("replay-start-timeout-fixed", "summary.json")
    assert saved["problems"] == ["the engine did not start within --start-timeout 30 s (in phase engine start)"]
    assert saved["start_model"]["agrees"] is None and saved["start_model"]["line"].startswith("not judged")
    assert saved["start_error"]["msg"] == "ended by the driver: the engine did not start within --start-timeout 30 s"
    assert compare_start(saved["start_model"]["model"], saved["start_error"])["agrees"] is None
