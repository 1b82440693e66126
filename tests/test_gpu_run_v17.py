"""A CPU rehearsal of the one GPU command for sglang 0.5.17 (``specstate/integration/gpu_run_v17.sh``):
the site tarball is a fake ``sglang`` whose Engine is the v2 model behind the real 0.5.17 recorder
hooks (``tests/fake_sglang17/engine.py``), and the packages a GPU host lacks (hypothesis, networkx,
graphviz, tqdm, pytest) cannot be imported. The script must unpack the site, run the driver, pack
the recordings, check them, and leave at most 8 files, no folders, under OUT: when all goes well,
when the engine dies at start, and when it hangs past the hard limit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "specstate" / "integration" / "gpu_run_v17.sh"
#: the site tarball carries pydantic (specstate's schemas) for the GPU host
SITE_ONLY = ("pydantic", "pydantic_core", "annotated_types", "typing_inspection")
BLOCK = '''import importlib.abc, importlib.machinery, os, sys
SITE_ONLY = %r
class _AsOnTheGpuHost(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in {"hypothesis", "networkx", "graphviz", "tqdm", "pytest", "_pytest"}:
            raise ImportError("not on the GPU host: " + name)
        if top in SITE_ONLY and name == top:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            where = (spec.origin or "") if spec else ""
            if not where.startswith(os.environ["SITE17"]):
                raise ImportError(name + " on the GPU host comes from the site tarball only, not " + where)
        return None
sys.meta_path.insert(0, _AsOnTheGpuHost())
''' % (SITE_ONLY,)


def _fake_whl17(tmp: Path) -> Path:
    site = tmp / "fakesite"
    d = site / "sglang" / "srt" / "entrypoints"
    d.mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("__version__ = '0.5.17-fake'\n")
    (site / "sglang" / "srt" / "__init__.py").write_text("")
    (d / "__init__.py").write_text("")
    shutil.copy(REPO / "tests" / "fake_sglang17" / "engine.py", d / "engine.py")
    import importlib.util

    for name in SITE_ONLY:  # links to this environment's copies (what the real tarball packs)
        (site / name).symlink_to(Path(importlib.util.find_spec(name).origin).parent)  # type: ignore[arg-type]
    whl = tmp / "whl17"
    whl.mkdir()
    with tarfile.open(whl / "site17.tar.xz", "w:xz") as t:
        t.add(site, arcname=".")
    return whl


def _run(tmp: Path, limit: int, args: str, **env: str) -> tuple[int, Path, float]:
    block = tmp / "block"
    block.mkdir(exist_ok=True)
    (block / "sitecustomize.py").write_text(BLOCK)
    out = tmp / "out"
    e = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "SPECSTATE_"))}
    e.update(SITE17=str(tmp / "site"), V17_WORK=str(tmp / "work"), PYTHON=sys.executable,
             PYTHONPATH=str(block), V17_ARGS=args, V17_CONFORM_S="40")
    e.update(env)
    if "WHL17" not in env:
        e["WHL17"] = str(_fake_whl17(tmp))
    t0 = time.perf_counter()
    rc = subprocess.run(["bash", str(SCRIPT), str(out), str(limit)], cwd=tmp, env=e, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL, timeout=limit + 60).returncode
    return rc, out, time.perf_counter() - t0


def _come_back(out: Path) -> list[str]:
    """What the device tool brings back: at most 8 plain files here (no folders needed)."""
    names = sorted(p.name for p in out.iterdir())
    assert len(names) <= 8 and all((out / n).is_file() for n in names), names
    return names


@pytest.mark.slow  # 8 CPU s: the whole rehearsal; the fast tier runs the script on an engine that dies at start
def test_the_gpu_command_runs_checks_and_packs_everything(tmp_path: Path) -> None:
    workload = REPO / "specstate/integration/sglang_assets/fuzz-workloads-v2/g001.json"
    rc, out, _ = _run(tmp_path, 240, f"--agree --scenario {workload} --random 1 --fuzz-v2 1")
    log = (out / "log").read_text()
    assert rc == 0, log[-3000:]
    assert _come_back(out) == ["conform.json", "gpu.txt", "log", "recordings.tar.gz", "summary.json"]
    with tarfile.open(out / "recordings.tar.gz") as t:
        recs = sorted(n for n in t.getnames() if n.startswith("run/rec/") and n.endswith(".jsonl"))
        assert "run/host_result.json" in t.getnames()
    assert recs == ["run/rec/g000.jsonl", "run/rec/g001.jsonl", "run/rec/random-0-0.jsonl"]
    conf = json.loads((out / "conform.json").read_text())
    assert conf["recordings"] == conf["conforming"] == 3 and conf["mismatches"] == 0, conf
    assert conf["crossing_both_ways"] >= 2, [r["switches"] for r in conf["files"]]
    assert all(r["iterations"] > 50 for r in conf["files"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] and summary["engine"] == "sglang-0.5.17" and summary["agree"]
    assert "[gpu_run_v17] conformance exit 0" in log and "3/3 recordings conform" in log


def test_an_engine_that_dies_at_start_still_leaves_the_log_and_the_host_files(tmp_path: Path) -> None:
    rc, out, _ = _run(tmp_path, 200, "--random 1", FAKE_V17_CRASH_AT_START="1")
    assert rc != 0
    names = _come_back(out)
    assert {"log", "recordings.tar.gz", "summary.json", "conform.json"} <= set(names), names
    assert "fake engine start failure" in (out / "log").read_text()
    assert not json.loads((out / "summary.json").read_text())["ok"]
    assert json.loads((out / "conform.json").read_text())["recordings"] == 0


@pytest.mark.slow  # the script end to end on the fake engine (15 s); the fast tier runs one such call (packs everything)
def test_an_engine_that_hangs_is_cut_at_the_hard_limit(tmp_path: Path) -> None:
    """A limit of 60 s with a conformance share of 10 (nothing to conform): the driver's host
    limit is what is left after unpacking, less the packing share and 20 s of grace (about 12 s
    here), so the hang is cut there, well inside the limit."""
    rc, out, wall = _run(tmp_path, 60, "--random 1", FAKE_V17_HANG_AT_START="1", V17_CONFORM_S="10")
    assert rc != 0 and wall < 60, wall
    assert {"log", "recordings.tar.gz", "summary.json"} <= set(_come_back(out))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["host_timed_out"] and not summary["ok"]


@pytest.mark.slow  # the script end to end on the fake engine (15 s); the fast tier runs one such call (packs everything)
def test_a_plan_runs_each_engine_and_conforms_every_recording(tmp_path: Path) -> None:
    """``V17_PLAN``: engines in a row (``pressure17.py``'s workloads and configs); a start probe
    that the engine refuses (the fake engine runs the model's start) leaves its reason in the log
    and does not fail the run; every engine's recordings are conformed together."""
    from specstate.integration.sglang_0_5_17.pressure17 import write_all

    w = tmp_path / "w"
    write_all(str(w))
    plan = tmp_path / "plan.txt"
    plan.write_text(f"a|--agree --scenario {w}/chunk-abort-1.json --engine-arg max_total_tokens=2048 "
                    "--engine-arg chunked_prefill_size=64\n"
                    f"start-missing|--scenario {w}/tiny.json --engine-arg speculative_adaptive_config={w}/adaptive-missing.json\n")
    rc, out, _ = _run(tmp_path, 240, "", V17_PLAN=str(plan))
    log = (out / "log").read_text()
    assert rc == 0, log[-3000:]
    assert "--speculative-num-steps=3 is not in the adaptive config candidate_steps [1, 2]" in log
    conf = json.loads((out / "conform.json").read_text())
    assert conf["recordings"] == conf["conforming"] == 1 and conf["mismatches"] == 0, conf
    assert conf["files"][0]["file"].endswith("a__chunk-abort-1.jsonl")
    with tarfile.open(out / "recordings.tar.gz") as t:
        assert "run/a/rec/chunk-abort-1.jsonl" in t.getnames() and "run/start-missing/host_result.json" in t.getnames()


def test_the_issue25_plan_names_workloads_that_load_and_start_what_the_model_says() -> None:
    """``sglang_assets/plan-issue25/plan.txt`` (the call ``docs/results/upstream-0.5.17.md`` left
    to run): every ``--scenario`` file is a valid workload, and the model's start verdicts are
    the ones the plan expects of the engine (``nostart-*`` refused, the others started)."""
    from specstate.integration.sglang_0_5_17.engine import engine_kwargs
    from specstate.integration.start_prediction import predict_start
    from specstate.integration.workloads import load_workload

    plan = REPO / "specstate" / "integration" / "sglang_assets" / "plan-issue25" / "plan.txt"
    for line in plan.read_text().splitlines():
        name, _, args = line.partition("|")
        tokens = args.split()
        for i, t in enumerate(tokens):
            if t == "--scenario":
                assert load_workload(str(REPO / tokens[i + 1])).waves
        overrides = {}
        for i, t in enumerate(tokens):
            if t == "--engine-arg":
                k, _, v = tokens[i + 1].partition("=")
                overrides[k] = json.loads(v) if v not in ("",) and (v[0].isdigit() or v == "null") else v
        status = predict_start(engine_kwargs(overrides), "upstream-adaptive")["status"]
        assert status == ("refuses" if name.startswith("nostart") else "starts"), (name, status)


@pytest.mark.slow  # six engines end to end (40 to 80 s); the pieces it joins are checked in the fast tier:
# the crash verdict and the header's variant and threshold (test_v2_switch_patch.py), a plan of
# engines conformed together (the test above)
def test_the_static17_plan_judges_the_naive_crash_and_the_corrected_switch(tmp_path: Path) -> None:
    """``V17_PLAN=static17`` (short workloads): four static engines behind the real 0.5.17 hooks, the
    switch patch's own hook deciding each decode's counts (``switch_patch``, checked against the
    model by the fake engine); the naive engines crash and their crash is judged against the
    model's prediction (class and sizes, at the same iteration), the upstream and corrected
    engines conform, each with the variant and threshold its header names."""
    rc, out, _ = _run(tmp_path, 300, "", V17_PLAN="static17", V17_STATIC17_SHORT="1", PROBE_MIN_S="20")
    log = (out / "log").read_text()
    assert rc == 0, log[-3000:]
    conf = json.loads((out / "conform.json").read_text())
    rows = {Path(r["file"]).name: r for r in conf["files"]}
    assert set(rows) == {"static__sweep-short.jsonl", "static__random-0-0.jsonl", "switch-naive__sweep-short.jsonl",
                         "switch__sweep-short.jsonl", "switch__random-1-0.jsonl", "probe-naive-eager__sweep-short.jsonl"}, rows
    assert conf["recordings"] == conf["conforming"] == 6 and conf["mismatches"] == 0, conf
    assert {r["variant"] for n, r in rows.items() if n.startswith("static")} == {"upstream-static"}
    naive = rows["switch-naive__sweep-short.jsonl"]
    assert (naive["variant"], naive["threshold"]) == ("v2-static-switch-naive", 5)
    verdict = naive["crash_verdict"]
    assert verdict["verdict"] == "as-predicted" and verdict["where_seen"] is False, verdict  # the fake raises in _launch
    assert verdict["real"] == ["RuntimeError", [40, 10]], verdict  # the sweep's wave of 10: positions 10 vs 4 * 10
    eager = rows["probe-naive-eager__sweep-short.jsonl"]["crash_verdict"]
    assert eager["verdict"] == "as-predicted" and eager["real"][0] == "IndexError", eager
    for name in ("switch__sweep-short.jsonl", "switch__random-1-0.jsonl"):
        r = rows[name]
        assert (r["variant"], r["threshold"], r["real_crash"], r["crash_verdict"]) == ("v2-static-switch", 5, None, None)
    assert rows["switch__sweep-short.jsonl"]["switches"]["switch_down"] >= 1
    assert rows["switch__sweep-short.jsonl"]["switches"]["switch_up"] >= 1
    assert conf["crashes_as_predicted"] == 2 and conf["crashes_not_as_predicted"] == 0
    assert "a crash was expected" in log and "2 crashed as the model predicted" in log


@pytest.mark.slow  # the script end to end on the fake engine (15 s); the fast tier runs one such call (packs everything)
def test_a_second_call_on_the_same_machine_reuses_the_unpacked_site(tmp_path: Path) -> None:
    """The site unpacked by an earlier call (marked ``.specstate-unpacked``) serves a later call
    that carries no ``.whl17``; a folder without the marker is not trusted."""
    site = tmp_path / "site"
    site.mkdir()
    (tmp_path / "first").mkdir()
    with tarfile.open(_fake_whl17(tmp_path / "first") / "site17.tar.xz") as t:
        t.extractall(site)  # noqa: S202  (our own tarball)
    (site / ".specstate-unpacked").touch()
    rc, out, _ = _run(tmp_path, 200, "--random 1", WHL17=str(tmp_path / "none"))
    log = (out / "log").read_text()
    assert rc == 0 and "reusing the site unpacked in" in log, log[-3000:]
    (site / ".specstate-unpacked").unlink()
    shutil.rmtree(tmp_path / "out")
    rc, out, _ = _run(tmp_path, 200, "--random 1", WHL17=str(tmp_path / "none"))
    assert rc != 0 and "no site:" in (out / "log").read_text()
