"""``pytest -m fuzz`` runs on two cores (``tests/conftest.py::pytest_cmdline_main``: pytest-xdist's
``-n 2``), and so does the whole suite (a ``pytest`` naming no paths, the README's command); ``-n 0``
keeps one process, and so does a run naming paths (not ``-m fuzz``). Child pytest runs of one
cheap fuzz test (SIGINT at its default, as the suite's other child runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.signals_default import default_sigint

ROOT = Path(__file__).resolve().parents[1]
ONE = "tests/fuzz/test_quality.py::test_fuzzer_finds_planted_bug[kv-leak-spec-tail]"


def _pytest(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300, preexec_fn=default_sigint)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


class _Plugins:
    def has_plugin(self, name: str) -> bool:
        return name == "xdist"


def _workers(*paths: str, mark: str = "", n: int | None = None) -> int | None:
    """What the suite's ``pytest_cmdline_main`` asks xdist for on ``pytest [-m MARK] [-n N] PATHS``
    (``None``: one process), on a machine of two cores or more, in this process."""
    from types import SimpleNamespace

    from tests import conftest

    opt = SimpleNamespace(markexpr=mark, file_or_dir=list(paths), numprocesses=n, collectonly=False)
    conftest.pytest_cmdline_main(SimpleNamespace(option=opt, pluginmanager=_Plugins()))
    return opt.numprocesses


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: the fuzz suite stays in one process")
def test_the_fuzz_suite_runs_on_two_cores_unless_told_otherwise() -> None:
    assert "2 workers [1 item]" in _pytest("-m", "fuzz", ONE)  # end to end, through xdist
    assert _workers(ONE, mark="fuzz") == 2 and _workers(mark="fuzz") == 2
    assert _workers(ONE, mark="fuzz", n=0) == 0
    assert _workers(ONE) is None  # not -m fuzz, a path named: one process


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: the suite stays in one process")
def test_the_whole_suite_runs_on_two_cores_unless_told_otherwise() -> None:
    """No path named (the README's ``pytest``, or a tier by marker): two workers; ``-n 0``: one; ``-n 3``:
    as asked. (End to end through xdist: the fuzz suite's test above.)"""
    assert _workers() == 2 and _workers(mark="not fuzz and not slow") == 2 and _workers(mark="slow") == 2
    assert _workers(n=0) == 0 and _workers(mark="not fuzz and not slow", n=0) == 0 and _workers(n=3) == 3
    assert _workers("tests/test_x.py") is None and _workers("-q") == 2  # an option is not a path
