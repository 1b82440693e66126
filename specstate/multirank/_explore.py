"""``explore`` on several ranks: breadth-first search for the shortest trace that breaks a
cross-rank invariant, with states merged by rank symmetry and by the single-rank reduced key.

Owns the search's key (``multi_key``) and alphabet (``multi_alphabet``); the search keeps the
*concrete* state of each class it meets (the first one reached) and its concrete path, so a
counterexample is a trace as found, never renamed back.

Why the key is sound (two states with one key have the same futures, up to a renaming that every
invariant's verdict ignores, so breadth-first search over keys finds a violation at the same depth
as over states, and reports "none" exactly when the unreduced search does):

1. **Rank rotation.** The multi-rank step treats ranks alike but for their *order*: the MLP sync
   gathers every rank's row in rank order, every rank derives its collective sizes from that list,
   and the policies decide from it through symmetric functions (``max``, ``sum``: ``_policy.py``);
   the cross-rank invariants ask whether every rank agrees (a symmetric question: that they compare
   with rank 0 only names the rank reported); the single-rank invariants are per rank. What breaks
   full symmetry is routing. Round robin (``DataParallelController.round_robin_scheduler``) sends
   the next arrival to rank ``counter`` and then ``counter + 1``: renaming rank ``r`` as ``r - k``
   (mod N) together with the counter maps every future of a state onto a future of the renamed one,
   and no other renaming does (a transposition of two ranks changes which one the next-but-one
   arrival reaches). So the key rotates the ranks until the counter's rank comes first: one
   representative per rotation class, the counter itself dropped (always 0 there). The gathered
   lists a rank stores as its switch decision's context (``_step._with_context``, compared by
   ``stable-switch-decision`` for equality only) are rotated with the ranks.
   With an alphabet of routed arrivals only (``routed_dp_rank``, one per rank: the alphabet is
   closed under every rotation) the counter never moves and every rotation is a symmetry: the key is
   the set of all N rotations (the orbit). ``--load-balance-method total_requests`` sends an arrival
   to ``total_requests.index(min(...))``, the *lowest* rank among the least loaded: that tie-break
   is invariant under no non-trivial renaming of ranks, so there the ranks are not reduced (the key
   keeps their order and the budget).
2. **Per rank, the single-rank reduced key** (``fuzz.explore.canonical_renamed(reduce=True,
   symmetric=True)``, docs/fuzzing.md "Reduction", ``fuzz/symmetry.py``): step counters, spent
   fields of finished requests, the older switch decision, the radix tree's ids, and request ids
   renamed in a canonical order. Its argument carries over because the multi-rank layer reads of a
   rank's outcome only what that argument preserves (the batch kind, the batch's row *count*, the
   forwards' phases, extend lengths, widths and rows, a crash) and the multi-rank alphabet names no
   request id (its arrivals name none, its steps no EOS, it has no abort), so it is symmetric in the
   single-rank sense. The global request map (``MultiState.owner``) and the action count are
   dropped from the key: only an action naming a global id (an EOS, an abort, a shared prefix)
   reads the map, and the alphabet has none. The erasures a variant's own operation can read are
   kept as in single-rank ``explore`` (``fuzz.reads.kept`` of the variant every rank runs; the
   agreed decision the multi-rank layer forces in is a constant and reads nothing).

``tests/test_multirank_more.py`` checks that the reduced and unreduced searches agree (the same
verdict and counterexample length) on four policies at dp 2, and that a rotated state has the key
of the state it came from.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

from specstate.model import Arrive, Step
from specstate.model.state import ModelState
from specstate.multirank._invariants import check_multi
from specstate.multirank._routing import RoutedArrive
from specstate.multirank._run import MultiResult, run_multi
from specstate.multirank._state import MultiState, initial_multi_state
from specstate.multirank._step import MultiModel, multi_step

__all__ = ["ExploreResult", "explore_multi", "multi_alphabet", "multi_key", "rotate"]


@dataclass
class ExploreResult:
    depth: int
    states: int  #: classes of states (reduced) or states
    transitions: int
    elapsed_s: float
    counterexample: MultiResult | None = None
    reduced: str = "none"  #: ``rotation``, ``orbit`` (every rotation), ``ranks-ordered`` or ``none``
    #: (from, action, to, violations) per explored transition, when asked (``graph``)
    edges: list[tuple[int, Any, int, tuple[Any, ...]]] = field(default_factory=list)
    labels: dict[int, str] = field(default_factory=dict)


def multi_alphabet(model: MultiModel, arrive_max: int = 16, *, routed: bool = False) -> list[Any]:
    """Two kinds of arrival (each to every rank, ``routed``), a step accepting nothing, a step
    accepting everything."""
    top = model.config.max_accept_len
    arrivals: list[Any] = [Arrive(8, 3), Arrive(8, 1)]
    if routed:
        arrivals = [RoutedArrive(a, r) for a in arrivals for r in range(model.ranks.ranks)]
    return arrivals + [Step(), Step((top,) * arrive_max)]


def rotate(rank: ModelState, k: int, n: int) -> ModelState:
    """``rank`` with the gathered lists its switch decisions hold (``Decision.context``, N long)
    rotated so that rank ``k`` comes first."""
    ds = rank.decisions
    if not k or not any(len(d.context) == n for d in ds):
        return rank
    from specstate.model.values import evolve

    return rank.evolve(decisions=tuple(evolve(d, context=d.context[k:] + d.context[:k]) if len(d.context) == n else d
                                       for d in ds))


def multi_key(model: MultiModel, *, reduce: bool = True, routed: bool = False
              ) -> tuple[Callable[[MultiState], Hashable], str]:
    """The search's key function and the rank reduction it makes (module doc)."""
    from specstate.fuzz.explore import canonical
    from specstate.fuzz.reads import kept

    if not reduce:
        return (lambda s: s), "none"
    keep = frozenset(kept(model.ops))
    n = model.ranks.ranks

    def one(rank: ModelState, k: int) -> ModelState:
        return canonical(rotate(rank, k, n), reduce=True, symmetric=True, keep=keep)

    def rotated(s: MultiState, k: int) -> tuple[ModelState, ...]:
        return tuple(one(s.ranks[(k + i) % n], k) for i in range(n))

    if model.ranks.load_balance_method == "total_requests":
        return (lambda s: (tuple(one(r, 0) for r in s.ranks), s.budget)), "ranks-ordered"
    if routed:
        return (lambda s: frozenset(rotated(s, k) for k in range(n))), "orbit"
    return (lambda s: rotated(s, s.round_robin_counter % n)), "rotation"


