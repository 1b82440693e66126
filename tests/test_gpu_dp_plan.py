"""The DP-attention GPU run of issue 43, on CPU: the patch's per-rank decision against the multi-rank
model's policies, the run script's prediction stage against the model, the judge on synthetic phase
folders (made here in tmp_path, never saved as recordings), and the script's syntax."""

from __future__ import annotations

import json
import os
import re
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
            patch.refuse_dp_attention(None, dp)  # no PatchRefused
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
    assert "watchdog timeout" in (srt / "utils" / "watchdog.py").read_text()  # the words dp_plan._HANG reads
    # every ``file.py::Symbol`` the DP files cite (tests/test_citations.py leaves integration/ out)
    cited = 0
    for f in ("dp_patch.py", "dp_plan.py"):
        for m in re.finditer(r"([\w/]+\.py)::([A-Za-z_][\w.]*)", (ROOT / "specstate" / "integration" / f).read_text()):
            own = ROOT / "specstate" / "multirank" / m.group(1)  # the model's own file
            files = [own] if own.exists() else find_file(srt, m.group(1))
            assert files and m.group(2).rstrip(".") in symbols_of(files[0]), (f, m.group(0))
            cited += 1
    assert cited >= 4


def _model_first_violation(dp: int, policy: str, cfg: SpecConfig, first: str) -> tuple[str, int, list[str]]:
    """The model run on the plan's first workload (idle-rank, or uneven) written out here by hand."""
    model = make_model(cfg, RankConfig(dp_size=dp, tp_size=dp, enable_dp_attention=True), policy)
    assert cfg.max_running_requests == SpecConfig().max_running_requests // dp  # each rank's share
    lens = [32 if i % dp == 0 else 2 for i in range(dp * 6)] if first == "idle-rank" else [32] * (dp * 5 + 1)
    res = run_multi(model, [Arrive(64, n) for n in lens] + [Step()] * 60)
    v = res.violations[0]
    it = res.outcomes[-1].iteration
    assert it is not None
    return v.invariant, v.step, [cs[-1].describe() for cs in it.collectives]


