from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from specstate.cli import main, run_scenario
from specstate.fuzz.trace import load_trace, replay_trace


def test_same_seed_same_trace() -> None:
    a = run_scenario("oscillate", "fixed-threshold", 7)
    b = run_scenario("oscillate", "fixed-threshold", 7)
    c = run_scenario("oscillate", "fixed-threshold", 8)
    assert a.actions == b.actions and a.stats == b.stats
    assert a.actions != c.actions


def test_run_failure_writes_trace_and_prints_repro(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    rc = main(["run", "--variant", "naive-threshold", "--failures", str(tmp_path), "--quiet"])
    out = capsys.readouterr().out
    assert rc == 1
    traces = list(tmp_path.glob("*.json"))
    assert len(traces) == 1
    assert f"reproduce with: specstate reproduce {traces[0]}" in out
    assert "passed: C=1, C=2, C=5; failed during C=10" in out
    t = load_trace(traces[0])
    assert t.violation["invariant"] == "worker-crash" and t.scenario == "seed-sweep" and t.seed == 0
    again = replay_trace(t)
    assert again.first is not None and again.first.to_json() == t.violation


def test_run_pass_exit_code(capsys) -> None:  # noqa: ANN001
    assert main(["run", "--scenario", "oscillate", "--quiet"]) == 0
    assert "PASS" in capsys.readouterr().out


def test_usage_error_exit_code(capsys) -> None:  # noqa: ANN001
    assert main(["run", "--variant", "nope", "--quiet"]) == 2
    assert "Expected a variant from" in capsys.readouterr().err


def test_console_script_lists() -> None:
    out = subprocess.run([sys.executable, "-m", "specstate", "invariants"], capture_output=True, text=True, check=True).stdout
    for name in ("worker-crash", "mode-consistency", "token-counts", "spec-info-rows", "graph-padding",
                 "kv-accounting", "draft-kv-in-step", "stable-switch-decision"):
        assert name in out
    assert "mirrors" in out


def test_trace_json_is_stable(tmp_path: Path) -> None:
    main(["run", "--variant", "naive-threshold", "--failures", str(tmp_path / "a"), "--quiet"])
    main(["run", "--variant", "naive-threshold", "--failures", str(tmp_path / "b"), "--quiet"])
    [a], [b] = list((tmp_path / "a").glob("*.json")), list((tmp_path / "b").glob("*.json"))
    assert a.read_bytes() == b.read_bytes()
    assert json.loads(a.read_text())["format"] == 1
