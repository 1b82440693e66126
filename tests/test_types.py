"""The type checker is clean: ``python -m mypy`` over ``specstate/`` reports no error.

The configuration is ``[tool.mypy]`` in ``pyproject.toml`` (not strict; ``warn_unused_ignores``, so a
``# type: ignore`` that silences nothing is an error too; the modules without type information are
named there). A new error fails this test with mypy's own lines. mypy is in the ``test`` extra; its
cache (``.mypy_cache``, gitignored) makes a second run a few seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_reports_no_error() -> None:
    pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # this tree's specstate, not an installed one
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    out = proc.stdout + proc.stderr
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert proc.returncode == 0 and not errors, f"mypy: {len(errors)} error(s)\n{out}"
    assert "Success: no issues found" in out, out  # it checked something (the packages of [tool.mypy])
