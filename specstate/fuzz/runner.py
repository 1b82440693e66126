"""Run the state machine for one variant and turn its outcome into a report.

``fuzz_variant`` runs ``machine_for(variant)`` under a Hypothesis ``settings`` object and
catches the final (shrunk) :class:`~specstate.fuzz.machine.FuzzViolation`. A failure is then
minimised further (``minimize.py``), written as a JSON trace (atomically) to
``$SPECSTATE_FAILURE_DIR`` and reported with the one command that replays it. A run
without a violation checks the witnesses: a run that never reached a wanted witness did
not explore the switch, and fails saying which witnesses it missed.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.reporting import current_reporter, with_reporter
from hypothesis.stateful import run_state_machine_as_test

from specstate.check import RunResult
from specstate.errors import Interrupted, VariantFailure
from specstate.fuzz.machine import FuzzViolation, SpecMachine, UserCodeFailed, machine_for
from specstate.fuzz.stream import import_independent_draws
from specstate.fuzz.trace import Trace, reproduce_command, save_trace
from specstate.invariants import WITNESSES
from specstate.model import SpecConfig, get_variant

__all__ = ["FuzzReport", "fuzz_variant", "wanted_witnesses", "SWITCH_WITNESSES", "record_failure"]

#: witnesses that need a threshold (unreachable for a variant that never switches)
SWITCH_WITNESSES = frozenset({"crossed-up", "crossed-down", "spec-resumed", "all-finished-while-off", "retract-while-off"})


def wanted_witnesses(variant: str, config: SpecConfig | None = None) -> set[str]:
    """Every witness, less the switch witnesses when ``variant`` never switches (a variant of a
    family without adaptive speculation and without a threshold; an adaptive family's fuzz
    configs always have slots routed to steps 0)."""
    from specstate.model.families import get_family

    v = get_variant(variant)
    if get_family(v.family_name).adaptive:
        return set(WITNESSES)
    cfg = v.configure(config or SpecConfig())
    wanted = set(WITNESSES)
    return wanted - SWITCH_WITNESSES if cfg.disable_batch_threshold is None else wanted


@dataclass
class FuzzReport:
    variant: str
    elapsed_s: float
    witnesses: set[str]
    max_crossings: int
    result: RunResult | None = None  #: the shrunk failing run, if any
    config: SpecConfig | None = None  #: its config before the variant's changes
    first_violation_s: float | None = None  #: seconds from start to the first failing example
    trace_path: Path | None = None
    minimized: list = field(default_factory=list)  #: the minimised actions (if minimised)
    minimality: str = ""  #: the BFS verdict on the minimised trace

    @property
    def found(self) -> set[str]:
        return {v.invariant for v in self.result.violations} if self.result else set()

    def missing(self, wanted: set[str]) -> set[str]:
        return wanted - self.witnesses


def _pick(group: BaseExceptionGroup, prefer: str | None) -> FuzzViolation | None:  # type: ignore[name-defined]
    found = [e for e in group.exceptions if isinstance(e, FuzzViolation)]
    for e in found:
        if prefer is not None and e.result.first and prefer in {v.invariant for v in e.result.violations}:
            return e
    return found[0] if found else None


def _after_each_case(cls: type[SpecMachine], on_case: Callable[[], None]) -> None:
    """Call ``on_case`` after each test case's teardown (``cls`` is a fresh class per run)."""
    inner = cls.teardown

    def teardown(self: SpecMachine) -> None:
        inner(self)
        on_case()

    cls.teardown = teardown  # type: ignore[method-assign]


def _without_seed_hint(inner: Callable[[str], None]) -> Callable[[str], None]:
    """Hypothesis's reporter, less its "adding @seed(...) to this test" hint: there is no test
    to add it to; the trace file and ``specstate reproduce`` replay the failure instead."""

    def report(text: str) -> None:
        if not str(text).startswith("You can reproduce this failure by adding @seed("):
            inner(text)

    return report


def save_interrupted(result: RunResult, config: SpecConfig, variant: str, *, seed: int | None,
                     folder: Path | str | None, stage: str, out=sys.stderr) -> Path:  # noqa: ANN001
    """Write the failing run found so far when SIGINT / SIGTERM stops the fuzzer (``stage``:
    what was cut short), and say where it is."""
    notes = {"source": "hypothesis", "interrupted": stage, "minimised": False}
    trace = Trace(config=config, variant=variant, actions=list(result.actions),
                  violation=result.first.to_json() if result.first else None, seed=seed, notes=notes)
    path = save_trace(trace, folder)
    print(f"specstate: {variant}: interrupted during {stage}; the counterexample found so far: "
          f"{result.first.describe() if result.first else 'violation'}", file=out)
    print(f"  trace: {path} ({len(result.actions)} actions, not minimised)", file=out)
    print(f"  reproduce with: {reproduce_command(path, variant)}", file=out, flush=True)
    return path


