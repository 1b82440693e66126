"""``specstate check``: the seed's launch fails under the naive patch with the 160-row crash, in a
short trace that ``specstate reproduce`` replays, and passes under the corrected one; ``--json``,
``--budget``, ``--parts``; ``specstate.testing.check`` and the ``specstate_check`` fixture."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from specstate.cli import main

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ("python -m sglang.launch_server --model-path x --speculative-algorithm EAGLE3 --speculative-num-steps 3 "
          "--speculative-eagle-topk 4 --speculative-num-draft-tokens 16 --cuda-graph-max-bs 16 "
          "--max-running-requests 48 --speculative-disable-batch-threshold 5")


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, str, str]:
    code = main(["check", "--failures", str(tmp_path), *options, "--", *shlex.split(LAUNCH)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_naive_patch_fails_with_the_160_row_crash_and_a_replayable_trace(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    code, out, err = _check(tmp_path, capsys, "--variant", "naive-threshold", "--budget", "2", "--quiet")
    assert code == 1, out + err
    assert "start  engine start: not modelled for this family" in out and "sweep  FAILED" in out and "fuzz   FAILED" in out and "prove  FAILED" in out
    verdict = out[out.index("verdict:"):]
    assert "first violation (sweep): [worker-crash]" in verdict and "The size of tensor a (160)" in verdict
    assert "'input_ids_buffer': [160], 'input_ids': [10]" in verdict
    assert "fails at bs = 6" in out  # the proof's smallest failing batch size
    assert "not modelled (accepted; checked to change nothing the model holds): --model-path" in err
    trace = Path(verdict.split("trace: ")[1].split()[0])
    assert len(json.loads(trace.read_text())["actions"]) <= 12  # ten arrivals, a prefill, the first fallback decode
    command = verdict.split("reproduce with: ")[1].splitlines()[0]
    assert command == f"specstate reproduce {trace}"
    assert main(shlex.split(command)[1:]) == 1  # exit 1: the same violation as recorded
    assert "same violation as recorded: worker-crash" in capsys.readouterr().out


@pytest.fixture(scope="module")
def fixed_check(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, str]:
    """``check --variant fixed-threshold --budget 1 --json``, once for the module: exit code, the
    JSON on stdout, the text verdict on stderr."""
    import contextlib
    import io

    failures = tmp_path_factory.mktemp("fixed-check")
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(["check", "--failures", str(failures), "--variant", "fixed-threshold", "--budget", "1", "--quiet",
                     "--json", "--", *shlex.split(LAUNCH)])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.slow  # the module's fixture (8 CPU s): the fast tier's PASS of check is test_coverage.py's
def test_the_fixed_patch_passes_every_part(fixed_check: tuple[int, str, str]) -> None:
    code, out, err = fixed_check
    assert code == 0, err
    result = json.loads(out)
    parts = {p["name"]: p for p in result["details"]["parts"]}
    assert result["ok"] and [p["status"] for p in parts.values()] == ["not modelled", "passed", "passed", "passed"]
    assert parts["prove"]["details"]["verdict"] == "holds for all bs <= 48"
    assert parts["fuzz"]["details"]["cases"] >= 25 and parts["fuzz"]["details"]["max_crossings"] > 0
    assert result["details"]["not_modelled"] == ["--model-path"] and result["kind"] == "check"
    assert result["verdict"] == "pass" and result["exit_code"] == 0 and result["coverage"]["not_judged"] == []
    assert result["coverage"]["unaffected"] == ["--model-path"] and "--cuda-graph-max-bs" in result["coverage"]["modelled"]
    assert "verdict: PASS: every part passed (start: not modelled for this family)" in err


@pytest.mark.slow  # the same run as above
def test_the_budget_bounds_the_fuzz_and_says_what_it_covered(fixed_check: tuple[int, str, str]) -> None:
    """The same run as above (``--budget 1``; with ``--json`` the text goes to stderr)."""
    code, _, err = fixed_check
    assert code == 0
    line = next(ln for ln in err.splitlines() if ln.strip().startswith("fuzz"))
    assert "25 cases in 1 seeded round (seeds 0..0)" in line and "witnesses reached" in line


def test_check_needs_a_launch_and_good_options(capsys) -> None:  # noqa: ANN001
    assert main(["check", "--variant", "naive-threshold"]) == 2
    assert "expected the launch to check" in capsys.readouterr().err
    assert main(["check", "--budget", "0", "--", "--speculative-algorithm", "EAGLE3"]) == 2
    assert main(["check", "--parts", "fuzz,nope", "--", "--speculative-algorithm", "EAGLE3"]) == 2
    assert main(["check", "--engine", "sglang-0.5.17", "--variant", "naive-threshold", "--", "--x"]) == 2


def test_testing_check_from_python(tmp_path: Path) -> None:
    from specstate.testing import check

    r = check(LAUNCH, variant="naive-threshold", parts=("sweep",), failures=tmp_path)
    assert not r.ok and r.violation is not None and r.violation.shapes["input_ids_buffer"] == [160]
    assert r.repro_command == f"specstate reproduce {r.trace_path}"
    ok = check(shlex.split(LAUNCH), variant="fixed-threshold", parts=("sweep",), failures=tmp_path)
    assert ok.ok and ok.details["parts"][0]["status"] == "passed"
    from specstate.errors import UsageError

    with pytest.raises(UsageError, match="--speculative-num-steps"):
        check(LAUNCH.replace("num-steps 3", "num-steps x"), variant="fixed-threshold")


PROJECT_TEST = f'''
LAUNCH = {LAUNCH!r}


def test_our_launch(specstate_check):
    specstate_check(LAUNCH, variant="naive-threshold", parts=("sweep",))


def test_our_fixed_launch(specstate_check):
    specstate_check(LAUNCH, variant="fixed-threshold", parts=("sweep",))
'''


def test_the_pytest_fixture_fails_with_the_verdict(tmp_path: Path) -> None:
    (tmp_path / "test_ours.py").write_text(PROJECT_TEST)
    env = {k: v for k, v in os.environ.items() if k not in ("SPECSTATE_FAILURE_DIR", "HYPOTHESIS_PROFILE",
                                                            "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's specstate (and its plugin)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "1 failed, 1 passed" in p.stdout, p.stdout
    assert "test_our_launch" in p.stdout and "The size of tensor a (160)" in p.stdout
    assert "reproduce with: specstate reproduce specstate-failures/naive-threshold-check-sweep" in p.stdout


V17_LAUNCH = ("--speculative-algorithm EAGLE3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 2 "
              "--speculative-adaptive --cuda-graph-max-bs 16 --max-running-requests 16")


def _adaptive_config(tmp_path: Path) -> Path:
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps({"1": {"candidate_steps": [1, 3]}, "6": {"candidate_steps": [0]}}))
    return path


def test_a_launch_the_engine_cannot_start_fails_at_start_and_runs_nothing_else(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    # startup steps 1 sizes the shared logits buffer for 2 draft tokens; the candidate with 3
    # steps needs 4 per request: 0.5.17's GraphSharedOutput.get_logits_buffer asserts at start
    flags = f"--speculative-num-steps 1 {V17_LAUNCH} --speculative-adaptive-config {_adaptive_config(tmp_path)}"
    code = main(["check", "--engine", "sglang-0.5.17", "--budget", "5", "--failures", str(tmp_path), "--", *flags.split()])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "start  FAILED" in out and "asked 64 rows, held 32" in out
    for part in ("sweep", "fuzz", "prove"):
        assert f"{part}: not run (the engine does not start on this config)" in out
    repro = next(line for line in out.splitlines() if "reproduce with:" in line).split("reproduce with: ")[1]
    assert repro.startswith("specstate check --engine sglang-0.5.17") and "--parts start" in repro
    assert main(shlex.split(repro)[1:]) == 1  # the printed command shows the same refusal
    assert "asked 64 rows, held 32" in capsys.readouterr().out


def test_the_same_adaptive_config_starts_from_the_larger_startup_steps(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    flags = f"--speculative-num-steps 3 {V17_LAUNCH} --speculative-adaptive-config {_adaptive_config(tmp_path)}"
    code = main(["check", "--engine", "sglang-0.5.17", "--parts", "start", "--", *flags.split()])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "start  passed" in out
