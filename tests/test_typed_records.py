"""Conformance reads typed records (issue 38): the loader keeps the models it validated each line
with, a hand-built list of dicts is validated into the same models, records changed after loading
are validated again, and 0.5.12's checks on recorded forwards read the model's own
``mode-consistency`` table (``model.spec_info.spec_info_for``)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from specstate.errors import RecordingFormatError
from specstate.integration.compare import load_records
from specstate.integration.sglang_0_5_12.conformance import recorded_invariants
from specstate.integration.sglang_0_5_12.recording import model_for
from specstate.model.spec_info import SPEC_FOR_MODE, spec_info_for
from specstate.schema import typed_records

V17 = Path(__file__).parent / "data" / "gpu" / "v17" / "g000.jsonl.gz"


def _fwd(mode: str, spec: str | None, n: int, loc: int) -> dict[str, Any]:
    return {"ev": "fwd", "worker": "target", "mode": mode, "bs": 1, "input_ids": [n], "out_cache_loc": [loc], "spec": spec}


def _iteration(*events: dict[str, Any]) -> dict[str, Any]:
    return {"ev": "fbg", "iter": 3, "bs": 1, "rids": ["a"], "mode_in": "DECODE", "events": list(events)}


def test_the_loader_keeps_one_typed_record_per_line() -> None:
    records = load_records(V17)
    assert len(records.typed) == len(records) > 1
    assert all(t.ev == r["ev"] for t, r in zip(records.typed, records))  # type: ignore[attr-defined]
    assert typed_records(records, lambda data: {}) is records.typed  # the loaded ones, not validated again


def test_hand_built_records_are_validated_into_the_release_models() -> None:
    (it,) = typed_records([_iteration(_fwd("DECODE", None, 1, 1))], model_for)
    assert type(it).__name__ == "_Iteration" and it.events[0].out_cache_loc == [1]  # type: ignore[attr-defined]
    with pytest.raises(RecordingFormatError, match="bs"):
        typed_records([{**_iteration(), "bs": -1}], model_for)


def test_a_changed_copy_is_validated_again() -> None:
    records = load_records(V17)
    changed = copy.deepcopy(records)
    assert changed.typed == [] and changed.header is changed[0] and changed.family == records.family
    changed[0]["server_args"]["page_size"] = 16
    (header,) = [r for r in typed_records(changed, lambda data: {"header": type(records.typed[0])}) if r.ev == "header"]  # type: ignore[attr-defined]
    assert header.server_args.page_size == 16 and records.typed[0].server_args.page_size != 16  # type: ignore[attr-defined]


def test_recorded_forwards_are_judged_by_the_models_spec_table() -> None:
    bad = recorded_invariants([_iteration(_fwd("TARGET_VERIFY", "EagleDraftInput", 4, 4),
                                          _fwd("DECODE", "EagleVerifyInput", 1, 2))], topk=1)
    assert bad == ["iter 3: mode-consistency: TARGET_VERIFY with EagleDraftInput",
                   "iter 3: token-counts: target DECODE out_cache_loc 2 != input_ids 1",
                   "iter 3: mode-consistency: target DECODE with EagleVerifyInput attached"]
    assert recorded_invariants([_iteration(_fwd("TARGET_VERIFY", "EagleVerifyInput", 4, 4),
                                           _fwd("DECODE", None, 1, 1))], topk=1) == []  # positive control


def test_the_shared_table_is_the_models() -> None:
    for (worker, mode), want in SPEC_FOR_MODE.items():
        assert spec_info_for(worker.value, mode.value) == (True, want.__name__ if want else None)
    assert spec_info_for("target", "EXTEND") == (False, None) and spec_info_for("target", "NOT_A_MODE") == (False, None)
