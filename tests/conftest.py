"""Shared test setup: tests are sorted by cost.

- ``tests/test_*.py``            fast, CPU, no network (except ``sglang_source``-marked ones)
- ``tests/fuzz/``                ``-m fuzz``: Hypothesis fuzzing; profile via ``--specstate-profile``
                                 or ``HYPOTHESIS_PROFILE`` (also the ``fuzz``-marked oracle, v0.5.23 and
                                 mutation-study modules in ``tests/``)
- ``-m slow``                    end-to-end acceptance that is not fuzzing: ``test_wheel.py`` (the built
                                 wheel in a fresh venv), ``test_tutorial.py`` (docs/tutorial.md as written),
                                 ``test_vllm_oracle.py`` (vLLM's scheduler, fetched on first use); and the rest
                                 of the sweeps over every variant or recording whose representatives run
                                 in the fast tier (``-m "not fuzz and not slow"``: the goal is 5 minutes on
                                 two cores, met by 3-4% (issue 38); ``python -m benchmarks.fast_tier``): the
                                 reduction's checks per variant, the conformance of every 0.5.12 recording,
                                 the thousand bad inputs (300 run fast), the GPU scripts' whole rehearsals,
                                 and a few end-to-end checks whose claim the fast tier has no smaller check
                                 of (docs/performance.md, "Fifth round" and "Sixth round"; how xdist schedules them: "Seventh round")
- ``tests/gpu/``                 ``-m gpu``: the real SGLang worker; skips without CUDA + sglang

Markers ``fuzz``/``gpu``, ``--specstate-profile``, ``--specstate-variant`` and the fixtures
(``specstate_settings``, ``specstate_fuzz``, ...) come from specstate's own pytest plugin
(``specstate/_pytest_plugin.py``), the one users get with ``pip install specstate``; ``slow`` is
this repository's (``pyproject.toml``).

Collecting imports no torch (``tests/test_startup.py``): a test module imports torch, or a module
that imports it at import (the integration recorder), inside its tests or fixtures.
"""

from __future__ import annotations

import gc
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("SPECSTATE_FAILURE_DIR", str(ROOT / ".pytest-failures"))


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which turns -n into workers
def pytest_cmdline_main(config) -> None:  # noqa: ANN001
    """The suite, or a tier of it, runs on two cores (pytest-xdist's ``-n 2``, where it is
    installed and the machine has two): a plain ``pytest`` (the README's command, which ``.ci/run``
    calls), ``pytest -m "not fuzz and not slow"``, ``pytest -m fuzz`` (with or without paths).
    One process took about 29 minutes on CI's two cores (stop 35), over issue 38's 20; the fuzz
    suite alone took twice the 5 minutes it should (issue 29; docs/performance.md). A run naming
    paths (``pytest tests/test_x.py``) and not ``-m fuzz`` stays one process, as does ``-n N``
    (``-n 0``: one process) or ``-p no:xdist``."""
    opt = config.option
    fuzz = getattr(opt, "markexpr", "").strip() == "fuzz"
    whole = not [a for a in getattr(opt, "file_or_dir", None) or [] if not a.startswith("-")]
    if ((fuzz or whole) and getattr(opt, "numprocesses", 0) is None
            and config.pluginmanager.has_plugin("xdist") and (os.cpu_count() or 1) >= 2
            and not getattr(opt, "collectonly", False) and not hasattr(config, "workerinput")):
        opt.numprocesses = 2
    if getattr(opt, "numprocesses", None) and getattr(opt, "dist", "no") == "no":
        opt.specstate_units = True  # pytest_xdist_make_scheduler: one unit per test, or per shared process or fixture


#: the modules whose tests share a process per sglang release: the session's oracle process
#: (``oracle_of``, below; ``pytest_collection_modifyitems`` fails the collection if a test elsewhere
#: uses it) and test_worker_oracle's module-scoped worker oracle; each with its group's prefix
GROUPED_MODULES = {"tests/test_oracle.py": "sglang-oracle", "tests/test_oracle_strict.py": "sglang-oracle",
                   "tests/test_v2_static.py": "sglang-oracle", "tests/test_oracle_fuzz.py": "sglang-oracle",
                   "tests/test_worker_oracle.py": "sglang-worker-oracle"}
_RELEASE = re.compile(r"(?<![\d.])(0\.5\.\d+)(?![\d.])")


