"""sglang 0.5.17 on the H200 with one adaptive slot switching 3 <-> 0 steps on its own EMA (alpha 1,
a recompute after every batch: ``pressure17.py``'s ``adaptive-flip.json``) and an out-of-memory
wave (``tests/data/gpu/v17/flip``, recorded by ``gpu_run_v17.sh`` with a plan of three engines:
``verdicts.txt`` holds the driver's verdict lines). CPU only.

Under this config the EMA gate of ``AdaptiveStepSlot.update`` meets results launched under the
other step count every few iterations (``invariants/_provenance.py``): the recordings must still
conform step by step with ``upstream-adaptive``, and most of them cross the switch both ways.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specstate.integration.sglang_0_5_17.conformance import check_recording

DATA = Path(__file__).parent / "data" / "gpu" / "v17" / "flip"
FILES = sorted(DATA.glob("*.jsonl.gz"))


def test_the_recordings_are_there() -> None:
    assert len(FILES) == 8


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_recording_conforms(path: Path) -> None:
    report = check_recording(path)
    assert report["mismatch_count"] == 0, report["mismatches"][:3]
    assert not report["model_invariant_violations"]


def test_the_slot_flips_both_ways_many_times() -> None:
    switches = {p.name: check_recording(p)["switches"] for p in FILES if p.name.startswith("flip__")}
    assert sum(1 for s in switches.values() if s.get("switch_down", 0) and s.get("switch_up", 0)) >= 6
    assert switches["flip__solo-0.jsonl.gz"]["switch_down"] >= 100  # one request: a flip almost every iteration


def test_the_verdicts_name_what_failed() -> None:
    text = (DATA / "verdicts.txt").read_text()
    assert "ENGINE DID NOT START (phase graph capture): AssertionError: shared logits buffer holds 48 rows but caller needs 64" in text
    assert "no request of 2 reached the scheduler" in text
    assert "'aborted:out-of-memory': 1, 'finished': 2" in text
