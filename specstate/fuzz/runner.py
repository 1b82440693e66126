"""Run the state machine for one variant and turn its outcome into a report.

``fuzz_variant`` runs ``machine_for(variant)`` under a Hypothesis ``settings`` object and
catches the final (shrunk) :class:`~specstate.fuzz.machine.FuzzViolation`. A failure is then
minimised further (``minimize.py``), written as a JSON trace (atomically) to
``$SPECSTATE_FAILURE_DIR`` and reported with the one command that replays it. A run
without a violation checks the witnesses: a run that never reached a wanted witness did
not explore the switch, and fails saying which witnesses it missed.
"""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

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
from specstate.model import SpecConfig, Variant, as_variant

__all__ = ["FuzzReport", "fuzz_variant", "round_plan", "ROUND_EXAMPLES", "wanted_witnesses", "SWITCH_WITNESSES", "record_failure"]

#: witnesses that need a threshold (unreachable for a variant that never switches)
SWITCH_WITNESSES = frozenset({"crossed-up", "crossed-down", "spec-resumed", "all-finished-while-off", "retract-while-off"})


def wanted_witnesses(variant: Variant | str, config: SpecConfig | None = None) -> set[str]:
    """Every witness, less the switch witnesses when ``variant`` never switches (a variant of a
    family without adaptive speculation and without a threshold; an adaptive family's fuzz
    configs always have slots routed to steps 0)."""
    from specstate.model.families import get_family

    v = as_variant(variant)
    from specstate.fuzz.static import is_static

    if is_static(v):  # static v2: only a switch patch (the seed's flag) reads the threshold
        reads = any(f.field == "disable_batch_threshold" for f in v.all_flags())
        return set(WITNESSES) if reads else set(WITNESSES) - SWITCH_WITNESSES
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
    paths: dict[str, int] = field(default_factory=dict)  #: scheduler paths run, over every case (``check.PATHS``)
    #: the variant object fuzzed (``variant`` is its name): minimisation runs it, not a look-up of the name
    model: Variant | None = field(default=None, repr=False, compare=False)

    @property
    def found(self) -> set[str]:
        return {v.invariant for v in self.result.violations} if self.result else set()

    def missing(self, wanted: set[str]) -> set[str]:
        return wanted - self.witnesses


def _pick(group: BaseExceptionGroup, prefer: str | None) -> FuzzViolation | None:
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


def _without_seed_hint(inner: Callable[[Any], None]) -> Callable[[object], None]:
    """Hypothesis's reporter, less its "adding @seed(...) to this test" hint: there is no test
    to add it to; the trace file and ``specstate reproduce`` replay the failure instead."""

    def report(text: object) -> None:
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


#: the most test cases one Hypothesis run holds; a larger budget runs as consecutive rounds. Hypothesis
#: keeps a tree of every example it generated for the length of a run (about 270 KB per example of
#: the ``deep`` profile's 80 steps: 602 MB RSS after 600 examples in one run; 433 MB after three
#: rounds of 200, measured 2026-12-03), so a 5,000-example run grew past 2 GB
ROUND_EXAMPLES = 500
#: a round's seed from the run's: ``(seed + round * _ROUND_STRIDE) mod 2**64`` (round 0 is the seed itself)
_ROUND_STRIDE = 0x9E3779B97F4A7C15


def round_plan(settings: Settings, seed: int | None, variant: str,
               round_examples: int = ROUND_EXAMPLES) -> list[tuple[Settings, int | None]]:
    """The rounds a run of ``settings.max_examples`` cases takes: each round's settings and seed.

    One round when the budget fits in ``round_examples``: the settings and seed as given. Else
    rounds of ``round_examples`` (the last one the rest); with a seed, round ``r`` runs from
    ``seed + r * _ROUND_STRIDE`` (the same rounds for the same seed); a derandomized profile
    (``ci``) would draw the same examples in every round, so its rounds run from seeds derived from
    the variant's name, without the database; a profile with a database keeps it (Hypothesis
    replays the failures it stored first, in every round)."""
    total = settings.max_examples
    if total <= round_examples:
        return [(settings, seed)]
    if seed is None and settings.derandomize:
        seed = int.from_bytes(hashlib.blake2b(variant.encode(), digest_size=8).digest(), "big")
    plan = []
    for r, start in enumerate(range(0, total, round_examples)):
        s = Settings(settings, max_examples=min(round_examples, total - start))
        if seed is not None:
            s = Settings(s, derandomize=False, database=None)
        plan.append((s, None if seed is None else (seed + r * _ROUND_STRIDE) % (1 << 64)))
    return plan