def oracle_group(nodeid: str) -> str | None:
    """The scheduling group of a test: ``<prefix>-<release>`` for a test of ``GROUPED_MODULES``
    whose parameters name a release, else ``None``."""
    path, _, rest = nodeid.partition("::")
    prefix = GROUPED_MODULES.get(path)
    m = _RELEASE.search(rest.partition("[")[2]) if prefix else None
    return f"{prefix}-{m.group(1)}" if m else None


#: tests that share a module-scoped fixture or memo too costly to build in both workers (its setup under
#: ``-n 0``: test_shape_rules' batch of commands 8.3 s, test_graph's graphs 2.3 s, test_v17_pressure's
#: recordings 2.1 s, test_v2_integration's 1.5 s; test_wheel's built and installed wheel, about 40 s;
#: test_oracle_multirank's two rank processes, about 7 CPU s to start (its tests ran in both workers
#: and each started them); test_paged_conformance's model recording, test_check's ``check`` run,
#: test_oracle_flags' drawn configs per release, a memo two of its tests read, about 1 CPU s each;
#: test_import_structure's parsed package, about 1.4 s, which five tests read):
#: one scheduling unit each, a whole module or one test function with its parameters
SHARED_FIXTURE_UNITS = ("tests/test_wheel.py", "tests/test_graph.py", "tests/test_v17_pressure.py",
                        "tests/test_v2_integration.py", "tests/test_oracle_multirank.py",
                        "tests/test_paged_conformance.py", "tests/test_check.py", "tests/test_oracle_flags.py",
                        "tests/test_import_structure.py",
                        "tests/test_shape_rules.py::test_the_models_commands_on_a_correct_variant_never_import_torch")