def test_the_scripts_prediction_stage_writes_the_models_prediction(tmp_path: Path) -> None:
    env = dict(os.environ, DP_PREDICT_ONLY="1", DP_GPUS="2", DP_WORK=str(tmp_path / "work"),
               DP_PYTHON=sys.executable, PYTHONPATH=str(ROOT))
    out = tmp_path / "out"
    phases = ["dp2-seed-naive", "dp2-seed-fixed", "dp2-topk1-fixed", "dp2-topk1-fixed-uneven"]
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
        inv, step, colls = _model_first_violation(ph.dp, ph.policy, dp_plan.model_config(ph), ph.first)
        assert pred["step"] == step and pred["workload"] == ph.first
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
    assert dp_plan.parse_phase("dp2-seed-fixed-uneven").name == "dp2-seed-fixed-uneven"
    names = [w.name for w in dp_plan.phase_workloads(2, "uneven")]
    assert names == ["uneven", "idle-rank", "seed-sweep"]
    assert "uneven.json" in dp_plan.driver_args("W", "dp2-seed-fixed-uneven")[7]  # the first --scenario


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
    ranks = [{"rank": 0, "path": "plain", "batch": "decode", "graph": None, "collective": "eager 6"},
             {"rank": 1, "path": "spec", "batch": "idle", "graph": "TARGET_VERIFY@6", "collective": "graph 96"}]
    preds = {"a-naive": {"outcome": "crash", "crash_sizes": [96, 6], "workload": "idle-rank"},
             "b-fixed": {"outcome": "collective-mismatch", "workload": "idle-rank", "ranks": ranks},
             "f-fixed": {"outcome": "collective-mismatch", "workload": "idle-rank", "ranks": ranks},
             "c-naive": {"outcome": "crash", "crash_sizes": [96, 6], "workload": "idle-rank"},
             "d-agreed": {"outcome": "clean"}, "e-never-ran": {"outcome": "clean"}}
    (tmp_path / "prediction.json").write_text(json.dumps({"phases": preds}))
    err = {"cls": "RuntimeError", "msg": "The size of tensor a (96) must match the size of tensor b (6) at ..."}
    _phase_dir(tmp_path, "a-naive", {"ok": False, "problems": ["worker crash"], "workloads": []},
               {"tag": "idle-rank", "iter": 9, "path": "naive", "error": err}, rank=1)
    _phase_dir(tmp_path, "b-fixed", {"ok": False, "problems": ["the run exceeded --timeout 200 s (in phase workload idle-rank)"],
                                     "workloads": [{"name": "idle-rank", "verdict": {"problems": ["x"]}}]},
               trace=[{"ev": "fwd-enter", "worker": "target", "mode": "DECODE", "rows": 6, "dp_graph": True,
                       "has_graph_runner": False}])
    hang = {"ok": False, "problems": ["the run exceeded --timeout 200 s (in phase workload idle-rank)"],
            "workloads": [{"name": "idle-rank", "verdict": {"problems": ["x"]}}]}
    # the ranks stopped, but rank 0 in a graph replay where the model has it eager: not the predicted parting
    _phase_dir(tmp_path, "f-fixed", hang, trace=[{"ev": "fwd-enter", "worker": "target", "mode": "DECODE", "rows": 6,
                                                 "dp_graph": True, "has_graph_runner": True}])
    _phase_dir(tmp_path, "c-naive", {"ok": True, "problems": [], "workloads": [{"name": "idle-rank", "verdict": {"problems": []}}]})
    _phase_dir(tmp_path, "d-agreed", {"ok": True, "problems": [], "workloads": [{"name": "idle-rank", "verdict": {"problems": []}}]})
    doc = dp_plan.judge(str(tmp_path))
    v = {n: r["verdict"] for n, r in doc["phases"].items()}
    assert v == {"a-naive": "as predicted", "b-fixed": "as predicted", "c-naive": "NOT as predicted",
                 "d-agreed": "as predicted", "f-fixed": "NOT as predicted"}
    assert "rank 0: predicted DECODE eager" in doc["phases"]["f-fixed"]["why"][0]
    assert doc["not_run"] == ["e-never-ran"]
    assert doc["phases"]["a-naive"]["real"]["crashes"][0]["rank"] == 1
    assert doc["phases"]["b-fixed"]["real"]["traces"]["0"]["stopped_in"]["rows"] == 6
    assert dp_plan.main(["judge", str(tmp_path)]) == 1


def test_the_run_script_parses() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
    text = SCRIPT.read_text()
    for needed in ("NCCL_NVLS_ENABLE=0", "TORCH_SYMM_MEM_DISABLE_MULTICAST=1", "NVSHMEM_DISABLE_NVLS=1",
                   "SPECSTATE_REC_PER_RANK=1", "dp_plan predict", "dp_plan judge"):
        assert needed in text, needed
    assert text.index("dp_plan predict") < text.index("sglang_driver run")  # the prediction comes first


