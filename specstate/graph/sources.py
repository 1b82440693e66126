"""The inputs of the abstract graph: exploration (default), fuzz cases, a GPU recording, and
a ``--trace`` path laid over any of them.

- ``exploration_graph``: the sweep BFS (``transitions.explored_transitions``); every edge is
  allowed and taken, counts = how often the search took it.
- ``fuzz_graph``: the exploration gives the allowed edges; the seeded generator's cases
  (``specstate reproduce --seed N``, the same action lists the GPU replay uses), run on the
  same config, give the taken ones. The Hypothesis state machine keeps no log of its runs,
  so the generator stands in for "the fuzzer's runs".
- ``recording_graph``: a real recording (``REC.jsonl.gz``) of any release turned into actions by
  ``integration.conform.load`` and the shared conformance route (``workload`` of ``integration/walk.py``
  with the recording's release's ``CONFORMANCE``, through its adapter) and replayed on the model;
  the exploration of the recording's config gives the allowed edges.
- ``overlay_trace``: a failure trace replayed under the graph's variant; its steps number
  the edges they take.
"""

from __future__ import annotations

from pathlib import Path

from specstate.fuzz.generate import generate_case
from specstate.fuzz.trace import Trace
from specstate.graph.abstraction import Abstraction, abstract_state
from specstate.graph.build import AbstractGraph
from specstate.graph.transitions import ExploreStats, SweepBounds, explored_transitions, run_transitions
from specstate.model import SpecConfig, Variant, as_variant

__all__ = ["exploration_graph", "fuzz_graph", "recording_graph", "overlay_trace"]


def _explored(config: SpecConfig, variant: Variant | str, bounds: SweepBounds, abstraction: Abstraction,
              *, taken: bool, title: str) -> AbstractGraph:
    v = as_variant(variant)
    g = AbstractGraph(title=title, config=v.configure(config), family=v.family_name)
    stats = ExploreStats()
    g.add_all(explored_transitions(config, v, bounds, abstraction, stats), taken=taken, allowed=True)
    levels = ",".join(map(str, bounds.levels)) if bounds.levels else "seed levels"
    g.notes.append(f"exploration: bursts of {levels}; {stats.states} states, {stats.transitions} transitions"
                   + ("" if stats.complete else " (bounded)"))
    return g


def exploration_graph(config: SpecConfig, variant: Variant | str, bounds: SweepBounds = SweepBounds(),
                      abstraction: Abstraction = abstract_state) -> AbstractGraph:
    v = as_variant(variant)
    return _explored(config, v, bounds, abstraction, taken=True,
                     title=f"{v.name}: explored (edge counts = BFS transitions)")


def fuzz_graph(config: SpecConfig, variant: Variant | str, runs: int, *, length: int = 300,
               bounds: SweepBounds = SweepBounds(), abstraction: Abstraction = abstract_state) -> AbstractGraph:
    v = as_variant(variant)
    g = _explored(config, v, bounds, abstraction, taken=False,
                  title=f"{v.name}: {runs} fuzz cases over the exploration")
    failed = 0
    for seed in range(runs):
        _, actions = generate_case(seed, config=config, length=length)
        ts = run_transitions(config, v, actions, abstraction)
        failed += bool(ts and ts[-1].violations)
        g.add_all(ts, taken=True, allowed=False)
    g.notes.append(f"input: generator seeds 0..{runs - 1}, {length} actions each; {failed} failed")
    return g


def recording_graph(path: Path | str, variant: Variant | str, threshold: int | None, *, bounds: SweepBounds = SweepBounds(),
                    abstraction: Abstraction = abstract_state) -> AbstractGraph:
    from specstate.integration.catalog import adapter_of
    from specstate.integration.conform import check_pairing, load

    records = load(path)
    check_pairing(path, records, variant)  # a recording of another family than the variant's is refused
    # the recording's release reads it into the workload the model replays (its adapter's ``workload``)
    config, actions, what = adapter_of(records).workload(path, threshold, records)
    v = as_variant(variant)
    g = _explored(config, v, bounds, abstraction, taken=False,
                  title=f"{v.name}: recording {Path(path).name} over the exploration")
    ts = run_transitions(config, v, actions, abstraction)
    g.add_all(ts, taken=True, allowed=False)
    g.notes.append(f"input: {what}, "
                   f"{len(ts)} model steps{'; ends in a violation' if ts and ts[-1].violations else ''}")
    return g


def overlay_trace(g: AbstractGraph, trace: Trace, variant: Variant | str, abstraction: Abstraction = abstract_state) -> int:
    """Number the edges of ``trace``'s path (replayed under ``variant``); returns its length."""
    v = as_variant(variant)
    ts = run_transitions(trace.config, v, trace.actions, abstraction)
    g.add_trace(ts)
    end = f"; ends: {ts[-1].violations[0]}" if ts and ts[-1].violations else "; no violation"
    g.notes.append(f"--trace: {len(ts)} steps of a {trace.variant} trace, replayed under {v.name}{end}")
    return len(ts)