def scheduling_unit(nodeid: str) -> str:
    """What xdist hands a worker as one piece under the suite's ``-n 2``: a release's oracle tests
    (``oracle_group``), a unit of ``SHARED_FIXTURE_UNITS``, else the test alone."""
    group = oracle_group(nodeid)
    if group is not None:
        return group
    for unit in SHARED_FIXTURE_UNITS:
        if nodeid.startswith(unit + ("[" if "::" in unit else "::")) or nodeid == unit:
            return unit
    return nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):  # noqa: ANN001, ANN201
    """Under the ``-n 2`` chosen above: xdist's ``loadscope`` scheduler with each test a unit of its
    own (as ``load`` balances them), except that the oracle tests of one release are one unit (``oracle_group``), run by one
    worker, so the release's oracle process is started once per session (or module), not once per
    worker (its imports cost 5-12 CPU s: torch's and upstream's scheduler's), and so are the tests
    that share a costly module-scoped fixture (``SHARED_FIXTURE_UNITS``). Units with more tests go
    first (xdist's ``loadscope`` order), so no large unit is left for the end. xdist's own ``loadgroup``
    cannot do it here: it renames the test ids through an attribute pytest 9.2 no longer reads.
    An explicit ``--dist`` is left to xdist."""
    if not getattr(config.option, "specstate_units", False):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SchedulingUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_unit(nodeid)

    return SchedulingUnits(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:  # noqa: ANN001
    """A test outside ``GROUPED_MODULES`` that uses ``oracle_of`` is a collection error (its
    release's process would be started again on the other worker)."""
    stray = sorted({item.nodeid.partition("::")[0] for item in items
                    if "oracle_of" in getattr(item, "fixturenames", ())} - set(GROUPED_MODULES))
    if stray:
        raise pytest.UsageError(f"tests/conftest.py: add {', '.join(stray)} to GROUPED_MODULES (its tests use oracle_of)")


def pytest_configure(config) -> None:  # noqa: ANN001
    """Name the missing dependency and the set-up command instead of an import traceback; set the
    collector's thresholds (``COLLECTOR_THRESHOLDS``); keep each worker to its core."""
    import importlib.util

    import pytest

    setup = ("python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 -e '.[test]', "
             "then run .venv/bin/python -m pytest")
    missing = [m for m in ("torch", "hypothesis", "networkx", "tqdm") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.exit(f"specstate's tests need {', '.join(missing)} in this Python ({sys.executable}); set up with: "
                    f"{setup}", returncode=4)
    _keep_hypothesis_unrewritten(config)
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
    _one_core_per_worker(config)
    if not any(config.pluginmanager.has_plugin(n) for n in ("specstate", "specstate._pytest_plugin")):
        pytest.exit("specstate's pytest plugin is not loaded (an install from before its pytest11 entry point, "
                    f"or PYTEST_DISABLE_PLUGIN_AUTOLOAD; then add -p specstate._pytest_plugin); set up with: {setup}",
                    returncode=4)



def _one_core_per_worker(config) -> None:  # noqa: ANN001
    """An xdist worker of a run with a worker per core (the suite's ``-n 2`` on two cores) keeps to
    one core, as do the processes it starts. A search's default ``--jobs`` is the cores it may use
    (``fuzz.explore_parallel.default_jobs``), so a command a test runs with the default no longer forks
    two search processes onto cores the other worker keeps busy: ``tests/test_graph.py`` alone took
    about 37 CPU s with its forks and 26 on one core (docs/performance.md, "Ninth round"). Tests of
    the parallel searches name ``--jobs 2`` / ``jobs=2`` and still fork (onto the one core)."""
    info = getattr(config, "workerinput", None)
    if info is None or not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) > 1 and int(info["workercount"]) >= len(cores):
        os.sched_setaffinity(0, {cores[int(str(info["workerid"]).removeprefix("gw")) % len(cores)]})


#: the test process's collector thresholds (Python's default: 700, 10, 10); see ``pytest_runtest_setup``
COLLECTOR_THRESHOLDS = (20_000, 10, 10)
_last_module: list[str] = [""]


@pytest.hookimpl(tryfirst=True)  # before the module's fixtures are set up
def pytest_runtest_setup(item) -> None:  # noqa: ANN001
    """When a test's module differs from the previous test's: ``gc.collect()``, then ``gc.freeze()``
    what survived, so the collector's passes in this module walk only what this module makes.

    A worker keeps what earlier modules memoised (explored state sets, parsed recordings, sglang's
    trees) for the whole session, and Python 3.11's full collections walked all of it again and
    again: 62 of about 600 worker-seconds of the fast tier went to the collector, 49 of them to the
    oldest generation (docs/performance.md, "Ninth round"). Collecting first keeps the previous
    module's garbage out of the frozen heap (``specstate/heap.py`` says why freezing without it cost
    memory); a cycle among frozen objects that dies later is never collected (peak memory did not
    grow: the same page). ``COLLECTOR_THRESHOLDS`` (set in ``pytest_configure``) makes the youngest collections
    rarer. A search's own ``heap.frozen_heap`` finds the heap frozen and leaves it so."""
    module = item.nodeid.partition("::")[0]
    if module != _last_module[0]:
        _last_module[0] = module
        gc.collect()
        gc.freeze()


@pytest.fixture(scope="session")
def oracle_of() -> Iterator[Callable[[str], Any]]:
    """``oracle_of(release)``: one oracle process of that sglang release for the whole session
    (``specstate.integration.oracle_differential.OracleProcess``: its imports, torch's and upstream's scheduler's,
    are paid once; every workload runs on a fresh upstream ``Scheduler``), started on first use and
    started again if it ended. A release whose wheel is neither cached nor fetchable skips the test
    with one line; a cache that fails a check fails it. Under xdist each worker has its own."""
    procs: dict[str, Any] = {}

    def get(release: str) -> Any:
        from specstate.integration.oracle_differential import OracleProcess
        from specstate.oracle.wheels import OracleOffline, cache_dir, unpacked

        proc = procs.get(release)
        if proc is not None and proc.proc.poll() is None:
            return proc
        if proc is not None:
            proc.close()
        try:
            unpacked(release)
        except OracleOffline:
            pytest.skip(f"sglang {release}: no wheel in {cache_dir() / 'wheels'} and no package registry to fetch it")
        procs[release] = OracleProcess(release)
        return procs[release]

    yield get
    for proc in procs.values():
        proc.close()


def _keep_hypothesis_unrewritten(config) -> None:  # noqa: ANN001
    """Hypothesis's own modules are not assertion-rewritten (as specstate's plugin does for
    specstate's: ``specstate/_pytest_plugin.py``'s ``pytest_addhooks``).

    pytest rewrites every module of a distribution with a ``pytest11`` entry point; Hypothesis
    has one, so its ~75 modules, imported when the first ``@given`` test module is collected, were
    parsed and rewritten on every collection where no bytecode is cached (about 1 s of a cold
    ``pytest --collect-only``). Its asserts are its own internal checks, not this suite's test
    assertions. Internal names, looked up defensively: with another pytest nothing changes."""
    hook = getattr(config.pluginmanager, "rewrite_hook", None)
    marked = getattr(hook, "_must_rewrite", None)
    if isinstance(marked, set) and "hypothesis" in marked:
        marked.discard("hypothesis")
        cache = getattr(hook, "_marked_for_rewrite_cache", None)
        if isinstance(cache, dict):
            cache.clear()