def test_a_run_cut_by_the_limit_between_forwards_is_judged_on_what_finished(tmp_path: Path) -> None:
    (tmp_path / "prediction.json").write_text(json.dumps({"phases": {"x-agreed": {"outcome": "clean"},
                                                                     "y-fixed": {"outcome": "collective-mismatch",
                                                                                 "workload": "idle-rank"}}}))
    cut = {"ok": False, "problems": ["the run exceeded --timeout 170 s (in phase workload seed-sweep)"],
           "workloads": [{"name": "idle-rank", "verdict": {"problems": []}},
                         {"name": "seed-sweep", "verdict": {"problems": ["cut"]}}]}
    _phase_dir(tmp_path, "x-agreed", cut, trace=[{"ev": "fwd-enter"}, {"ev": "fwd-exit"}])
    _phase_dir(tmp_path, "y-fixed", dict(cut, workloads=[{"name": "idle-rank", "verdict": {"problems": ["cut"]}}]),
               trace=[{"ev": "sync-exit"}, {"ev": "fwd-enter", "worker": "target", "mode": "DECODE", "rows": 6}])
    doc = dp_plan.judge(str(tmp_path))
    assert doc["phases"]["x-agreed"]["real"]["kind"] == "limit"
    assert doc["phases"]["x-agreed"]["verdict"] == "as predicted" and doc["phases"]["x-agreed"]["judged"] == ["idle-rank"]
    pred = {"outcome": "collective-mismatch", "workload": "idle-rank"}
    cut = {"kind": "limit", "finished": ["idle-rank"], "failed_in": "uneven", "ranks_parted": None}
    assert dp_plan.judge_phase(pred, cut)["verdict"] == "NOT as predicted"  # its workload finished cleanly
    assert dp_plan.judge_phase(dict(pred, workload="seed-sweep"), cut)["verdict"] == "not judged"  # not reached
    assert doc["phases"]["y-fixed"]["real"]["kind"] == "hang"  # the limit ended a rank stuck in a forward
    assert doc["phases"]["y-fixed"]["verdict"] == "as predicted"


FAKE_DP_ENGINE = '''
import asyncio, json, os, time


class _TM:
    def abort_request(self, rid):
        pass


class Engine:
    """A stand-in for sglang's Engine under DP attention: it keeps the arguments it was given and, under
    the naive patch, ends as a rank's worker crash would (the crash line in rank 1's crash file, the
    process killed); otherwise every request finishes."""

    def __init__(self, **kw):
        with open(os.path.join(os.environ["FAKE_KW_DIR"], "kw-%s.json" % os.environ["SPECSTATE_PATCH"]), "w") as f:
            json.dump(kw, f)
        self.loop = asyncio.new_event_loop()
        self.tokenizer_manager = _TM()

    def _tag(self):
        with open(os.environ["SPECSTATE_REC_CTL"]) as f:
            return json.load(f).get("tag")

    async def async_generate(self, input_ids, sampling_params, rid):
        if os.environ.get("SPECSTATE_PATCH") == "naive" and rid.endswith("r011"):
            crash = os.environ["SPECSTATE_REC_CRASH"].replace(".jsonl", ".rank1.jsonl")
            msg = "The size of tensor a (24) must match the size of tensor b (6) at non-singleton dimension 0"
            with open(crash, "a") as f:
                f.write(json.dumps({"ev": "fbg_error", "tag": self._tag(), "iter": 14, "path": "naive",
                                    "error": {"cls": "RuntimeError", "msg": msg}}) + "\\n")
            os.kill(os.getpid(), 9)
        n = sampling_params["max_new_tokens"]
        return {"output_ids": list(range(n)), "meta_info": {"finish_reason": {"type": "length"}}}

    def flush_cache(self):
        return True

    def shutdown(self):
        pass
'''


