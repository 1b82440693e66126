"""The sweep BFS of ``graph.transitions`` on several cores, with the serial sweep's result.

Owns no model state. The serial sweep is a breadth-first search whose only links between
bursts are the idle server's keys (``("idle", node, level)``): a busy server's state holds every
request ever seen, so two bursts from different idle servers never meet again. The parallel
sweep cuts the search there. A *task* is one macro action of an idle representative and the
whole search below it, down to the idle servers it reaches (their first occurrence per key
only); tasks run in forked processes (``jobs`` of them; the processes inherit the variant, the
abstraction and the representatives, nothing is sent to them but a task number). A
*generation* is every task of the representatives the previous generation found.

The result is the serial sweep's, transition for transition and in the same order: in a FIFO
breadth-first search the entries of one depth are popped in the lexicographic order of their
*paths* (the macro indices from the root), so every transition is sorted by (depth, path,
macro) and the first occurrence of a key is the one with the smallest (depth, path). Three
things would make the cut search differ from the serial one, and each is checked, not assumed:

- a busy state reached from two tasks (the serial search expands it once): every task returns
  the hashes of the keys it expanded (forked processes share ``PYTHONHASHSEED``), and a hash
  seen in two tasks sends the sweep back to the serial search;
- an idle key whose earliest occurrence turns up in a later generation than the one that chose
  its representative: checked on every occurrence, same fallback;
- more states than ``bounds.max_states`` (the serial search stops adding at the cap, in an
  order a cut search cannot follow): same fallback.

A false alarm (two different keys with one hash) only costs the serial run's time. Where
``fork`` is missing (not Linux) or a result does not pickle, the serial search runs too;
``ExploreStats.parallel`` says which ran.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import pickle
from collections import deque
from dataclasses import dataclass
from typing import Any, Hashable

from specstate.fuzz.explore_parallel import default_jobs, worker_start
from specstate.graph.abstraction import Abstraction
from specstate.heap import frozen_heap
from specstate.graph.walk import (ExploreStats, SweepBounds, Transition, SweepEntry, Walker, apply_macro,
                                  is_idle_key, macros, start_entry)
from specstate.model import SpecConfig, Variant

__all__ = ["parallel_sweep", "default_jobs"]

MacroPath = tuple[int, ...]  #: macro indices from the root; its length is the entry's depth
Order = tuple[int, MacroPath]  #: (depth, path): the serial search's pop order


@dataclass(frozen=True)
class _Job:
    """What the forked processes inherit: the sweep's walker (variant, abstraction) and bounds."""

    walker: Walker
    bounds: SweepBounds
    levels: tuple[int, ...]


Task = tuple[SweepEntry, MacroPath, int]  #: (representative, its path, macro index): sent to a process


@dataclass
class _TaskResult:
    transitions: list[tuple[Order, int, tuple[Transition, ...]]]  #: (entry order, macro index, transitions)
    hashes: list[int]  #: hash of every busy key the task expanded
    idle: dict[Hashable, tuple[Order, SweepEntry]]  #: first occurrence of each idle key
    complete: bool


class _Fallback(Exception):
    """The cut search cannot show it equals the serial one (the message says why)."""


_JOB: _Job | None = None


def _order(path: MacroPath) -> Order:
    return (len(path), path)


def _run_task(task: Task) -> _TaskResult:
    """One macro of a representative and the search below it, in a process of the pool."""
    job = _JOB
    assert job is not None
    rep, rep_path, i = task
    walker, bounds = job.walker, job.bounds
    out = _TaskResult([], [], {}, True)
    seen: set[Hashable] = set()
    frontier: deque[tuple[SweepEntry, MacroPath]] = deque()

    nodes: dict[Hashable, Any] = {}  # one object per node: the result pickles each once

    def expand(e: SweepEntry, path: MacroPath, j: int, macro: list) -> None:
        child = apply_macro(walker, e, macro, bounds)
        ts = tuple(Transition(nodes.setdefault(t.src, t.src), t.op, nodes.setdefault(t.dst, t.dst), t.violations)
                   for t in child.transitions)
        out.transitions.append((_order(path), j, ts))
        if child.key is None:
            return
        child_path = path + (j,)
        if is_idle_key(child.key):
            out.idle.setdefault(child.key, (_order(child_path), child.entry))  # type: ignore[arg-type]
            return
        if child.key in seen:
            return
        seen.add(child.key)
        if len(seen) > bounds.max_states:
            raise _Fallback("more states than --max-states in one task")
        out.hashes.append(hash(child.key))
        frontier.append((child.entry, child_path))  # type: ignore[arg-type]

    expand(rep, rep_path, i, macros(rep, bounds, job.levels, walker.family)[i])
    while frontier:
        e, path = frontier.popleft()
        if e.depth >= bounds.max_depth:
            out.complete = False
            continue
        for j, macro in enumerate(macros(e, bounds, job.levels, walker.family)):
            expand(e, path, j, macro)
    return out


