"""Upstream's reverted fixes (``SGLANG_DEBUG_REVERT_PR``) on the real sglang 0.5.17 engine, judged again
on CPU (``tests/data/gpu/v17/reverts``, recorded by ``gpu_run_v17.sh`` with ``V17_PLAN=reverts17``;
the plan and predictions: ``specstate/integration/sglang_0_5_17/reverts17.py``, docs/gpu.md).

- The engines whose revert applies to the 0.5.17 wheel (#25015, #26329) and the unreverted ``base``
  started, and every recording conforms step by step with ``upstream-adaptive``: the model's
  prediction (the scheduler's state and shapes are unchanged by either revert).
- The engines whose revert no longer matches the wheel's source (#27338, #27460, #26972) were refused
  at ``Scheduler.__init__`` with upstream's ``PatchApplicationError``: exactly the reverts that
  ``REVERTS`` (measured with upstream's own ``source_editor`` on the wheel) says do not apply.
- The accept lengths under #25015 and #26329 equal ``base``'s, token for token: the agreeing weights
  (``integration/agree.py``: attention zeroed, the draft reading only the last accepted token) are
  blind to a draft position or a draft-KV token by construction, so the value damage these reverts
  do is not visible at this scale (what docs/gpu.md's table expected, "accept lengths below base's",
  did not show; the model never predicted values).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specstate.integration.compare import load_records
from specstate.integration.sglang_0_5_17.conformance import check_recording
from specstate.integration.sglang_0_5_17.reverts17 import REVERTS

DATA = Path(__file__).parent / "data" / "gpu" / "v17" / "reverts"
STARTS = {e["engine"]: e for e in json.loads((DATA / "starts.json").read_text())["engines"]}
CONFORMING = sorted(p.name for p in DATA.glob("*.jsonl.gz") if not p.name.startswith("row-overflow"))


def _accepts(name: str) -> list[list[int]]:
    return [r["accept_lens"] for r in load_records(DATA / name) if r.get("ev") == "post" and r.get("accept_lens")]


@pytest.mark.parametrize("name", CONFORMING)
def test_every_recording_of_a_started_revert_conforms(name: str) -> None:
    rep = check_recording(DATA / name)
    assert rep["variant"] == "upstream-adaptive"
    assert rep["mismatch_count"] == 0, rep["mismatches"]
    assert rep["real_crash"] is None and rep["model_crash"] is None and rep["model_invariant_violations"] == []


def test_the_recordings_cover_each_started_revert_and_its_base() -> None:
    engines = {n.split("__")[0] for n in CONFORMING}
    assert engines == {"base", "revert-25015", "revert-26329"}
    assert all(STARTS[e]["started"] and not STARTS[e]["crashes"] for e in engines)


@pytest.mark.parametrize("revert", REVERTS, ids=[str(r.pr) for r in REVERTS])
def test_an_engine_is_refused_at_start_exactly_where_the_revert_does_not_apply(revert: Any) -> None:
    row = STARTS.get(f"start-revert-{revert.pr}") or STARTS.get(f"revert-{revert.pr}")
    assert row is not None, f"no engine ran #{revert.pr}"
    if revert.pr == 27360:  # the FA3 backend it reverts is not in the slim site: not judged
        assert row["error_class"] == "ImportError" and "flash_ops" in row["error"]
        return
    assert row["started"] == revert.applies["0.5.17"], row
    if not row["started"]:
        assert row["error_class"] == "PatchApplicationError" and "match text not found" in row["error"]


@pytest.mark.parametrize("revert,workloads", [("revert-25015", ["decode-1", "decode-4"]),
                                               ("revert-26329", ["chunked-1", "chunked-2"])])
def test_the_reverts_leave_the_accept_lengths_of_the_agreeing_weights_unchanged(revert: str, workloads: list[str]) -> None:
    for w in workloads:
        base, rev = _accepts(f"base__{w}.jsonl.gz"), _accepts(f"{revert}__{w}.jsonl.gz")
        assert len(base) > 20 and rev == base, (w, len(base), len(rev))
