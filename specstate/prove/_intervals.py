"""Which batch sizes a proof checks: one per interval of batch sizes the model cannot tell apart.

Owns: :class:`Points` (the constants and capture lists the model compares batch sizes with,
``specstate.model.bs_compare``), :func:`derive` (those of a prepared config), and
:func:`checked_bounds` (the bounds whose scripts a proof runs; the ramp runs at every bound).

The argument (``docs/prove.md``, "Intervals"): the model branches on a batch size only through
``bs_compare``, i.e. on ``x <= c`` for a recorded constant ``c`` and on ``x``'s graph class
(captured, padded, above the largest) under a recorded capture list. Call ``point(x)`` the
outcomes of all of those at ``x``. A script at bound ``b`` compares ``b``, ``b - 1``, ``b - 2``
(rows after one or two leave) and the class representatives below ``b`` (``_abstraction``), so
its branches are fixed by ``signature(b)``: ``point`` of ``b``, ``b - 1``, ``b - 2`` and the sets
of ``point`` values below ``b`` and below ``b - 1`` (which representatives exist). A maximal run
of bounds with one signature behaves alike (the bounds need not be consecutive: the padded runs
of a capture list share one); the proof checks the first two bounds of every signature (the
smallest failing bs is the first bound of a signature whose scripts fail; the second catches a
coincidence at the first), and ``1`` and ``max_bs``.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Hashable

from specstate.model.bs_compare import recording
from specstate.model.config import SpecConfig
from specstate.prove._abstraction import decision_of

if TYPE_CHECKING:
    from specstate.model.family_registry import Family

__all__ = ["Points", "derive", "checked_bounds", "signatures"]


@dataclass(frozen=True)
class Points:
    """The constants ``c`` (behaviour may change between ``c`` and ``c + 1``) and the capture lists
    a proof's intervals are cut at."""

    constants: frozenset[int]
    captures: frozenset[tuple[int, ...]]

    def with_(self, constants: set[int], captures: set[tuple[int, ...]]) -> "Points":
        return Points(self.constants | frozenset(constants), self.captures | frozenset(captures))

    def missing(self, constants: set[int], captures: set[tuple[int, ...]], max_bs: int) -> "Points | None":
        """These points plus what of ``constants`` / ``captures`` they lack; ``None`` when they lack
        nothing that could cut ``1 .. max_bs`` (a constant outside ``1 .. max_bs - 1`` cuts nothing)."""
        new_c = {c for c in constants if 1 <= c < max_bs} - self.constants
        new_k = captures - self.captures
        return self.with_(new_c, new_k) if new_c or new_k else None


def derive(config: SpecConfig, max_bs: int, family: "Family | None" = None) -> Points:
    """What a prepared config compares batch sizes with, read by recording the model's own
    comparisons: the switch rule at every bs (v1 threshold; v2 routing list and slot keys), the
    capture list and its largest entry (``can_run``), ``max_running_requests`` (``room``)."""
    with recording() as rec:
        decide = decision_of(config, family)
        for b in range(1, max_bs + 1):
            decide(b)
    capture = config.cuda_graph_bs
    constants = rec.constants | {capture[-1], config.max_running_requests - 1}
    return Points(frozenset(), frozenset()).with_({c for c in constants if 1 <= c < max_bs},
                                                  rec.captures | {capture})


def _graph(capture: tuple[int, ...], x: int) -> str:
    if x > capture[-1]:
        return "eager"
    return "exact" if capture[bisect.bisect_left(capture, x)] == x else "padded"


def signatures(config: SpecConfig, points: Points, max_bs: int, family: "Family | None" = None) -> list[Hashable]:
    """``signature(b)`` for ``b = 1 .. max_bs`` (index ``b - 1``)."""
    consts, caps = sorted(points.constants), sorted(points.captures)
    decide = decision_of(config, family)

    def point(x: int) -> Hashable:
        if x < 1:
            return None
        return (decide(x), tuple(x <= c for c in consts), tuple(_graph(k, x) for k in caps))

    pts = [point(x) for x in range(-1, max_bs + 1)]  # pts[x + 1] = point(x)
    sigs: list[Hashable] = []
    below: set[Hashable] = set()
    below_prev: frozenset[Hashable] = frozenset()
    for b in range(1, max_bs + 1):
        now = frozenset(below)
        sigs.append((pts[b + 1], pts[b], pts[b - 1], now, below_prev))
        below_prev = now
        below.add(pts[b + 1])
    return sigs


def checked_bounds(config: SpecConfig, points: Points, max_bs: int, family: "Family | None" = None) -> frozenset[int]:
    """The first two bounds of every signature, and ``1`` and ``max_bs``: the first is where a
    signature's failure first shows (the smallest failing bs); the second catches a mismatch
    of two linear forms of ``b`` that happen to agree at the first (they agree at one ``b`` at most)."""
    seen: dict[Hashable, int] = {}
    out = {1, max_bs}
    for b, sig in enumerate(signatures(config, points, max_bs, family), 1):
        n = seen.get(sig, 0)
        if n < 2:
            out.add(b)
            seen[sig] = n + 1
    return frozenset(out)
