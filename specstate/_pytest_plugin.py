"""specstate's pytest plugin: fuzz your own variant from your own test suite.

Registered through the ``pytest11`` entry point, so it is active wherever specstate is
installed (``-p no:specstate`` turns it off). It imports nothing heavy until a fixture runs.

- markers ``fuzz`` (Hypothesis fuzzing, slow) and ``gpu`` (needs CUDA and sglang);
- ``--specstate-variant MODULE:ATTR`` (repeatable): the variants to check. Tests that take the
  ``specstate_variant`` fixture run once per variant; when no collected test takes it, the
  plugin adds its own ``fuzz`` test (``_pytest_builtin.py``), so a repository holding only a
  variant module runs ``pytest -m fuzz --specstate-variant mypatch:Variant``;
- ``--specstate-profile dev|ci|deep``: the Hypothesis profile (default ``$HYPOTHESIS_PROFILE``,
  else ``ci``: derandomized, the same examples every run);
- fixtures ``specstate_fuzz`` and ``specstate_scenario``: callables that run a check of
  ``specstate.testing`` and fail the test with the violation report and the one command that
  reproduces it; ``specstate_profile`` and ``specstate_settings`` for tests that drive
  Hypothesis themselves.

``HYPOTHESIS_PROFILE=specstate-dev`` (or ``-ci``, ``-deep``) also loads that profile
globally, for Hypothesis tests outside these fixtures (HypoFuzz targets).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pytest

if TYPE_CHECKING:
    from hypothesis import settings

    from specstate.testing import CheckResult

PROFILES = ("dev", "ci", "deep")
_BUILTIN_TESTS = Path(__file__).with_name("_pytest_builtin.py")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("specstate", "specstate: check a speculative-decoding variant")
    group.addoption("--specstate-variant", action="append", default=[], metavar="MODULE:ATTR",
                    dest="specstate_variants",
                    help="a variant to check (a built-in name or package.module:Object); repeatable")
    group.addoption("--specstate-profile", choices=PROFILES, default=None, dest="specstate_profile",
                    help="Hypothesis profile for fuzzing (default: $HYPOTHESIS_PROFILE, else ci)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fuzz: Hypothesis fuzzing of threshold crossings (slow; "
                                       "--specstate-profile dev|ci|deep)")
    config.addinivalue_line("markers", "gpu: needs CUDA and sglang==0.5.12 (skips with a reason otherwise)")
    env = os.environ.get("HYPOTHESIS_PROFILE", "")
    if env.removeprefix("specstate-") in PROFILES and env.startswith("specstate-"):
        from hypothesis import settings as hsettings

        from specstate.fuzz.profiles import register_profiles

        register_profiles()
        hsettings.load_profile(env)


def profile_name(config: pytest.Config) -> str:
    """``--specstate-profile``, else ``$HYPOTHESIS_PROFILE`` (bare or ``specstate-``), else ``ci``."""
    env = os.environ.get("HYPOTHESIS_PROFILE", "").removeprefix("specstate-")
    return config.getoption("specstate_profile") or (env if env in PROFILES else "ci")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "specstate_variant" not in metafunc.fixturenames:
        return
    variants = metafunc.config.getoption("specstate_variants")
    if variants:
        metafunc.parametrize("specstate_variant", variants, ids=[v.replace(":", "-") for v in variants])
    else:
        skip = pytest.mark.skip(reason="no --specstate-variant MODULE:ATTR given")
        metafunc.parametrize("specstate_variant", [pytest.param(None, marks=skip)], ids=["no-variant"])


@pytest.hookimpl(tryfirst=True)  # before ``-m`` / ``-k`` deselect
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("specstate_variants"):
        return
    if any("specstate_variant" in getattr(item, "fixturenames", ()) for item in items):
        return
    module = pytest.Module.from_parent(session, path=_BUILTIN_TESTS, nodeid="specstate")
    items.extend(i for i in module.collect() if isinstance(i, pytest.Item))


@pytest.fixture(scope="session")
def specstate_profile(pytestconfig: pytest.Config) -> str:
    """The Hypothesis profile name: dev, ci or deep."""
    return profile_name(pytestconfig)


@pytest.fixture(scope="session")
def specstate_settings(specstate_profile: str) -> "settings":
    """The Hypothesis ``settings`` of the chosen profile."""
    from specstate.fuzz.profiles import profile_settings

    return profile_settings(specstate_profile)


def _failing(result: "CheckResult", expect_ok: bool) -> "CheckResult":
    if expect_ok and not result.ok:
        pytest.fail(result.report, pytrace=False)
    return result


@pytest.fixture
def specstate_fuzz(specstate_profile: str) -> Callable[..., "CheckResult"]:
    """``specstate_fuzz(variant, expect_ok=True, **options)``: ``specstate.testing.fuzz`` under
    the session's profile; fails the test with the report and repro command unless ``ok``."""
    from specstate.testing import fuzz

    def check(variant: str, *, expect_ok: bool = True, **options: Any) -> "CheckResult":
        options.setdefault("profile", specstate_profile)
        return _failing(fuzz(variant, quiet=True, **options), expect_ok)

    return check


@pytest.fixture
def specstate_scenario() -> Callable[..., "CheckResult"]:
    """``specstate_scenario(variant, scenario="seed-sweep", seed=0, expect_ok=True)``:
    ``specstate.testing.run_scenario``; fails the test with the report unless ``ok``."""
    from specstate.testing import run_scenario

    def check(variant: str, scenario: str = "seed-sweep", *, seed: int = 0, expect_ok: bool = True,
              **options: Any) -> "CheckResult":
        return _failing(run_scenario(variant, scenario, seed=seed, quiet=True, **options), expect_ok)

    return check


@pytest.fixture
def specstate_check() -> Callable[..., "CheckResult"]:
    """``specstate_check(flags, variant=None, expect_ok=True, **options)``: ``specstate.testing.check``
    on your launch flags; fails the test with the verdict and the repro command unless ``ok``."""
    from specstate.testing import check as check_launch

    def check(flags: Any, *, variant: str | None = None, expect_ok: bool = True, **options: Any) -> "CheckResult":
        return _failing(check_launch(flags, variant=variant, quiet=True, **options), expect_ok)

    return check
