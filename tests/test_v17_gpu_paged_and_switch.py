"""sglang 0.5.17 on the real engine (H100 80GB HBM3, torch 2.11.0+cu130, one call of
``V17_PLAN=<plan> bash specstate/integration/gpu_run_v17.sh``), judged again on CPU: the corrected
v2 switch (``--patch v2-switch --threshold 5`` on a static launch), the static launch with no patch,
and paged KV at page sizes 16 and 64 (Triton backend, adaptive launch). The device's own judgement
is kept beside them (``paged/conform-h100-run4.json``: 13 of 13 conform, 0 mismatches).

Each recording is judged from its header (variant, threshold, page size); the controls show that
the verdict depends on what the header says: the paged recordings conform only at the page size they
ran with, and the corrected switch's recordings are not the naive switch's.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest

from specstate.integration.sglang_0_5_17.conformance import check_recording, load_records

DATA = Path(__file__).parent / "data" / "gpu" / "v17"
SWITCH = sorted((DATA / "static-switch").glob("switch__*.jsonl.gz"))
STATIC = sorted((DATA / "static-switch").glob("static__*.jsonl.gz"))
PAGED = sorted((DATA / "paged").glob("paged*__*.jsonl.gz"))


def _page_of(path: Path) -> int:
    return int(path.name.split("__")[0].removeprefix("paged"))


@functools.lru_cache(maxsize=None)
def _report(path: Path) -> dict[str, Any]:
    """``check_recording(path)`` once for the module (the seed sweep of the corrected switch is
    read by two tests; the tests only read the report)."""
    return check_recording(path)


def _judged_at(path: Path, page_size: int) -> dict[str, Any]:
    records = copy.deepcopy(load_records(path))
    next(r for r in records if "server_args" in r)["server_args"]["page_size"] = page_size
    return check_recording(path, records=records)


def test_the_run_recorded_every_engine() -> None:
    assert (len(SWITCH), len(STATIC), len(PAGED)) == (4, 3, 6)
    device = json.loads((DATA / "paged" / "conform-h100-run4.json").read_text())
    text = json.dumps(device)
    for path in SWITCH + STATIC + PAGED:  # the device judged the same files
        assert path.name.removesuffix(".gz") in text, path.name


@pytest.mark.parametrize("path", SWITCH, ids=lambda p: p.name)
def test_the_corrected_v2_switch_conforms_and_crosses_the_threshold(path: Path) -> None:
    rep = _report(path)
    assert (rep["variant"], rep["threshold"]) == ("v2-static-switch", 5)
    assert rep["mismatch_count"] == 0, rep["first_mismatch"]
    assert rep["real_crash"] is None and rep["model_crash"] is None


def test_the_corrected_switch_turned_drafting_off_and_on_again() -> None:
    """The seed sweep crosses batch size 5 both ways: drafting goes off and comes back on."""
    rep = _report(DATA / "static-switch" / "switch__seed-sweep.jsonl.gz")
    assert rep["switches"]["switch_down"] >= 3 and rep["switches"]["switch_up"] >= 3, rep["switches"]
    assert rep["switches"]["decodes_steps_0"] > 0 and rep["switches"]["decodes_steps_3"] > 0


def test_judged_as_the_naive_switch_the_seed_sweep_is_a_crash_that_did_not_happen() -> None:
    """The control: the naive form predicts the crash the naive engine had (``test_v17_static_switch_gpu``);
    the corrected engine ran the same sweep to the end."""
    rep = check_recording(DATA / "static-switch" / "switch__seed-sweep.jsonl.gz", "v2-static-switch-naive")
    assert rep["model_crash"] is not None and rep["real_crash"] is None


@pytest.mark.parametrize("path", STATIC, ids=lambda p: p.name)
def test_the_static_launch_conforms(path: Path) -> None:
    rep = check_recording(path)
    assert rep["variant"] == "upstream-static" and rep["mismatch_count"] == 0, rep["first_mismatch"]


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow if "seed-sweep" in p.name else ())
                                  for p in PAGED], ids=lambda p: p.name)  # the sweeps (9 CPU s): -m slow
def test_paged_kv_conforms_at_the_page_size_it_ran_with(path: Path) -> None:
    records = load_records(path)
    header = next(r for r in records if "server_args" in r)
    assert header["server_args"]["page_size"] == _page_of(path) > 1
    rep = check_recording(path, records=records)
    assert rep["mismatch_count"] == 0, rep["first_mismatch"]


@pytest.mark.parametrize("page_size", [1, 16, 64])
def test_a_paged_recording_judged_at_another_page_size_does_not_conform(page_size: int) -> None:
    """The page size is judged, not assumed: the free pool the real scheduler reports after each
    iteration matches the model's only at the page size the engine ran with."""
    for path in (DATA / "paged" / "paged16__random-0-0.jsonl.gz", DATA / "paged" / "paged64__random-0-0.jsonl.gz"):
        rep = _judged_at(path, page_size)
        if page_size == _page_of(path):
            assert rep["mismatch_count"] == 0, (path.name, rep["first_mismatch"])
        else:
            assert rep["mismatch_count"] > 0 and rep["first_mismatch"].field == "kv_after", (path.name, page_size)
