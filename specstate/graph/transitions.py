"""Where the edges come from: abstract transitions of an exploration or of replayed runs.

A :class:`Transition` is one model step seen through the abstraction: source node, the
operation, destination node (or the failure it ended in) and the violations it raised.

- ``explored_transitions`` is a breadth-first search in the spirit of ``fuzz/explore.py``,
  with an alphabet shaped like the seed's benchmark (the *sweep alphabet*): from the empty
  server, a burst of C requests for each concurrency level C (the seed's levels 1, 2, 5, 10,
  30, ... up to ``max_running_requests``; once every request has finished, a burst of a
  larger level, as the seed's sweep goes up; request j wants ``3 + j % 4`` tokens, so batches
  shrink back through the threshold); while requests are live: a step accepting 1 token per
  request, a step accepting all, a step with EOS for the first running request, one more
  arrival while speculation is allowed and the queue is empty (at most ``extra_arrivals`` in
  all), and no abort (EOS covers finishing). Concrete
  states are deduplicated by ``explore.canonical`` plus the last target forward (the node
  depends on it); an idle server only by its node and last burst level (one representative
  goes on to the next burst), so the search stays small: an under-approximation, like any
  bounded exploration.
- ``run_transitions`` replays one action list (a fuzz case, a recording, a trace) and stops
  at its first violation, as ``check.Run`` does.
"""

from __future__ import annotations

from collections import deque
from typing import Hashable, Iterator, Sequence

from specstate.heap import frozen_heap
from specstate.model import Action, SpecConfig, Variant, as_variant, initial_state
from specstate.graph.abstraction import Abstraction, abstract_state
from specstate.graph.walk import (  # noqa: F401  (re-exported: the names this module had before graph/walk.py)
    SEED_LEVELS, Child, ExploreStats, Failure, SweepBounds, SweepEntry, Transition, Walker, apply_macro, is_idle_key,
    macros, short_violation, start_entry, sweep_levels)

__all__ = ["Failure", "Transition", "SweepBounds", "sweep_levels", "explored_transitions", "run_transitions"]


def run_transitions(config: SpecConfig, variant: Variant | str, actions: Sequence[Action],
                    abstraction: Abstraction = abstract_state) -> list[Transition]:
    """The transitions of one run, in step order, up to and including its first violation."""
    v = as_variant(variant)
    walker = Walker(v, abstraction)
    state, last, out = initial_state(v.configure(config)), None, []
    for a in actions:
        t, state, last = walker.advance(state, last, a)
        out.append(t)
        if isinstance(t.dst, Failure):
            break
    return out


def explored_transitions(config: SpecConfig, variant: Variant | str, bounds: SweepBounds = SweepBounds(),
                         abstraction: Abstraction = abstract_state,
                         stats: ExploreStats | None = None) -> Iterator[Transition]:
    """Every transition of the sweep BFS (see the module doc), in BFS order.

    ``bounds.jobs`` > 1 runs it in that many forked processes (``graph.parallel``), with the
    same transitions in the same order; it falls back to this process where it cannot show
    that (``stats.parallel`` says which ran)."""
    stats = stats if stats is not None else ExploreStats()
    if bounds.jobs > 1:
        from specstate.graph.parallel import parallel_sweep

        done = parallel_sweep(config, variant, bounds, abstraction, stats)
        if done is not None:
            yield from done
            return
    yield from _serial_sweep(config, variant, bounds, abstraction, stats)


def _serial_sweep(config: SpecConfig, variant: Variant | str, bounds: SweepBounds, abstraction: Abstraction,
                  stats: ExploreStats) -> Iterator[Transition]:
    walker, root, root_key, levels = start_entry(config, variant, bounds, abstraction)
    seen = {root_key}
    frontier: deque[SweepEntry] = deque([root])
    with frozen_heap():
        yield from _bfs(walker, frontier, seen, bounds, levels, stats)
    stats.states = len(seen)
    stats.parallel = stats.parallel or "serial"


def _bfs(walker: "Walker", frontier: deque[SweepEntry], seen: set[Hashable], bounds: SweepBounds,
         levels: tuple[int, ...], stats: ExploreStats) -> Iterator[Transition]:
    while frontier:
        e = frontier.popleft()
        if e.depth >= bounds.max_depth:
            stats.complete = False
            continue
        for macro in macros(e, bounds, levels, walker.family):
            child = apply_macro(walker, e, macro, bounds)
            for t in child.transitions:
                stats.transitions += 1
                yield t
            if child.key is None or child.key in seen:
                continue
            if len(seen) >= bounds.max_states:
                stats.complete = False
                continue
            seen.add(child.key)
            frontier.append(child.entry)  # type: ignore[arg-type]
