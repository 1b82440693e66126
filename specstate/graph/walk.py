"""The sweep's steps, below both of its searches: the serial one (``graph/transitions.py``)
and the one on several processes (``graph/parallel.py``).

It owns the values a sweep passes around (``SweepBounds``, ``SweepEntry``, ``Child``,
``ExploreStats``, and the ``Transition`` / ``Failure`` it yields), the ``Walker`` that steps
the model and abstracts each outcome, and the sweep alphabet (``macros``: a burst per
concurrency level, steps, one extra arrival; see ``graph/transitions.py``'s module doc).
``specstate.graph.transitions`` re-exports every public name here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable

from specstate.check import checked_step
from specstate.fuzz.explore import canonical
from specstate.fuzz.reads import kept
from specstate.invariants import Violation, check_outcome
from specstate.model import (Action, Arrive, ForwardRecord, ModelState, SpecConfig, Step, StepOutcome, Variant,
                             as_variant, initial_state)
from specstate.model.family_registry import Family
from specstate.graph.abstraction import (AbstractState, Abstraction, decode_rows, last_target_forward, operation,
                                         threshold, with_family)

__all__ = ["Failure", "Transition", "SweepBounds", "sweep_levels", "SweepEntry", "ExploreStats", "Child", "Walker",
           "apply_macro", "is_idle_key", "macros", "start_entry"]

SEED_LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)


@dataclass(frozen=True, order=True)
class Failure:
    """A terminal node: the step violated ``invariants`` (names, sorted)."""

    invariants: tuple[str, ...]

    @property
    def key(self) -> str:
        return "FAIL|" + "|".join(self.invariants)


@dataclass(frozen=True)
class Transition:
    src: AbstractState
    op: str
    dst: AbstractState | Failure
    violations: tuple[str, ...] = ()  #: "invariant: short detail" per violation


@dataclass(frozen=True)
class SweepBounds:
    levels: tuple[int, ...] | None = None  #: burst sizes; ``None``: ``sweep_levels(config)``
    prompt_len: int = 8
    extra_arrivals: int = 1  #: single arrivals while requests are live
    max_depth: int = 40  #: actions per path (a burst counts as one)
    max_states: int = 20_000
    #: processes (forked) that run the sweep; never changes its result (``graph.parallel``)
    jobs: int = 1


def sweep_levels(config: SpecConfig) -> tuple[int, ...]:
    """The seed's concurrency levels that fit ``max_running_requests`` (at least one)."""
    return tuple(c for c in SEED_LEVELS if c <= config.max_running_requests) or (1,)


def short_violation(v: Violation, outcome: StepOutcome) -> str:
    """``worker-crash: RuntimeError 160 vs 10`` (the torch error's sizes), or the field."""
    if outcome.crash is not None and v.invariant == "worker-crash":
        c = outcome.crash
        sizes = [s for s in c.message.replace("(", " ").replace(")", " ").split() if s.isdigit()][:2]
        what = " vs ".join(sizes) if len(sizes) == 2 else c.message[:48]
        return f"worker-crash: {c.error_class} {what}"
    return f"{v.invariant}: {v.field}"


class Walker:
    """Steps the model and turns each outcome into a :class:`Transition`."""

    def __init__(self, variant: Variant, abstraction: Abstraction) -> None:
        #: the variant's family (its switch threshold draws the buckets and the alphabet), bound to the abstraction
        self.family = variant.engine_family
        self.variant, self.ops, self.abstraction = variant, variant.ops(), with_family(abstraction, self.family)
        #: the erasures of the canonical key the variant's own operations can read (``fuzz.reads``)
        self.keep = frozenset(kept(self.ops))

    def advance(self, state: ModelState, last: ForwardRecord | None,
                action: Action) -> tuple[Transition, ModelState, ForwardRecord | None]:
        o = checked_step(state, action, self.ops, self.variant, state.step_index)
        found = check_outcome(o)
        src = self.abstraction(state, last)
        new_last = last_target_forward(o, last)
        if found:
            dst: AbstractState | Failure = Failure(tuple(sorted({v.invariant for v in found})))
            details = tuple(sorted({short_violation(v, o) for v in found}, key=lambda d: (not d.startswith("worker-crash"), d)))
            return Transition(src, operation(o, self.family), dst, details), o.state, new_last
        return Transition(src, operation(o, self.family), self.abstraction(o.state, new_last)), o.state, new_last


def _burst(level: int, prompt_len: int) -> list[Action]:
    return [Arrive(prompt_len, 3 + j % 4) for j in range(level)]


