"""Wrong arguments to the Python API (``specstate.testing``) and the pytest plugin: each is
specstate's own error naming the argument, what was expected and what came, before any work
(the CLI's twin is ``tests/test_bad_input.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from specstate.errors import InvalidArgument, UnknownName, UsageError
from specstate.testing import check_recording, explore, run_scenario
from tests.bad_inputs import _api_cases, judge_api

ROOT = Path(__file__).resolve().parents[1]
V17 = ROOT / "tests/data/gpu/v17/g003.jsonl.gz"
V1 = ROOT / "tests/data/gpu/deferred4/seed-sweep.jsonl.gz"

API = _api_cases()


@pytest.mark.parametrize("call,needle", [c[1:] for c in API], ids=[c[0] for c in API])
def test_a_wrong_argument_is_specstates_error_naming_it(call: Callable[[], Any], needle: str) -> None:
    v = judge_api(call, needle)
    assert v.kind == "clean", (v.kind, v.stderr)
    assert v.seconds < 5.0  # refused before any work


def test_a_v1_recording_with_a_v2_variant_and_the_reverse_are_refused() -> None:
    with pytest.raises(UsageError, match="Expected a variant of sglang-0.5.17"):
        check_recording(V17, "fixed-threshold")
    with pytest.raises(UsageError, match="Expected a variant of sglang-0.5.12"):
        check_recording(V1, "upstream-adaptive")


def test_invalid_argument_is_a_usage_error_and_a_builtin_type_error() -> None:
    with pytest.raises(InvalidArgument) as e:
        explore("fixed-threshold", depth="8")
    assert isinstance(e.value, UsageError) and isinstance(e.value, TypeError) and isinstance(e.value, ValueError)
    with pytest.raises(UnknownName):
        run_scenario("fixed-threshold", "nope")


def test_check_recording_takes_the_family_from_the_recording() -> None:
    r = check_recording(V17)
    assert r.variant == "upstream-adaptive" and r.details["family"] == "sglang-0.5.17"
    assert "--variant upstream-adaptive" in (r.repro_command or "")


# -- the pytest plugin ---------------------------------------------------------------------

PROJECT = '''
def test_fuzz_int(specstate_fuzz):
    specstate_fuzz(123)

def test_fuzz_zero(specstate_fuzz):
    specstate_fuzz("fixed-threshold", max_examples=0)

def test_check_expect_ok_a_str(specstate_check):
    specstate_check("--model-path m", expect_ok="no")

def test_check_budget_zero(specstate_check):
    specstate_check("--model-path m", budget_s=0)

def test_check_bogus(specstate_check):
    specstate_check("--model-path m", bogus=1)

def test_fuzz_bogus(specstate_fuzz):
    specstate_fuzz("fixed-threshold", bogus=1)

def test_scenario_raises(specstate_scenario):
    specstate_scenario("tests.user_variants.broken:RaisesAtRun")
'''


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPECSTATE_FAILURE_DIR", "HYPOTHESIS_PROFILE", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's specstate and tests.user_variants
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("variant,needle", [
    ("bad", "Expected a variant from"),
    ("nope:X", "Expected an importable module"),
    (":", "Expected --variant to be a built-in name"),
    ("", "Expected a variant from"),
    ("tests.user_variants.raises_on_import:X", "RuntimeError: boom at import"),
    ("tests.user_variants.os_exit_on_import:X", "ended the Python process with exit status 0"),
])
def test_a_bad_variant_option_is_a_usage_error(tmp_path: Path, variant: str, needle: str) -> None:
    (tmp_path / "test_mine.py").write_text("def test_nothing():\n    pass\n")
    p = _pytest(tmp_path, "--specstate-variant", variant)
    out = p.stdout + p.stderr
    assert p.returncode == 4, out  # pytest's usage-error exit, never 0
    assert needle in out and f"--specstate-variant {variant!r}" in out, out
    assert "Traceback" not in out and "specstate/" not in out.replace("specstate/..", ""), out


def test_bad_fixture_arguments_fail_the_test_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text(PROJECT)
    p = _pytest(tmp_path)
    out = p.stdout
    assert p.returncode == 1 and "7 failed" in out, out
    for needle in ("specstate_check: Expected bool but got expect_ok='no'", "specstate_check: Expected seconds",
                   "Expected options of specstate_check from budget_s, config_file, engine, failures, parts, seed but "
                   "got bogus=...","specstate_fuzz: Expected a variant name", "but got max_examples=0",
                   "Expected options of specstate_fuzz from check_witnesses, failures, max_examples, profile, seed "
                   "but got bogus=...", "specstate_scenario: Expected variant 'tests.user_variants.broken:RaisesAtRun' "
                   "to run but it raised ZeroDivisionError"):
        assert needle in out, out
    assert "Traceback" not in out and "During handling" not in out and "_api.py" not in out, out


def test_check_takes_the_engines_and_values_the_cli_takes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``engine='0.5.12.post1'`` as ``--engine 0.5.12.post1``; the bounds' own ends accepted."""
    from specstate.testing import check

    monkeypatch.chdir(tmp_path)
    flags = ("--model-path m --speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 "
             "--speculative-num-draft-tokens 4 --disable-overlap-schedule --cuda-graph-max-bs 8")
    for engine in ("0.5.12.post1", "sglang-0.5.12", "0.5.12"):
        r = check(flags, engine=engine, parts=["start"])
        assert r.ok and r.variant == "fixed-threshold", r.report
    assert check(flags.split(), parts=("start", "start")).ok
    # the bounds' own ends pass the bounds, then are refused only for want of the fuzz part
    for budget_s, seed in ((1, (1 << 63) - 1), (86400.0, 0)):
        with pytest.raises(InvalidArgument, match=r"^budget_s, seed: the fuzz part's options, but parts=\['start'\]"):
            check(flags, parts=["start"], budget_s=budget_s, seed=seed)


