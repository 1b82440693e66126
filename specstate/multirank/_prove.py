"""``prove`` on several ranks: every vector of per-rank batch sizes up to a bound, up to rank order.

Owns ``prove_multi`` and its result. For each vector ``v`` (rank ``r`` holds ``v[r]`` requests,
``0 <= v[r] <= max_bs``; ``max_bs`` defaults to the per-rank ``max_running_requests``) the proof
runs a few scripts on the multi-rank model, every invariant checked after every step (the
cross-rank ones and every single-rank one on every rank, as ``reproduce`` applies them):

- ``burst``: ``v[r]`` requests routed to rank ``r`` (``routed_dp_rank``), one prefill iteration,
  a decode at ``v`` accepting everything;
- ``staggered``: the first half of the busy ranks prefill and decode first; then the rest arrive
  and prefill while the first half's decode waits (``is_extend_in_batch``: their IDLE batch), then
  decodes at ``v``;
- ``shrink-one``: from ``burst``, the first request of every busy rank finishes (EOS): a decode at
  ``v - 1`` (accepting nothing);
- ``drop-top``: from ``burst``, every request of the most loaded rank finishes: a decode with that
  rank idle among busy ones.

Why rank order can be dropped. The scripts route every arrival explicitly, and the multi-rank step
is equivariant under *every* renaming of ranks once routing names the rank (``_explore.py``'s
argument: the gathered list is read through symmetric functions, each rank derives its sizes from
the same list, the invariants ask whether all ranks agree): a permutation of ``v`` runs the
permuted scripts, with the same verdicts. So one vector per multiset, taken in non-increasing
order. Round robin's order (what ``explore`` must respect) does not enter: it decides how requests
reach ranks, and here they are routed.

Which per-rank sizes. Every size ``0 .. max_bs`` (``exhaustive``) when the multisets number at
most ``LIMIT``: the seed's launch at dp 8 (6 per rank) and dp 2 (24 per rank) are proved at every
vector. Above that, the interval method of single-rank ``prove`` (``prove/_intervals.py``): per rank
``0`` and the bounds of ``checked_bounds`` of the per-rank config; sound for every comparison the
multi-rank layer makes of *one* rank's size or of the list's maximum (the local decision, the
agreed ``max`` rule, ``can_run``'s ``max(global_num_tokens)`` and the replay's bucket); the list's
*sum* (``dp-global-sum``'s rule, ``DpPaddingMode.get_dp_padding_mode``) is met only at those
points, which the verdict says.

What it does not prove: the scripts are one history per vector (fresh requests of one shape, routed
at once or in two halves), not every workload reaching it (``fuzz`` and ``explore`` cover others);
transitions from a vector go to ``v - 1`` and to ``v`` without its largest entry only.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from specstate.model import Arrive, Step
from specstate.multirank._invariants import RankViolation, check_multi
from specstate.multirank._routing import RoutedArrive
from specstate.multirank._run import MultiResult, run_multi
from specstate.multirank._state import MultiState, initial_multi_state
from specstate.multirank._step import MultiModel, multi_step

__all__ = ["MultiProveResult", "prove_multi", "vectors", "LIMIT"]

#: the most multisets an exhaustive proof enumerates (above: the interval method)
LIMIT = 20_000
#: new tokens of a scripted request: none finishes by length within a script
_LONG = 64


@dataclass
class MultiProveResult:
    policy: str
    dp: int
    max_bs: int  #: per rank
    values: tuple[int, ...]  #: the per-rank sizes enumerated
    exhaustive: bool  #: every size 0 .. max_bs
    vectors: int = 0  #: multisets run
    orderings: int = 0  #: the vectors they stand for (every rank order)
    scripts: int = 0
    steps: int = 0
    elapsed_s: float = 0.0
    failure: MultiResult | None = None
    failing_vector: tuple[int, ...] | None = None
    script: str | None = None
    reached: dict[str, int] = field(default_factory=dict)  #: paths met (spec, plain, extend, idle ranks)

    @property
    def holds(self) -> bool:
        return self.failure is None

    def verdict(self) -> str:
        if self.failure is not None:
            return (f"fails at per-rank batch sizes {list(self.failing_vector or ())} (script {self.script}, "
                    f"{len(self.failure.actions)} actions)")
        how = "every size" if self.exhaustive else f"the interval points {list(self.values)}"
        return (f"holds for every vector of per-rank batch sizes <= {self.max_bs} on {self.dp} ranks ({how}; "
                f"{self.vectors} multisets standing for {self.orderings} vectors)")


def _values(model: MultiModel, max_bs: int) -> tuple[tuple[int, ...], bool]:
    n = model.ranks.ranks
    if math.comb(max_bs + n, n) <= LIMIT:
        return tuple(range(max_bs + 1)), True
    from specstate.prove._intervals import checked_bounds, derive

    pts = derive(model.config, max_bs)
    values = (0,) + tuple(sorted(checked_bounds(model.config, pts, max_bs)))
    if math.comb(len(values) - 1 + n, n) > LIMIT:
        from specstate.errors import UsageError

        raise UsageError(f"--max-bs {max_bs} on {n} ranks: {math.comb(max_bs + n, n):,} multisets of per-rank sizes, "
                         f"{math.comb(len(values) - 1 + n, n):,} even at the interval points {list(values)}; the proof "
                         f"enumerates at most {LIMIT:,}: expected a smaller --max-bs")
    return values, False


def vectors(values: Sequence[int], n: int) -> list[tuple[int, ...]]:
    """Every multiset of ``n`` sizes from ``values`` (non-increasing), by its largest entry, then its
    sum: the first failure found is at the smallest per-rank maximum."""
    out = [tuple(sorted(c, reverse=True)) for c in itertools.combinations_with_replacement(values, n)]
    return sorted((v for v in out if v[0] > 0), key=lambda v: (v[0], sum(v), v))


def _orderings(v: tuple[int, ...]) -> int:
    c = math.factorial(len(v))
    for k in set(v):
        c //= math.factorial(v.count(k))
    return c


class _Stop(Exception):
    def __init__(self, actions: list[Any]) -> None:
        self.actions = actions


class _Runner:
    def __init__(self, model: MultiModel, out: MultiProveResult) -> None:
        self.model, self.out = model, out
        self.ndt = model.config.speculative_num_draft_tokens

    def go(self, state: MultiState, done: list[Any], actions: Sequence[Any]) -> tuple[MultiState, list[Any]]:
        path = list(done)
        for a in actions:
            o = multi_step(self.model, state, a)
            path.append(a)
            self.out.steps += 1
            if o.iteration is not None:
                for p in o.iteration.paths:
                    key = "idle ranks" if p.batch == "idle" else p.path
                    self.out.reached[key] = self.out.reached.get(key, 0) + 1
            if check_multi(o, self.ndt, self.model):
                raise _Stop(path)
            state = o.state
        return state, path


def _arrivals(v: Sequence[int], ranks: Sequence[int]) -> list[Any]:
    return [RoutedArrive(Arrive(8, _LONG), r) for r in ranks for _ in range(v[r])]


def _scripts(run: _Runner, v: tuple[int, ...], top: int, width: int) -> None:
    model = run.model
    start = initial_multi_state(model.config, model.ranks.ranks)
    full, none = Step((top,) * width), Step()
    busy = [r for r, k in enumerate(v) if k]
    run.out.scripts += 1
    s, path = run.go(start, [], _arrivals(v, busy) + [none, full])
    burst, burst_path = s, path
    first = []
    gid = 0
    owned: dict[int, list[int]] = {}
    for r in busy:
        owned[r] = list(range(gid, gid + v[r]))
        gid += v[r]
        first.append(owned[r][0])
    run.out.scripts += 1
    run.go(burst, burst_path, [Step((), tuple(first)), none])
    run.out.scripts += 1
    run.go(burst, burst_path, [Step((), tuple(owned[busy[0]])), none])
    if len(busy) > 1:
        half = busy[: len(busy) // 2]
        rest = busy[len(busy) // 2:]
        run.out.scripts += 1
        run.go(start, [], _arrivals(v, half) + [none, none] + _arrivals(v, rest) + [none, full])


def prove_multi(model: MultiModel, max_bs: int | None = None) -> MultiProveResult:
    """The proof (module doc) of ``model`` (its policy, ranks and per-rank config)."""
    t0 = time.perf_counter()
    bound = max_bs if max_bs is not None else model.config.max_running_requests
    values, exhaustive = _values(model, bound)
    out = MultiProveResult(model.policy.name, model.ranks.ranks, bound, values, exhaustive)
    run = _Runner(model, out)
    names = ("burst", "shrink-one", "drop-top", "staggered")
    top = model.config.max_accept_len
    for v in vectors(values, model.ranks.ranks):
        out.vectors += 1
        out.orderings += _orderings(v)
        before = out.scripts
        try:
            _scripts(run, v, top, max(v))
        except _Stop as stop:
            out.failure = run_multi(model, stop.actions)
            out.failing_vector = v
            out.script = names[min(out.scripts - before, len(names)) - 1]
            break
    out.elapsed_s = time.perf_counter() - t0
    return out


def violation(r: MultiProveResult) -> RankViolation | None:
    return r.failure.violations[0] if r.failure is not None and r.failure.violations else None
