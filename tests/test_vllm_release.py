"""The vLLM release as the shared commands see it (``_engine_option.own_model_release``,
``specstate/cli/vllm.py``, ``cli/engines.py::vllm_rows``): asked by folder, never named. A second vLLM
release built at run time on ``SPECSTATE_RELEASE_PATH`` (``vllm_0_35_0/``: 0.34.0's model, launch and
check re-exported, its own default variant) is found by ``--engine``, by a ``vllm serve`` line (the
newest release recognising it) and by ``engines``, with no line of the package naming it."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from specstate._engine_option import own_model_release
from specstate.model.releases import RELEASE_PATH_ENV, own_model_releases

REPO = Path(__file__).resolve().parent.parent
LINE = ["vllm", "serve", "M", "--speculative-config",
        '{"method": "eagle3", "num_speculative_tokens": 3, "num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 4096, 0]]}']

_TRIAL = {
    "__init__.py": 'from specstate.model.vllm_0_34_0 import *  # noqa: F403\n'
                   'from specstate.model.vllm_0_34_0 import CITED_OUTSIDE, SUMMARY  # noqa: F401\n'
                   'ENGINE, RELEASE = "vllm-0.35.0", "0.35.0"\n',
    "launch.py": 'from specstate.model.vllm_0_34_0.launch import *  # noqa: F403\n'
                 'from specstate.model.vllm_0_34_0.launch import SERVE, default_launch, is_serve, parse  # noqa: F401\n'
                 'DEFAULT_VARIANT = "dsd-corrected"\n',
    "check.py": 'from specstate.integration.vllm_0_34_0.check import *  # noqa: F403\n',
}


@pytest.fixture()
def trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    import specstate.model

    folder = tmp_path / "vllm_0_35_0"
    folder.mkdir()
    for name, text in _TRIAL.items():
        (folder / name).write_text(text)
    monkeypatch.setenv(RELEASE_PATH_ENV, str(tmp_path))
    path = list(specstate.model.__path__)
    try:
        yield folder
    finally:
        specstate.model.__path__[:] = path


def _args(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**{"engine": None, "server_argv": None, "variant": None, **kw})


def test_the_release_a_command_is_for_is_asked_of_the_releases() -> None:
    release = own_model_releases()[0]  # the newest: a line two releases take is its
    assert own_model_release(_args(server_argv=LINE)) == release
    assert own_model_release(_args(engine=release.name)) == release
    assert own_model_release(_args(variant="dsd-corrected")) == release
    assert own_model_release(_args(variant="dsd-corrected", engine="sglang-0.5.12")) is None
    assert own_model_release(_args(server_argv=["python", "-m", "sglang.launch_server"])) is None
    assert own_model_release(_args(variant="fixed-threshold")) is None


def _specstate(trial: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m specstate ARGV`` with the trial on ``SPECSTATE_RELEASE_PATH`` (the ``--engine``
    choices are read when the parser module is imported)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), RELEASE_PATH_ENV: str(trial.parent)}
    return subprocess.run([sys.executable, "-m", "specstate", *argv, "--failures", str(trial.parent / "f")],
                          cwd=trial.parent, env=env, capture_output=True, text=True, timeout=300)


def test_a_second_vllm_release_is_its_folder(trial: Path) -> None:
    assert [r.name for r in own_model_releases()] == ["vllm-0.35.0", "vllm-0.34.0"]
    assert own_model_release(_args(server_argv=LINE)).name == "vllm-0.35.0"  # type: ignore[union-attr]
    p = _specstate(trial, "run", "--engine", "vllm-0.35.0")
    assert p.returncode == 0 and p.stdout.startswith("specstate run: vllm-0.35.0 dsd-corrected, scenario sweep"), p.stderr
    p = _specstate(trial, "run", "--engine", "vllm-0.34.0")
    assert p.returncode == 1 and p.stdout.startswith("specstate run: vllm-0.34.0 dsd-as-shipped, scenario sweep")
    p = _specstate(trial, "check", "--parts", "start,sweep", "--", *LINE)
    assert p.returncode == 0 and p.stdout.startswith("specstate check: vllm-0.35.0 dsd-corrected on vllm serve M")


def test_engines_has_a_row_per_vllm_release(trial: Path) -> None:
    from specstate.cli.engines import vllm_rows

    rows = {r["family"]: r for r in vllm_rows(trial.parent / "no-cache")}
    assert list(rows) == ["vllm-0.34.0", "vllm-0.35.0"]
    assert (rows["vllm-0.34.0"]["default_variant"], rows["vllm-0.35.0"]["default_variant"]) == ("dsd-as-shipped",
                                                                                               "dsd-corrected")
    assert rows["vllm-0.35.0"]["missing_sources"] == ["0.35.0"] and rows["vllm-0.34.0"]["own_citations"] > 0
