"""``benchmarks/recorder.py`` drives what it says it drives: the recorder's real hooks, recording
in ``deferred`` mode the records conformance reads, and nothing when the recorder is off.

Both modules are imported by the fixtures, not at collection: the recorder's capture imports
torch (``tests/test_startup.py`` checks that collecting the suite does not)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def rec():
    from specstate.integration import sglang_recorder

    return sglang_recorder


@pytest.fixture(scope="module")
def bench():
    from benchmarks import recorder

    return recorder


@pytest.fixture
def recorder(rec, monkeypatch, tmp_path):
    r = rec.Recorder()
    monkeypatch.setattr(rec, "RECORDER", r)
    r.mode, r.out_path = "deferred", str(tmp_path / "bench.jsonl")
    r._header_written_for = r.out_path
    return r


def _rendered(r):
    return [item[0](*item[1:]) for _path, item in r._buf]


def test_a_speculative_step_records_its_forwards_and_post(bench, recorder):
    bench._step("c4")()
    fbg, post = _rendered(recorder)
    assert fbg["ev"] == "fbg" and fbg["path"] == "spec" and fbg["bs"] == 4
    assert [(e["via"], e["mode"], e.get("graph", {}).get("padded_bs")) for e in fbg["events"]] == [
        ("graph:draft_decode", "DECODE", 4), ("model_runner", "TARGET_VERIFY", 4), ("graph:draft_extend", "DRAFT_EXTEND", 4)]
    assert fbg["reqs_after"]["out_len"] == [20] * 4 and fbg["result"]["accept_lens"] == [1] * 4
    assert post["ev"] == "post" and post["rids"] == fbg["rids"] and post["kv"]["available"] == 100_000


def test_a_fallback_step_runs_eager_forwards_at_batch_size_30(bench, recorder):
    bench._step("c30")()
    fbg, _post = _rendered(recorder)
    assert fbg["path"] == "fallback" and fbg["bs"] == 30 and fbg["after"]["seq_lens"] == list(range(84, 114))
    assert [(e["worker"], e["mode"], e["graph_ran"]) for e in fbg["events"]] == [
        ("target", "DECODE", False), ("draft", "DRAFT_EXTEND", False)]


def test_off_records_nothing_and_measure_reports_both_modes(bench, rec, monkeypatch):
    monkeypatch.setattr(rec, "RECORDER", rec.Recorder())
    assert bench.step_us("c4", "off", steps=3) > 0 and rec.RECORDER._buf == []
    res = bench.measure(repeats=2, steps=20)
    assert set(res) == set(bench.SHAPES)
    for d in res.values():
        assert set(d) == {"off", "deferred", "added"} and d["deferred"]["median"] > 0 and d["off"]["median"] > 0
    assert rec.RECORDER.out_path is None and rec.RECORDER._buf == []
