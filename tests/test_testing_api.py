"""``specstate.testing`` (the public checks), ``--json`` output, progress, and the pytest
plugin's fixtures and options in a throw-away project (fast: scenarios, no fuzzing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specstate.cli import main
from specstate.progress import enabled_on_stderr, progress_bar
from specstate.testing import CheckResult, check_recording, explore, run_scenario

ROOT = Path(__file__).resolve().parents[1]


def test_failing_scenario_has_violation_trace_and_repro(tmp_path: Path) -> None:
    r = run_scenario("naive-threshold", "seed-sweep", failures=tmp_path)
    assert not r.ok and r.violation is not None and r.violation.invariant == "worker-crash"
    assert r.trace_path is not None and r.trace_path.parent == tmp_path and r.trace_path.is_file()
    assert r.repro_command == f"specstate reproduce {r.trace_path}"
    assert r.report.splitlines()[0] == "specstate scenario: seed-sweep / naive-threshold (seed 0): FAIL"
    assert r.report.splitlines()[-1] == f"  reproduce with: {r.repro_command}"
    assert json.loads(json.dumps(r.to_json()))["violation"]["invariant"] == "worker-crash"


def test_passing_scenario_is_ok_without_trace() -> None:
    r = run_scenario("fixed-threshold", "oscillate")
    assert r.ok and r.violation is None and r.trace_path is None and r.repro_command is None
    assert r.report.endswith("PASS")


def test_explore_writes_the_shortest_counterexample(tmp_path: Path) -> None:
    r = explore("naive-threshold", depth=5, failures=tmp_path)
    assert not r.ok and r.details["counterexample_length"] == 5 and r.trace_path is not None
    assert main(["reproduce", str(r.trace_path)]) == 1  # the same violation replays


def test_check_recording_of_the_fixed_patch_conforms() -> None:
    r = check_recording(ROOT / "tests/data/gpu/fixed/random-0-0.jsonl.gz", "fixed-threshold", threshold=5)
    assert r.ok, r.report
    assert r.repro_command is not None and r.repro_command.startswith("specstate conform ")
    assert r.details["mismatch_count"] == 0


def test_report_lists_problems() -> None:
    r = CheckResult("fuzz", "v (profile ci)", "v", False, problems=("witnesses never reached: spec-resumed",),
                    repro_command="specstate fuzz --variant v --profile ci")
    assert r.report == ("specstate fuzz: v (profile ci): FAIL\n  witnesses never reached: spec-resumed\n"
                        "  reproduce with: specstate fuzz --variant v --profile ci")


def test_json_goes_to_stdout_and_text_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--variant", "naive-threshold", "--json", "--quiet", "--failures", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["kind"] == "scenario" and data["ok"] is False and data["reproduce"].startswith("specstate reproduce ")
    assert "FAIL  seed-sweep / naive-threshold" in err


def test_progress_is_off_when_stderr_is_not_a_terminal() -> None:
    assert not enabled_on_stderr()  # pytest captures stderr
    with progress_bar("x", total=3) as bar:
        assert bar.disable


PROJECT_TEST = '''
def test_variant_scenario(specstate_variant, specstate_scenario):
    specstate_scenario(specstate_variant, "seed-sweep")


def test_profile(specstate_profile):
    assert specstate_profile == "dev"
'''


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPECSTATE_FAILURE_DIR", "HYPOTHESIS_PROFILE", "PYTEST_ADDOPTS")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_plugin_fixtures_fail_with_report_and_repro(tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text(PROJECT_TEST)
    p = _pytest(tmp_path, "--specstate-profile", "dev", "--specstate-variant", "fixed-threshold",
                "--specstate-variant", "naive-threshold")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "2 passed, 1 failed" in p.stdout or "1 failed, 2 passed" in p.stdout, p.stdout
    assert "test_variant_scenario[naive-threshold]" in p.stdout and "[worker-crash]" in p.stdout
    assert "reproduce with: specstate reproduce specstate-failures/naive-threshold-worker-crash-" in p.stdout


def test_plugin_skips_variant_tests_without_a_variant(tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text(PROJECT_TEST)
    p = _pytest(tmp_path, "-rs", "-k", "variant")
    assert p.returncode == 0 and "no --specstate-variant MODULE:ATTR given" in p.stdout, p.stdout + p.stderr
