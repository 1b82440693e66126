"""Server flags on every command that runs the model: each runs on the launch's config
(``specstate run | fuzz | explore | prove | graph | reproduce | minimize | replay -- FLAGS``)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from specstate.cli import main


def flags(mrr: int = 8, thr: int = 5) -> list[str]:
    return shlex.split("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 4 "
                       f"--speculative-num-draft-tokens 16 --cuda-graph-max-bs 16 --max-running-requests {mrr} "
                       f"--speculative-disable-batch-threshold {thr} --model-path x")


def _json(capsys: pytest.CaptureFixture[str], argv: list[str], code: int) -> dict:  # type: ignore[type-arg]
    assert main(argv) == code
    out = capsys.readouterr()
    assert "not modelled (accepted; checked to change nothing the model holds): --model-path" in out.err
    return json.loads(out.out)


def test_run_plays_the_scenario_on_the_launch(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    ok = _json(capsys, ["run", "--variant", "naive-threshold", "--scenario", "oscillate", "--json", "--quiet",
                        "--failures", str(tmp_path), "--", *flags(mrr=4)], 0)  # at most 4 running: the switch at 5
    # never fires
    assert ok["ok"]
    bad = _json(capsys, ["run", "--variant", "naive-threshold", "--json", "--quiet", "--failures", str(tmp_path),
                         "--server-args", shlex.join(flags(mrr=48))], 1)
    assert bad["violation"]["shapes"]["input_ids_buffer"] == [160]
    assert json.loads(Path(bad["trace"]).read_text())["config"]["max_running_requests"] == 48


def test_prove_bounds_the_batch_by_the_launch(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    r = _json(capsys, ["prove", "--variant", "fixed-threshold", "--json", "--quiet", "--failures", str(tmp_path), "--",
                       *flags(mrr=7)], 0)
    assert r["details"]["max_bs"] == 7 and r["details"]["verdict"] == "holds for all bs <= 7"


def test_explore_says_how_deep_it_goes(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    assert main(["explore", "--variant", "naive-threshold", "--max-bs", "8", "--depth", "6", "--quiet", "--json",
                 "--failures", str(tmp_path), "--", *flags(mrr=2, thr=1)]) == 1
    out = capsys.readouterr()
    assert "batches of up to 2 of the launch's max_running_requests 2" in out.err
    r = json.loads(out.out)
    assert r["violation"]["shapes"]["raw_bs"] == 2  # the switch at 1: the first fallback decode has 2 rows
    assert json.loads(Path(r["trace"]).read_text())["config"]["max_running_requests"] == 2


def test_fuzz_draws_workloads_on_the_launch(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    r = _json(capsys, ["fuzz", "--variant", "naive-threshold", "--max-examples", "25", "--json", "--quiet",
                       "--failures", str(tmp_path), "--", *flags(mrr=6)], 1)
    assert json.loads(Path(r["trace"]).read_text())["config"]["max_running_requests"] == 6


def test_reproduce_minimize_replay_a_trace_on_the_launch(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    bad = _json(capsys, ["run", "--variant", "naive-threshold", "--json", "--quiet", "--failures", str(tmp_path), "--",
                         *flags(mrr=48)], 1)
    trace = bad["trace"]
    # the same actions with the switch at 20: no crash, so a different outcome than recorded (exit 3)
    assert main(["reproduce", trace, "--", *flags(mrr=48, thr=20)]) == 3
    assert "DIFFERENT from the recorded violation" in capsys.readouterr().out
    assert main(["reproduce", trace, "--", *flags(mrr=48)]) == 1
    assert main(["replay", trace, "--", *flags(mrr=48, thr=20)]) == 0
    assert main(["minimize", trace, "--quiet", "--failures", str(tmp_path), "--bfs-depth", "0", "--",
                 *flags(mrr=48)]) == 0
    assert "reproduce with:" in capsys.readouterr().out
    assert main(["replay", "--engine", "sglang", "seed-sweep", "--", *flags()]) == 2


def test_graph_explores_the_launch(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    out = tmp_path / "g.json"
    assert main(["graph", "--variant", "naive-threshold", "--levels", "1,2", "--jobs", "1", "--out", str(out), "--",
                 *flags(mrr=2, thr=1)]) == 0
    assert json.loads(out.read_text())["nodes"]
