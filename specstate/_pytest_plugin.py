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

Wrong input is a usage error, never a traceback: a ``--specstate-variant`` that is not a
name, does not import or is not a variant stops pytest at start-up (``pytest.UsageError``,
exit 4, one line). A user's variant module is imported in a child process first, so one
that ends the interpreter at import (``os._exit(0)``) is reported instead of ending pytest
with exit 0 (its import runs twice: keep import-time side effects out of variant modules).
A fixture called with a wrong argument, or a variant whose own code raises while the model
runs it, fails that test with specstate's one line and no frames.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pytest

if TYPE_CHECKING:
    from hypothesis import settings

    from specstate.testing import CheckResult

PROFILES = ("dev", "ci", "deep")
#: what ``specstate_fuzz`` passes on to ``specstate.testing.fuzz`` (``quiet`` is the plugin's)
FUZZ_OPTIONS = ("profile", "max_examples", "seed", "failures", "check_witnesses")
SCENARIO_OPTIONS = ("failures",)
#: the keywords ``specstate_check`` passes to ``specstate.testing.check``
CHECK_OPTIONS = ("engine", "config_file", "budget_s", "seed", "parts", "failures")
_LOADED = "specstate: variant loaded"
_BUILTIN_TESTS = Path(__file__).with_name("_pytest_builtin.py")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """At registration: the library's own modules are not assertion-rewritten.

    pytest rewrites the asserts of every module of a ``pytest11`` plugin's package (an editable
    install: the package owning the entry point, ``config._mark_plugins_for_rewrite``); for
    specstate that is the whole model, re-parsed and rewritten on every collection where no
    bytecode is cached (about half of ``pytest --collect-only``'s time). The model's asserts are
    not test assertions; the plugin's own built-in test module stays rewritten. Internal
    names, looked up defensively: with another pytest nothing changes.
    """
    hook = getattr(pluginmanager, "rewrite_hook", None)
    marked = getattr(hook, "_must_rewrite", None)
    if isinstance(marked, set) and "specstate" in marked:
        marked.discard("specstate")
        marked.add("specstate._pytest_builtin")
        cache = getattr(hook, "_marked_for_rewrite_cache", None)
        if isinstance(cache, dict):
            cache.clear()


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
    config.addinivalue_line("markers", "gpu: needs CUDA and the sglang release under test (skips with a reason otherwise)")
    env = os.environ.get("HYPOTHESIS_PROFILE", "")
    if env.removeprefix("specstate-") in PROFILES and env.startswith("specstate-"):
        from hypothesis import settings as hsettings

        from specstate.fuzz.profiles import register_profiles

        register_profiles()
        hsettings.load_profile(env)
    for variant in config.getoption("specstate_variants") or ():
        _check_variant_option(variant)


_CHILD = """import sys
from specstate.errors import SpecStateError
from specstate.model import get_variant
try:
    get_variant(sys.argv[1])
except SpecStateError as e:
    print("specstate: error: " + " ".join(str(e).split()), flush=True)
    sys.exit(2)
print(%r, flush=True)
""" % _LOADED