@dataclass
class _Coverage:
    """What the rounds run so far covered (for the report, and for the line an interruption prints)."""

    cases: int = 0
    rounds: int = 0
    witnesses: set[str] = field(default_factory=set)
    max_crossings: int = 0
    paths: dict[str, int] = field(default_factory=dict)

    def add(self, cls: type[SpecMachine]) -> None:
        self.witnesses |= cls.reached
        for path, count in getattr(cls, "paths", {}).items():
            self.paths[path] = self.paths.get(path, 0) + count
        self.max_crossings = max(self.max_crossings, cls.max_crossings)

    def line(self, variant: str, planned: int, rounds: int) -> str:
        seen = ", ".join(sorted(self.witnesses)) or "none"
        where = f" (in round {self.rounds} of {rounds})" if rounds > 1 else ""
        return (f"specstate: fuzz {variant}: interrupted after {self.cases} of {planned} test cases{where}, "
                f"no violation in them; max crossings {self.max_crossings}, witnesses reached: {seen}")


def fuzz_variant(variant: Variant | str, settings: Settings, *, config_strategy: st.SearchStrategy[SpecConfig] | None = None,
                 seed: int | None = None, prefer: str | None = None, only: str | None = None,
                 on_case: Callable[[], None] | None = None, failures: Path | str | None = None,
                 announce: bool = False, round_examples: int = ROUND_EXAMPLES, out=sys.stderr,  # noqa: ANN001
                 machine: type[SpecMachine] = SpecMachine) -> FuzzReport:
    """Fuzz ``variant``. ``only``: an invariant; test cases that violate only others are
    discarded. ``prefer``: the invariant to report when several distinct failures shrink.
    ``on_case``: called after every test case (progress). A budget above ``round_examples``
    runs in rounds (``round_plan``), each a Hypothesis run of its own, so memory stays flat; the
    first round that finds a violation ends the run. On SIGINT / SIGTERM the shortest failing
    run found so far is written to ``failures`` before the interruption goes on, or, if none was
    found, one line on ``out`` says how many test cases ran and what they reached;
    ``announce``: say on stderr when the first one is found. A variant whose own code fails
    ends the run there: a ``VariantFailure`` naming the user's frame, the action, the trace
    and the command that replays it. ``machine``: the state machine (``SpecMachine``, or
    ``DrainingMachine``: one more rule)."""
    v = as_variant(variant)
    t0 = time.perf_counter()
    seen = _Coverage()
    first: float | None = None
    caught: FuzzViolation | None = None
    plan = round_plan(settings, seed, v.name, round_examples)
    for s, round_seed in plan:
        seen.rounds += 1
        cls, caught = _one_round(v, s, round_seed, seen, config_strategy=config_strategy, prefer=prefer,
                                 only=only, on_case=on_case, failures=failures, announce=announce,
                                 planned=(settings.max_examples, len(plan)), out=out, machine=machine)
        seen.add(cls)
        if cls.first_violation_at is not None:
            first = cls.first_violation_at - t0
        if caught is not None:
            break
    report = FuzzReport(v.name, time.perf_counter() - t0, seen.witnesses, seen.max_crossings,
                        first_violation_s=first, model=v)
    report.paths = dict(seen.paths)
    if caught is not None:
        report.result, report.config = caught.result, caught.config
    return report


def _one_round(variant: Variant, settings: Settings, seed: int | None, seen: _Coverage, *,
               config_strategy: st.SearchStrategy[SpecConfig] | None, prefer: str | None, only: str | None,
               on_case: Callable[[], None] | None, failures: Path | str | None, announce: bool,
               planned: tuple[int, int], out,  # noqa: ANN001
               machine: type[SpecMachine] = SpecMachine) -> tuple[type[SpecMachine], FuzzViolation | None]:
    """One Hypothesis run of ``fuzz_variant``: its machine class and the violation it caught."""
    cls = machine_for(variant, config_strategy=config_strategy, seed=seed, only_invariant=only, announce=announce,
                      base=machine)

    def counted() -> None:
        seen.cases += 1
        if on_case is not None:
            on_case()

    _after_each_case(cls, counted)
    try:
        with import_independent_draws(), with_reporter(_without_seed_hint(current_reporter())):
            run_state_machine_as_test(cls, settings=settings)
    except FuzzViolation as e:
        return cls, e
    except BaseExceptionGroup as g:  # several distinct invariants failed  # noqa: F821
        caught = _pick(g, prefer)
        if caught is None:
            raise
        return cls, caught
    except UserCodeFailed as e:
        raise _user_code_failed(e, variant.name, seed=seed, folder=failures) from None
    except (KeyboardInterrupt, Interrupted):
        best = cls.best
        if best is not None:
            save_interrupted(best[0], best[1], variant.name, seed=seed, folder=failures,
                             stage="shrinking" if cls.first_violation_at is not None else "generation")
        else:
            seen.add(cls)
            print(seen.line(variant.name, *planned), file=out, flush=True)
        raise
    return cls, None


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
            m = minimize_failure(report.config, report.model or report.variant, result.actions, bfs_depth=bfs_depth)
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
