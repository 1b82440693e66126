"""The transitions a proof runs at one bound: trees of the model's own actions.

Owns: :class:`Node` (an action sequence continuing its parent's) and :class:`Ramp`, which builds
bound after bound the nodes whose runs reach ``b`` live requests, only from ``Arrive``,
``Abort`` and ``Step``, so every path from the initial state is a trace ``specstate
reproduce`` replays.

The spine is a *ramp*: ``R(b)`` is ``R(b - 1)`` plus one arrival, its prefill and the merged
decode at ``b`` (accept 1, so that ``b`` requests stay within the KV pool up to ``b = 256``).
At each bound (``docs/prove.md`` lists what each one exercises, with its sglang code):

- off ``R(b)``: ``accepts`` (all ``steps + 1``, alternating 1 / ``steps + 1``, all 1: draft-extend
  token counts from ``b * (steps + 1)`` down to ``b`` under one padded size); ``shrink-d`` for one ``d < b`` of every class
  (the rows finishing at the *front*, by EOS in a full verify, so ``filter_batch`` must select,
  not truncate; then decodes at ``d``: cross-down at the threshold, spec resumed, a padded replay
  after a larger one); ``last`` (the last row finishes by EOS); ``abort`` (``Abort`` of the first
  row between iterations); ``drain`` (every row finishes, the scheduler idles, one arrives);
- off ``R(b - 1)``: ``length`` (a request that finishes by length inside its first verify, 2 of
  ``steps + 1`` tokens kept), ``waits`` (a request as long as the pool allows, which waits when the
  KV budget is short); off ``R(b - 2)``: ``long`` (a canonical request and the longest prompt the
  context allows, prefilled together: chunked when ``chunked_prefill_size`` is below it);
- ``jump-a`` for one ``a < b - 1`` of every class (the smallest): ``R(a)`` plus ``b - a`` arrivals
  (kept from bound to bound, one more each time), their prefill, the merged decode at ``b``
  (cross-up from far below the threshold, past the largest captured size), the new rows finish,
  decodes at ``a`` again.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from specstate.model import Abort, Action, Arrive, SpecConfig, Step

__all__ = ["Lengths", "Node", "Ramp", "proof_alphabet"]


@dataclass(frozen=True)
class Lengths:
    """The canonical request lengths of a proof (``docs/prove.md``: why others add nothing)."""

    prompt_len: int = 8
    #: a request that finishes by length inside its first verify with a full accept: 1 token
    #: from the prefill, 2 of the verify's ``steps + 1``
    short_new_tokens: int = 3
    #: ``max_new_tokens`` of every other request; ``None``: long enough that none finishes unless a
    #: script finishes it (one ramp decode per spine bound plus the branches' full accepts)
    max_new_tokens: int | None = None

    def long_new(self, config: SpecConfig, max_bs: int) -> int:
        return self.max_new_tokens or max_bs + 8 * config.max_accept_len + 8


@dataclass(eq=False)
class Node:
    """``actions`` applied after ``parent``'s; ``children`` run from this node's end state."""

    label: str
    actions: tuple[Action, ...]
    parent: "Node | None" = None
    children: list["Node"] = field(default_factory=list)
    #: a ramp node: its last step must be a decode of this many rows (else the bound is not reached)
    reaches: int | None = None

    def child(self, label: str, actions: tuple[Action, ...]) -> "Node":
        node = Node(label, actions, self)
        self.children.append(node)
        return node

    def path(self) -> list[Action]:
        chunks: list[tuple[Action, ...]] = []
        node: Node | None = self
        while node is not None:
            chunks.append(node.actions)
            node = node.parent
        return [a for chunk in reversed(chunks) for a in chunk]

    def name(self) -> str:
        """The labels from the nearest ramp node down (``R6/shrink3``)."""
        parts: list[str] = []
        node: Node | None = self
        while node is not None:
            parts.insert(0, node.label)
            if node.label.startswith("R"):
                break
            node = node.parent
        return "/".join(parts)


class Ramp:
    """The nodes of each bound, in order; keeps the spine and the jump chains (``Node``s only:
    the executor keeps their states).

    The *spine* is ``R(x)`` for the bounds ``x`` of ``spine`` (the bounds an interval proof
    checks, ``_intervals.checked_bounds``): ``R(x)`` = ``R(p)`` (``p`` the spine bound before ``x``)
    plus ``x - p`` arrivals, their prefill and the merged decode at ``x``; where the spine is
    dense (every bound below 20 or so) that is one arrival per bound. ``R(y)`` of a bound off the
    spine (``--exhaustive``, or the ``b - 1`` / ``b - 2`` a script starts from) is built the same
    way from ``R(p)``, kept while a later bound may start from it (``b - 2``). The arrivals queued
    on ``R(p)`` are one chain of nodes shared by every ``R(x)`` built from it (``_queued``), so
    the enumeration adds one arrival per bound, as a dense ramp would. An interval proof and the
    enumeration share the spine, so a failing bound on it has the same trace in both."""

    def __init__(self, config: SpecConfig, max_bs: int, lengths: Lengths, spine: frozenset[int] | None = None) -> None:
        self.config = config
        self.lengths = lengths
        self.spine = sorted(spine) if spine is not None else list(range(1, max_bs + 1))
        # a request sees one ramp decode per spine bound (twice as many: slack for a spine that grows)
        self.new = lengths.long_new(config, min(max_bs, 2 * len(self.spine)))
        self.overlap = not config.disable_overlap_schedule
        self.ramp: dict[int, Node] = {}  #: spine bound -> ``R(x)``
        self.jumps: dict[int, tuple[Node, int]] = {}  #: a -> (the newest link of ``R(a)`` plus arrivals, its bound)
        self._fresh: dict[int, Node] = {}  #: ramp nodes made for the current bound (they run as its roots)
        self._recent: dict[int, Node] = {}  #: ``R(x)`` off the spine, kept while ``x >= b - 2``
        self._queued: dict[int, dict[int, Node]] = {}  #: p -> {k: ``R(p)`` plus k arrivals}

    def _arrive(self, max_new: int | None = None) -> Arrive:
        return Arrive(self.lengths.prompt_len, max_new or self.new)

    def _full(self, rows: int, **kw: tuple[int, ...]) -> Step:
        return Step(accept=(self.config.max_accept_len,) * rows, **kw)

    def _after(self, rows: int) -> tuple[Action, ...]:
        """A decode at ``rows`` after a transition; two under the overlap scheduler (v2), which
        processes an iteration's result in the next one (``specstate.model.sglang_0_5_17.scheduler.event_loop_overlap``)."""
        return (self._full(rows), Step()) if self.overlap else (self._full(rows),)

    def _before(self, x: int) -> int:
        """The spine bound before ``x`` (0: the initial state)."""
        i = bisect.bisect_left(self.spine, x)
        return self.spine[i - 1] if i > 0 else 0

    def at(self, x: int, roots: list[Node]) -> Node | None:
        """``R(x)`` (``None`` for ``x = 0``); a node made now is appended to ``roots``."""
        if x <= 0:
            return None
        node = self.ramp.get(x) or self._recent.get(x) or self._fresh.get(x)
        if node is not None:
            return node
        p = self._before(x)
        queued = self._arrivals(p, x - p, roots)
        label = f"R{x}" if self._on_spine(x) else f"R{p}+{x - p}"
        node = Node(label, (Step(), Step(accept=(1,) * x)), queued, reaches=x)
        (self.ramp if self._on_spine(x) else self._recent)[x] = node
        self._fresh[x] = node
        roots.append(node)
        return node

    def _arrivals(self, p: int, k: int, roots: list[Node]) -> Node | None:
        """``R(p)`` plus ``k`` arrivals, extending the longest shorter chain link made so far."""
        links = self._queued.setdefault(p, {})
        if k in links:
            return links[k]
        j = max((i for i in links if i < k), default=0)
        node = Node(f"R{p}+{k}a", (self._arrive(),) * (k - j), links[j] if j else self.at(p, roots))
        links[k] = node
        roots.append(node)
        return node

    def _on_spine(self, x: int) -> bool:
        i = bisect.bisect_left(self.spine, x)
        return i < len(self.spine) and self.spine[i] == x

    def _under(self, parent: Node | None, roots: list[Node], label: str, actions: tuple[Action, ...]) -> None:
        """A script from ``parent``'s end: its child if ``parent`` runs in this bound, else a root."""
        if parent is not None and self._fresh.get(int(parent.reaches or 0)) is parent:
            parent.child(label, actions)
        else:
            roots.append(Node(label, actions, parent))

    def bound(self, b: int, shrink_to: tuple[int, ...], jump_from: tuple[int, ...], checked: bool = True) -> list[Node]:
        """The roots of bound ``b``; each root's parent is a kept node of an earlier bound (or none).
        Unchecked (an interval proof between its bounds): nothing; the spine grows at the next."""
        self._fresh = {}
        self._forget(b)
        roots: list[Node] = []
        if not checked:
            return roots
        before = [self.at(x, roots) for x in (b - 2, b - 1)]  # first: their arrivals are a prefix of R(b)'s
        r = self.at(b, roots)
        assert r is not None
        self._branches(r, b, shrink_to)
        if b >= 2:
            for label, acts in self._arrivals_at(b):
                self._under(before[1], roots, label, acts)
            self._under(before[0], roots, "long", self._long(b))
        roots += self._jumps(b, jump_from)
        return roots

    def _forget(self, b: int) -> None:
        """Drop the off-spine nodes no bound from ``b`` on starts from."""
        self._recent = {x: n for x, n in self._recent.items() if x >= b - 2}
        oldest = self._before(max(b - 2, 1))
        self._queued = {p: links for p, links in self._queued.items() if p >= oldest}

    def _branches(self, r: Node, b: int, shrink_to: tuple[int, ...]) -> None:
        m = self.config.max_accept_len
        r.child("accepts", (self._full(b), Step(accept=tuple(m if i % 2 else 1 for i in range(b))), Step()))
        for d in shrink_to:
            r.child(f"shrink{d}", (self._full(b, eos=tuple(range(b - d))),) + self._after(d))
        r.child("last", (Step(eos=(b - 1,)),) + self._after(b - 1))
        r.child("abort", (Abort(0),) + self._after(b - 1))
        r.child("drain", (Step(eos=tuple(range(b))), Step(), self._arrive(), Step(), self._full(1)))

    def _arrivals_at(self, b: int) -> list[tuple[str, tuple[Action, ...]]]:
        huge = self._arrive(self.config.kv_pool_size)  # clamped by init_req_max_new_tokens
        return [
            ("length", (self._arrive(self.lengths.short_new_tokens), Step(), self._full(b)) + self._after(b - 1)),
            ("waits", (huge, Step(), self._full(b), Step())),
        ]

    def _long(self, b: int) -> tuple[Action, ...]:
        """Off ``R(b - 2)``: a request of the canonical length and the longest prompt the context
        allows arrive together; their prefill chunks the long one when ``chunked_prefill_size`` is
        below it, and the merge filters the chunked row out (``filter_batch`` selects)."""
        cfg = self.config
        longest = max(1, min(cfg.chunked_prefill_size + self.lengths.prompt_len, cfg.max_req_len - 6))
        return (self._arrive(), Arrive(longest, self.new), Step(), Step(), Step(), self._full(b), Step())

    def _jumps(self, b: int, jump_from: tuple[int, ...]) -> list[Node]:
        """One root per source ``a``: the newest link of its arrival chain (``R(a)`` plus ``b - a``
        arrivals, one link per checked bound), or for a new chain the whole chain from ``R(a)``."""
        roots: list[Node] = []
        for a in jump_from:
            if a >= b - 1:
                continue
            chain = self.jumps.get(a)
            if chain is None:
                src = self.at(a, roots)
                link = Node(f"R{a}+{b - a}", (self._arrive(),) * (b - a), src)
            else:
                link = Node(f"R{a}+{b - a}", (self._arrive(),) * (b - chain[1]), chain[0])
            self.jumps[a] = (link, b)
            # R(a) made rids 0 .. a - 1, so the arrivals are a .. b - 1
            link.child(f"jump{a}", (Step(), self._full(b), Step(eos=tuple(range(a, b)))) + self._after(a))
            roots.append(link)
        return roots

    def kept(self) -> set[Node]:
        """The nodes later bounds continue from: the spine and each chain's newest link."""
        queued = {n for links in self._queued.values() for n in links.values()}
        return set(self.ramp.values()) | {link for link, _ in self.jumps.values()} | set(self._recent.values()) | queued

    def running(self) -> set[Node]:
        """The nodes whose end states the current bound's roots start from: ``kept`` and the ramp
        nodes made for this bound."""
        return self.kept() | set(self._fresh.values())


