"""The DP-attention GPU run of issue 43, on CPU: the patch's per-rank decision against the multi-rank
model's policies, the run script's prediction stage against the model, the judge on synthetic phase
folders (made here in tmp_path, never saved as recordings), and the script's syntax."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from specstate.integration import dp_patch, dp_plan
from specstate.integration.dp_patch import Gathered, dp_choose_path, model_path_of
from specstate.model import Arrive, SpecConfig, Step
from specstate.multirank import RankConfig, SyncEntry, SyncRecord, get_policy, make_model, run_multi

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "specstate" / "integration" / "gpu_run_dp.sh"
THR = 5


def _decode_sync(counts: list[int]) -> SyncRecord:
    return SyncRecord("decode", tuple(SyncEntry(c, c, True, False, "DECODE" if c else "NONE") for c in counts))


def _gathered(counts: list[int], r: int) -> Gathered:
    return Gathered(tuple(counts), False, "DECODE" if counts[r] else "IDLE", counts[r])


GRIDS = [[6, 5], [5, 5], [6, 0], [0, 6], [1, 0], [3, 3], [6, 6], [16, 1], [5, 0, 0, 0], [6, 0, 0, 0], [2, 7, 1, 0]]


@pytest.mark.parametrize("counts", GRIDS)
def test_agreed_decision_is_the_models_from_the_same_gathered_record(counts: list[int]) -> None:
    policy = get_policy("dp-agreed-threshold")
    speculate = policy.decide(_decode_sync(counts), THR)  # type: ignore[misc]
    paths = [dp_choose_path("agreed", THR, _gathered(counts, r)) for r in range(len(counts))]
    # one decision for every rank, idle ranks included (policy.idle_follows)
    assert {model_path_of(p) for p in paths} == {"spec" if speculate else "plain"}
    assert policy.idle_follows and policy.extend_first


@pytest.mark.parametrize("counts", GRIDS)
def test_per_rank_patches_decide_on_the_local_batch_as_the_models_local_policies(counts: list[int]) -> None:
    for patch, policy in (("naive", "naive-threshold"), ("fixed", "fixed-threshold")):
        assert get_policy(policy).decide is None  # local: each rank's own decide_speculation
        for r, c in enumerate(counts):
            path = dp_choose_path(patch, THR, _gathered(counts, r))
            want = "spec" if c <= THR else ("naive" if patch == "naive" else "plain")  # idle ranks: the idle verify
            assert model_path_of(path) == want, (patch, counts, r, path)


def test_the_other_multi_rank_policies_decide_otherwise() -> None:
    """The comparison can fail: the sum rule (dp-global-sum) and a local rule disagree with the agreed
    patch on records where it matters."""
    g = _decode_sync([3, 3])
    assert get_policy("dp-global-sum").decide(g, THR) is False  # type: ignore[misc]
    assert model_path_of(dp_choose_path("agreed", THR, _gathered([3, 3], 0))) == "spec"
    assert model_path_of(dp_choose_path("fixed", THR, _gathered([6, 0], 1))) == "spec"  # idle verify
    assert model_path_of(dp_choose_path("agreed", THR, _gathered([6, 0], 1))) == "plain"


def test_extend_in_batch_comes_first() -> None:
    for patch in dp_patch.DP_PATCHES:
        g = Gathered((40, 0), True, "IDLE", 0)  # another rank prefills: this idle rank runs the extend path
        assert dp_choose_path(patch, THR, g) == "extend"
        assert dp_choose_path(patch, THR, Gathered((40, 0), True, "EXTEND", 40)) == "extend"
    with pytest.raises(ValueError, match="DP patch"):
        dp_choose_path("sum", THR, Gathered((1,), False, "DECODE", 1))


@pytest.mark.parametrize("patch", ["naive", "fixed", "agreed"])
def test_every_rank_of_every_model_iteration_takes_the_patchs_path(patch: str) -> None:
    """The model's run (dp 2 and 4, waves that split unevenly and leave ranks idle): at each iteration,
    the patch fed that rank's gathered record and local batch takes the model's path on every rank."""
    policy = dp_patch.POLICY_OF[patch]
    checked = 0
    seen: set[tuple[str, str]] = set()
    for dp in (2, 4):
        model = make_model(SpecConfig(), RankConfig(dp_size=dp, tp_size=dp, enable_dp_attention=True), policy)
        waves = [[32 if i % dp == 0 else 2 for i in range(dp * 6)], [32] * (dp * 5 + 1), [8] * (dp * 2 - 1), [16]]
        for lens in waves:
            actions = [Arrive(64, n) for n in lens] + [Step()] * 40
            result = run_multi(model, actions)
            for o in result.outcomes:
                it = o.iteration
                if it is None:
                    continue
                sync = it.syncs[-1]
                for r, p in enumerate(it.paths):
                    if p.path == "none":
                        continue
                    mode = {"prefill": "EXTEND", "decode": "DECODE", "idle": "IDLE"}[p.batch]
                    g = Gathered(sync.global_num_tokens, sync.is_extend_in_batch, mode, p.rows)
                    assert model_path_of(dp_choose_path(patch, THR, g)) == p.path, (dp, lens, it.step, r)
                    checked += 1
                    seen.add((p.path, p.batch))
    assert checked > 40
    # every kind of rank iteration the patch has was met: extend, speculating, its fallback, an idle rank
    fallback = "naive" if patch == "naive" else "plain"
    assert {("extend", "prefill"), ("spec", "decode"), (fallback, "decode")} <= seen, seen
    assert any(b == "idle" for _, b in seen), seen


def test_rank_suffix_names_each_ranks_file() -> None:
    assert dp_patch.rank_suffix("run/rec/seed-sweep.jsonl", 1) == "run/rec/seed-sweep.rank1.jsonl"
    assert dp_patch.rank_suffix("crash", 0) == "crash.rank0"
    assert dp_patch.rank_suffix("a.b/c", 3) == "a.b/c.rank3"
    assert dp_patch.rank_suffix("x.jsonl", None) == "x.jsonl"


def test_the_patch_runs_under_dp_attention_only_in_its_dp_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    from specstate.integration import sglang_patch as patch

    dp = types.SimpleNamespace(server_args=types.SimpleNamespace(enable_dp_attention=True))
    for env, refused in (({"SPECSTATE_PATCH": "fixed"}, True), ({"SPECSTATE_PATCH": "naive"}, True),
                         ({"SPECSTATE_PATCH": "fixed", "SPECSTATE_DP_ALLOW": "1"}, False),
                         ({"SPECSTATE_PATCH": "agreed"}, False)):
        monkeypatch.setattr(patch, "CFG", patch.config_from_env(env))
        if refused:
            with pytest.raises(patch.PatchRefused, match="SPECSTATE_PATCH=agreed"):
                patch.refuse_dp_attention(None, dp)
        else:
            assert patch.refuse_dp_attention(None, dp) is None
    # one rank: agreed is the fixed patch
    cfg = patch.config_from_env({"SPECSTATE_PATCH": "agreed"})
    assert patch.choose_path(cfg, is_extend=False, is_idle=False, is_decode=True, bs=6) == "fallback"
    assert patch.choose_path(cfg, is_extend=False, is_idle=False, is_decode=True, bs=5) == "spec"


@pytest.mark.sglang_source
def test_trace_and_dp_targets_exist_in_sglang_source() -> None:
    from tests.sglang_source import find_file, sglang_source, symbols_of

    try:
        srt = sglang_source()
    except OSError as e:
        pytest.skip(str(e))
    for target in dp_patch.TRACE_TARGETS:
        mod, cls, meth = target.rsplit(".", 2)
        files = find_file(srt, mod.replace(".", "/") + ".py")
        assert files and f"{cls}.{meth}" in symbols_of(files[0]), target
    info = find_file(srt, "speculative/eagle_info.py")[0]
    for name in ("EagleDraftExtendInput.create_idle_input", "EagleDraftExtendInput.hidden_size_for",
                 "EagleDraftExtendInput.dtype_for"):
        assert name in symbols_of(info), name
    worker = find_file(srt, "speculative/eagle_worker.py")[0]
    assert "EAGLEWorker.forward_draft_extend_after_decode" in symbols_of(worker)
    mixin = (srt / "managers" / "scheduler_dp_attn_mixin.py").read_text()
    assert "batch.global_num_tokens = mlp_sync_info.global_num_tokens" in mixin
    assert "batch.is_extend_in_batch = mlp_sync_info.is_extend_in_batch" in mixin
    args = (srt / "server_args.py").read_text()
    for field in ("watchdog_timeout:", "dist_timeout:", "enable_dp_attention:"):
        assert field in args, field


def _model_first_violation(dp: int, policy: str, cfg: SpecConfig) -> tuple[str, int, list[str]]:
    """The model run on the plan's first workload (idle-rank) written out here by hand."""
    model = make_model(cfg, RankConfig(dp_size=dp, tp_size=dp, enable_dp_attention=True), policy)
    assert cfg.max_running_requests == SpecConfig().max_running_requests // dp  # each rank's share
    lens = [32 if i % dp == 0 else 2 for i in range(dp * 6)]
    res = run_multi(model, [Arrive(64, n) for n in lens] + [Step()] * 60)
    v = res.violations[0]
    it = res.outcomes[-1].iteration
    assert it is not None
    return v.invariant, v.step, [cs[-1].describe() for cs in it.collectives]