def _alphabet(s: ModelState, bounds: SweepBounds, levels: tuple[int, ...], budget: int,
              family: Family) -> list[list[Action]]:
    """Macro actions from ``s``; ``levels``: the bursts still allowed here (idle states only);
    ``family``: the variant's (its switch threshold)."""
    live = [r.rid for r in s.live_reqs()]
    if not live:
        return ([[Step()]] if s.reqs else []) + [_burst(c, bounds.prompt_len) for c in levels]
    rows = decode_rows(s)
    out: list[list[Action]] = [[Step()]]
    t = threshold(s.config, family)
    allowed = t is None or rows <= t
    if allowed:  # accept lengths matter only with speculation on
        out.append([Step(accept=(s.config.max_accept_len,) * len(s.reqs))])
    running = [r for r in s.running.rids if s.req(r).live]
    if running:
        out.append([Step(eos=(running[0],))])
    if len(s.reqs) < budget and not s.waiting and allowed:
        out.append([Arrive(bounds.prompt_len, 3)])  # push the batch up through the threshold
    return out


@dataclass(frozen=True)
class SweepEntry:
    state: ModelState
    last: ForwardRecord | None
    depth: int
    level: int  #: the last burst's size: a later burst (from an idle server) must be larger
    budget: int  #: requests in all, after which no single arrival is offered


@dataclass
class ExploreStats:
    states: int = 0
    transitions: int = 0
    complete: bool = True
    found: list[Transition] = field(default_factory=list)
    #: how it ran: "serial", "N processes", or "serial (parallel fell back: why)"
    parallel: str = ""


def _key(s: ModelState, last: ForwardRecord | None, level: int, abstraction: Abstraction,
         keep: frozenset[str] = frozenset()) -> tuple[Hashable, ModelState]:
    """(dedup key, the canonical state): the key is the canonical state (without the erasures in
    ``keep``) and last forward; an idle server only by its node and last burst level, so one
    representative goes on to the next, larger burst."""
    c = canonical(s, keep=keep)
    if not s.live_rids() and s.is_quiet():
        return ("idle", abstraction(s, last), level), c
    return (c, last), c


@dataclass(frozen=True)
class Child:
    """One macro action applied to an entry: its transitions, and the entry it leads to
    (``key`` / ``entry`` ``None``: it ended in a failure)."""

    transitions: tuple[Transition, ...]
    key: Hashable | None
    entry: SweepEntry | None


def is_idle_key(key: Hashable) -> bool:
    """An idle server's key (``_key``): deduplicated by node and burst level only."""
    return isinstance(key, tuple) and len(key) == 3 and key[0] == "idle"


def macros(e: SweepEntry, bounds: SweepBounds, levels: tuple[int, ...], family: Family) -> list[list[Action]]:
    """The macro actions offered at ``e``; an idle, quiet server offers the bursts above its level
    (``family``: the sweep's variant's, ``Walker.family``)."""
    idle = not e.state.live_reqs()
    quiet = e.state.is_quiet()
    higher = tuple(c for c in levels if c > e.level) if idle and quiet else ()
    return _alphabet(e.state, bounds, higher, e.budget, family)


def apply_macro(walker: "Walker", e: SweepEntry, macro: list[Action], bounds: SweepBounds) -> Child:
    """Step through ``macro`` from ``e`` (stopping at a failure)."""
    s, f, out = e.state, e.last, []
    for a in macro:
        t, s, f = walker.advance(s, f, a)
        out.append(t)
        if isinstance(t.dst, Failure):
            return Child(tuple(out), None, None)
    burst = len(macro) if len(macro) > 1 or e.budget == 0 and isinstance(macro[0], Arrive) else 0
    level, budget = (burst, len(e.state.reqs) + burst + bounds.extra_arrivals) if burst else (e.level, e.budget)
    key, c = _key(s, f, level, walker.abstraction, walker.keep)
    return Child(tuple(out), key, SweepEntry(c, f, e.depth + 1, level, budget))


def start_entry(config: SpecConfig, variant: Variant | str, bounds: SweepBounds,
                abstraction: Abstraction) -> tuple["Walker", SweepEntry, Hashable, tuple[int, ...]]:
    """(walker, the empty server's entry, its key, the burst levels) of a sweep."""
    v = as_variant(variant)
    cfg = v.configure(config)
    walker = Walker(v, abstraction)
    start = canonical(initial_state(cfg), keep=walker.keep)
    levels = bounds.levels or sweep_levels(cfg)
    return walker, SweepEntry(start, None, 0, 0, 0), _key(start, None, 0, walker.abstraction, walker.keep)[0], levels
