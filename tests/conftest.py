"""Shared test setup: tests are sorted by cost.

- ``tests/test_*.py``            fast, CPU, no network (except ``sglang_source``-marked ones)
- ``tests/fuzz/``                ``-m fuzz``: Hypothesis fuzzing; profile via ``HYPOTHESIS_PROFILE``
- ``tests/gpu/``                 ``-m gpu``: the real SGLang worker; skips without CUDA + sglang
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("SPECSTATE_FAILURE_DIR", str(ROOT / ".pytest-failures"))


def pytest_configure(config) -> None:  # noqa: ANN001
    """Name the missing dependency and the set-up command instead of an import traceback."""
    import importlib.util

    import pytest

    missing = [m for m in ("torch", "hypothesis", "networkx") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.exit(f"specstate's tests need {', '.join(missing)} in this Python ({sys.executable}); set up with: "
                    "python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 -e '.[test]', "
                    "then run .venv/bin/python -m pytest", returncode=4)


def pytest_addoption(parser) -> None:  # noqa: ANN001
    parser.addoption("--specstate-profile", choices=("dev", "ci", "deep"), default=None,
                     help="Hypothesis profile for the fuzz tests (default: $HYPOTHESIS_PROFILE, else ci)")
