"""Fuzz-test setup: Hypothesis profiles ``dev``, ``ci``, ``deep`` (``specstate/fuzz/profiles.py``).

The profile comes from ``--specstate-profile`` (registered in ``tests/conftest.py``, so
``pytest -m fuzz --specstate-profile deep`` works from the repository root), else
from ``$HYPOTHESIS_PROFILE``, else ``ci`` (derandomized: the same examples every run).
Every failure is written as a JSON trace to ``$SPECSTATE_FAILURE_DIR``.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from specstate.fuzz.profiles import PROFILES, profile_settings, register_profiles

register_profiles()
if os.environ.get("HYPOTHESIS_PROFILE", "").removeprefix("specstate-") in PROFILES:
    # for test classes that read the global profile (HypoFuzz targets); our own tests pass
    # the chosen settings explicitly through the ``fuzz_settings`` fixture
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])


def _profile_name(config: pytest.Config) -> str:
    try:
        chosen = config.getoption("--specstate-profile")
    except ValueError:  # this conftest was not loaded at start-up: no such option
        chosen = None
    name = chosen or os.environ.get("HYPOTHESIS_PROFILE") or "ci"
    return name.removeprefix("specstate-")


@pytest.fixture(scope="session")
def fuzz_profile(pytestconfig: pytest.Config) -> str:
    return _profile_name(pytestconfig)


@pytest.fixture(scope="session")
def fuzz_settings(fuzz_profile: str) -> settings:
    return profile_settings(fuzz_profile)