def explore_multi(model: MultiModel, depth: int = 10, *, arrive_max: int = 16, max_states: int = 200_000,
                  reduce: bool = True, routed: bool = False, graph: bool = False) -> ExploreResult:
    """Breadth-first over ``multi_alphabet`` from the empty state; the first violating trace found
    is a shortest one over that alphabet (``reduce``: one node per class of ``multi_key``).
    ``graph``: keep every transition (``ExploreResult.edges``) and every node's label, and go on
    past violations (a violating transition is an edge into a terminal node)."""
    t0 = time.perf_counter()
    key, how = multi_key(model, reduce=reduce, routed=routed)
    start = initial_multi_state(model.config, model.ranks.ranks)
    ids: dict[Hashable, int] = {key(start): 0}
    queue: deque[tuple[MultiState, tuple[Any, ...], int]] = deque([(start, (), 0)])
    transitions = 0
    alphabet = multi_alphabet(model, arrive_max, routed=routed)
    reached = 0
    out = ExploreResult(0, 0, 0, 0.0, reduced=how)
    if graph:
        out.labels[0] = _label(start)
    ndt = model.config.speculative_num_draft_tokens
    while queue:
        state, path, node = queue.popleft()
        reached = max(reached, len(path))
        if len(path) >= depth:
            continue
        for a in alphabet:
            transitions += 1
            o = multi_step(model, state, a)
            bad = check_multi(o, ndt, model)
            if bad and not graph:
                found = run_multi(model, path + (a,))
                return ExploreResult(len(path) + 1, len(ids), transitions, time.perf_counter() - t0, found, how)
            k = key(o.state)
            dst = ids.get(k)
            if dst is None and len(ids) < max_states:
                dst = ids[k] = len(ids)
                if graph:
                    out.labels[dst] = _label(o.state)
                if not bad:
                    queue.append((o.state, path + (a,), dst))
                elif out.counterexample is None:
                    out.counterexample = run_multi(model, path + (a,))
            if graph and dst is not None:
                out.edges.append((node, a, dst, tuple(bad)))
    out.depth, out.states, out.transitions, out.elapsed_s = reached, len(ids), transitions, time.perf_counter() - t0
    return out


def _label(s: MultiState) -> str:
    """``[2w 1r | 0 | 3r]``: per rank, its waiting and running requests."""
    parts = []
    for r in s.ranks:
        run = len([x for x in r.running.rids if r.req(x).live]) + (len(r.last_batch.rids) if r.last_batch else 0)
        parts.append(" ".join(t for t in (f"{len(r.waiting)}w" if r.waiting else "", f"{run}r" if run else "") if t)
                     or "0")
    return "[" + " | ".join(parts) + "]"


