"""A user's variant raises a modelled crash through the public surface (``specstate.variant``:
``guarded``, ``sglang_assert``) and gets the report the model's own operations give: a
``worker-crash`` at the symbol it names, the verdict and exit code of any model violation (not
a ``VariantFailure``, exit 2); and a crash inside a graph replay cites the running release's
own runner (0.5.17 and 0.5.23: ``DecodeCudaGraphRunner.execute``, not 0.5.12's ``CudaGraphRunner``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specstate.scenarios import play_scenario
from tests.user_variants.crashes import WHERE

ROOT = Path(__file__).resolve().parents[1]
USER = "tests.user_variants.crashes"


def test_the_crash_helpers_are_public() -> None:
    import specstate.variant as surface
    from specstate.model import runner

    for name in ("guarded", "sglang_assert", "ModelledCrash"):
        assert name in surface.__all__ and getattr(surface, name) is getattr(runner, name)


def test_a_user_variant_raises_a_modelled_crash() -> None:
    r = play_scenario("oscillate", f"{USER}:AssertsAboveTwoRows", 0)
    v = r.first
    assert v is not None and v.invariant == "worker-crash", r.first
    assert v.field == WHERE and v.actual.startswith("AssertionError: at most 2 rows") and v.shapes["bs"] > 2


def _run(variant: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "specstate", "run", "--quiet", "--scenario", "oscillate",
                           "--failures", str(tmp_path), "--variant", variant],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def test_its_report_is_the_models_own(tmp_path: Path) -> None:
    mine, model = _run(f"{USER}:AssertsAboveTwoRows", tmp_path), _run("naive-threshold", tmp_path)
    assert mine.returncode == model.returncode != 2, mine.stdout + mine.stderr
    assert "[worker-crash]" in mine.stdout + mine.stderr and "VariantFailure" not in mine.stderr
    assert "Expected variant" not in mine.stderr  # the user-code-failed message


@pytest.mark.parametrize("variant,symbol", [
    ("OverflowingReplay", "cuda_graph_runner.py::CudaGraphRunner.replay_prepare"),  # 0.5.12
    ("OverflowingReplay17", "model_executor/runner/decode_cuda_graph_runner.py::DecodeCudaGraphRunner.execute"),
    ("OverflowingReplay23", "model_executor/runner/decode_cuda_graph_runner.py::DecodeCudaGraphRunner.execute"),
])
def test_a_replay_crash_cites_the_running_releases_runner(variant: str, symbol: str) -> None:
    r = play_scenario("oscillate", f"{USER}:{variant}", 0)
    v = r.first
    assert v is not None and v.invariant == "worker-crash", r.first
    assert v.field == symbol and v.actual.startswith("RuntimeError"), v.describe()


def test_every_v2_runner_names_a_v2_symbol() -> None:
    """Each runner of a v2 release's runtime states fails in a symbol of its own release's files."""
    from specstate.model import SpecConfig
    from specstate.model.sglang_0_5_17.runtime import runtime_states
    from specstate.model.sglang_0_5_23.runtime import runtime_states_v23
    from specstate.scenarios_v2 import SMALL_V2

    for states in (runtime_states(SMALL_V2), runtime_states_v23(SMALL_V2)):
        for s in states.values():
            for r in (s.draft_decode, s.target_verify, s.draft_extend):
                if r is not None:
                    assert r.fails_in == f"{r.symbol}.execute", r
    assert isinstance(SMALL_V2, SpecConfig)
