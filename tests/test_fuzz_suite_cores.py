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


def test_tests_that_share_a_costly_process_or_fixture_are_one_scheduling_unit() -> None:
    """Under the ``-n 2`` the suite chooses, xdist schedules each test on its own except the tests
    that share a process per release (``GROUPED_MODULES``): one unit per release, so one worker
    starts that release's process; a run that names ``--dist`` itself keeps xdist's scheduler."""
    from types import SimpleNamespace

    from tests import conftest

    opt = SimpleNamespace(markexpr="", file_or_dir=[], numprocesses=None, collectonly=False)
    conftest.pytest_cmdline_main(SimpleNamespace(option=opt, pluginmanager=_Plugins()))
    assert opt.numprocesses == 2 and opt.specstate_units  # type: ignore[attr-defined]
    config = SimpleNamespace(option=opt, getvalue=lambda name: ["popen", "popen"] if name == "tx" else None)
    sched = conftest.pytest_xdist_make_scheduler(config, None)
    split = sched._split_scope
    assert split("tests/test_oracle.py::test_hand_workloads_conform[0.5.12-mixed]") == "sglang-oracle-0.5.12"
    assert split("tests/test_oracle_fuzz.py::test_oracle_and_model_agree[0.5.12]") == "sglang-oracle-0.5.12"
    assert split("tests/test_worker_oracle.py::test_the_seed_sweep_agrees[0.5.9-naive-threshold]") \
        == "sglang-worker-oracle-0.5.9"
    for ungrouped in ("tests/test_oracle.py::test_every_stub_says_why_it_is_safe",  # no release
                      "tests/test_prove.py::test_x[0.5.12]",  # not a grouped module
                      "tests/test_oracle.py::test_x[10.5.12]"):  # not a release
        assert split(ungrouped) == ungrouped
    shared = "tests/test_shape_rules.py::test_the_models_commands_on_a_correct_variant_never_import_torch"
    assert split(f"{shared}[run]") == split(f"{shared}[graph --out g.svg]") == shared  # one fixture, built once
    assert split("tests/test_wheel.py::test_every_cli_command_runs_outside_the_checkout") == "tests/test_wheel.py"
    assert split("tests/test_oracle_multirank.py::test_eos_while_a_rank_waits") == "tests/test_oracle_multirank.py"
    assert split("tests/test_shape_rules.py::test_other") == "tests/test_shape_rules.py::test_other"
    assert split("tests/test_graph_parallel.py::test_x") == "tests/test_graph_parallel.py::test_x"  # not test_graph.py
    mine = SimpleNamespace(markexpr="", file_or_dir=[], numprocesses=2, collectonly=False, dist="load")
    conftest.pytest_cmdline_main(SimpleNamespace(option=mine, pluginmanager=_Plugins()))
    assert conftest.pytest_xdist_make_scheduler(SimpleNamespace(option=mine), None) is None


def test_a_new_module_collects_the_last_ones_garbage_and_freezes_the_rest() -> None:
    """``tests/conftest.py::pytest_runtest_setup``: a test of the same module freezes nothing; the first
    test of another module collects the garbage (a cycle nothing holds) and freezes what lives (out of
    ``gc.get_objects()``, which lists the collector's generations); the thresholds are the suite's."""
    import gc
    import weakref
    from types import SimpleNamespace

    from tests import conftest

    class Cycle:
        me: object

    kept, garbage = Cycle(), Cycle()
    kept.me, garbage.me = kept, garbage
    gone = weakref.ref(garbage)
    del garbage
    here = conftest._last_module[0]
    conftest.pytest_runtest_setup(SimpleNamespace(nodeid=f"{here}::another_test"))
    assert any(o is kept for o in gc.get_objects())  # not frozen (the frozen count itself falls as frozen objects die)
    try:
        conftest.pytest_runtest_setup(SimpleNamespace(nodeid="tests/test_elsewhere.py::a_test"))
        assert gone() is None
        assert not any(o is kept for o in gc.get_objects())
    finally:
        conftest._last_module[0] = here
    assert gc.get_threshold() == conftest.COLLECTOR_THRESHOLDS


def test_a_worker_of_a_run_with_a_worker_per_core_keeps_to_one_core() -> None:
    """``tests/conftest.py::_one_core_per_worker``: as many workers as cores, each keeps to its own
    core (``gw1``: the second); fewer workers, or no xdist, leave the process on every core. In a
    forked child given every core first (this test's worker may itself keep to one)."""
    from types import SimpleNamespace

    from tests import conftest

    if not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2:
        pytest.skip("one core, or no sched_setaffinity: nothing to keep to")
    every = set(range(os.cpu_count() or 1))

    def check() -> int:
        os.sched_setaffinity(0, every)
        conftest._one_core_per_worker(SimpleNamespace(workerinput={"workerid": "gw1", "workercount": len(every)}))
        if os.sched_getaffinity(0) != {1}:
            return 1
        for config in (SimpleNamespace(workerinput={"workerid": "gw1", "workercount": len(every) - 1}), SimpleNamespace()):
            os.sched_setaffinity(0, every)
            conftest._one_core_per_worker(config)
            if os.sched_getaffinity(0) != every:
                return 2
        return 0

    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            code = check()
        finally:
            os._exit(code)
    assert os.waitpid(pid, 0)[1] >> 8 == 0
