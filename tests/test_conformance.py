"""The model against the real sglang workers: the GPU recordings in ``tests/data/gpu`` replayed on the
model step by step through the one conformance route (``specstate conform``,
``integration/conform.py::check_recording``: a recording's schema names its release, whose adapter
pairs it with its variant), one table for every release with recordings (``RECORDED``, keyed by the
family its adapter models, ``integration/catalog.py``): a new release's recordings add a row, not a
file; ``test_every_recorded_release_has_rows`` fails until they do. CPU only.

Below the table, what is about one release's recordings only: 0.5.12's on the H200 (pressure,
admission, the naive and the seed patch's crashes, the unpatched worker) and 0.5.17's
``EAGLEWorkerV2`` with upstream's adaptive switch (one engine, 27 workloads in a row; the command and
the figures: ``docs/results/upstream-0.5.17.md``)."""

from __future__ import annotations

import gzip
import json
import re
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from specstate.integration.analyze import pressure_counts
from specstate.integration.catalog import SCHEMAS, adapter_for
from specstate.integration.compare import load_records
from specstate.integration.conform import check_recording
from specstate.integration.sglang_0_5_12.conformance import RecordedBackend, recorded_workload
from specstate.model.releases import get_release

DATA = Path(__file__).parent / "data" / "gpu"


def _files(folder: str) -> list[Path]:
    return sorted(p for p in (DATA / folder).glob("*.jsonl.gz") if not p.name.startswith("timing"))


class Recorded(NamedTuple):
    """A release's recordings that its default variant (or the one a header names) conforms to."""

    folders: tuple[str, ...]  #: under ``tests/data/gpu``, each folder's ``*.jsonl.gz``
    worker: str  #: the speculative worker the recordings' headers name
    threshold: int | None  #: the switching threshold they ran with, where the adapter takes one (``takes_threshold``)
    min_requests: int  #: requests in each recording, at least
    min_files: int  #: recordings of the release, at least
    fast: int | None  #: recordings of each folder in the fast tier (the first; ``seed-sweep`` too); ``None``: all


#: the rows: each family with GPU recordings -> its recordings (a new release: a row)
RECORDED: dict[str, Recorded] = {
    "sglang-0.5.12": Recorded(("fixed", "agree", "fuzz", "pressure-a", "pressure-b", "lean", "deferred", "deferred2",
                               "deferred3", "deferred4", "deferred5", "deferred6", "deferred7"),
                              "sglang.srt.speculative.eagle_worker.EAGLEWorker", 5, 11, 100, 1),
    "sglang-0.5.17": Recorded(("v17",), "sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2", None, 5, 20, None),
}


def _rows() -> list[Any]:
    """Every recording of ``RECORDED``: the fast ones in the fast tier, the rest under ``-m slow``
    (the full suite, ``.ci/run``): about a second each."""
    out = []
    for family, rec in RECORDED.items():
        for folder in rec.folders:
            for i, p in enumerate(_files(folder)):
                fast = rec.fast is None or i < rec.fast or p.name == "seed-sweep.jsonl.gz"
                out.append(pytest.param(family, p, id=f"{folder}/{p.name}", marks=() if fast else pytest.mark.slow))
    return out


@cache
def _header(path: Path) -> dict[str, Any]:
    """A recording's first line (its header) as JSON, not validated (its conformance test validates it)."""
    with gzip.open(path, "rt") as f:
        return dict(json.loads(f.readline()))


_REPORTS: dict[Path, dict[str, Any]] = {}


def _report(family: str, path: Path) -> dict[str, Any]:
    """``specstate conform`` on one recording, with the variant its release pairs it with; once a session."""
    if path not in _REPORTS:
        _REPORTS[path] = check_recording(path, None, RECORDED[family].threshold)
    return _REPORTS[path]


def test_every_recorded_release_has_rows() -> None:
    """Every GPU recording kept here is of a release with a row (its schema's family), and each row's
    recordings are of its release: their schema its adapter's, their header its sglang and worker."""
    heads = [_header(p) for p in DATA.rglob("*.jsonl.gz") if not p.name.startswith("timing")]
    recorded = {SCHEMAS[h["schema"]] for h in heads if h.get("ev") == "header"}  # not a driver's stats file
    assert recorded == set(RECORDED), recorded
    for family, rec in RECORDED.items():
        adapter, files = adapter_for(family), [p for f in rec.folders for p in _files(f)]
        assert len(files) >= rec.min_files, (family, len(files))
        assert (rec.threshold is not None) == adapter.takes_threshold, family
        heads = [_header(p) for p in files]
        assert {h["schema"] for h in heads} <= set(adapter.schemas), family
        assert {h["sglang"] for h in heads} == {get_release(family).version}
        assert {h["worker"] for h in heads} == {rec.worker}


@pytest.mark.parametrize("family,path", _rows())
def test_every_recording_conforms_step_by_step(family: str, path: Path) -> None:
    rep = _report(family, path)
    assert (rep["family"], rep["variant"]) == (family, adapter_for(family).default_variant)
    assert rep["iterations"] > 50 and rep["requests"] >= RECORDED[family].min_requests
    assert rep["mismatches"] == [] and rep["mismatch_count"] == 0, rep["mismatches"]
    assert rep["model_invariant_violations"] == [], rep["model_invariant_violations"]
    assert rep["recorded_invariant_violations"] == []
    assert rep["real_crash"] is None and rep["model_crash"] is None


# -- sglang 0.5.12: the H200 recordings of the patched v1 worker (``fixed-threshold``, threshold 5)

PRESSURE = _files("pressure-a") + _files("pressure-b")


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


# -- sglang 0.5.17: one engine, 27 workloads in a row, upstream's adaptive switch (``upstream-adaptive``)

V17 = _files("v17")
FRESH = {"steps": 3, "slots": {"1": [3, 2.0, 0], "6": [0, -1.0, 0]}}  # AdaptiveController.__init__, H200 config


def test_at_least_20_recordings_cross_the_switch_both_ways() -> None:
    reports = {p.name: _report("sglang-0.5.17", p) for p in V17}
    both = [n for n, r in reports.items() if r["switches"]["switch_down"] and r["switches"]["switch_up"]]
    assert len(both) >= 20, {n: r["switches"] for n, r in reports.items()}


def test_later_workloads_start_from_the_controller_the_earlier_ones_left() -> None:
    """The first workload meets a fresh controller; the later ones do not (the model must start
    from ``adaptive_start``, else thousands of mismatches: the results doc)."""
    starts = {p.name: _header(p)["adaptive_start"] for p in V17}
    assert starts["seed-sweep.jsonl.gz"] == FRESH
    later = [s for n, s in starts.items() if n != "seed-sweep.jsonl.gz"]
    assert all(s != FRESH and s["slots"]["6"][2] > 0 for s in later)
    assert {s["steps"] for s in later} == {0, 3}  # some start with drafting off


def test_released_requests_in_the_running_batch_are_seen() -> None:
    """The second finding: the real ``end`` line shows a finished request the batch still holds
    as ``(kv_committed_len, 0)``; the recordings must contain such lines for the regression to
    mean something."""
    seen = 0
    for p in V17[:5]:
        for r in load_records(p):
            if r.get("ev") == "end" and "reqs" in r:
                reqs = r["reqs"]
                seen += sum(1 for c, a, f in zip(reqs["kv_committed"], reqs["kv_allocated"], reqs["finished"])
                            if f and c > 0 and a == 0)
    assert seen > 10
