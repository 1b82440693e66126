"""``--engine all`` on ``check``, ``fuzz`` and ``reproduce`` (``specstate/cli/across.py``): the
same launch, workload or trace on every family, one table; a release that refuses the flags is a
row saying why; exit 1 when a family fails, 2 when no family accepts the flags."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from specstate.cli import main
from specstate.fuzz.trace import Trace, save_trace
from specstate.model import Arrive, Step
from specstate.scenarios_v2 import SMALL_V2

SEED = ("python -m sglang.launch_server --model-path x --speculative-algorithm EAGLE3 --speculative-num-steps 3 "
        "--speculative-eagle-topk 4 --speculative-num-draft-tokens 16 --cuda-graph-max-bs 16 "
        "--max-running-requests 48 --speculative-disable-batch-threshold 5")
#: adaptive speculation, decode graphs up to 16: 0.5.17's engine start refuses it (the shared
#: logits buffer, docs/model-v2.md), 0.5.23 runs it; 0.5.12 has no ``--cuda-graph-max-bs-decode``
ADAPTIVE = "--speculative-algorithm EAGLE3 --speculative-adaptive --cuda-graph-max-bs-decode 16 --max-running-requests 48"


def _rows(out: str) -> dict[str, list[str]]:
    """The table's rows by family: the cells after the family's name."""
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if cells and cells[0].startswith("sglang-"):
            rows[cells[0]] = cells[1:]
    return rows


def test_check_all_runs_where_the_flags_are_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--engine", "all", "--parts", "start,sweep", "--failures", str(tmp_path), "--",
                 *shlex.split(SEED)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("| family | releases | variant | start | sweep | verdict | first violation |")
    rows = _rows(out)
    assert rows["sglang-0.5.12"][:5] == ["0.5.12, 0.5.12.post1", "fixed-threshold", "not modelled", "passed", "pass"]
    assert rows["sglang-0.5.17"][2:5] == ["-", "-", "refused"] and "declares no such flag" in rows["sglang-0.5.17"][5]
    assert rows["sglang-0.5.23"][4] == "refused" and "ambiguous option: --cuda-graph-max-bs" in rows["sglang-0.5.23"][5]


def test_check_all_fails_where_a_release_cannot_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--engine", "all", "--parts", "start,sweep", "--failures", str(tmp_path), "--json", "--",
                 *shlex.split(ADAPTIVE)])
    got = json.loads(capsys.readouterr().out)
    assert code == 1 and got["ok"] is False and got["kind"] == "check"
    rows = {r["family"]: r for r in got["rows"]}
    assert rows["sglang-0.5.12"]["verdict"] == "refused" and "--cuda-graph-max-bs-decode" in rows["sglang-0.5.12"]["first"]
    assert rows["sglang-0.5.17"]["verdict"] == "FAIL"
    assert rows["sglang-0.5.17"]["parts"] == {"start": "failed", "sweep": "not run"}
    assert "engine-start" in rows["sglang-0.5.17"]["first"]
    assert rows["sglang-0.5.23"]["parts"] == {"start": "passed", "sweep": "passed"}  # 0.5.23 sizes for every candidate
    assert rows["sglang-0.5.23"]["verdict"] == "pass" and rows["sglang-0.5.23"]["check"]["ok"] is True


def test_check_all_with_no_family_accepting_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--engine", "all", "--parts", "start", "--", "--speculative-algorithm", "NGRAM"]) == 2
    err = capsys.readouterr().err
    assert "no engine family accepts these flags" in err and err.count("sglang-0.5.") == 4 and "NGRAM" in err


def test_engine_all_refuses_a_variant_and_other_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--engine", "all", "--variant", "naive-threshold", "--", *shlex.split(SEED)]) == 2
    assert "drop --variant naive-threshold" in capsys.readouterr().err
    assert main(["run", "--engine", "all"]) == 2  # only check, fuzz and reproduce take all
    assert "invalid choice: 'all'" in capsys.readouterr().err


def test_fuzz_all_prints_one_row_per_family(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["fuzz", "--engine", "all", "--max-examples", "2", "--seed", "1", "--json"])
    got = json.loads(capsys.readouterr().out)
    assert [r["family"] for r in got["rows"]] == ["sglang-0.5.12", "sglang-0.5.17", "sglang-0.5.23", "sglang-0.5.9"]
    assert all(r["verdict"] in ("pass", "incomplete") for r in got["rows"])  # 2 cases: no false alarm
    assert code == got["exit_code"] == (0 if got["ok"] else 4)  # incomplete: not judged (exit 4), never a failure
    assert got["ok"] == all(r["verdict"] == "pass" for r in got["rows"])


def test_fuzz_all_on_a_launch_refuses_per_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["fuzz", "--engine", "all", "--max-examples", "2", "--failures", str(tmp_path), "--",
                 *shlex.split(ADAPTIVE)])
    rows = _rows(capsys.readouterr().out)
    assert code == 1 and rows["sglang-0.5.12"][3] == "refused"
    assert rows["sglang-0.5.17"][2:4] == ["-", "cannot start"] and "engine start" in rows["sglang-0.5.17"][4]
    assert rows["sglang-0.5.23"][2:4] == ["passed", "pass"]  # the fuzz part's status, the verdict


def test_reproduce_all_replays_the_trace_on_every_family(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = save_trace(Trace(SMALL_V2, "upstream-v23", [Arrive(8, 6), Arrive(8, 6), *([Step(accept=(2, 2))] * 6)]),
                      tmp_path, name="good")
    assert main(["reproduce", "--engine", "all", str(good)]) == 0
    rows = _rows(capsys.readouterr().out)
    assert [rows[f][2] for f in ("sglang-0.5.12", "sglang-0.5.17", "sglang-0.5.23")] == ["pass"] * 3
    bad = SMALL_V2.with_(speculative_adaptive_config='{"warmup_batches": 3}')  # no batch-size slot
    odd = save_trace(Trace(bad, "upstream-v23", [Arrive(8, 4), Step()]), tmp_path, name="odd")
    assert main(["reproduce", "--engine", "all", "--json", str(odd)]) == 0  # rows, not a failure
    got = {r["family"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert got["sglang-0.5.12"]["verdict"] == "pass"  # the v1 worker has no adaptive controller
    assert got["sglang-0.5.17"]["verdict"] == got["sglang-0.5.23"]["verdict"] == "cannot start"
    assert main(["reproduce", "--engine", "all", "--seed", "3", str(odd)]) == 2


def test_check_all_reads_a_config_file_per_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "launch.toml"
    f.write_text('speculative-algorithm = "EAGLE3"\nspeculative-adaptive = true\ncuda-graph-max-bs-decode = 16\n')
    assert main(["check", "--engine", "all", "--parts", "start", "--config", str(f)]) == 1  # 0.5.17 cannot start
    rows = _rows(capsys.readouterr().out)
    assert rows["sglang-0.5.12"][3] == "refused" and "unknown server flag" in rows["sglang-0.5.12"][4]
    assert rows["sglang-0.5.17"][2:4] == ["failed", "FAIL"] and rows["sglang-0.5.23"][2:4] == ["passed", "pass"]
