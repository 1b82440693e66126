"""CPU tests of the sglang 0.5.17 adapter: hook targets and the attributes the hooks read exist
in sglang 0.5.17's source; a model-driven stand-in scheduler (``tests/sim_sglang17.py``) records
through the real hooks and the recording conforms with the model (0 mismatches), while a
different variant or a corrupted recording does not; the plugin registers the 0.5.17 hooks only;
the driver runs end to end with a fake 0.5.17 engine."""

from __future__ import annotations

import ast
import json
import random
import shutil
import types
from pathlib import Path

import pytest

from specstate.check import Run
from specstate.integration.sglang_0_5_17 import recorder as hooks
from specstate.integration.sglang_0_5_17.conformance import check_recording, recorded_workload
from specstate.integration.compare import load_records
from specstate.scenarios import get_scenario
from tests.sglang_source import SGLANG_V2_VERSION, find_file, sglang_source, symbols_of
from tests.sim_sglang17 import simulate

REPO = Path(__file__).resolve().parents[1]


def _actions(scenario: str, variant: str = "upstream-adaptive", seed: int = 0) -> list:  # type: ignore[type-arg]
    """The scenario's actions (up to the first violation, for a buggy variant)."""
    from specstate.check import StopRun

    sc = get_scenario(scenario)
    run = Run(sc.config, variant)
    try:
        sc.play(run, random.Random(seed))
    except StopRun:
        pass
    return list(run.result().actions)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:  # noqa: ANN001
    out = tmp_path_factory.mktemp("rec") / "adaptive-sweep.jsonl"
    simulate(get_scenario("adaptive-sweep").config, "upstream-adaptive", _actions("adaptive-sweep"), str(out))
    return out


# -- sglang 0.5.17's source ---------------------------------------------------------------------

def _resolve(target: str) -> bool:
    """``sglang.srt.a.b.Class.method`` defined in the 0.5.17 source."""
    srt = sglang_source(SGLANG_V2_VERSION)
    parts = target.split(".")[2:]
    for cut in range(len(parts) - 1, 0, -1):
        path = srt.joinpath(*parts[:cut]).with_suffix(".py")
        if path.exists():
            return ".".join(parts[cut:]) in symbols_of(path)
    return False


@pytest.mark.sglang_source
@pytest.mark.parametrize("target", [t for t, _, _ in hooks.TARGETS] +
                         ["sglang.srt.model_executor.model_runner.ModelRunner.load_model"])
def test_hook_targets_exist_in_sglang_0_5_17_source(target: str) -> None:
    assert _resolve(target), f"{target} is not defined in sglang {SGLANG_V2_VERSION}"


def _attributes(file: str, cls: str) -> set[str]:
    """``self.X`` assigned in a class, its annotated fields and methods (and properties)."""
    srt = sglang_source(SGLANG_V2_VERSION)
    out: set[str] = set()
    for p in find_file(srt, file):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef) and node.name == cls:
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                        out.add(sub.attr)
                    elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
                        out.add(sub.target.id)
                    elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        out.add(sub.name)
    return out


