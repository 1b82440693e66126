"""The breadth-first search's bookkeeping and labels, shared by the serial search
(``specstate/fuzz/explore.py``) and the parallel one (``specstate/fuzz/explore_parallel.py``).

``_Search`` holds node ids, parent links, depths, the explored ``networkx.DiGraph`` (nodes
carry ``state_label``, edges a count and the ``action_label`` of every action taking one node
to the other) and the first counterexample. It lives below both strategies so that neither
imports the other for it; ``specstate.fuzz.explore`` re-exports every name here.
"""

from __future__ import annotations

from typing import Callable, Hashable, Iterable

from specstate._lazy import lazy_module
from specstate.model import Abort, Action, Arrive, ModelState, Ops

nx = lazy_module("networkx", globals(), "nx")  # imported at the first graph (specstate/_lazy.py)

__all__ = ["Alphabet", "action_label", "state_label", "independent", "commuting", "is_env"]

Alphabet = Callable[[ModelState], list[Action]]


# -- partial-order reduction: the action pairs that commute (docs/fuzzing.md, "Sleep sets") ----

def is_env(a: Action) -> bool:
    """An arrival or an abort: an action that runs no iteration (no forward, no batch)."""
    return isinstance(a, (Arrive, Abort))


def independent(a: Action, b: Action) -> bool:
    """``a`` and ``b`` commute wherever both are enabled (with the operations :func:`commuting`
    accepts): aborts of two different requests, and an arrival (not sharing a prefix) with an
    abort. Two arrivals do not: the waiting queue is FCFS, and the ids follow the order."""
    if isinstance(a, Abort):
        return (isinstance(b, Abort) and a.rid != b.rid) or (isinstance(b, Arrive) and b.prefix_of is None)
    return isinstance(a, Arrive) and a.prefix_of is None and isinstance(b, Abort)


def commuting(ops: Ops, alphabet: Alphabet) -> bool:
    """Whether :func:`independent` holds for these operations and this alphabet: ``arrive`` is
    ``scheduler.arrive`` (it appends to the waiting queue and reads only the number of requests
    and the config) and ``abort`` is ``scheduler.abort`` or a release's own (the v2 family's ``abort_v2``; each
    touches only the aborted request's entry, its place in the waiting queue, and v2's
    ``chunked_abort``); and the alphabet is marked ``commuting`` (``default_alphabet``): of two
    independent actions it offers at a state, it offers each again after the other. A variant
    that overrides either operation (``finish-before-filter``'s abort releases KV into the radix
    tree, whose order is state) is searched without the reduction; so is one that overrides what
    ``arrive`` calls (``validate_input_length``), and any search under an invariant of your own
    (the argument needs every invariant to judge an arrival or an abort by the state after it
    only: ``specstate.fuzz.reads.user_invariants``)."""
    from specstate.fuzz.reads import own, user_invariants
    from specstate.model import scheduler

    return (getattr(alphabet, "commuting", False) is True and ops.arrive is scheduler.arrive
            and (ops.abort is scheduler.abort or ops.abort in _release_aborts()) and own(ops.validate_input_length)
            and not user_invariants())


def _release_aborts() -> list[object]:
    """The ``abort`` each release's own operations hold (``Release.overrides``, asked, never named:
    the v2 family's ``abort_v2``, which later overlap releases keep); a variant's (a known bug's
    ``abort_finishes_running_now``) is none of them."""
    from specstate.model.releases import releases

    return [o["abort"] for r in releases() if (o := r.overrides) is not None and "abort" in o]


def action_label(a: Action) -> str:
    if isinstance(a, Arrive):
        return f"arrive({a.prompt_len},{a.max_new_tokens})"
    if isinstance(a, Abort):
        return f"abort({a.rid})"
    parts = []
    if any(x != 1 for x in a.accept):
        parts.append("accept=" + ",".join(map(str, a.accept)))
    if a.eos:
        parts.append("eos=" + ",".join(map(str, a.eos)))
    return f"step({' '.join(parts)})"


def state_label(s: ModelState) -> str:
    spec = {True: "on", False: "off"}.get(s.decisions[-1].speculate, "-") if s.decisions else "-"
    return (f"w{len(s.waiting)} r{s.running.batch_size}{' +p' if s.last_batch else ''}"
            f" live{len(s.live_reqs())} spec:{spec} kv{s.kv_allocated}")