class _Pool:
    """``jobs`` forked processes for the whole sweep: they inherit the job and keep their caches
    (graph runners, tensors) from one generation to the next."""

    def __init__(self, job: _Job, jobs: int) -> None:
        global _JOB
        _JOB = job
        self.job = job
        try:
            self.pool = multiprocessing.get_context("fork").Pool(jobs, initializer=worker_start)
        finally:
            _JOB = None

    def run(self, tasks: list[Task]) -> list[_TaskResult]:
        job = self.job
        # the biggest tasks (the largest bursts) first, so the processes finish together
        size = [len(macros(rep, job.bounds, job.levels, job.walker.family)[i]) for rep, _, i in tasks]
        todo = sorted(range(len(tasks)), key=lambda k: -size[k])
        results: list[_TaskResult | None] = [None] * len(tasks)
        for k, r in zip(todo, self.pool.imap(_run_task, [tasks[k] for k in todo])):
            results[k] = r
        return results  # type: ignore[return-value]

    def close(self) -> None:
        self.pool.terminate()
        self.pool.join()


def parallel_sweep(config: SpecConfig, variant: Variant | str, bounds: SweepBounds, abstraction: Abstraction,
                   stats: ExploreStats) -> list[Transition] | None:
    """The serial sweep's transitions in its order, computed in ``bounds.jobs`` processes;
    ``None`` (``stats.parallel`` says why) where the serial search must run instead."""
    try:
        return _sweep(config, variant, bounds, abstraction, stats)
    except _Fallback as e:
        stats.parallel = f"serial (parallel fell back: {e})"
    except (ValueError, OSError, pickle.PicklingError, AttributeError, TypeError,
            multiprocessing.pool.MaybeEncodingError) as e:  # type: ignore[attr-defined]  # not in typeshed's pool
        # no ``fork`` here, or a user abstraction's nodes that do not pickle; a real error of
        # the model raises again in the serial search
        stats.parallel = f"serial (parallel fell back: {type(e).__name__})"
    stats.states, stats.transitions, stats.complete = 0, 0, True
    return None


def _sweep(config: SpecConfig, variant: Variant | str, bounds: SweepBounds, abstraction: Abstraction,
           stats: ExploreStats) -> list[Transition]:
    walker, root, root_key, levels = start_entry(config, variant, bounds, abstraction)
    with frozen_heap():  # the pool's processes then copy no inherited page for their collector's sake
        pool = _Pool(_Job(walker, bounds, levels), bounds.jobs)
        try:
            found, states, complete = _generations(pool, root, root_key, bounds, levels)
        finally:
            pool.close()
    found.sort(key=lambda t: (t[0], t[1]))
    out = [t for _, _, ts in found for t in ts]
    stats.states, stats.transitions, stats.complete = states, len(out), complete
    stats.parallel = f"{bounds.jobs} processes"
    return out


def _generations(pool: _Pool, root: SweepEntry, root_key: Hashable, bounds: SweepBounds,
                 levels: tuple[int, ...]) -> tuple[list[tuple[Order, int, tuple[Transition, ...]]], int, bool]:
    """(every task's transitions, states, complete): generation after generation."""
    chosen: dict[Hashable, Order] = {root_key: _order(())}
    busy: set[int] = set()
    busy_count = 0
    found: list[tuple[Order, int, tuple[Transition, ...]]] = []
    complete = True
    generation: list[tuple[SweepEntry, MacroPath]] = [(root, ())]
    while generation:
        tasks: list[Task] = []
        for rep, path in generation:
            if rep.depth >= bounds.max_depth:
                complete = False
                continue
            tasks.extend((rep, path, i) for i in range(len(macros(rep, bounds, levels, pool.job.walker.family))))
        if not tasks:
            break
        candidates: dict[Hashable, tuple[Order, SweepEntry]] = {}
        for r in pool.run(tasks):
            mine = set(r.hashes)
            if not busy.isdisjoint(mine):
                raise _Fallback("two bursts reached one state")
            busy |= mine
            busy_count += len(r.hashes)
            found.extend(r.transitions)
            complete = complete and r.complete
            for key, (order, entry) in r.idle.items():
                if key not in candidates or order < candidates[key][0]:
                    candidates[key] = (order, entry)
        generation = []
        for key, (order, entry) in sorted(candidates.items(), key=lambda kv: kv[1][0]):
            if key in chosen:
                if order < chosen[key]:
                    raise _Fallback("an idle server's first occurrence came late")
                continue
            chosen[key] = order
            generation.append((entry, order[1]))
        if len(chosen) + busy_count > bounds.max_states:
            raise _Fallback("more states than --max-states")
    return found, len(chosen) + busy_count, complete
