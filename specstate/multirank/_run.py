"""Driving the multi-rank model: a checked run, the seed's sweep, a seeded fuzzer, and a
breadth-first search for the shortest trace that breaks a cross-rank invariant.

``MultiRun`` owns the state and stops at the first step with a violation, as
``specstate.check.Run`` does for one rank. Every random choice comes from one
``random.Random(seed)``: one seed, one trace.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from specstate.model import Action, Arrive, SpecConfig, Step, as_variant
from specstate.multirank._config import RankConfig
from specstate.multirank._invariants import RankViolation, check_multi
from specstate.multirank._policy import MultiPolicy, get_policy
from specstate.multirank._routing import RoutedArrive
from specstate.multirank._state import MultiState, initial_multi_state
from specstate.multirank._step import MultiModel, MultiOutcome, multi_step
from specstate.sweep import SEED_SWEEP_LEVELS

__all__ = ["MultiRun", "MultiResult", "make_model", "run_multi", "sweep_multi", "fuzz_multi"]


def make_model(config: SpecConfig, ranks: RankConfig, policy: MultiPolicy | str) -> MultiModel:
    p = get_policy(policy) if isinstance(policy, str) else policy
    v = as_variant(p.base)
    return MultiModel(v.configure(config), ranks, p, v.ops())


@dataclass
class MultiResult:
    config: SpecConfig
    ranks: RankConfig
    policy: str
    actions: list[Action]
    violations: list[RankViolation]
    outcomes: list[MultiOutcome] = field(default_factory=list, repr=False)
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations


class MultiStop(Exception):
    """Raised by ``MultiRun.apply`` at the first violation."""


class MultiRun:
    def __init__(self, model: MultiModel, *, keep: bool = True) -> None:
        self.model = model
        self.state: MultiState = initial_multi_state(model.config, model.ranks.ranks)
        self.actions: list[Action] = []
        self.outcomes: list[MultiOutcome] = []
        self.violations: list[RankViolation] = []
        self.keep = keep
        self.stats = {"iterations": 0, "extend": 0, "spec": 0, "plain": 0, "idle_rank_iterations": 0}

    def apply(self, action: Action) -> MultiOutcome:
        if self.violations:
            raise MultiStop(self.violations[0].describe())
        o = multi_step(self.model, self.state, action)
        self.actions.append(action)
        self.state = o.state
        if self.keep:
            self.outcomes.append(o)
        self._count(o)
        found = check_multi(o, self.model.config.speculative_num_draft_tokens, self.model)
        if found:
            self.violations = found
            raise MultiStop(found[0].describe())
        return o

    def _count(self, o: MultiOutcome) -> None:
        it = o.iteration
        if it is None:
            return
        self.stats["iterations"] += 1
        for p in it.paths:
            if p.path in ("extend", "spec", "plain"):
                self.stats[p.path] += 1
            self.stats["idle_rank_iterations"] += p.batch == "idle"

    def result(self) -> MultiResult:
        m = self.model
        return MultiResult(m.config, m.ranks, m.policy.name, list(self.actions), list(self.violations),
                           list(self.outcomes), dict(self.stats))

    def rows_next(self) -> int:
        return max(len(s.running.rids) + (len(s.last_batch.rids) if s.last_batch else 0) for s in self.state.ranks)


def run_multi(model: MultiModel, actions: Iterable[Action]) -> MultiResult:
    run = MultiRun(model)
    try:
        for a in actions:
            run.apply(a)
    except MultiStop:
        pass
    return run.result()


def _until_idle(run: MultiRun, rng: random.Random, limit: int = 10_000) -> None:
    top = run.model.config.max_accept_len
    for _ in range(limit):
        if run.state.is_quiet() and all(s.is_quiet() for s in run.state.ranks):
            return
        run.apply(Step(tuple(rng.randint(1, top) for _ in range(run.rows_next()))))


def sweep_multi(model: MultiModel, seed: int = 0, levels: Sequence[int] = SEED_SWEEP_LEVELS) -> MultiResult:
    """The seed's sweep (``specstate.sweep.seed_sweep``) on every rank: each level's C requests
    arrive together (round robin over the ranks) and run until all finish."""
    run = MultiRun(model)
    rng = random.Random(seed)
    try:
        for c in levels:
            for _ in range(c):
                run.apply(Arrive(rng.randint(56, 72), rng.randint(16, 48)))
            _until_idle(run, rng)
            run.apply(Step())
    except MultiStop:
        pass
    return run.result()


def random_actions(rng: random.Random, model: MultiModel, n: int, *, routed: float = 0.0) -> list[Action]:
    """A workload of ``n`` iterations: bursts of arrivals (short prompts, short outputs; now and then
    enough at once to put every rank over the threshold) and steps with random accepts and EOS, so
    that ranks fill, drain and finish at different times. ``routed``: the share of arrivals that
    name their rank (``RoutedArrive``, a random one); 0 draws nothing more (the same workloads as
    before it existed)."""
    top = model.config.max_accept_len
    ranks = model.ranks.ranks
    wide = ((model.config.disable_batch_threshold or 4) + 2) * ranks
    out: list[Action] = []
    arrived = 0
    for _ in range(n):
        if arrived < 2 * wide and rng.random() < 0.35:
            k = rng.randint(1, wide) if rng.random() < 0.3 else rng.randint(1, 3 * ranks)
            for _ in range(k):
                a = Arrive(rng.randint(1, 24), rng.randint(1, 12))
                out.append(RoutedArrive(a, rng.randrange(ranks)) if routed and rng.random() < routed else a)
            arrived += k
        eos = tuple(rng.randrange(arrived) for _ in range(rng.randint(0, 2))) if arrived and rng.random() < 0.2 else ()
        out.append(Step(tuple(rng.randint(1, top) for _ in range(rng.randint(0, 12))), eos))
    return out


def fuzz_multi(model: MultiModel, *, seed: int = 0, cases: int = 100, length: int = 40,
               budget_s: float | None = None, routed: float = 0.0) -> tuple[MultiResult | None, int]:
    """Random workloads from ``seed`` (``routed``: ``random_actions``'); the first failing one cut to
    its failing prefix, and the number of cases run."""
    t0 = time.perf_counter()
    for i in range(cases):
        rng = random.Random(seed * 1_000_003 + i)
        result = run_multi(model, random_actions(rng, model, length, routed=routed))
        if not result.ok:
            return result, i + 1
        if budget_s is not None and time.perf_counter() - t0 > budget_s:
            return None, i + 1
    return None, cases
