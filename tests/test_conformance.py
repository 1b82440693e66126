"""The model against the real sglang 0.5.12 worker: the H200 recordings in tests/data/gpu,
replayed on the model step by step (``specstate conform``)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from specstate.integration.analyze import pressure_counts
from specstate.integration.compare import load_records
from specstate.integration.conform import check_recording
from specstate.integration.sglang_0_5_12.conformance import RecordedBackend, recorded_workload

DATA = Path(__file__).parent / "data" / "gpu"


def _files(folder: str) -> list[Path]:
    return sorted(p for p in (DATA / folder).glob("*.jsonl.gz") if not p.name.startswith("timing"))


PRESSURE = _files("pressure-a") + _files("pressure-b")


FOLDERS = ["fixed", "agree", "fuzz", "pressure-a", "pressure-b", "lean", "deferred", "deferred2", "deferred3", "deferred4",
           "deferred5", "deferred6", "deferred7"]


def _tiered_recordings() -> list:
    """Every recording of ``FOLDERS``: the first two of each folder (and ``fixed/seed-sweep``) in the
    fast tier, the rest under ``-m slow`` (the full suite, ``.ci/run``): about a second each."""
    out = []
    for folder in FOLDERS:
        for i, p in enumerate(_files(folder)):
            fast = i < 2 or p.name == "seed-sweep.jsonl.gz"
            out.append(pytest.param(p, id=f"{folder}/{p.name}", marks=() if fast else pytest.mark.slow))
    return out


@pytest.mark.parametrize("path", _tiered_recordings())
def test_fixed_patch_conforms_step_by_step(path: Path) -> None:
    rep = check_recording(path, "fixed-threshold", 5)
    assert rep["iterations"] > 50 and rep["requests"] > 10
    assert rep["mismatches"] == [], rep["mismatches"]
    assert rep["model_invariant_violations"] == [], rep["model_invariant_violations"]
    assert rep["recorded_invariant_violations"] == []
    assert rep["real_crash"] is None and rep["model_crash"] is None


def test_enough_fixed_workloads_were_recorded() -> None:
    assert len([p for p in _files("fixed") if p.name.startswith("random")]) >= 20
    assert len(_files("fuzz")) >= 20  # fuzzer-generated (specstate.fuzz.generate seeds 0-19)


#: the lines ``pressure_counts`` reads (``ev`` ``retract`` or ``post``, or ``fbg`` with ``mode_in``
#: ``EXTEND``), told apart on the raw text: a line of that kind holds these words as written (JSON
#: spaces allowed), so nothing it counts is skipped; a line that only looks like one is parsed and
#: counted by its real fields. The other lines, the decode iterations' ``fbg`` (6 KB each, most of
#: the 200 MB), are never parsed (json.loads of them all: 10.7 of the test's 11 CPU s)
_COUNTED = re.compile(r'"ev"\s*:\s*"(retract|post|fbg)"')
_EXTEND_IN = re.compile(r'"mode_in"\s*:\s*"EXTEND"')


def _counted_lines(path: Path) -> list[dict]:  # type: ignore[type-arg]
    """The lines of a recording that ``pressure_counts`` reads, as JSON, not validated
    (``load_records`` validates each line, about 0.7 s a recording; every recording is validated by
    its conformance test above, most under ``-m slow``)."""
    out = []
    with gzip.open(path, "rt") as f:
        for line in f:
            m = _COUNTED.search(line)
            if m is not None and (m.group(1) != "fbg" or _EXTEND_IN.search(line) is not None):
                out.append(json.loads(line))
    return out


def test_pressure_recordings_exercise_retraction_chunking_and_prefix_hits() -> None:
    """Issue 13's bar: >= 30 pressure recordings (schema /2, admission checked), >= 10 retract,
    >= 5 chunk, >= 5 hit the radix cache, counted from the recordings themselves."""
    counts = [pressure_counts(_counted_lines(p)) for p in PRESSURE]
    with gzip.open(PRESSURE[0], "rt") as f:  # the filter keeps what the counts read: one recording in full
        assert pressure_counts(json.loads(line) for line in f if line.strip()) == counts[0]
    assert len(PRESSURE) >= 30
    assert sum(c["retractions"] > 0 for c in counts) >= 10
    assert sum(c["chunked_requests"] > 0 for c in counts) >= 5
    assert sum(c["prefix_hits"] > 0 for c in counts) >= 5


def test_pressure_recordings_check_admission() -> None:
    """Schema /2 places arrivals by time, so the model decides admission itself; and the
    comparison covers the allocator, the radix tree, the waiting queue and the ratio."""
    rep = check_recording(DATA / "pressure-a" / "f120.jsonl.gz", "fixed-threshold", 5)
    assert rep["schema"] == 2
    wl = recorded_workload(load_records(DATA / "pressure-a" / "f120.jsonl.gz"))
    real = RecordedBackend().observe(wl)
    assert all(o.kv_after is not None and o.waiting_after is not None and o.ratio_after is not None for o in real)
    assert any(o.retracted for o in real) and any(o.extend_lens and len(o.extend_lens) > 1 for o in real)


@pytest.mark.parametrize("folder,variant,error", [
    ("naive-graph", "naive-threshold", ("RuntimeError", (160, 10))),
    ("naive-eager", "naive-threshold-eager", ("AttributeError", ())),
])
def test_naive_patch_crash_is_predicted_at_the_same_step(folder: str, variant: str, error: tuple) -> None:
    rep = check_recording(DATA / folder / "seed-sweep.jsonl.gz", variant, 5)
    assert rep["real_crash"] == error
    assert rep["model_crash"] == error  # same class, same sizes
    assert rep["mismatches"] == []  # ... at the same iteration, after identical steps
    assert rep["iterations"] == 98


@pytest.mark.parametrize("folder,variant,error,at", [
    # the seed's patch as the seed describes it, on sglang 0.5.12 (H100, issue 35), the seed's benchmark
    # with one identical prompt: the batch as handed (out_cache_loc None after merge_batch) ...
    ("seed-carried", "seed-patch", ("AttributeError", ()), 134),
    # ... and with one slot per request allocated, input_ids still as carried: the seed's own message
    ("seed-alloc", "seed-patch-alloc", ("RuntimeError", (160, 2)), 140),
])
def test_the_seed_patch_on_the_real_worker_raises_what_the_model_predicts(folder: str, variant: str, error: tuple,
                                                                           at: int) -> None:
    """The real 0.5.12 worker's exception (class and sizes) at the first decode above the threshold is
    the model's, at the same iteration, after identical paths. The only differences before it are the
    radix cache's accounting once the first pair of requests with one identical prompt finished: greedy
    decoding gave them identical outputs, which the cache stores once; the model holds every generated
    token as its request's own (docs/model.md, "What the model leaves out"). seed-repeated's prompts
    now differ in their last token for that reason."""
    rep = check_recording(DATA / "seed-identical" / folder / "seed-repeated.jsonl.gz", variant, 5)
    assert rep["real_crash"] == rep["model_crash"] == error
    assert rep["iterations"] == at
    assert rep["mismatches"] and all(": kv_after: " in m for m in rep["mismatches"])
    wrong = check_recording(DATA / "seed-identical" / folder / "seed-repeated.jsonl.gz", "naive-threshold", 5)
    assert wrong["model_crash"] == ("RuntimeError", (160, 10)) != wrong["real_crash"]  # the project's older reading


def test_unpatched_worker_conforms_to_always_spec() -> None:
    rep = check_recording(DATA / "none" / "seed-sweep.jsonl.gz", "always-spec", None)
    assert rep["mismatches"] == [] and rep["iterations"] > 800


def test_conformance_catches_the_wrong_model() -> None:
    """Replaying the fixed patch's run with the upstream policy must disagree."""
    rep = check_recording(DATA / "fixed" / "seed-sweep.jsonl.gz", "always-spec", 5)
    assert rep["mismatch_count"] > 0
    assert "path" in rep["mismatches"][0] or "forwards" in rep["mismatches"][0]