READ = [  # what the recorder reads on the real objects
    ("managers/schedule_batch.py", "Req", {"rid", "origin_input_ids", "output_ids", "kv_committed_len", "kv",
                                          "finished_reason", "finished", "is_retracted", "sampling_params"}),
    ("managers/schedule_batch.py", "ReqKvInfo", {"kv_allocated_len"}),
    ("managers/schedule_batch.py", "ScheduleBatch", {"reqs", "forward_mode", "batch_is_full", "is_extend_in_batch",
                                                    "seq_lens_cpu", "retract_decode"}),
    ("managers/scheduler.py", "Scheduler", {"waiting_queue", "running_batch", "chunked_req", "new_token_ratio_tracker",
                                           "tree_cache", "token_to_kv_pool_allocator", "req_to_token_pool",
                                           "model_worker", "server_args", "max_running_requests",
                                           "max_total_num_tokens", "max_prefill_tokens", "chunked_prefill_size",
                                           "model_config"}),
    ("scheduler_components/new_token_ratio_tracker.py", "NewTokenRatioTracker", {"current"}),
    ("managers/utils.py", "GenerationBatchResult", {"accept_lens", "speculative_num_draft_tokens"}),
    ("speculative/eagle_worker_v2.py", "EAGLEWorkerV2", {"speculative_num_steps", "speculative_num_draft_tokens",
                                                        "adaptive_controller"}),
    ("speculative/adaptive_runtime_state.py", "AdaptiveController", {"params", "_states"}),
    ("speculative/adaptive_runtime_state.py", "SpecRuntimeState", {
        "cuda_graph_runner", "target_graph_runner", "cuda_graph_runner_for_draft_extend", "speculative_num_draft_tokens"}),
    ("speculative/adaptive_spec_params.py", "AdaptiveSpeculativeParams", {"_slots"}),
    ("speculative/adaptive_spec_params.py", "AdaptiveStepSlot", {"current_steps", "ema_accept_len", "_batch_count"}),
    ("model_executor/runner/decode_cuda_graph_runner.py", "DecodeCudaGraphRunner",
     {"capture_bs", "captured_req_width", "capture_forward_mode"}),
    ("model_executor/model_runner.py", "ModelRunner", {"decode_cuda_graph_runner", "is_draft_worker"}),
    ("model_executor/model_runner.py", "ModelRunnerOutput", {"can_run_graph"}),
    ("model_executor/forward_batch_info.py", "ForwardBatch", {"forward_mode", "batch_size", "input_ids",
                                                             "out_cache_loc", "seq_lens_cpu", "spec_info"}),
    ("server_args.py", "ServerArgs", set(hooks._ARGS) - {"cuda_graph_max_bs"}),
]


@pytest.mark.sglang_source
@pytest.mark.parametrize("file,cls,names", READ, ids=[c for _, c, _ in READ])
def test_the_recorder_reads_attributes_sglang_0_5_17_has(file: str, cls: str, names: set[str]) -> None:
    missing = names - _attributes(file, cls)
    assert not missing, f"{cls} ({file}) in sglang {SGLANG_V2_VERSION} has no {sorted(missing)}"


# -- recordings through the real hooks ----------------------------------------------------------

def test_a_faithful_recording_conforms(sweep: Path) -> None:
    rep = check_recording(sweep)
    assert rep["mismatch_count"] == 0, rep["mismatches"]
    assert rep["iterations"] > 600 and rep["requests"] == 468 and not rep["model_invariant_violations"]
    assert rep["switches"]["switch_down"] >= 5 and rep["switches"]["switch_up"] >= 5
    kinds = {r["ev"] for r in load_records(sweep)}
    assert kinds == {"header", "arrive", "loop", "fbg", "post", "end"}


def test_the_actions_rebuilt_from_a_recording_are_the_recorded_run(sweep: Path) -> None:
    """The same arrivals in the same order; one step per logged iteration, one idle step per gap."""
    from specstate.model import Arrive

    rec = recorded_workload(load_records(sweep))
    orig = _actions("adaptive-sweep")
    assert [a for a in rec.actions if isinstance(a, Arrive)] == [a for a in orig if isinstance(a, Arrive)]
    assert len(rec.actions) == sum(isinstance(a, Arrive) for a in orig) + len(rec.loops) + len(rec.idle_steps)
    assert len(rec.idle_steps) == 7  # between the sweep's 8 levels


@pytest.mark.parametrize("variant", ["v2-single-reserve", "v2-skip-zero-step-draft-extend"])
def test_another_variant_does_not_conform(tmp_path: Path, variant: str) -> None:
    """Recorded from a variant that differs from upstream: the comparison with upstream fails."""
    out = tmp_path / "other.jsonl"
    simulate(get_scenario("adaptive-sweep").config, variant, _actions("adaptive-sweep", variant)[:400], str(out))
    assert check_recording(out)["mismatch_count"] > 0


@pytest.mark.parametrize("edit", ["accept", "arrival", "allocator", "steps", "forward"])
def test_a_corrupted_recording_does_not_conform(sweep: Path, tmp_path: Path, edit: str) -> None:
    lines = [json.loads(x) for x in sweep.read_text().splitlines()]
    i = next(i for i, r in enumerate(lines) if _target(r, edit))
    r = lines[i]
    if edit == "accept":
        r["accept_lens"][0] = 1 if r["accept_lens"][0] > 1 else 2
    elif edit == "arrival":
        r["max_new_tokens"] += 1
    elif edit == "allocator":
        r["kv"]["available"] -= 1
    elif edit == "steps":
        r["steps"] = 3 - r["steps"] if r["steps"] in (0, 3) else 0
    else:
        r["events"][0]["out_cache_loc"] = [r["events"][0]["out_cache_loc"][0] + 1]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert check_recording(bad)["mismatch_count"] > 0


