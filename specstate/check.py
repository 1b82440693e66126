"""Run actions through the model with every invariant checked after every step.

``Run`` is the one place where the model, the invariants and the witnesses meet: it owns the
state, applies actions one by one (``apply``), checks every invariant on every outcome, and
stops at the first step with a violation (``StopRun``). Scenarios, the fuzzer, reproduction
and minimisation all drive a ``Run``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from specstate.checked_ops import twin
from specstate.errors import InternalError, InvalidAction, SpecStateError, VariantFailure
from specstate.invariants import Violation, WitnessTracker, check_outcome
from specstate.model import (Action, ModelState, Ops, SpecConfig, Step, StepOutcome, Variant, action_to_json,
                             as_variant, initial_state)
from specstate.model.step import step  # the function (the package's lazy ``step`` shares the module's name)
from specstate.model.variants import is_builtin

__all__ = ["StopRun", "Run", "RunResult", "run_actions", "checked_step", "PATHS", "path_counts"]

#: the scheduler paths a verdict says it reached or not (``path_counts`` counts them per step)
PATHS = {"chunked-prefill": "a prefill that left a request chunked (a prompt longer than the chunk size)",
         "retraction": "the KV pool ran out and the scheduler retracted a request",
         "shared-prefix": "a request arrived sharing a prompt prefix with an earlier one (the radix cache's match)",
         "abort": "a request aborted while live",
         "crossed-up": "the decode batch grew past the switch: speculate, then not",
         "crossed-down": "the decode batch shrank back: not, then speculate"}


def path_counts(o: StepOutcome, counts: dict[str, int]) -> None:
    """Add this step's paths to ``counts`` (the crossings come from the witnesses)."""
    if o.batch_kind == "prefill" and getattr(o.state, "chunked_rid", None) is not None:
        counts["chunked-prefill"] = counts.get("chunked-prefill", 0) + 1
    if any(e.kind == "retract" for e in o.events):
        counts["retraction"] = counts.get("retraction", 0) + 1
    if type(o.action).__name__ == "Abort":
        counts["abort"] = counts.get("abort", 0) + 1
    if getattr(o.action, "prefix_of", None) is not None and getattr(o.action, "shared_len", 0) > 0:
        counts["shared-prefix"] = counts.get("shared-prefix", 0) + 1


class StopRun(Exception):
    """Raised by :meth:`Run.apply` when the step violated an invariant."""


@dataclass
class RunResult:
    config: SpecConfig
    variant: str
    actions: list[Action]
    violations: list[Violation]  #: all violations of the first bad step (empty: all held)
    steps: int
    witnesses: set[str]
    stats: dict[str, int] = field(default_factory=dict)
    milestones: list[tuple[int, str]] = field(default_factory=list)  #: (step reached, label)
    paths: dict[str, int] = field(default_factory=dict)  #: how often each of ``PATHS`` ran (``path_counts``)

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def first(self) -> Violation | None:
        return self.violations[0] if self.violations else None