class _Search:
    """The BFS bookkeeping, shared by the serial and the parallel search: node ids, parent
    links, the graph, the transitions merged, the first counterexample."""

    def __init__(self, start: ModelState, keep_graph: bool, key: Hashable = None) -> None:
        self.ids: dict[Hashable, int] = {start if key is None else key: 0}
        self.transitions = 0
        self.found: list[Action] | None = None  #: the path to the first violating transition merged
        self.interrupted: KeyboardInterrupt | None = None
        self.parent: list[tuple[int, Action] | None] = [None]
        self.depth = [0]
        self.graph = nx.DiGraph() if keep_graph else None
        self.bad_nodes: set[int] = set()  #: nodes first reached by a violating transition (never expanded)
        if self.graph is not None:
            self.graph.add_node(0, label=state_label(start), initial=True)

    def path(self, node: int) -> list[Action]:
        out: list[Action] = []
        while (link := self.parent[node]) is not None:
            node, a = link
            out.append(a)
        return out[::-1]

    def merge(self, src: int, a: Action, key: Hashable, bad: bool, label: str | None = None) -> tuple[int, bool]:
        """One transition of the search (:meth:`add_key`), counted; the first violating one's path
        becomes :attr:`found`."""
        self.transitions += 1
        dst, new = self.add_key(src, a, key, bad, label)
        if bad and self.found is None:
            self.found = self.path(src) + [a]
        return dst, new

    def progress(self, node: int, on_node: Callable[[int, int, int], None] | None) -> None:
        """``on_node(states, transitions, depth)`` after ``node`` was expanded and merged."""
        if on_node is not None:
            on_node(len(self.parent), self.transitions, self.depth[node])

    def add_key(self, src: int, a: Action, key: Hashable, bad: bool, label: str | None) -> tuple[int, bool]:
        """The transition ``src --a--> key`` (``key``: the canonical state, or its fingerprint in a
        parallel search, whose workers send the ``label`` with it): (the node, whether it is new)."""
        ids = self.ids
        dst = ids.get(key)
        new = dst is None
        if dst is None:
            dst = ids[key] = len(self.parent)
            self.parent.append((src, a))
            self.depth.append(self.depth[src] + 1)
            if bad:
                self.bad_nodes.add(dst)
        if self.graph is not None:
            if new:
                self.graph.add_node(dst, label=label if label is not None else state_label(key), violation=bad)
            self._edge(src, dst, action_label(a))
        return dst, new

    def _edge(self, src: int, dst: int, label: str) -> None:
        g = self.graph
        assert g is not None
        if g.has_edge(src, dst):
            g[src][dst]["count"] += 1
            g[src][dst]["labels"].append(label)
        else:
            g.add_edge(src, dst, count=1, labels=[label])


class SleepSets:
    """The sleep sets of the next level's nodes (docs/fuzzing.md, "Sleep sets"): a node's set is
    the intersection, over the transitions into it from the level before it, of the earlier
    explored independent actions of their source (renamed into the node's ids); a node expanded
    skips the actions in its set. Only non-empty sets are stored."""

    def __init__(self, search: _Search, max_depth: int) -> None:
        self.search, self.max_depth = search, max_depth
        self.sets: dict[int, frozenset[Action]] = {}

    def covers(self, dst: int, bad: bool) -> bool:
        """A transition into ``dst`` (``bad``: it violated) whose action may sleep in its source's
        later successors: it reaches a node that is expanded."""
        return not bad and dst not in self.search.bad_nodes

    def into(self, src: int, dst: int, new: bool, bad: bool, asleep: Iterable[Action]) -> None:
        """The transition ``src -> dst`` merged; ``asleep``: the earlier actions of ``src`` that
        :meth:`covers` and that are independent of this one, in ``dst``'s ids."""
        depth = self.search.depth
        if bad or depth[dst] != depth[src] + 1 or depth[dst] >= self.max_depth or dst in self.search.bad_nodes:
            return
        if new:
            got = frozenset(asleep)
        else:
            old = self.sets.get(dst)
            got = old & frozenset(asleep) if old else frozenset()
        if got:
            self.sets[dst] = got
        else:
            self.sets.pop(dst, None)

    def take(self, node: int) -> frozenset[Action]:
        return self.sets.pop(node, frozenset())