def test_the_scripts_prediction_stage_writes_the_models_prediction(tmp_path: Path) -> None:
    env = dict(os.environ, DP_PREDICT_ONLY="1", DP_GPUS="2", DP_WORK=str(tmp_path / "work"),
               DP_PYTHON=sys.executable, PYTHONPATH=str(ROOT))
    out = tmp_path / "out"
    phases = ["dp2-seed-naive", "dp2-seed-fixed", "dp2-topk1-fixed"]
    p = subprocess.run(["bash", str(SCRIPT), str(out), "100", *phases], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[dp] predicted dp2-seed-fixed: collective-mismatch" in p.stdout
    doc = json.loads((out / "prediction.json").read_text())
    assert sorted(doc["phases"]) == sorted(phases)
    assert (tmp_path / "work" / "wl" / "dp2" / "idle-rank.json").exists()
    for name in phases:
        pred = doc["phases"][name]
        ph = dp_plan.parse_phase(name)
        inv, step, colls = _model_first_violation(ph.dp, ph.policy, dp_plan.model_config(ph))
        assert pred["step"] == step and pred["workload"] == "idle-rank"
        assert [r["collective"] for r in pred["ranks"]] == colls
        assert pred["violations"][0]["invariant"] == inv
        if pred["outcome"] == "crash":
            v = pred["violations"][0]
            assert inv == "rank-graph-rows" and pred["crash_sizes"] == sorted([int(v["expected"].split()[0]),
                                                                               int(v["actual"])], reverse=True)
        else:
            assert pred["outcome"] == "collective-mismatch" and inv == "rank-collectives-agree"
            assert len(set(colls)) > 1  # the ranks lay the target's DP gather out differently


def test_the_agreed_phase_is_predicted_clean() -> None:
    pred = dp_plan.predict_phase(dp_plan.parse_phase("dp2-topk1-agreed"))
    assert pred["outcome"] == "clean" and "violations" not in pred
    assert pred["stats"]["plain"] > 0 and pred["stats"]["spec"] > 0 and pred["stats"]["idle_rank_iterations"] > 0


def test_phases_and_driver_arguments() -> None:
    assert [p.name for p in dp_plan.phases(2)] == [f"dp2-{s}-{p}" for s in ("seed", "topk1") for p in ("naive", "fixed", "agreed")]
    assert len(dp_plan.phases(4)) == 12 and len(dp_plan.phases(8)) == 12
    args = dp_plan.driver_args("W", "dp4-topk1-agreed")
    assert args[:2] == ["--patch", "agreed"]
    for kv in ("tp_size=4", "dp_size=4", "enable_dp_attention=true", "speculative_eagle_topk=1",
               "speculative_num_draft_tokens=4", f"watchdog_timeout={dp_plan.WATCHDOG_S}"):
        assert kv in args, kv
    assert (ROOT / dp_plan.TARGET / "config.json").exists()
    with pytest.raises(ValueError, match="phase"):
        dp_plan.parse_phase("dp2-seed-sum")


def _phase_dir(root: Path, name: str, summary: dict, crash: dict | None = None, rank: int = 0,
               trace: list[dict] | None = None) -> None:
    d = root / "run" / name
    (d / "trace").mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps(summary))
    if crash is not None:
        (d / f"crash.rank{rank}.jsonl").write_text(json.dumps(crash) + "\n")
    if trace is not None:
        (d / "trace" / f"trace.rank{rank}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trace))


def test_judge_compares_real_outcomes_with_the_prediction(tmp_path: Path) -> None:
    """Synthetic phase folders (the driver's summary shape): a crash of the predicted sizes, a hang where
    ranks were predicted to disagree, a clean run where a crash was predicted."""
    preds = {"a-naive": {"outcome": "crash", "crash_sizes": [96, 6], "workload": "idle-rank"},
             "b-fixed": {"outcome": "collective-mismatch", "workload": "idle-rank", "ranks": []},
             "c-naive": {"outcome": "crash", "crash_sizes": [96, 6], "workload": "idle-rank"},
             "d-agreed": {"outcome": "clean"}, "e-never-ran": {"outcome": "clean"}}
    (tmp_path / "prediction.json").write_text(json.dumps({"phases": preds}))
    err = {"cls": "RuntimeError", "msg": "The size of tensor a (96) must match the size of tensor b (6) at ..."}
    _phase_dir(tmp_path, "a-naive", {"ok": False, "problems": ["worker crash"], "workloads": []},
               {"tag": "idle-rank", "iter": 9, "path": "naive", "error": err}, rank=1)
    _phase_dir(tmp_path, "b-fixed", {"ok": False, "problems": ["the run exceeded --timeout 200 s (in phase workload idle-rank)"],
                                     "workloads": [{"name": "idle-rank", "verdict": {"problems": ["x"]}}]},
               trace=[{"ev": "fwd-enter", "worker": "target", "mode": "TARGET_VERIFY", "rows": 96}])
    _phase_dir(tmp_path, "c-naive", {"ok": True, "problems": [], "workloads": [{"name": "idle-rank", "verdict": {"problems": []}}]})
    _phase_dir(tmp_path, "d-agreed", {"ok": True, "problems": [], "workloads": [{"name": "idle-rank", "verdict": {"problems": []}}]})
    doc = dp_plan.judge(str(tmp_path))
    v = {n: r["verdict"] for n, r in doc["phases"].items()}
    assert v == {"a-naive": "as predicted", "b-fixed": "as predicted", "c-naive": "NOT as predicted",
                 "d-agreed": "as predicted"}
    assert doc["not_run"] == ["e-never-ran"]
    assert doc["phases"]["a-naive"]["real"]["crashes"][0]["rank"] == 1
    assert doc["phases"]["b-fixed"]["real"]["traces"]["0"]["stopped_in"]["rows"] == 96
    assert dp_plan.main(["judge", str(tmp_path)]) == 1


def test_the_run_script_parses() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
    text = SCRIPT.read_text()
    for needed in ("NCCL_NVLS_ENABLE=0", "TORCH_SYMM_MEM_DISABLE_MULTICAST=1", "NVSHMEM_DISABLE_NVLS=1",
                   "SPECSTATE_REC_PER_RANK=1", "dp_plan predict", "dp_plan judge"):
        assert needed in text, needed
    assert text.index("dp_plan predict") < text.index("sglang_driver run")  # the prediction comes first


def test_a_run_cut_by_the_limit_between_forwards_is_not_judged(tmp_path: Path) -> None:
    (tmp_path / "prediction.json").write_text(json.dumps({"phases": {"x-agreed": {"outcome": "clean"},
                                                                     "y-fixed": {"outcome": "collective-mismatch",
                                                                                 "workload": "idle-rank"}}}))
    cut = {"ok": False, "problems": ["the run exceeded --timeout 170 s (in phase workload seed-sweep)"],
           "workloads": [{"name": "idle-rank", "verdict": {"problems": []}},
                         {"name": "seed-sweep", "verdict": {"problems": ["cut"]}}]}
    _phase_dir(tmp_path, "x-agreed", cut, trace=[{"ev": "fwd-enter"}, {"ev": "fwd-exit"}])
    _phase_dir(tmp_path, "y-fixed", dict(cut, workloads=[{"name": "idle-rank", "verdict": {"problems": ["cut"]}}]),
               trace=[{"ev": "sync-exit"}, {"ev": "fwd-enter", "mode": "DECODE", "rows": 6}])
    doc = dp_plan.judge(str(tmp_path))
    assert doc["phases"]["x-agreed"]["real"]["kind"] == "limit"
    assert doc["phases"]["x-agreed"]["verdict"] == "not judged"
    assert doc["phases"]["y-fixed"]["real"]["kind"] == "hang"  # the limit ended a rank stuck in a forward
    assert doc["phases"]["y-fixed"]["verdict"] == "as predicted"
