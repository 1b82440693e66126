"""Wrong arguments to the Python API (``specstate.testing``) and the pytest plugin: each is
specstate's own error naming the argument, what was expected and what came, before any work
(the CLI's twin is ``tests/test_bad_input.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from specstate.errors import InvalidArgument, SpecStateError, UnknownName, UsageError
from specstate.testing import check_recording, explore, fuzz, run_scenario

ROOT = Path(__file__).resolve().parents[1]
V17 = ROOT / "tests/data/gpu/v17/g003.jsonl.gz"
V1 = ROOT / "tests/data/gpu/deferred4/seed-sweep.jsonl.gz"

# (call, the text the error must hold): each row a class of wrong argument the issue found accepted
API_CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("max_examples zero", lambda: fuzz("fixed-threshold", max_examples=0), "Expected None or int in [1, 10000000] but got max_examples=0"),
    ("max_examples negative", lambda: fuzz("fixed-threshold", max_examples=-5), "max_examples=-5"),
    ("max_examples a str", lambda: fuzz("fixed-threshold", max_examples="5"), "max_examples='5' (str)"),
    ("max_examples a float", lambda: fuzz("fixed-threshold", max_examples=2.5), "max_examples=2.5"),
    ("max_examples a bool", lambda: fuzz("fixed-threshold", max_examples=True), "max_examples=True (bool)"),
    ("seed a str", lambda: fuzz("fixed-threshold", seed="abc"), "seed='abc'"),
    ("seed negative", lambda: fuzz("fixed-threshold", seed=-1), "seed=-1"),
    ("seed over 64 bits", lambda: fuzz("fixed-threshold", seed=2**70), "seed=1180591620717411303424"),
    ("seed a float", lambda: fuzz("fixed-threshold", seed=1.5), "seed=1.5"),
    ("profile unknown", lambda: fuzz("fixed-threshold", profile="fast"), "profile one of dev, ci, deep"),
    ("check_witnesses a str", lambda: fuzz("fixed-threshold", check_witnesses="no"), "check_witnesses='no'"),
    ("failures empty", lambda: fuzz("fixed-threshold", failures=""), "failures=''"),
    ("failures an int", lambda: explore("fixed-threshold", failures=123), "failures=123"),
    ("scenario seed a str", lambda: run_scenario("fixed-threshold", seed="x"), "seed='x'"),
    ("scenario variant None", lambda: run_scenario(None), "variant=None"),  # type: ignore[arg-type]
    ("scenario unknown", lambda: run_scenario("fixed-threshold", "nope"), "Expected a scenario"),
    ("scenario variant unknown", lambda: run_scenario("nope-variant"), "Expected a variant"),
    ("explore max_live zero", lambda: explore("fixed-threshold", max_live=0), "Expected int in [1, 8] but got max_live=0"),
    ("explore max_live negative", lambda: explore("fixed-threshold", max_live=-1), "max_live=-1"),
    ("explore depth zero", lambda: explore("fixed-threshold", depth=0), "depth=0"),
    ("explore depth negative", lambda: explore("fixed-threshold", depth=-1), "depth=-1"),
    ("explore depth a str", lambda: explore("fixed-threshold", depth="8"), "depth='8' (str)"),
    ("explore max_states zero", lambda: explore("fixed-threshold", max_states=0), "max_states=0"),
    ("explore jobs negative", lambda: explore("fixed-threshold", jobs=-1), "jobs=-1"),
    ("explore reduce a str", lambda: explore("fixed-threshold", reduce="yes"), "Expected bool but got reduce='yes'"),
    ("recording path None", lambda: check_recording(None), "path=None"),  # type: ignore[arg-type]
    ("recording threshold negative", lambda: check_recording(V1, threshold=-3), "threshold=-3"),
    ("recording expect_crash a str", lambda: check_recording(V1, expect_crash="yes"), "expect_crash='yes'"),
    ("recording of another family", lambda: check_recording(V17, "fixed-threshold"), "Expected a variant of sglang-0.5.17"),
    ("recording of v1 with a v2 variant", lambda: check_recording(V1, "upstream-adaptive"), "Expected a variant of sglang-0.5.12"),
]


@pytest.mark.parametrize("call,needle", [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES])
def test_a_wrong_argument_is_specstates_error_naming_it(call: Callable[[], Any], needle: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises(SpecStateError) as e:
        call()
    assert needle in str(e.value), str(e.value)
    assert "\n" not in str(e.value)
    assert time.perf_counter() - t0 < 5.0  # refused before any work


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
    assert p.returncode == 1 and "4 failed" in out, out
    for needle in ("specstate_fuzz: Expected a variant name", "but got max_examples=0",
                   "Expected options of specstate_fuzz from check_witnesses, failures, max_examples, profile, seed "
                   "but got bogus=...", "specstate_scenario: Expected variant 'tests.user_variants.broken:RaisesAtRun' "
                   "to run but it raised ZeroDivisionError"):
        assert needle in out, out
    assert "Traceback" not in out and "During handling" not in out and "_api.py" not in out, out