FLAGS = ("--model-path m --speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 "
         "--speculative-num-draft-tokens 4 --disable-overlap-schedule --cuda-graph-max-bs 8")


@pytest.mark.parametrize("given", [{"seed": 0}, {"budget_s": 30.0}, {"seed": 7, "budget_s": 5}])
def test_check_refuses_the_fuzz_parts_options_without_the_fuzz_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    given: dict[str, object]) -> None:
    """As ``specstate check --parts start --seed 0``: a value given, even the default's, is told
    apart from one left out; nothing written, no failures folder left."""
    from specstate.testing import check

    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgument, match=f"^{', '.join(sorted(given))}: the fuzz part's options") as e:
        check(FLAGS, parts=("start", "sweep", "prove"), failures=tmp_path / "f" / "g", **given)  # type: ignore[arg-type]
    assert "\n" not in str(e.value) and list(tmp_path.iterdir()) == []


def test_check_removes_an_empty_failures_folder_it_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing failed, or the call was refused: the folders it made for traces are gone; a folder
    that was there before is kept."""
    from specstate.fuzz import trace as trace_module
    from specstate.testing import check

    monkeypatch.chdir(tmp_path)
    (tmp_path / "kept").mkdir()
    assert check(FLAGS, parts=["start"], failures=tmp_path / "kept").ok
    trace_module.failure_dir(tmp_path / "new" / "deep")  # as a part does before it writes
    assert check(FLAGS, parts=["start"], failures=tmp_path / "new" / "deep").ok
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
    trace_module.failure_dir(tmp_path / "refused")
    with pytest.raises(InvalidArgument):
        check(FLAGS, parts=["start"], seed=1, failures=tmp_path / "refused")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]


def test_check_engine_start_still_starts_a_v2_config(tmp_path: Path) -> None:
    from specstate.model import SpecConfig
    from specstate.testing import check_engine_start

    cfg = SpecConfig(speculative_eagle_topk=1, speculative_num_draft_tokens=4, disable_overlap_schedule=False,
                     cuda_graph_max_bs=8)
    (tmp_path / "c.json").write_text(cfg.to_json() if isinstance(cfg.to_json(), str) else __import__("json").dumps(cfg.to_json()))
    for given in (cfg, tmp_path / "c.json", str(tmp_path / "c.json")):
        try:
            assert check_engine_start(given).describe()
        except Exception as e:  # noqa: BLE001  (a refusal is the model's answer, not an argument error)
            assert type(e).__name__ == "EngineStartRefused", e