def _child_import(spec: str) -> str | None:
    """Load ``spec`` in a child Python with this process's ``sys.path``: ``None`` if it loaded,
    else why not, in one line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        child = subprocess.run([sys.executable, "-c", _CHILD, spec], capture_output=True, text=True, env=env,
                               timeout=300)
    except subprocess.TimeoutExpired:
        return f"importing module {spec.partition(':')[0]!r} did not end within 300 s"
    lines = child.stdout.splitlines()
    if _LOADED in lines:
        return None
    said = [ln.removeprefix("specstate: error: ") for ln in lines if ln.startswith("specstate: error: ")]
    if said:
        return said[-1]
    if child.returncode == 0:
        return (f"importing module {spec.partition(':')[0]!r} ended the Python process with exit status 0 (os._exit?) "
                f"before the variant was loaded")
    last = (child.stderr.strip().splitlines() or ["(no output)"])[-1][:200]
    return f"loading it in a child Python ended with exit status {child.returncode}: {last}"


def _check_variant_option(spec: object) -> None:
    """``--specstate-variant`` loads, or pytest stops with one usage line (module doc)."""
    from specstate.errors import InternalError, SpecStateError
    from specstate.model import get_variant

    problem = _child_import(spec) if isinstance(spec, str) and ":" in spec else None
    if problem is not None:
        raise pytest.UsageError(f"--specstate-variant {spec!r}: {problem}")
    try:
        get_variant(spec)
    except InternalError:
        raise
    except SpecStateError as e:
        raise pytest.UsageError(f"--specstate-variant {spec!r}: {' '.join(str(e).split())}") from None


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


def _checked_call(fixture: str, run: Callable[[], "CheckResult"], expect_ok: object) -> "CheckResult":
    """``run()``; a wrong argument or a variant's own error fails the test with one line, no frames."""
    from specstate.errors import InternalError, SpecStateError
    from specstate.schema._arguments import boolean

    problem = None
    try:
        boolean("expect_ok", expect_ok)
        result = run()
    except InternalError:
        raise
    except SpecStateError as e:
        problem = f"{fixture}: {' '.join(str(e).split())}"
    if problem is not None:  # outside the ``except``: no chained exception to print
        pytest.fail(problem, pytrace=False)
    return _failing(result, bool(expect_ok))


@pytest.fixture
def specstate_fuzz(specstate_profile: str) -> Callable[..., "CheckResult"]:
    """``specstate_fuzz(variant, expect_ok=True, **options)``: ``specstate.testing.fuzz`` under
    the session's profile (``options``: ``FUZZ_OPTIONS``); fails the test with the report and
    repro command unless ``ok``."""
    from specstate.schema._arguments import known_options
    from specstate.testing import fuzz

    def check(variant: str, *, expect_ok: bool = True, **options: Any) -> "CheckResult":
        def run() -> "CheckResult":
            known_options("specstate_fuzz", options, FUZZ_OPTIONS)
            options.setdefault("profile", specstate_profile)
            return fuzz(variant, quiet=True, **options)

        return _checked_call("specstate_fuzz", run, expect_ok)

    return check


@pytest.fixture
def specstate_scenario() -> Callable[..., "CheckResult"]:
    """``specstate_scenario(variant, scenario="seed-sweep", seed=0, expect_ok=True, failures=None)``:
    ``specstate.testing.run_scenario``; fails the test with the report unless ``ok``."""
    from specstate.schema._arguments import known_options
    from specstate.testing import run_scenario

    def check(variant: str, scenario: str = "seed-sweep", *, seed: int = 0, expect_ok: bool = True,
              **options: Any) -> "CheckResult":
        def run() -> "CheckResult":
            known_options("specstate_scenario", options, SCENARIO_OPTIONS)
            return run_scenario(variant, scenario, seed=seed, quiet=True, **options)

        return _checked_call("specstate_scenario", run, expect_ok)

    return check


@pytest.fixture
def specstate_check() -> Callable[..., "CheckResult"]:
    """``specstate_check(flags, variant=None, expect_ok=True, **options)``: ``specstate.testing.check``
    on your launch flags; fails the test with the verdict and the repro command unless ``ok``; a
    wrong argument (``expect_ok='no'``, ``budget_s=0``, an unknown option) fails it with one line."""
    from specstate.schema._arguments import known_options
    from specstate.testing import check as check_launch

    def check(flags: Any, *, variant: str | None = None, expect_ok: bool = True, **options: Any) -> "CheckResult":
        def run() -> "CheckResult":
            known_options("specstate_check", options, CHECK_OPTIONS)
            return check_launch(flags, variant=variant, quiet=True, **options)

        return _checked_call("specstate_check", run, expect_ok)

    return check