def _target(r: dict, edit: str) -> bool:  # type: ignore[type-arg]
    if edit == "accept":
        return r["ev"] == "post" and bool(r.get("accept_lens"))
    if edit == "arrival":
        return r["ev"] == "arrive"
    if edit == "allocator":
        return r["ev"] == "end" and r.get("loop", 0) > 5
    if edit == "steps":
        return r["ev"] == "fbg" and r.get("path") in ("spec", "trivial")
    return r["ev"] == "fbg" and bool(r.get("events"))


def test_fuzz_v2_workloads_in_the_assets_are_the_generators(tmp_path: Path) -> None:
    from specstate.integration.sglang_0_5_17.engine import fuzz_v2_workloads
    from specstate.integration.workloads import load_workload

    folder = REPO / "specstate" / "integration" / "sglang_assets" / "fuzz-workloads-v2"
    names = sorted(p.name for p in folder.glob("*.json"))
    assert len(names) >= 10
    for w in fuzz_v2_workloads(len(names)):
        assert load_workload(str(folder / f"{w.name}.json")).to_json() == w.to_json()


# -- the plugin and the driver --------------------------------------------------------------------

def test_the_plugin_registers_only_the_0_5_17_hooks(monkeypatch) -> None:  # noqa: ANN001
    import specstate.integration.sglang_plugin as plugin

    registered: list[str] = []
    kinds = types.SimpleNamespace(AFTER="after", AROUND="around", BEFORE="before")
    monkeypatch.setenv("SPECSTATE_ENGINE", "sglang-0.5.17")
    monkeypatch.setenv("SPECSTATE_REC_OUT", "/dev/null")
    monkeypatch.setenv("SPECSTATE_AGREE", "1")
    from specstate.integration.sglang_0_5_17 import plugin as plugin17

    plugin17.register(types.SimpleNamespace(register=lambda t, f, k: registered.append(t)), kinds)
    assert set(registered) == {t for t, _, _ in hooks.TARGETS} | {
        "sglang.srt.model_executor.model_runner.ModelRunner.load_model"}
    assert not any("eagle_worker.EAGLEWorker." in t for t in registered)  # no v1 patch


def test_the_guarded_agree_hook_never_raises(capsys) -> None:  # noqa: ANN001
    import specstate.integration.sglang_plugin as plugin

    assert plugin._safe_after_load_model(None, types.SimpleNamespace()) is None
    assert "agree weights NOT applied" in capsys.readouterr().err


def _fake_sglang17(tmp_path: Path) -> Path:
    root = tmp_path / "fakesg17"
    d = root / "sglang" / "srt" / "entrypoints"
    d.mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("__version__ = '0.5.17-fake'\n")
    (root / "sglang" / "srt" / "__init__.py").write_text("")
    (d / "__init__.py").write_text("")
    shutil.copy(REPO / "tests" / "fake_sglang17" / "engine.py", d / "engine.py")
    return root


def test_the_driver_runs_sglang_0_5_17_end_to_end(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from specstate.integration import sglang_driver as drv

    monkeypatch.setenv("PYTHONPATH", str(_fake_sglang17(tmp_path)))
    out = tmp_path / "v17"
    rc = drv.main(["run", "--out", str(out), "--engine", "sglang-0.5.17", "--patch", "none", "--random", "2",
                   "--scenario", str(REPO / "specstate/integration/sglang_assets/fuzz-workloads-v2/g000.json"),
                   "--timeout", "300"])
    s = json.loads((out / "summary.json").read_text())
    assert rc == 0 and s["ok"] and s["engine"] == "sglang-0.5.17", s
    recs = sorted((out / "rec").glob("*.jsonl"))
    assert [p.stem for p in recs] == ["g000", "random-0-0", "random-0-1"]
    for p in recs:
        rep = check_recording(p)
        assert rep["mismatch_count"] == 0 and rep["iterations"] > 0, (p.name, rep["mismatches"])
    assert s["workloads"][0]["analysis"]["loops"] > 0