class Run:
    """A model run under one variant: ``apply`` actions, read ``state``."""

    def __init__(self, config: SpecConfig, variant: Variant | str, *,
                 on_step: Callable[[StepOutcome], None] | None = None) -> None:
        self.variant = as_variant(variant)
        self.config = self.variant.configure(config)
        self.ops = self.variant.ops()
        self.state: ModelState = initial_state(self.config)
        self.actions: list[Action] = []
        self.violations: list[Violation] = []
        self.witnesses = WitnessTracker()
        self.stats = {"prefill": 0, "decode": 0, "idle": 0, "spec_decode": 0, "fallback_decode": 0, "forwards": 0}
        self._on_step = on_step
        self.milestones: list[tuple[int, str]] = []
        self.paths: dict[str, int] = {}

    def mark(self, label: str) -> None:
        """Note that the scenario reached a milestone (e.g. a concurrency level)."""
        self.milestones.append((len(self.actions), label))

    def apply(self, action: Action) -> StepOutcome:
        if self.violations:
            raise StopRun(self.violations[0].describe())
        outcome = self._step(action)
        self.actions.append(action)
        self.state = outcome.state
        self._count(outcome)
        self.witnesses.observe(outcome)
        path_counts(outcome, self.paths)
        if self._on_step is not None:
            self._on_step(outcome)
        found = check_outcome(outcome)
        if found:
            self.violations = found
            raise StopRun(found[0].describe())
        return outcome

    def _step(self, action: Action) -> StepOutcome:
        return checked_step(self.state, action, self.ops, self.variant, len(self.actions))

    def _count(self, o: StepOutcome) -> None:
        if o.batch_kind in self.stats:
            self.stats[o.batch_kind] += 1
        self.stats["forwards"] += len(o.forwards)
        if o.batch_kind == "decode":
            spec = o.state.overlap.speculated(o.state, o.forwards)  # v2: the adaptive decision
            self.stats["spec_decode" if spec else "fallback_decode"] += 1

    def result(self) -> RunResult:
        return RunResult(self.config, self.variant.name, list(self.actions), list(self.violations),
                         len(self.actions), set(self.witnesses.reached), dict(self.stats),
                         list(self.milestones), self._paths())

    def _paths(self) -> dict[str, int]:
        crossings: dict[str, int] = {w: 1 for w in ("crossed-up", "crossed-down") if w in self.witnesses.reached}
        return {**self.paths, **crossings}

    def decode_rows(self) -> int:
        """Rows the next decode may have (for sizing ``Step.accept``)."""
        s = self.state
        return len(s.running.rids) + (len(s.last_batch.rids) if s.last_batch else 0)


def checked_step(state: ModelState, action: Action, ops: Ops, variant: Variant, index: int) -> StepOutcome:
    """``step``, with errors that say which action (``actions[index]``, 0-based as in a trace
    file) and, for a user's variant that raised or returned a value of the wrong type
    (``checked_ops``), where in its code: a ``VariantFailure`` (an exception from a built-in
    variant is specstate's own bug and escapes as it is)."""
    try:
        return step(state, action, twin(ops, variant, is_builtin))
    except InvalidAction as e:
        raise InvalidAction(f"actions[{index}] {_show(action)}: {e}") from None
    except VariantFailure as e:  # a user's operation returned the wrong type (``checked_ops``)
        if " at actions[" in str(e):
            raise
        raise VariantFailure(f"{e} at actions[{index}] {_show(action)}") from None
    except SpecStateError:
        raise
    except (Exception, SystemExit) as e:  # a user's operation may call sys.exit too
        if is_builtin(variant):
            raise
        what = f"SystemExit({e.code!r})" if isinstance(e, SystemExit) else f"{type(e).__name__}: {str(e)[:200]}"
        raise VariantFailure(f"Expected variant {variant.name!r} to run but it raised {what} "
                             f"at actions[{index}] {_show(action)}{_user_frame(e)}") from e


def _show(action: Action) -> str:
    try:
        text = str(action_to_json(action))
    except Exception:  # an action of the wrong type: show what it is
        text = repr(action)
    return text if len(text) <= 100 else text[:97] + "..."


def _user_frame(e: BaseException) -> str:
    """`` (in FILE:LINE, FUNC)`` of the innermost frame outside specstate, if any."""
    import os
    import traceback

    here = os.path.dirname(os.path.abspath(__file__))
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not os.path.abspath(f.filename).startswith(here)]
    return f" (in {frames[-1].filename}:{frames[-1].lineno}, {frames[-1].name})" if frames else ""


def run_actions(config: SpecConfig, variant: Variant | str, actions: Iterable[Action]) -> RunResult:
    """Apply ``actions`` in order; stop at the first violation."""
    run = Run(config, variant)
    for a in actions:
        try:
            run.apply(a)
        except StopRun:
            break
    return run.result()


def steps_until_idle(run: Run, accept: Callable[[int], Sequence[int]], limit: int = 100_000) -> None:
    """Apply ``Step``s until no request is live (``accept(rows)`` gives accept lengths)."""
    for _ in range(limit):
        if run.state.is_idle() and run.state.is_quiet():
            return
        run.apply(Step(accept=tuple(accept(run.decode_rows()))))
    live = [r.rid for r in run.state.live_reqs()]
    raise InternalError(f"Expected every request to finish within {limit} steps but requests {live[:10]} are still live "
                        f"(a liveness bug in the model or variant {run.variant.name!r})")
