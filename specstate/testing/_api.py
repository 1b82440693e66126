"""The checks of ``specstate.testing``: run a scenario, fuzz, explore, check a recording.

Each function runs one check of one variant and returns a :class:`CheckResult`; none of them
raises on a violation (that is the result), only on wrong input (``specstate.errors``). A
failure of a model run is written as a trace file (``failures``, default
``$SPECSTATE_FAILURE_DIR`` or ``./specstate-failures``) and the result carries the command
that replays it. Progress goes to an interactive stderr unless ``quiet``.

Every argument is checked before any work starts (``specstate.schema._arguments``, the
CLI's bounds): a wrong one raises :class:`~specstate.errors.InvalidArgument` naming it, what
was expected and what came (``Expected int in [1, 10000000] but got max_examples=0``); a
variant that does not load raises the loader's ``VariantLoadError`` / ``UnknownName``.

The ``from_*`` helpers turn the lower layers' results into ``CheckResult``s; the CLI's
``--json`` output uses them, so the API and ``--json`` print one schema.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

from typing import TYPE_CHECKING

from specstate.check_result import CheckResult

#: the settings profiles of ``fuzz`` (``specstate.fuzz.profiles``)
PROFILES = ("dev", "ci", "deep")

if TYPE_CHECKING:  # annotations only: a trace's schema check needs neither the model nor hypothesis
    from specstate.check import RunResult
    from specstate.fuzz.explore import ExploreResult
    from specstate.fuzz.runner import FuzzReport
    from specstate.model import Variant

__all__ = ["run_scenario", "fuzz", "explore", "check_recording", "from_run", "from_fuzz", "from_explore",
           "explore_bfs"]


def from_run(result: RunResult, *, kind: str, subject: str, trace_path: Path | None, elapsed_s: float,
             repro_command: str | None = None, details: dict[str, object] | None = None,
             launch: object = None) -> CheckResult:
    """A model run (scenario, reproduction, minimisation) as a ``CheckResult`` (``launch``: the
    ``server_args.Launch`` it ran on, whose coverage it carries)."""
    from specstate.check_result import run_coverage
    from specstate.fuzz.trace import reproduce_command

    if repro_command is None and trace_path is not None:
        repro_command = reproduce_command(trace_path, result.variant)
    figures = {"steps": result.steps, "witnesses": sorted(result.witnesses), "counts": dict(result.stats)}
    reached = {**result.paths, **{w: 1 for w in result.witnesses if w not in result.paths}}
    coverage = run_coverage(f"{kind} {subject}: {result.steps} steps", launch=launch, reached=reached)
    return CheckResult(kind, subject, result.variant, result.ok, result.first,
                       tuple(v.describe() for v in result.violations), trace_path, repro_command, elapsed_s,
                       {**figures, **(details or {})}, coverage)


def run_scenario(variant: Variant | str, scenario: str = "seed-sweep", *, seed: int = 0, failures: Path | str | None = None,
                 quiet: bool = False) -> CheckResult:
    """Play built-in ``scenario`` under ``variant`` with every invariant checked after every step."""
    from specstate.fuzz.trace import failure_dir, save_trace, trace_from_result
    from specstate.progress import progress_bar
    from specstate.scenarios import get_scenario, play_scenario
    from specstate.schema import _arguments as arg

    v = arg.variant("variant", variant)
    get_scenario(arg.text("scenario", scenario))
    arg.integer("seed", seed)
    arg.boolean("quiet", quiet)
    failures = arg.folder("failures", failures)
    failure_dir(failures)
    t0 = time.perf_counter()
    with progress_bar(f"{scenario} / {v.name}", unit="step", quiet=quiet) as bar:
        result = play_scenario(scenario, v, seed, on_step=lambda o: bar.update(1))
    path = None
    if not result.ok:
        trace = trace_from_result(result, seed=seed, scenario=scenario, config=get_scenario(scenario).config)
        path = save_trace(trace, failures)
    return from_run(result, kind="scenario", subject=f"{scenario} / {v.name} (seed {seed})", trace_path=path,
                    elapsed_s=time.perf_counter() - t0)


def from_fuzz(report: FuzzReport, *, profile: str, seed: int | None, failures: Path | str | None = None,
              check_witnesses: bool = True) -> CheckResult:
    """A fuzzing run as a ``CheckResult``; a failure is minimised and written as a trace."""
    from specstate.fuzz.runner import record_failure, wanted_witnesses
    from specstate.fuzz.trace import reproduce_command

    from specstate.check_result import run_coverage

    details: dict[str, object] = {"profile": profile, "seed": seed, "max_crossings": report.max_crossings,
                                  "witnesses": sorted(report.witnesses), "first_violation_s": report.first_violation_s,
                                  "paths": dict(sorted(report.paths.items()))}
    subject = f"{report.variant} (profile {profile})"
    coverage = run_coverage(f"fuzz {subject}: configurations drawn by the fuzzer",
                            reached={**report.paths, **{w: 1 for w in report.witnesses if w not in report.paths}})
    if report.result is not None:
        path = record_failure(report, folder=failures, seed=seed, out=io.StringIO())
        assert report.config is not None
        from specstate.check import run_actions

        first = run_actions(report.config, report.model or report.variant, report.minimized).first or report.result.first
        details.update(shrunk_length=len(report.result.actions), minimized_length=len(report.minimized),
                       minimality=report.minimality)
        problems: tuple[str, ...] = (first.describe() if first else "violation", f"minimised: {report.minimality}")
        return CheckResult("fuzz", subject, report.variant, False, first, problems, path,
                           reproduce_command(path, report.variant) if path else None, report.elapsed_s, details,
                           coverage)
    missing = sorted(report.missing(wanted_witnesses(report.model or report.variant))) if check_witnesses else []
    again = f"specstate fuzz --variant {report.variant} --profile {profile}" + (f" --seed {seed}" if seed is not None else "")
    if missing:  # no violation, but the run did not explore the switch: not judged (exit 4), not a failure
        coverage["not_judged"] = [{"what": "the switch", "parts": "fuzz", "reason":
                                   f"witnesses never reached: {', '.join(missing)} (the fuzzer did not explore the "
                                   f"switch); more cases: {again} --max-examples N, or the deep profile"}]
    return CheckResult("fuzz", subject, report.variant, True, None, (), None, again if missing else None,
                       report.elapsed_s, details, coverage)


def fuzz(variant: Variant | str, *, profile: str = "ci", max_examples: int | None = None, seed: int | None = None,
         failures: Path | str | None = None, check_witnesses: bool = True, quiet: bool = False,
         announce: bool = False) -> CheckResult:
    """Run the Hypothesis state machine on ``variant`` under settings ``profile`` (dev, ci, deep).

    ``seed``: a random run from that seed (no example database); ``check_witnesses``: a run that
    never reached a wanted witness (crossed the threshold up and down, resumed speculation, ...)
    fails, since it proves nothing about the switch."""
    from hypothesis import settings

    from specstate.fuzz.profiles import profile_settings
    from specstate.fuzz.runner import fuzz_variant
    from specstate.fuzz.trace import failure_dir
    from specstate.progress import progress_bar
    from specstate.schema import _arguments as arg

    v = arg.variant("variant", variant)
    arg.choice("profile", profile, PROFILES)
    arg.optional_integer("max_examples", max_examples)
    arg.optional_integer("seed", seed)
    for name, flag in (("check_witnesses", check_witnesses), ("quiet", quiet), ("announce", announce)):
        arg.boolean(name, flag)
    failures = arg.folder("failures", failures)
    failure_dir(failures)
    s = profile_settings(profile)
    if max_examples is not None:
        s = settings(s, max_examples=max_examples)
    if seed is not None:
        s = settings(s, derandomize=False, database=None)
    with progress_bar(f"fuzz {v.name}", total=s.max_examples, unit="case", quiet=quiet) as bar:
        report = fuzz_variant(v, s, seed=seed, prefer=v.expected_invariant, on_case=lambda: bar.update(1), failures=failures,
                              announce=announce)
    return from_fuzz(report, profile=profile, seed=seed, failures=failures, check_witnesses=check_witnesses)


def from_explore(r: ExploreResult, *, failures: Path | str | None = None) -> CheckResult:
    """An exploration as a ``CheckResult``; a counterexample is written as a trace."""
    from specstate.fuzz.trace import Trace, reproduce_command, save_trace

    details = {"states": r.states, "transitions": r.transitions, "max_depth_reached": r.max_depth_reached,
               "complete": r.complete}
    subject = f"{r.variant} (BFS)"
    coverage = explore_coverage(r)
    if r.counterexample is None:
        return CheckResult("explore", subject, r.variant, True, None, (), None, None, r.elapsed_s, details, coverage)
    first = r.violations[0] if r.violations else None
    trace = Trace(config=explore_config(r.variant), variant=r.variant, actions=list(r.counterexample),
                  violation=first.to_json() if first else None, notes={"source": "explore", "shortest": True})
    path = save_trace(trace, failures, name=f"{r.variant.replace(':', '_').replace('.', '_')}-explore.json")
    details["counterexample_length"] = len(r.counterexample)
    return CheckResult("explore", subject, r.variant, False, first, tuple(v.describe() for v in r.violations),
                       path, reproduce_command(path, r.variant), r.elapsed_s, details, coverage)


def explore_coverage(r: ExploreResult, launch: object = None) -> dict[str, object]:
    """An exploration's coverage: the states it visited; one that stopped at ``--max-states``
    before its frontier was exhausted is not judged beyond them."""
    from specstate.check_result import run_coverage

    gap = [] if r.complete or r.counterexample is not None else [
        {"what": "explore beyond the states visited", "parts": "explore",
         "reason": f"the BFS stopped at --max-states after {r.states} states, depth {r.max_depth_reached}, before its "
                   f"frontier was exhausted: states deeper or wider were not judged (raise --max-states, or lower "
                   f"--depth / --max-bs)"}]
    judged = (f"explore {r.variant}: {r.states} states, {r.transitions} transitions, depth {r.max_depth_reached}"
              f"{', frontier exhausted within the bounds' if r.complete else ''}")
    return run_coverage(judged, launch=launch, not_judged=gap)


def explore_bfs(variant: str, *, max_live: int = 3, max_arrivals: int | None = None, depth: int = 8,
                max_states: int = 200_000, quiet: bool = False, keep_graph: bool = False,
                jobs: int = 1, reduce: bool = True) -> ExploreResult:
    """``fuzz.explore.explore`` over the default alphabet and config, with a state counter on stderr
    (``keep_graph``: build the concrete ``networkx`` graph, for ``graph --raw``; without it the
    search keeps only what the counterexample path needs; ``jobs``: processes, the same result;
    ``reduce``: one node per class of equivalent states, ``explore.explore``'s; ``False``: every
    concrete state)."""
    from specstate.fuzz.explore import default_alphabet
    from specstate.fuzz.explore import explore as bfs
    from specstate.progress import progress_bar

    _check_explore(variant, max_live=max_live, max_arrivals=max_arrivals, depth=depth, max_states=max_states,
                   jobs=jobs, reduce=reduce, quiet=quiet, keep_graph=keep_graph)
    alphabet = default_alphabet(max_live=max_live, max_arrivals=max_arrivals or max_live + 1)
    with progress_bar(f"explore {variant}", unit="state", quiet=quiet) as bar:

        def tick(states: int, transitions: int, reached: int) -> None:
            bar.set_postfix_str(f"depth {reached}", refresh=False)
            bar.update(states - bar.n)

        return bfs(explore_config(variant), variant, alphabet=alphabet, max_depth=depth, max_states=max_states,
                   on_node=tick, keep_graph=keep_graph, jobs=jobs, reduce=reduce)


def _check_explore(variant: object, *, max_live: object, max_arrivals: object, depth: object, max_states: object,
                   jobs: object, reduce: object, quiet: object, keep_graph: object) -> None:
    """``explore``'s arguments, with the bounds of ``specstate explore``'s options."""
    from specstate.schema import _arguments as arg

    arg.variant_name("variant", variant)
    for name, value in (("max_live", max_live), ("depth", depth), ("max_states", max_states), ("jobs", jobs)):
        arg.integer(name, value)
    arg.optional_integer("max_arrivals", max_arrivals)
    for name, value in (("reduce", reduce), ("quiet", quiet), ("keep_graph", keep_graph)):
        arg.boolean(name, value)


def explore_config(variant: Variant | str):  # noqa: ANN201
    """The exploration's config: the variant's family's (``Family.explore_config``), else the v1 default;
    made static for a static variant (``fuzz/static.py``: no ``--speculative-adaptive``, the threshold
    at the family's switch)."""
    from specstate.fuzz.explore import DEFAULT_EXPLORE_CONFIG
    from specstate.fuzz.static import static_config
    from specstate.model import as_variant
    from specstate.model.families import get_family

    v = as_variant(variant)
    return static_config(get_family(v.family_name).explore_config or DEFAULT_EXPLORE_CONFIG, v)


def explore(variant: str, *, max_live: int = 3, max_arrivals: int | None = None, depth: int = 8,
            max_states: int = 200_000, failures: Path | str | None = None, quiet: bool = False,
            jobs: int = 1, reduce: bool = True) -> CheckResult:
    """Breadth-first search of the model's abstract state space (``specstate explore``); a
    violation comes with a shortest counterexample (over the default alphabet, within the bounds;
    ``jobs``: processes, the same result; ``reduce``: one node per class of equivalent states
    (the same verdict and shortest counterexample length; ``False``: every concrete state))."""
    from specstate.fuzz.trace import failure_dir
    from specstate.schema import _arguments as arg

    failures = arg.folder("failures", failures)
    _check_explore(variant, max_live=max_live, max_arrivals=max_arrivals, depth=depth, max_states=max_states,
                   jobs=jobs, reduce=reduce, quiet=quiet, keep_graph=False)
    failure_dir(failures)
    r = explore_bfs(variant, max_live=max_live, max_arrivals=max_arrivals, depth=depth, max_states=max_states,
                    quiet=quiet, jobs=jobs, reduce=reduce)
    return from_explore(r, failures=failures)


def _takes_threshold(family: str) -> bool:
    """Whether ``specstate conform`` takes ``--threshold`` for a recording of ``family``."""
    from specstate.integration.catalog import ADAPTERS

    return all(a.takes_threshold for a in ADAPTERS if a.family == family)


def check_recording(path: Path | str, variant: str | None = None, *, threshold: int | None = 5,
                    expect_crash: bool = False) -> CheckResult:
    """Replay a recorded real run (``.jsonl[.gz]``) on the model, compare step by step and check
    the invariants on the recorded states (``specstate conform``). ``variant``: default the
    recording's family's (``fixed-threshold`` for sglang 0.5.12, ``upstream-adaptive`` for
    0.5.17); a variant of another family than the recording's is refused. ``threshold=None``:
    no switch (0.5.12 recordings; a 0.5.17 one takes its adaptive config from the header)."""
    from specstate.integration.conform import check_recording as conform
    from specstate.integration.conform import default_variant_of
    from specstate.schema import _arguments as arg

    arg.file_path("path", path)
    if variant is not None:
        arg.variant_name("variant", variant)
    arg.optional_integer("threshold", threshold)
    arg.boolean("expect_crash", expect_crash)
    t0 = time.perf_counter()
    rep = conform(path, variant, threshold)
    variant = variant or default_variant_of(rep)
    recorded = list(rep["recorded_invariant_violations"])
    problems = ([] if expect_crash else recorded) + list(rep["mismatches"])
    if rep["mismatch_count"] > len(rep["mismatches"]):
        problems.append(f"... {rep['mismatch_count']} mismatches in all")
    command = f"specstate conform {path} --variant {variant}"
    if _takes_threshold(rep["family"]):  # a 0.5.17 recording carries its own (``conform`` refuses one)
        command += f" --threshold {-1 if threshold is None else threshold}"
    return CheckResult("recording", str(path), variant, not problems, None, tuple(problems), Path(path),
                       command + (" --expect-crash" if expect_crash else ""), time.perf_counter() - t0, rep)
