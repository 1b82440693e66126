"""Minimal counterexamples: delta debugging over actions and their arguments, then a
bounded breadth-first search that proves (or refutes) minimality.

The predicate throughout is "the run still violates the same invariant" (at its last step:
a run stops at its first violation, so a candidate is cut to the actions it applied).

1. ``ddmin`` (Zeller & Hildebrandt) over the action list. Request ids are arrival indices,
   so dropping an ``Arrive`` renumbers later requests: actions are kept as *items* whose
   aborts and EOS name an arrival, not an rid, and rids are recomputed when a subset is
   rebuilt (an abort of a dropped arrival is dropped; EOS entries are filtered).
2. Argument lowering, to a fixpoint: prompt lengths and ``max_new_tokens`` go to 1, halve,
   or decrement; accept tuples go to ``()`` (all 1), lose trailing entries, entries drop to
   1; EOS sets lose members.
3. ``shortest_violation`` (``explore.py``) from the initial state over an alphabet made of
   the minimised trace's own actions (plus an abort and an EOS step per live request),
   to depth ``len - 1``. None found and the search exhaustive: *proven minimal* within that
   bound and alphabet; a shorter one found replaces the result.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence, TypeVar

from specstate.check import RunResult, run_actions
from specstate.errors import NotFailing
from specstate.fuzz.explore import fixed_alphabet, shortest_violation
from specstate.model import Abort, Action, Arrive, SpecConfig, Step, Variant, as_variant

__all__ = ["ddmin", "Item", "to_items", "from_items", "MinimizeResult", "minimize_failure", "minimize_actions"]

T = TypeVar("T")


def ddmin(items: Sequence[T], test: Callable[[list[T]], bool]) -> list[T]:
    """A 1-minimal subsequence of ``items`` for which ``test`` holds (``test(items)`` must)."""
    cur, n = list(items), 2
    while len(cur) >= 2:
        size = max(len(cur) // n, 1)
        chunks = [cur[i:i + size] for i in range(0, len(cur), size)]
        reduced = False
        for i in range(len(chunks)):
            rest = [x for j, c in enumerate(chunks) if j != i for x in c]
            if rest and test(rest):
                cur, n, reduced = rest, max(n - 1, 2), True
                break
        if not reduced:
            if n >= len(cur):
                break
            n = min(n * 2, len(cur))
    return cur


@dataclass(frozen=True)
class Item:
    """An action whose request references are arrival *identities* (``Arrive`` items get a
    unique ``ident``; an abort's ``target`` and a step's ``eos`` name those)."""

    action: Action
    ident: int = -1  #: for an Arrive: its identity
    target: int = -1  #: for an Abort: the identity of the aborted arrival
    eos: tuple[int, ...] = ()  #: for a Step: identities whose next token is EOS


def to_items(actions: Sequence[Action]) -> list[Item]:
    ids: list[int] = []  # rid -> identity
    out: list[Item] = []
    for a in actions:
        if isinstance(a, Arrive):
            ids.append(len(ids))
            out.append(Item(a, ident=ids[-1]))
        elif isinstance(a, Abort):
            out.append(Item(a, target=ids[a.rid] if a.rid < len(ids) else -1))
        else:
            out.append(Item(a, eos=tuple(ids[r] for r in a.eos if r < len(ids))))
    return out


def from_items(items: Sequence[Item]) -> list[Action]:
    rid: dict[int, int] = {}
    out: list[Action] = []
    for it in items:
        a = it.action
        if isinstance(a, Arrive):
            if a.prefix_of is not None:  # identities are the original rids; the shared prompt may be gone
                of = rid.get(a.prefix_of)
                a = replace(a, prefix_of=of, shared_len=min(a.shared_len, a.prompt_len) if of is not None else 0)
            rid[it.ident] = len(rid)
            out.append(a)
        elif isinstance(a, Abort):
            if it.target in rid:
                out.append(Abort(rid[it.target]))
        else:
            out.append(Step(accept=a.accept, eos=tuple(sorted(rid[i] for i in it.eos if i in rid))))
    return out


def _lower_int(x: int) -> list[int]:
    return sorted({v for v in (1, x // 2, x - 1) if 1 <= v < x})


def _simpler(it: Item) -> list[Item]:
    """Candidate simplifications of one item, simplest first."""
    a = it.action
    if isinstance(a, Arrive):
        unshared = [replace(it, action=Arrive(a.prompt_len, a.max_new_tokens))] if a.prefix_of is not None else []
        return (unshared
                + [replace(it, action=replace(a, prompt_len=p, shared_len=min(a.shared_len, p)))
                   for p in _lower_int(a.prompt_len)]
                + [replace(it, action=replace(a, max_new_tokens=m)) for m in _lower_int(a.max_new_tokens)])
    if not isinstance(a, Step):
        return []
    out: list[Item] = []
    acc = a.accept
    while acc and acc[-1] == 1:
        acc = acc[:-1]
    if acc != a.accept or acc:
        out.append(replace(it, action=Step((), a.eos)))
        out.extend(replace(it, action=Step(acc[:k], a.eos)) for k in range(len(acc) - 1, 0, -1))
        out.extend(replace(it, action=Step(acc[:i] + (v,) + acc[i + 1:], a.eos))
                   for i, x in enumerate(acc) for v in _lower_int(x))
    out.extend(replace(it, eos=it.eos[:i] + it.eos[i + 1:]) for i in range(len(it.eos)))
    return out


@dataclass
class MinimizeResult:
    actions: list[Action]
    result: RunResult
    start_length: int
    ddmin_length: int
    runs: int  #: predicate evaluations
    bfs_depth: int
    bfs_exhaustive: bool
    bfs_shorter: bool  #: the BFS found a shorter counterexample (now in ``actions``)

    @property
    def proven_minimal(self) -> bool:
        return self.bfs_exhaustive and not self.bfs_shorter and self.bfs_depth >= len(self.actions) - 1

    def verdict(self) -> str:
        n = len(self.actions)
        if self.proven_minimal:
            return f"length {n}, proven minimal (BFS to depth {self.bfs_depth}: no shorter counterexample)"
        if self.bfs_shorter:
            return f"length {n}, found by BFS (delta debugging had {self.ddmin_length})"
        return f"length {n}, not proven minimal (BFS to depth {self.bfs_depth} hit its state budget)"

    def notes(self) -> dict[str, object]:
        return {"minimized_from": self.start_length, "ddmin_length": self.ddmin_length, "length": len(self.actions),
                "proven_minimal": self.proven_minimal, "bfs_depth": self.bfs_depth, "verdict": self.verdict()}


def minimize_actions(config: SpecConfig, variant: Variant | str, actions: Sequence[Action], invariant: str, *,
                     on_run: Callable[[], None] | None = None) -> tuple[list[Action], int]:
    """Delta debugging and argument lowering; returns the actions and the runs it took.
    ``on_run``: called after every predicate evaluation (progress)."""
    runs = 0

    def cut(cand: list[Item]) -> list[Item] | None:
        nonlocal runs
        runs += 1
        if on_run is not None:
            on_run()
        res = run_actions(config, variant, from_items(cand))
        if invariant in {v.invariant for v in res.violations}:
            return to_items(res.actions)
        return None

    items = cut(to_items(actions))
    if items is None:
        raise ValueError(f"Expected the trace to violate {invariant!r} under {variant!r} but it does not")
    changed = True
    while changed:
        items = ddmin(items, lambda c: cut(c) is not None)
        items = cut(items) or items
        changed = False
        for i in range(len(items)):
            for cand in _simpler(items[i]):
                got = cut(items[:i] + [cand] + items[i + 1:])
                if got is not None:
                    items, changed = got, True
                    break
            if i >= len(items) - 1:
                break
    return from_items(items), runs


def _violates(config: SpecConfig, v: Variant, actions: Sequence[Action], invariant: str) -> bool:
    """The breadth-first check's shorter trace replays to the same invariant's violation (its key
    keeps what the variant's operations can read, ``fuzz.reads``; this replay is the last word)."""
    return invariant in {x.invariant for x in run_actions(config, v, actions).violations}


def minimize_failure(config: SpecConfig, variant: Variant | str, actions: Sequence[Action], *, invariant: str | None = None,
                     bfs_depth: int | None = None, bfs_states: int = 50_000,
                     on_run: Callable[[], None] | None = None) -> MinimizeResult:
    """Minimise a failing trace of ``variant`` (``config`` before the variant's changes). The
    breadth-first check (``fuzz.explore.shortest_violation``) still takes the variant's name: an
    unregistered ``Variant`` object is run, cut and replayed here, but that check looks it up."""
    v = as_variant(variant)
    first = run_actions(config, v, actions)
    if first.first is None:
        raise NotFailing(f"Expected a failing trace under {v.name!r} but every invariant held "
                         f"(nothing to minimise; `specstate reproduce` shows the run)")
    inv = invariant or first.first.invariant
    small, runs = minimize_actions(config, v, first.actions, inv, on_run=on_run)
    depth = len(small) - 1 if bfs_depth is None else min(bfs_depth, len(small) - 1)
    shorter, exhaustive = shortest_violation(config, v.name, fixed_alphabet(small), max_depth=depth,
                                             invariant=inv, max_states=bfs_states)
    best = shorter if shorter is not None and len(shorter) < len(small) and _violates(config, v, shorter, inv) else small
    return MinimizeResult(best, run_actions(config, v, best), len(first.actions), len(small), runs, depth,
                          exhaustive, best is not small)
