"""Conformance of sglang 0.5.12 recordings at page size > 1 (issue 39, the GPU part): the page size
is the recording's own (``config_from_header``), a recording the model makes at page size 16 conforms
and one with a page-level field changed does not, and the paged GPU plan
(``integration/sglang_assets/plan-paged/plan.json``) rehearses on CPU: the model starts every
engine's configuration, the plan runs on the fake engine, and its conformance step judges a folder."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from specstate.errors import RecordingFormatError
from specstate.integration.conform import check_recording
from specstate.integration.sglang_0_5_12.conformance import config_from_header
from specstate.model import Arrive, SpecConfig
from tests.model_recording import header, model_recording, write

PLAN = Path(__file__).resolve().parent.parent / "specstate" / "integration" / "sglang_assets" / "plan-paged" / "plan.json"

PAGED16 = SpecConfig(page_size=16, speculative_eagle_topk=1, speculative_num_steps=3, speculative_num_draft_tokens=4,
                     target_kv_pool_size=2048, draft_kv_pool_size=2048, chunked_prefill_size=64,
                     disable_batch_threshold=5, max_running_requests=48, cuda_graph_max_bs=16,
                     target_hidden_size=256, draft_hidden_size=256, num_aux_hidden_states=3)

#: a threshold-crossing run on a 128-page pool: one request, eight (fallback), a shared prefix, a
#: prompt over several chunks, then thirty at once (the pool runs out: retractions)
WAVES = [[Arrive(61, 20)], [Arrive(50 + i, 30) for i in range(8)],
         [Arrive(70, 40, 0, 64), Arrive(300, 24), Arrive(13, 9)], [Arrive(100 + 7 * i, 40) for i in range(30)]]


@pytest.fixture(scope="module")
def lines() -> list[dict[str, Any]]:
    return model_recording(PAGED16, WAVES)


def _judge(tmp_path: Path, lines: list[dict[str, Any]], change: Callable[[list[dict[str, Any]]], None] | None = None) -> dict[str, Any]:
    ls = copy.deepcopy(lines)
    if change:
        change(ls)
    return check_recording(write(ls, tmp_path / "rec.jsonl"), None, 5)


def test_the_page_size_is_the_recordings_own() -> None:
    h = header(PAGED16)
    assert config_from_header(h, 5).page_size == 16
    h["server_args"].pop("page_size")
    assert config_from_header(h, 5).page_size == 16  # EAGLEWorker.page_size
    h.pop("page_size")
    assert config_from_header(h, 5).page_size == 1  # recordings made before either was written


def test_a_header_whose_page_sizes_differ_is_refused(tmp_path: Path, lines: list[dict[str, Any]]) -> None:
    def contradict(ls: list[dict[str, Any]]) -> None:
        ls[0]["server_args"]["page_size"] = 64

    with pytest.raises(RecordingFormatError, match="page_size is 16 but its server_args.page_size is 64"):
        _judge(tmp_path, lines, contradict)


def test_a_page_16_recording_of_the_model_conforms(tmp_path: Path, lines: list[dict[str, Any]]) -> None:
    rep = _judge(tmp_path, lines)
    kinds = {r["ev"] for r in lines}
    paths = {r["path"] for r in lines if r["ev"] == "fbg"}
    assert "retract" in kinds and paths == {"extend", "spec", "fallback"}  # what the run is meant to cover
    assert rep["iterations"] > 100 and rep["mismatch_count"] == 0, rep["mismatches"]
    assert not rep["recorded_invariant_violations"] and not rep["model_invariant_violations"]


def test_a_page_64_recording_of_the_model_conforms(tmp_path: Path) -> None:
    cfg = PAGED16.with_(page_size=64, target_kv_pool_size=4096, draft_kv_pool_size=4096, chunked_prefill_size=128)
    lines = model_recording(cfg, WAVES, seed=1)
    rep = _judge(tmp_path, lines)
    assert rep["iterations"] > 100 and rep["mismatch_count"] == 0, rep["mismatches"]
    assert not rep["recorded_invariant_violations"] and not rep["model_invariant_violations"]
    rep = _judge(tmp_path, lines, _unpaged)
    assert rep["mismatch_count"] > 0


def _posts(ls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in ls if r["ev"] == "post"]


def _unpaged(ls: list[dict[str, Any]]) -> None:  # the same run claimed at page size 1
    ls[0]["page_size"] = ls[0]["server_args"]["page_size"] = 1


def _page_leaked(ls: list[dict[str, Any]]) -> None:  # one page fewer free after one iteration
    _posts(ls)[40]["kv"]["available"] -= 16


def _half_page_in_tree(ls: list[dict[str, Any]]) -> None:  # the radix tree holding a partial page
    post = next(p for p in _posts(ls)[30:] if p["kv"]["evictable"])
    post["kv"]["evictable"] += 8


def _allocated_to_page_end(ls: list[dict[str, Any]]) -> None:  # a request's allocation rounded up to its page
    post = next(p for p in _posts(ls)[60:] if None in p["finished"] and p["kv_allocated"][p["finished"].index(None)] % 16)
    i = post["finished"].index(None)
    post["kv_allocated"][i] = -(-post["kv_allocated"][i] // 16) * 16


def _verify_slots_paged(ls: list[dict[str, Any]]) -> None:  # a verify's out_cache_loc rounded up to a page
    fbg = next(r for r in ls if r["ev"] == "fbg" and r["path"] == "spec")
    ev = next(e for e in fbg["events"] if e["mode"] == "TARGET_VERIFY")
    ev["out_cache_loc"] = [16 * fbg["bs"]]
    ev["input_ids"] = [16 * fbg["bs"]]


@pytest.mark.parametrize("change,field", [(_unpaged, None), (_page_leaked, "kv_after"), (_half_page_in_tree, "kv_after"),
                                          (_allocated_to_page_end, "req_kv_after"), (_verify_slots_paged, "forwards")])
def test_a_page_level_change_is_caught(tmp_path: Path, lines: list[dict[str, Any]], change: Callable[..., None],
                                       field: str | None) -> None:
    rep = _judge(tmp_path, lines, change)
    assert rep["mismatch_count"] > 0
    if field:
        assert rep["first_mismatch"].field == field, rep["mismatches"]


# ------------------------------------------------------------------ the paged GPU plan, rehearsed


def test_the_model_starts_every_engine_of_the_paged_plan() -> None:
    """Each engine's arguments as the driver passes them, read back as the recorder's header would
    carry them: the model's config is valid (whole pages, chunks of whole pages, topk 1 on triton:
    sglang 0.5.12's ``server_args.py`` refuses topk > 1 at page size > 1 outside flashinfer / fa3)."""
    from specstate.integration.plan import load_plan
    from specstate.integration.sglang_driver import engine_kwargs

    plan = load_plan(str(PLAN))
    assert [e.name for e in plan.engines] == ["paged16", "paged64"]
    for e in plan.engines:
        kw = engine_kwargs(e.engine_args, e.engine)
        assert kw["page_size"] > 1 and kw["attention_backend"] == "triton" and kw["speculative_eagle_topk"] == 1
        h = {"topk": kw["speculative_eagle_topk"], "speculative_num_steps": kw["speculative_num_steps"],
             "speculative_num_draft_tokens": kw["speculative_num_draft_tokens"], "page_size": kw["page_size"],
             "kv_size": kw["max_total_tokens"], "server_args": kw}
        cfg = config_from_header(h, e.threshold)
        assert cfg.page_size == kw["page_size"] and cfg.target_kv_pool_size % cfg.page_size == 0


