"""The parts of ``specstate check``: start, the load sweep, a bounded fuzz, the batch-size proof.

Owns: running each part on one launch's config (``server_args.Launch``) and its verdict as a
:class:`Part`. Each part is an existing check run on a fixed config, not a copy of one:

- ``start``: the family's engine start, where the family models one (``Family.start``); else
  "not modelled for this family";
- ``sweep``: the family's built-in load sweep (the seed's concurrency levels C = 1, 2, 5, 10, 30,
  70, 100, 250: ``scenarios.py``), what a load test at rising concurrency meets; a failure is cut
  by delta debugging to the actions that still give *the same crash with the same shapes*
  (``fuzz.minimize.ddmin``), so the trace is short and shows the shapes a load test would see;
- ``fuzz``: the Hypothesis state machine with the config draw fixed to this config
  (``fuzz.strategies.fixed_configs``), in seeded rounds until ``budget_s`` is spent; a failure is
  minimised (``fuzz.runner.record_failure``); coverage is reported, never a verdict;
- ``prove``: ``specstate prove`` on this config, every batch size 1 .. ``max_running_requests``.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from specstate.check import Run, RunResult, StopRun, run_actions
from specstate.invariants import Violation
from specstate.model import SpecConfig, as_variant

__all__ = ["Part", "start_part", "skipped_part", "sweep_part", "fuzz_part", "prove_part", "FUZZ_ROUND", "fuzz_on_config", "play_on"]

#: test cases per seeded fuzz round (the budget is checked between rounds)
FUZZ_ROUND = 25


@dataclass
class Part:
    name: str  #: ``start``, ``sweep``, ``fuzz``, ``prove``
    status: str  #: ``passed``, ``failed``, ``inconclusive`` (a proof that could not conclude), ``not modelled`` or ``not run``
    summary: str  #: one line: what ran, what it covered
    violation: Violation | None = None
    trace_path: Path | None = None
    repro_command: str | None = None
    elapsed_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "summary": self.summary,
                "violation": self.violation.to_json() if self.violation else None,
                "trace": str(self.trace_path) if self.trace_path else None, "reproduce": self.repro_command,
                "elapsed_s": round(self.elapsed_s, 3), "details": self.details}


def start_part(config: SpecConfig, variant: str) -> Part:
    """The family's modelled engine start (``Family.start``, run by ``Variant.configure``): a
    config the engine refuses fails here, as an ``engine-start`` violation naming upstream's
    exception, where it is raised, the runtime state, the buffer and the sizes asked and held."""
    from specstate.errors import InvalidConfig
    from specstate.model.families import get_family

    v = as_variant(variant)
    if getattr(get_family(v.family_name), "start", None) is None:
        return Part("start", "not modelled", "engine start: not modelled for this family")
    t0 = time.perf_counter()
    try:
        v.configure(config)
    except InvalidConfig as e:
        if not hasattr(e, "upstream"):  # a config error of the variant's own, not the engine's start
            raise
        return Part("start", "failed", f"engine start: refused: {e}", _start_violation(e),
                    elapsed_s=time.perf_counter() - t0, details={"upstream": e.upstream, "where": getattr(e, "where", None)})
    return Part("start", "passed", "engine start: passed (every runtime state built, every capture fits)",
                elapsed_s=time.perf_counter() - t0)


def _start_violation(e: Any) -> Violation:  # noqa: ANN401  (model.sglang_0_5_17.start.EngineStartRefused)
    """The refusal as a violation at step 0 (before any request): asked vs held."""
    shapes = {} if e.buffer is None else {e.buffer: {"asked": e.asked, "held": e.held}}
    return Violation("engine-start", 0, None, e.buffer or "config", e.held if e.buffer else "a config it starts",
                     e.asked if e.buffer else e.message, f"{e.upstream} at {e.where}", shapes)


def skipped_part(name: str) -> Part:
    """A part that cannot run: the engine does not start on this config."""
    return Part(name, "not run", f"{name}: not run (the engine does not start on this config)")


def _same_crash(first: Violation) -> Callable[[RunResult], bool]:
    key = (first.invariant, first.field, str(first.actual), repr(sorted(first.shapes.items())))
    return lambda r: r.first is not None and (r.first.invariant, r.first.field, str(r.first.actual),
                                              repr(sorted(r.first.shapes.items()))) == key


def _cut_same_crash(config: SpecConfig, variant: str, result: RunResult) -> RunResult:
    """The fewest actions (1-minimal, delta debugging) that give the same first violation text and shapes."""
    from specstate.fuzz.minimize import ddmin, from_items, to_items

    same = _same_crash(result.first)  # type: ignore[arg-type]
    items = ddmin(to_items(result.actions), lambda c: same(run_actions(config, variant, from_items(c))))
    return run_actions(config, variant, from_items(items))


def _sweep_name(variant: str, config: SpecConfig | None = None) -> str:
    """The family's sweep: the seed's, the adaptive one, or (a v2 launch without
    ``--speculative-adaptive``) the static one."""
    from specstate.server_args import release_of_family, rules

    release = release_of_family(as_variant(variant).family_name)
    if release is None or not rules(release).adaptive_v2:
        return "seed-sweep"
    return "static-sweep" if config is not None and not config.speculative_adaptive else "adaptive-sweep"


def sweep_part(config: SpecConfig, variant: str, *, failures: Path | str | None = None) -> Part:
    from specstate.fuzz.trace import Trace, reproduce_command, save_trace, safe_part
    from specstate.scenarios import get_scenario

    t0 = time.perf_counter()
    scenario = get_scenario(_sweep_name(variant, config))
    full = play_on(config, scenario.name, variant, 0)
    paths, probe, steps = dict(full.paths), None, full.steps
    if full.ok and chunk_reachable(config) and "chunked-prefill" not in paths:
        full = probe = long_prompts(config, variant)  # steer: prompts longer than the chunk size
        paths.update(probe.paths)
    level = "the long-prompt probe" if probe is not None else full.milestones[-1][1] if full.milestones else ""
    if full.ok:
        extra = f"; then prompts longer than the chunk size together ({probe.steps} steps)" if probe else ""
        return Part("sweep", "passed", f"{scenario.name}: {steps} steps, every level passed{extra}",
                    elapsed_s=time.perf_counter() - t0, details={"steps": steps, "paths": dict(sorted(paths.items()))})
    small = _cut_same_crash(config, variant, full)
    assert small.first is not None, "the cut keeps the run's first violation"
    trace = Trace(config=config, variant=variant, actions=list(small.actions), violation=small.first.to_json(),
                  seed=0, notes={"source": "check sweep", "level": level, "cut_from": len(full.actions)})
    path = save_trace(trace, failures, name=f"{safe_part(variant)}-check-sweep")
    return Part("sweep", "failed", f"{scenario.name}: failed during {level} at step {full.steps}; the same crash "
                f"in {len(small.actions)} actions (delta debugging from {len(full.actions)})", small.first, path,
                reproduce_command(path, variant), time.perf_counter() - t0,
                {"level": level, "steps": full.steps, "trace_actions": len(small.actions),
                 "paths": dict(sorted(paths.items()))})


def chunk_reachable(config: SpecConfig) -> bool:
    """Prompts that fit the context and the running cap can together exceed the chunk: chunked
    prefill is a path this launch takes (one long prompt, or a batch of them)."""
    return config.chunked_prefill_size < config.max_running_requests * (config.context_len - 8)


def long_prompts(config: SpecConfig, variant: str) -> RunResult:
    """Prompts that together exceed the chunk size (each at most the context), decoded to the end:
    the chunked-prefill path the sweep's short prompts may never take (``check`` steers to it
    where the launch can take it)."""
    from specstate.check import steps_until_idle
    from specstate.model import Arrive

    run = Run(config, variant)
    length = min(config.context_len - 8, config.chunked_prefill_size + 1)
    count = min(config.max_running_requests, config.chunked_prefill_size // length + 2)
    run.mark("long prompts")
    try:
        for _ in range(count):
            run.apply(Arrive(length, 4))
        steps_until_idle(run, lambda rows: [1] * rows)
    except StopRun:
        pass
    return run.result()


def fuzz_on_config(config: SpecConfig, variant: str, *, budget_s: float, max_examples: int | None = None,
                   seed: int = 0, on_case: Callable[[], None] | None = None):  # noqa: ANN201
    """Seeded rounds of ``FUZZ_ROUND`` cases on ``config`` until ``budget_s`` (or ``max_examples``)
    is spent or a round fails; returns the last ``FuzzReport`` with the totals in ``.rounds`` / ``.cases``."""
    from hypothesis import settings

    from specstate.fuzz.profiles import profile_settings
    from specstate.fuzz.runner import fuzz_variant
    from specstate.fuzz.strategies import fixed_configs

    t0, cases, rounds, crossings = time.perf_counter(), 0, 0, 0
    witnesses: set[str] = set()
    paths: dict[str, int] = {}
    v = as_variant(variant)
    while True:
        n = FUZZ_ROUND if max_examples is None else min(FUZZ_ROUND, max_examples - cases)
        s = settings(profile_settings("ci"), max_examples=n, derandomize=False, database=None)
        report = fuzz_variant(v, s, config_strategy=fixed_configs(config), seed=seed + rounds,
                              prefer=v.expected_invariant, on_case=on_case)
        rounds, cases = rounds + 1, cases + n
        witnesses |= report.witnesses
        crossings = max(crossings, report.max_crossings)
        for path, count in report.paths.items():
            paths[path] = paths.get(path, 0) + count
        spent = time.perf_counter() - t0
        if report.result is not None or spent >= budget_s or (max_examples is not None and cases >= max_examples):
            report.witnesses, report.max_crossings, report.elapsed_s = witnesses, crossings, spent
            report.paths = paths
            report.rounds, report.cases = rounds, cases  # type: ignore[attr-defined]
            return report


def fuzz_part(config: SpecConfig, variant: str, *, budget_s: float, seed: int = 0, max_examples: int | None = None,
              failures: Path | str | None = None, quiet: bool = True) -> Part:
    import io

    from specstate.fuzz.runner import record_failure, wanted_witnesses
    from specstate.fuzz.trace import reproduce_command
    from specstate.progress import progress_bar

    with progress_bar(f"check: fuzz {variant} ({budget_s:g} s)", unit="case", quiet=quiet) as bar:
        report = fuzz_on_config(config, variant, budget_s=budget_s, max_examples=max_examples, seed=seed,
                                on_case=lambda: bar.update(1))
    missing = sorted(wanted_witnesses(variant, config) - report.witnesses)
    rounds = f"{report.rounds} seeded round{'s' if report.rounds > 1 else ''} (seeds {seed}..{seed + report.rounds - 1})"
    cover = (f"{report.cases} cases in {rounds}, {report.elapsed_s:.1f} s; max threshold crossings "
             f"{report.max_crossings}; witnesses reached {len(report.witnesses)}"
             + (f", not reached: {', '.join(missing)}" if missing else ""))
    if report.result is not None:  # the failing case ends the round: no coverage figures to give
        cover = f"a counterexample in round {report.rounds} of {rounds}, {report.elapsed_s:.1f} s"
    details = {"cases": report.cases, "rounds": report.rounds, "seeds": [seed, seed + report.rounds - 1],
               "witnesses": sorted(report.witnesses), "not_reached": missing, "max_crossings": report.max_crossings,
               "paths": dict(sorted(report.paths.items()))}
    if report.result is None:
        return Part("fuzz", "passed", cover, elapsed_s=report.elapsed_s, details=details)
    path = record_failure(report, folder=failures, seed=seed + report.rounds - 1, out=io.StringIO())
    first = run_actions(config, variant, report.minimized).first or report.result.first
    details.update(minimized_length=len(report.minimized), minimality=report.minimality)
    return Part("fuzz", "failed", f"{cover}; minimised: {report.minimality}", first, path,
                reproduce_command(path, variant) if path else None, report.elapsed_s, details)


def prove_part(config: SpecConfig, variant: str, *, failures: Path | str | None = None, quiet: bool = True) -> Part:
    from specstate.check_result import from_prove
    from specstate.progress import progress_bar
    from specstate.prove import prove

    max_bs = min(config.max_running_requests, 256)
    t0 = time.perf_counter()
    with progress_bar(f"check: prove {variant} (bs 1..{max_bs})", unit="bs", quiet=quiet) as bar:
        result = prove(config, variant, max_bs, on_bound=lambda name, b: bar.update(1))
    if result.interrupted is not None:
        raise result.interrupted
    check = from_prove(result, failures=failures)
    f = result.failure
    summary = f"bs 1..{max_bs}, {len(result.lists)} capture lists: {result.verdict()}"
    status = "passed" if result.holds else "inconclusive" if result.inconclusive else "failed"
    return Part("prove", status, summary, check.violation, check.trace_path,
                check.repro_command, time.perf_counter() - t0, {"max_bs": max_bs, "verdict": result.verdict(),
                                                                "failing_bs": f.bound if f else None})


def play_on(config: SpecConfig, scenario: str, variant: str, seed: int,
            on_step: Callable[..., None] | None = None) -> RunResult:
    """Built-in ``scenario``'s workload with ``seed`` on ``config`` (a launch's) instead of its own."""
    from specstate.scenarios import get_scenario

    run = Run(config, variant, on_step=on_step)
    try:
        get_scenario(scenario).play(run, random.Random(seed))
    except StopRun:
        pass
    return run.result()