def proof_alphabet(config: SpecConfig, max_bs: int, lengths: Lengths = Lengths(), *, max_live: int):
    """The concrete actions a proof's scripts are made of, as an alphabet of
    ``fuzz.explore.explore`` (``tests/test_prove.py`` explores it and compares the verdicts):
    the four arrivals (canonical, short, as long as the pool allows, the longest prompt), a step
    with every accept 1 and one with every accept ``steps + 1``, EOS for the first and for the
    last running row, an abort of each live request; no arrival beyond ``max_live`` live requests
    or ``max_live + 1`` in all. It names request ids only through the state's structures, so it
    is marked ``symmetric`` (``explore(..., reduce=True)`` may rename ids, ``fuzz/symmetry.py``)."""
    new = lengths.long_new(config, max_bs)
    longest = max(1, min(config.chunked_prefill_size + lengths.prompt_len, config.max_req_len - 6))
    arrivals = (Arrive(lengths.prompt_len, new), Arrive(lengths.prompt_len, lengths.short_new_tokens),
                Arrive(lengths.prompt_len, config.kv_pool_size), Arrive(longest, new))

    def actions(s):  # noqa: ANN001, ANN202
        live = [r.rid for r in s.live_reqs()]
        out: list[Action] = []
        if len(live) < max_live and len(s.reqs) < max_live + 1:
            out.extend(arrivals)
        out += [Step(), Step(accept=(s.config.max_accept_len,) * max(len(live), 1))]
        running = [r for r in s.running.rids if s.req(r).live]
        out.extend(Step(eos=(r,)) for r in dict.fromkeys(running[:1] + running[-1:]))
        out.extend(Abort(r) for r in live)
        return out

    actions.symmetric = True  # type: ignore[attr-defined]  # ids only through the state: fuzz/symmetry.py
    return actions