def test_the_paged_plan_runs_on_the_fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from specstate.integration import plan as plan_module
    from specstate.integration.plan import main as plan_main
    from tests.test_driver_verdicts import _without_waits, write_fake_sglang

    monkeypatch.setenv("PYTHONPATH", str(write_fake_sglang(tmp_path / "fakesg")))
    monkeypatch.setattr(plan_module, "_workload_files", _without_waits(plan_module._workload_files))
    rc = plan_main([str(PLAN), str(tmp_path / "out")])
    s = json.loads((tmp_path / "out" / "plan-summary.json").read_text())
    assert rc == 0 and [r["name"] for r in s["engines"]] == ["paged16", "paged64"] and all(r["ok"] for r in s["engines"])
    cfg = json.loads((tmp_path / "out" / "paged16" / "host_config.json").read_text())
    assert cfg["engine_overrides"]["page_size"] == 16 and cfg["engine_overrides"]["max_total_tokens"] == 2048
    first = json.loads((tmp_path / "out" / "paged16" / "summary.json").read_text())
    names = [w["name"] for w in first["workloads"]]
    assert names[:2] == ["random-0-0", "random-0-1"] and names[-1] == "seed-sweep" and len(names) == 8
    assert "[plan] VERDICT: ok (2 of 2 engines passed)" in capsys.readouterr().out


