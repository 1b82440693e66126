"""The v2 model against sglang 0.5.17 on the H200 under pressure (``tests/data/gpu/v17/pressure``,
recorded by ``gpu_run_v17.sh`` with ``V17_PLAN=pressure17``: two engines, two adaptive configs,
2,048 / 4,096 KV slots, 64 / 128-token chunks), and the engine's start against the model's on
seven start configs. CPU only.

- Every recording conforms step by step with ``upstream-adaptive``, 0 mismatches, and together they
  hold aborts that land on the request being chunk-prefilled, retractions under overlap and the
  out-of-memory abort.
- Without 0.5.17's pending chunked abort, or with each retraction paired with the iteration
  before its own (the two causes of the 5,607 mismatches of issue 23), they do not conform.
- The model starts exactly the configs the real engine started, with the same runtime states;
  for each one the engine refused, the model refuses with the same exception class, runtime
  state and sizes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from specstate.integration.compare import compare, load_records
from specstate.integration.sglang_0_5_17.conformance import (ModelBackend, RecordedBackend, check_recording,
                                                             config_from_header, recorded_workload)
from specstate.integration.sglang_0_5_17.pressure17 import adaptive_configs
from specstate.model import get_variant
from specstate.model.scheduler import abort, get_next_batch_to_run
from specstate.model.sglang_0_5_17.runtime import runtime_states
from specstate.model.sglang_0_5_17.start import EngineStartRefused
from specstate.model.sglang_0_5_17.variants import H200_CONFIG
from specstate.model.variants import Variant

DATA = Path(__file__).parent / "data" / "gpu" / "v17" / "pressure"
FILES = sorted(DATA.glob("*.jsonl.gz"))
STARTS = json.loads((DATA / "starts.json").read_text())["engines"]
H200_TEXT = (Path(__file__).resolve().parents[1] / "specstate/integration/sglang_assets/adaptive_config_h200.json").read_text()


@pytest.fixture(scope="module")
def reports() -> dict[str, dict[str, Any]]:
    return {p.name: check_recording(p) for p in FILES}


def _counts(p: Path) -> dict[str, int]:
    recs = load_records(p)
    out = {"retracted": 0, "oom_aborted": 0, "chunked_aborts": 0}
    chunked = None
    for r in recs:
        if r["ev"] == "retract":
            out["retracted"] += len(r["retracted"])
            out["oom_aborted"] += len(r["aborted"])
        elif r["ev"] == "end" and "sched" in r:
            chunked = r["sched"]["chunked"]
        elif r["ev"] == "abort" and chunked is not None and r["rid"] == chunked:
            out["chunked_aborts"] += 1
    return out


@pytest.mark.parametrize("name", [p.name for p in FILES])
def test_every_pressure_recording_conforms(reports: dict[str, dict[str, Any]], name: str) -> None:
    rep = reports[name]
    assert rep["mismatch_count"] == 0, rep["mismatches"]
    assert rep["model_invariant_violations"] == [] and rep["real_crash"] is None and rep["model_crash"] is None


def test_the_recordings_hold_every_abort_path_and_retraction(reports: dict[str, dict[str, Any]]) -> None:
    totals = {k: sum(_counts(p)[k] for p in FILES) for k in ("retracted", "oom_aborted", "chunked_aborts")}
    assert totals == {"retracted": 13, "oom_aborted": 1, "chunked_aborts": 13}, totals
    both = [n for n, r in reports.items() if r["switches"]["switch_down"] and r["switches"]["switch_up"]]
    assert len(both) >= 4 and {n.split("__")[0] for n in both} == {"a", "b"}  # both adaptive configs


def _old_chunked_abort() -> Variant:
    v = get_variant("upstream-adaptive")
    return Variant("old-chunked-abort", "abort_request sets to_finish on the chunked request too",
                   overrides={**v.overrides, "abort": abort, "get_next_batch_to_run": get_next_batch_to_run},
                   family="sglang-0.5.17")


@pytest.mark.parametrize("name", [p.name for p in FILES if "chunk-abort" in p.name][:2])
def test_without_the_pending_chunked_abort_they_do_not_conform(name: str) -> None:
    rec = recorded_workload(load_records(DATA / name))
    model = ModelBackend(config_from_header(rec.header), _old_chunked_abort()).observe(rec)
    assert compare(model, RecordedBackend().observe(rec))


def test_with_retractions_paired_one_iteration_early_they_do_not_conform() -> None:
    name = next(p for p in FILES if "retract" in p.name)
    rec = recorded_workload(load_records(name))
    for before, loop in zip(rec.loops, rec.loops[1:]):
        before.retracted, loop.retracted = before.retracted + loop.retracted, []
    model = ModelBackend(config_from_header(rec.header), "upstream-adaptive").observe(rec)
    mism = [m for m in compare(model, RecordedBackend().observe(rec)) if m.field == "retracted"]
    assert len(mism) == 2 * _counts(name)["retracted"]


# -- the engine's start ------------------------------------------------------------------------

def _config(row: dict[str, Any]) -> Any:
    sa, f = row["server_args"], row["adaptive_config_file"]
    text = H200_TEXT if f == "adaptive_config_h200.json" else json.dumps(adaptive_configs()[f[len("adaptive-"):-5]])
    bs = sa["cuda_graph_bs_decode"]
    return H200_CONFIG.with_(speculative_num_steps=sa["speculative_num_steps"],
                             speculative_num_draft_tokens=sa["speculative_num_draft_tokens"],
                             cuda_graph_max_bs=sa["cuda_graph_max_bs_decode"],
                             cuda_graph_bs_override=tuple(bs) if bs else None, speculative_adaptive_config=text)


def test_seven_start_configs_were_tried_on_the_gpu() -> None:
    assert [r["engine"] for r in STARTS] == ["a", "b", "start-above", "start-above5", "start-low", "start-missing",
                                             "start-nokey"]
    assert sum(r["started"] for r in STARTS) == 3


@pytest.mark.parametrize("row", STARTS, ids=[r["engine"] for r in STARTS])
def test_the_model_starts_what_the_engine_starts(row: dict[str, Any]) -> None:
    v = get_variant("upstream-adaptive")
    if row["started"]:
        cfg = v.configure(_config(row))
        model = {str(k): {"draft_decode": st.draft_decode, "target_verify": st.target_verify,
                          "draft_extend": st.draft_extend} for k, st in runtime_states(cfg).items()}
        assert sorted(model) == sorted(row["runtime_states"])
        for k, real in row["runtime_states"].items():
            for stage, r in real.items():
                if stage == "draft_tokens":
                    continue
                m = model[k][stage]
                assert (m is None) == (r is None), (k, stage)
                if m is not None:
                    assert (list(m.capture_bs), m.num_tokens_per_bs) == (r["capture_bs"], r["width"]), (k, stage)
        return
    with pytest.raises(EngineStartRefused) as e:
        v.configure(_config(row))
    cls, msg = row["error"].split(": ", 1)
    assert e.value.upstream == cls
    if cls == "AssertionError":  # shared logits buffer holds H rows but caller needs A
        held, asked = (int(x) for x in re.findall(r"holds (\d+) rows but caller needs (\d+)", msg)[0])
        assert (e.value.held, e.value.asked) == (held, asked)
        assert e.value.state == max(json.loads(_config(row).speculative_adaptive_config)["1"]["candidate_steps"])
    else:
        words = lambda s: re.sub(r"[\s,\[\]{}\"'.:]+", " ", s).split()  # noqa: E731
        assert words(msg)[:6] == words(e.value.message)[:6] or "integer-string BS key" in e.value.message