@pytest.mark.slow  # the DP script end to end on the fake engine (15 s); its stages are checked in the fast tier
def test_the_run_script_end_to_end_on_a_fake_engine(tmp_path: Path) -> None:
    """The whole script on CPU: the prediction, two phases through the real driver (a fake Engine that
    records its arguments; under the naive patch it crashes as the model predicts), the judge."""
    site = tmp_path / "site"
    d = site / "sglang" / "srt" / "entrypoints"
    d.mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("__version__ = 'fake'\n")
    (site / "sglang" / "srt" / "__init__.py").write_text("")
    (d / "__init__.py").write_text("")
    (d / "engine.py").write_text(FAKE_DP_ENGINE)
    (site / ".specstate-installed").write_text("")
    kw_dir = tmp_path / "kw"
    kw_dir.mkdir()
    env = dict(os.environ, DP_GPUS="2", DP_WORK=str(tmp_path / "work"), DP_PYTHON=sys.executable,
               DP_SITE=str(site), DP_PHASE_MAX="150", PYTHONPATH=str(ROOT), FAKE_KW_DIR=str(kw_dir))
    out = tmp_path / "out"
    p = subprocess.run(["bash", str(SCRIPT), str(out), "400", "dp2-topk1-naive", "dp2-topk1-agreed"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=600)
    log = p.stdout + p.stderr
    assert p.returncode == 0, log[-3000:]
    assert log.index("[dp] predicted dp2-topk1-naive") < log.index("phase dp2-topk1-naive")
    assert "[dp] VERDICT: every judged phase as predicted (2 judged" in log
    verdict = json.loads((out / "dp-verdict.json").read_text())["phases"]
    assert verdict["dp2-topk1-naive"]["real"]["kind"] == "crash"
    assert verdict["dp2-topk1-naive"]["real"]["crashes"][0]["sizes"] == [24, 6]
    assert verdict["dp2-topk1-agreed"]["real"]["kind"] == "clean"
    for patch in ("naive", "agreed"):
        kw = json.loads((kw_dir / f"kw-{patch}.json").read_text())
        assert (kw["tp_size"], kw["dp_size"], kw["enable_dp_attention"]) == (2, 2, True)
        assert (kw["speculative_eagle_topk"], kw["speculative_num_draft_tokens"]) == (1, 4)
        assert kw["model_path"] == dp_plan.TARGET and kw["watchdog_timeout"] == dp_plan.WATCHDOG_S
    assert (out / "prediction.json").exists() and (out / "results.tar.gz").exists()


def test_every_rank_records_into_its_own_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specstate.integration import recorder_core

    ctl = tmp_path / "ctl.json"
    ctl.write_text(json.dumps({"out": str(tmp_path / "rec" / "idle-rank.jsonl"), "tag": "idle-rank"}))
    monkeypatch.setenv("SPECSTATE_REC_CTL", str(ctl))
    monkeypatch.setattr(dp_patch, "dp_rank_of_process", lambda: 1)
    monkeypatch.setenv("SPECSTATE_REC_PER_RANK", "1")
    rec = recorder_core.RecorderCore()
    rec.poll_ctl()
    assert rec.out_path == str(tmp_path / "rec" / "idle-rank.rank1.jsonl")
    assert recorder_core.per_rank_path(str(tmp_path / "crash.jsonl")) == str(tmp_path / "crash.rank1.jsonl")
    monkeypatch.setenv("SPECSTATE_REC_PER_RANK", "0")  # one GPU: the names the single-rank runs always had
    rec2 = recorder_core.RecorderCore()
    rec2.poll_ctl()
    assert rec2.out_path == str(tmp_path / "rec" / "idle-rank.jsonl")


class _Mode:
    def __init__(self, name: str) -> None:
        self.name = name

    def is_extend(self) -> bool:
        return self.name == "EXTEND"

    def is_idle(self) -> bool:
        return self.name == "IDLE"

    def is_decode(self) -> bool:
        return self.name == "DECODE"


class _Batch:
    def __init__(self, mode: str, bs: int, gnt: list[int], ext: bool = False) -> None:
        self.forward_mode = _Mode(mode)
        self.global_num_tokens = gnt
        self.is_extend_in_batch = ext
        self.return_logprob = False
        self._bs = bs

    def batch_size(self) -> int:
        return self._bs


@pytest.mark.parametrize("patch, mode, bs, gnt, called", [
    ("agreed", "DECODE", 6, [6, 0], "fixed"), ("agreed", "IDLE", 0, [6, 0], "plain_idle"),
    ("agreed", "DECODE", 3, [3, 3], "original"), ("agreed", "IDLE", 0, [40, 0], "original"),
    ("fixed", "IDLE", 0, [6, 0], "original"), ("fixed", "DECODE", 6, [6, 5], "fixed"),
    ("naive", "DECODE", 6, [6, 5], "naive"), ("naive", "DECODE", 5, [6, 5], "original")])
def test_the_hook_under_dp_attention_runs_the_path_decided(monkeypatch: pytest.MonkeyPatch, patch: str, mode: str,
                                                           bs: int, gnt: list[int], called: str) -> None:
    """``around_fbg`` on a DP worker dispatches on ``dp_choose_path`` over what the batch carries (the
    GPU work itself replaced by markers)."""
    from specstate.integration import sglang_patch as sp

    monkeypatch.setattr(sp, "CFG", sp.config_from_env({"SPECSTATE_PATCH": patch, "SPECSTATE_DP_ALLOW": "1"}))
    monkeypatch.setattr(sp, "fixed_fallback", lambda w, b, dp_attention=False: ("fixed", dp_attention))
    monkeypatch.setattr(sp, "naive_fallback", lambda w, b, p: ("naive", False))
    monkeypatch.setattr(sp, "plain_idle", lambda w, b: ("plain_idle", True))
    worker = types.SimpleNamespace(server_args=types.SimpleNamespace(enable_dp_attention=True))
    ext = mode == "IDLE" and max(gnt) == 40  # another rank prefills
    got = sp.around_fbg(lambda w, b: ("original", None), worker, _Batch(mode, bs, gnt, ext))
    assert got[0] == called
    if called == "fixed":
        assert got[1] is True  # the fallback knows it runs under DP attention


def test_a_hang_is_the_watchdogs_words_not_the_engines_argument_dump(tmp_path: Path) -> None:
    ok = {"ok": True, "problems": [], "workloads": [{"name": "idle-rank", "verdict": {"problems": []}}]}
    _phase_dir(tmp_path, "p", ok)
    (tmp_path / "run" / "p" / "host.log").write_text("server_args=ServerArgs(watchdog_timeout=40, soft_watchdog_timeout=None)\n")
    assert dp_plan.observe_phase(str(tmp_path / "run" / "p"))["kind"] == "clean"
    _phase_dir(tmp_path, "q", dict(ok, ok=False, problems=["host died"]))
    (tmp_path / "run" / "q" / "host.log").write_text(
        "[2026-12-08] Scheduler watchdog timeout (self.watchdog_timeout=40, self.soft=False)\n"
        "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLGATHER, "
        "NumelIn=24576, NumelOut=49152, Timeout(ms)=60000) ran for 60001 milliseconds before timing out.\n")
    real = dp_plan.observe_phase(str(tmp_path / "run" / "q"))
    assert real["kind"] == "hang"
    assert real["nccl_timeouts"] == [{"rank": 1, "seq": 812, "op": "ALLGATHER", "numel_in": 24576, "numel_out": 49152}]


def test_the_agreed_patch_refuses_a_batch_that_carries_only_its_own_count(monkeypatch: pytest.MonkeyPatch) -> None:
    from specstate.integration import sglang_patch as sp

    monkeypatch.setattr(sp, "CFG", sp.config_from_env({"SPECSTATE_PATCH": "agreed"}))
    worker = types.SimpleNamespace(server_args=types.SimpleNamespace(enable_dp_attention=True, dp_size=2))
    with pytest.raises(sp.PatchRefused, match="require_mlp_tp_gather"):
        sp.around_fbg(lambda w, b: None, worker, _Batch("DECODE", 6, [6]))
    assert sp.around_fbg(lambda w, b: "original", worker, _Batch("DECODE", 3, [3, 2])) == "original"


def _decide(gnt: list[int], path: str, mode: str = "DECODE", bs: int = 6) -> dict:
    return {"ev": "decide", "gnt": gnt, "path": path, "mode": mode, "bs": bs}


def test_the_real_runs_ranks_agree_or_part_as_the_models_invariant_says() -> None:
    agreed = {"0": [_decide([6, 6], "fallback"), _decide([6, 0], "fallback")],
              "1": [_decide([6, 6], "fallback"), _decide([6, 0], "idle-plain", "IDLE", 0)]}
    assert dp_patch.first_disagreement(agreed) is None  # a plain IDLE forward is the model's plain path
    fixed = {"0": [_decide([6, 6], "fallback"), _decide([6, 0], "fallback")],
             "1": [_decide([6, 6], "fallback"), _decide([6, 0], "idle", "IDLE", 0)]}
    parted = dp_patch.first_disagreement(fixed)
    assert parted is not None and parted["call"] == 2 and parted["paths"] == {"0": "fallback", "1": "idle"}
    other = dp_patch.first_disagreement({"0": [_decide([1, 2], "spec")], "1": [_decide([2, 1], "spec")]})
    assert other is not None and other["call"] == 1  # different gathered lists: the ranks parted too


def test_judge_reads_where_the_ranks_parted(tmp_path: Path) -> None:
    ranks = [{"rank": 0, "path": "plain", "batch": "decode", "graph": None},
             {"rank": 1, "path": "spec", "batch": "idle", "graph": "TARGET_VERIFY@6"}]
    preds = {"g-agreed": {"outcome": "clean"},
             "h-fixed": {"outcome": "collective-mismatch", "workload": "idle-rank", "gathered": [6, 0], "ranks": ranks}}
    (tmp_path / "prediction.json").write_text(json.dumps({"phases": preds}))
    ok = {"ok": True, "problems": [], "workloads": [{"name": "idle-rank", "verdict": {"problems": []}}]}
    _phase_dir(tmp_path, "g-agreed", ok, rank=0, trace=[_decide([6, 0], "fallback")])
    (tmp_path / "run" / "g-agreed" / "trace" / "trace.rank1.jsonl").write_text(json.dumps(_decide([6, 0], "idle", "IDLE", 0)) + "\n")
    bad = {"ok": False, "problems": ["host died"], "workloads": [{"name": "idle-rank", "verdict": {"problems": ["x"]}}]}
    _phase_dir(tmp_path, "h-fixed", bad, rank=0, trace=[_decide([5, 1], "fallback")])
    (tmp_path / "run" / "h-fixed" / "trace" / "trace.rank1.jsonl").write_text(json.dumps(_decide([5, 1], "spec", bs=1)) + "\n")
    doc = dp_plan.judge(str(tmp_path))
    g, h = doc["phases"]["g-agreed"], doc["phases"]["h-fixed"]
    assert g["verdict"] == "NOT as predicted" and "parted at call 1" in g["why"][0]
    assert h["verdict"] == "NOT as predicted" and "predicted [6, 0]" in h["why"][-1]


def test_a_crash_is_judged_rank_by_rank(tmp_path: Path) -> None:
    """The model crashes rank 0 only (the uneven split: rank 1 at the threshold speculates): rank 1's
    crash is not the predicted one; rank 0's of the modelled class and sizes is."""
    pred = dp_plan.predict_phase(dp_plan.parse_phase("dp2-seed-naive-uneven"))
    assert pred["outcome"] == "crash" and [c["rank"] for c in pred["crashes"]] == [0]
    assert pred["crashes"][0]["where"].endswith("CudaGraphRunner.replay_prepare")
    (tmp_path / "prediction.json").write_text(json.dumps({"phases": {"r0": pred, "r1": pred}}))
    msg = "The size of tensor a ({}) must match the size of tensor b ({}) at non-singleton dimension 0".format(*pred["crash_sizes"])
    died = {"ok": False, "problems": ["worker crash"], "workloads": []}
    for name, rank in (("r0", 0), ("r1", 1)):
        _phase_dir(tmp_path, name, died, {"tag": "uneven", "error": {"cls": "RuntimeError", "msg": msg}}, rank=rank)
    doc = dp_plan.judge(str(tmp_path))
    assert doc["phases"]["r0"]["verdict"] == "as predicted"
    assert doc["phases"]["r1"]["verdict"] == "NOT as predicted" and "the model crashes ranks [0]" in doc["phases"]["r1"]["why"][0]