def fuzz_variant(variant: str, settings: Settings, *, config_strategy: st.SearchStrategy[SpecConfig] | None = None,
                 seed: int | None = None, prefer: str | None = None, only: str | None = None,
                 on_case: Callable[[], None] | None = None, failures: Path | str | None = None,
                 announce: bool = False) -> FuzzReport:
    """Fuzz ``variant``. ``only``: an invariant; test cases that violate only others are
    discarded. ``prefer``: the invariant to report when several distinct failures shrink.
    ``on_case``: called after every test case (progress). On SIGINT / SIGTERM the shortest
    failing run found so far is written to ``failures`` before the interruption goes on;
    ``announce``: say on stderr when the first one is found. A variant whose own code fails
    ends the run there: a ``VariantFailure`` naming the user's frame, the action, the trace
    and the command that replays it."""
    cls = machine_for(variant, config_strategy=config_strategy, seed=seed, only_invariant=only, announce=announce)
    if on_case is not None:
        _after_each_case(cls, on_case)
    t0 = time.perf_counter()
    caught: FuzzViolation | None = None
    try:
        with import_independent_draws(), with_reporter(_without_seed_hint(current_reporter())):
            run_state_machine_as_test(cls, settings=settings)
    except FuzzViolation as e:
        caught = e
    except BaseExceptionGroup as g:  # several distinct invariants failed  # noqa: F821
        caught = _pick(g, prefer)
        if caught is None:
            raise
    except UserCodeFailed as e:
        raise _user_code_failed(e, variant, seed=seed, folder=failures) from None
    except (KeyboardInterrupt, Interrupted):
        best = cls.best  # type: ignore[attr-defined]
        if best is not None:
            save_interrupted(best[0], best[1], variant, seed=seed, folder=failures,
                             stage="shrinking" if cls.first_violation_at is not None else "generation")
        raise
    first = cls.first_violation_at - t0 if cls.first_violation_at is not None else None  # type: ignore[attr-defined]
    report = FuzzReport(variant, time.perf_counter() - t0, set(cls.reached), cls.max_crossings, first_violation_s=first)
    if caught is not None:
        report.result, report.config = caught.result, caught.config
    return report


def _user_code_failed(e: UserCodeFailed, variant: str, *, seed: int | None, folder: Path | str | None) -> VariantFailure:
    """The variant's own error, at its first occurrence, with the trace that replays it (the
    actions up to and including the one that failed; not shrunk: it is the user's code)."""
    notes = {"source": "hypothesis", "variant_error": str(e.error)[:500], "minimised": False}
    path = save_trace(Trace(config=e.config, variant=variant, actions=list(e.actions), seed=seed, notes=notes), folder)
    return VariantFailure(f"{e.error}; the run stopped there (not shrunk); trace: {path}; reproduce with: "
                          f"{reproduce_command(path, variant)}")


def record_failure(report: FuzzReport, *, folder: Path | str | None = None, seed: int | None = None,
                   minimize: bool = True, bfs_depth: int | None = None, out=sys.stderr) -> Path | None:  # noqa: ANN001
    """Minimise the failure of ``report`` (if any), save its trace, print how to replay it."""
    if report.result is None or report.config is None:
        return None
    result = report.result
    notes: dict[str, object] = {"source": "hypothesis", "shrunk_length": len(result.actions)}
    if minimize:
        from specstate.fuzz.minimize import minimize_failure

        try:
            m = minimize_failure(report.config, report.variant, result.actions, bfs_depth=bfs_depth)
        except (KeyboardInterrupt, Interrupted):
            report.trace_path = save_interrupted(result, report.config, report.variant, seed=seed, folder=folder,
                                                 stage="minimisation")
            raise
        result = m.result
        report.minimized, report.minimality = list(m.actions), m.verdict()
        notes.update(m.notes())
    trace = Trace(config=report.config, variant=report.variant, actions=list(result.actions),
                  violation=result.first.to_json() if result.first else None, seed=seed, notes=notes)
    path = save_trace(trace, folder)
    report.trace_path = path
    print(f"specstate: {report.variant}: {result.first.describe() if result.first else 'no violation'}", file=out)
    print(f"  trace: {path} ({len(result.actions)} actions{'; ' + report.minimality if report.minimality else ''})",
          file=out)
    print(f"  reproduce with: {reproduce_command(path, report.variant)}", file=out)
    return path
