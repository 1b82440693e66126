"""Hypothesis settings profiles for the fuzzer: ``dev``, ``ci`` and ``deep``.

- ``dev``: a quick local run; failures are stored in the shared example database so the
  next run (or another xdist worker, or HypoFuzz) replays them first.
- ``ci``: derandomized (the seed is derived from the test itself), no database: the same
  examples on every CI run, so a pass or a failure never flickers. Sized so the whole
  ``pytest -m fuzz`` suite stays within a few minutes on 2 cores.
- ``deep``: long runs (nightly, or before a release), shared database.

Every profile sets ``derandomize`` and ``database`` itself: Hypothesis's own default profile differs
on a CI machine (``$CI`` set: derandomized, no database), and a profile that inherited it would run
``dev`` and ``deep`` derandomized there, the same examples on every run.

The database folder is ``$SPECSTATE_HYPOTHESIS_DB`` (default ``.hypothesis/specstate``),
one ``DirectoryBasedExampleDatabase`` that pytest-xdist workers and HypoFuzz share.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from specstate.errors import UnknownName

__all__ = ["PROFILES", "register_profiles", "profile_settings", "example_database", "DEFAULT_PROFILE"]

DEFAULT_PROFILE = "dev"
#: ``ci`` leaves shrinking to ``minimize.py`` (delta debugging is ~50x faster on these traces)
_NO_SHRINK = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target]
_QUIET_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def example_database() -> DirectoryBasedExampleDatabase:
    return DirectoryBasedExampleDatabase(os.environ.get("SPECSTATE_HYPOTHESIS_DB", ".hypothesis/specstate"))


def _profiles() -> dict[str, settings]:
    common: dict[str, Any] = dict(deadline=None, suppress_health_check=_QUIET_CHECKS, print_blob=False)
    return {
        "dev": settings(max_examples=120, stateful_step_count=40, derandomize=False,
                        database=example_database(), **common),
        "ci": settings(max_examples=400, stateful_step_count=50, derandomize=True, database=None,
                       phases=_NO_SHRINK, **common),
        "deep": settings(max_examples=5000, stateful_step_count=80, derandomize=False,
                         database=example_database(), **common),
    }


PROFILES: tuple[str, ...] = ("dev", "ci", "deep")


def register_profiles() -> None:
    """Register ``specstate-dev``, ``specstate-ci``, ``specstate-deep`` and the bare names."""
    for name, s in _profiles().items():
        settings.register_profile(name, s)
        settings.register_profile(f"specstate-{name}", s)


def profile_settings(name: str) -> settings:
    """The settings of profile ``name``."""
    table = _profiles()
    if name not in table:
        raise UnknownName(f"Expected a profile from {sorted(table)} but got {name!r}")
    return table[name]