def test_the_plans_conformance_step_judges_each_engines_recordings(tmp_path: Path, lines: list[dict[str, Any]],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from specstate.integration.plan import main as plan_main

    run = tmp_path / "run"
    (run / "paged16" / "rec").mkdir(parents=True)
    write(lines, run / "paged16" / "rec" / "model.jsonl")
    assert plan_main(["conform", str(PLAN), str(run), str(tmp_path / "conform.json")]) == 0
    res = json.loads((tmp_path / "conform.json").read_text())
    assert res["ok"] and res["recordings"] == res["conforming"] == 1 and res["rows"][0]["iterations"] > 100
    bad = copy.deepcopy(lines)
    _page_leaked(bad)
    write(bad, run / "paged16" / "rec" / "leak.jsonl")
    assert plan_main(["conform", str(PLAN), str(run), str(tmp_path / "conform.json")]) == 1
    res = json.loads((tmp_path / "conform.json").read_text())
    assert not res["ok"] and res["conforming"] == 1 and res["recordings"] == 2
    assert "[conform] VERDICT: FAILED (1 of 2 recordings conform)" in capsys.readouterr().out


def test_gpu_run_sh_runs_the_plan_then_its_conformance(tmp_path: Path, lines: list[dict[str, Any]]) -> None:
    """The device-side script itself, on CPU: the fake engine as the unpacked site, a one-engine
    paged plan, a model-made page-16 recording where that engine's recordings go; the script runs
    the plan, packs it, judges the recording (``OUT/conform.json``) and exits 0."""
    import os
    import subprocess
    import sys

    from tests.test_driver_verdicts import FAKE

    repo = PLAN.parents[4]
    site = tmp_path / "site"
    d = site / "sglang" / "srt" / "entrypoints"
    d.mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("__version__ = 'fake'\n")
    (site / "sglang" / "srt" / "__init__.py").write_text("")
    (d / "__init__.py").write_text("")
    (d / "engine.py").write_text(FAKE)
    (site / ".specstate-installed").write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    engine = json.loads(PLAN.read_text())["engines"][0]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"budget_s": 300, "min_engine_s": 30, "engines": [
        {**engine, "workloads": [{"random": 1, "seed": 0}], "timeout_s": 120}]}))
    work = tmp_path / "work"
    (work / "plan" / "paged16" / "rec").mkdir(parents=True)
    write(lines, work / "plan" / "paged16" / "rec" / "model.jsonl")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SPECSTATE_SITE": str(site),
           "SPECSTATE_WORK": str(work), "PLAN_CONFORM_S": "120"}
    p = subprocess.run(["bash", "specstate/integration/gpu_run.sh", str(plan), str(tmp_path / "out")], cwd=repo, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "[plan] VERDICT: ok (1 of 1 engines passed)" in p.stdout and "[conform] VERDICT: ok (1 of 1 recordings conform)" in p.stdout
    res = json.loads((tmp_path / "out" / "conform.json").read_text())
    assert res["ok"] and res["rows"][0]["iterations"] > 100
    assert {"plan-summary.json", "conform.json", "results.tar.gz"} <= set(os.listdir(tmp_path / "out"))


def test_the_per_step_slot_count_check_is_for_page_size_1_only() -> None:
    """``analyze.py``'s ``kv_available`` (free slots drop by the accept lengths) is page size 1's
    arithmetic: at page size > 1 the allocator takes and frees whole pages, so it is not checked."""
    from specstate.integration.analyze import analyze_records

    def records(page: int) -> list[dict[str, Any]]:
        fbg = {"ev": "fbg", "iter": 1, "path": "spec", "bs": 1, "mode_in": "DECODE", "result": {"accept_lens": [2]},
               "reqs_before": {"rid": ["a"], "out_len": [3], "kv_committed": [67], "prompt_len": [65]},
               "reqs_after": {"rid": ["a"], "out_len": [5], "kv_committed": [69], "prompt_len": [65], "finished": [None]},
               "before": {"seq_lens": [67]}, "after": {"seq_lens": [69], "seq_lens_cpu": [69], "spec_info": {"cls": "EagleDraftInput",
                                                                                       "fields": {"topk_p": {"s": [1, 1]}}}},
               "kv_before": {"available": 1000}, "kv_after": {"available": 984}}  # a new page of 16
        return [{"ev": "header", "page_size": page, "server_args": {"page_size": page}}, fbg]

    assert [f["check"] for f in analyze_records(records(1))["check_failures"]] == ["kv_available"]
    assert analyze_records(records(16))["n_check_failures"] == 0


def test_the_optional_topk_4_plan_is_one_sglang_allows_at_page_size_16() -> None:
    """``plan-paged/flashinfer-topk4.json`` (not run yet): topk 4 at page size 16 only on a backend
    ``ServerArgs._handle_speculative_decoding`` allows for it (flashinfer or fa3); the model starts it."""
    from specstate.integration.plan import load_plan
    from specstate.integration.sglang_driver import engine_kwargs

    (e,) = load_plan(str(PLAN.parent / "flashinfer-topk4.json")).engines
    kw = engine_kwargs(e.engine_args, e.engine)
    assert kw["speculative_eagle_topk"] > 1 and kw["page_size"] > 1 and kw["attention_backend"] in ("flashinfer", "fa3")
    h = {"topk": kw["speculative_eagle_topk"], "speculative_num_steps": kw["speculative_num_steps"],
         "speculative_num_draft_tokens": kw["speculative_num_draft_tokens"], "page_size": kw["page_size"],
         "kv_size": kw["max_total_tokens"], "server_args": kw}
    assert config_from_header(h, e.threshold).decode_reserve_per_req == 128  # ceil_align(3 + 16, 16) * 4
