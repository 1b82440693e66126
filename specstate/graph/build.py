"""The abstract graph as data: nodes, edges keyed ``(source, operation, destination)``.

An edge remembers how often the *input* runs took it (``count``), whether the exploration
reaches it (``allowed``; an allowed edge no input run took is drawn dashed), the invariants
it violated (``violations``, e.g. ``worker-crash: RuntimeError 160 vs 10``) and the steps
of the ``--trace`` path that went along it (``trace_steps``, 1-based).

When the input *is* the exploration, every edge is allowed and taken: counts are how often
the breadth-first search took it, and nothing is dashed. Dashed edges appear when the input
is a set of runs (``--from-fuzz``, ``--from-recording``) laid over the exploration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from specstate.model import SpecConfig
from specstate.graph.abstraction import BATCH_BUCKETS, AbstractState
from specstate.graph.transitions import Failure, Transition

__all__ = ["EdgeInfo", "AbstractGraph", "EdgeKey", "node_order"]

EdgeKey = tuple[str, str, str]  #: (source node key, operation, destination node key)
Node = AbstractState | Failure


@dataclass
class EdgeInfo:
    count: int = 0  #: times the input runs took it
    allowed: bool = False  #: the exploration reaches it
    violations: list[str] = field(default_factory=list)  #: distinct, in the order first seen
    trace_steps: list[int] = field(default_factory=list)  #: 1-based steps of the ``--trace`` path

    @property
    def taken(self) -> bool:
        return self.count > 0 or bool(self.trace_steps)


@dataclass
class AbstractGraph:
    title: str
    config: SpecConfig  #: the explored config (after the variant's changes): T and capture sizes
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: dict[EdgeKey, EdgeInfo] = field(default_factory=dict)
    initial: str | None = None
    notes: list[str] = field(default_factory=list)  #: lines for the legend (input, bounds)
    #: the explored variant's family (``Family.name``): its switch threshold is the legend's T
    family: str | None = None

    def add(self, t: Transition, *, taken: bool, allowed: bool, trace_step: int | None = None) -> EdgeInfo:
        for n in (t.src, t.dst):
            self.nodes.setdefault(n.key, n)
        if self.initial is None:
            self.initial = t.src.key
        info = self.edges.setdefault((t.src.key, t.op, t.dst.key), EdgeInfo())
        info.count += 1 if taken else 0
        info.allowed = info.allowed or allowed
        if trace_step is not None:  # the trace's own failure is the one its label names
            info.violations[:] = list(t.violations) + [v for v in info.violations if v not in t.violations]
            info.trace_steps.append(trace_step)
        info.violations.extend(v for v in t.violations if v not in info.violations)
        return info

    def add_all(self, ts: Iterable[Transition], *, taken: bool, allowed: bool) -> None:
        for t in ts:
            self.add(t, taken=taken, allowed=allowed)

    def add_trace(self, ts: Iterable[Transition]) -> None:
        for i, t in enumerate(ts, 1):
            self.add(t, taken=False, allowed=False, trace_step=i)

    def failing_edges(self) -> list[EdgeKey]:
        return [k for k, e in sorted(self.edges.items()) if e.violations]

    @property
    def counts(self) -> tuple[int, int]:
        return len(self.nodes), len(self.edges)


def node_order(n: Node) -> tuple[int, str]:
    """Sort key: batch-size bucket first (the drawing's columns), failures last."""
    if isinstance(n, Failure):
        return len(BATCH_BUCKETS), n.key
    return BATCH_BUCKETS.index(n.batch), n.key
