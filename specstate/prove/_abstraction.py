"""The abstraction ``specstate prove`` rests on: what of a batch size the shapes depend on.

Owns: the *class* of a batch size under one config (:func:`bs_class`), the representatives of
the classes below a bound (:func:`representatives`), and the capture lists a proof runs under
(:func:`capture_lists`). ``docs/prove.md`` argues, citing the model code, why these are the
only quantities of a batch size the shape invariants can see; ``tests/test_prove.py`` checks
the resulting verdicts against concrete exploration on small bounds.

A decode batch of ``bs`` rows reaches the shape-relevant code only through:

- the switch decision (``specstate.model.sglang_0_5_12.worker.decode`` -> ``Ops.decide_speculation``; v1
  ``SpecConfig.speculation_allowed``: speculate iff ``bs <= disable_batch_threshold``; v2
  ``AdaptiveParams.steps_for_batch``: the step count the routed slot starts with);
- the graph runner's verdict (``specstate.model.runner.can_run``: ``bs <= max(capture_bs)``) and its padding
  (``GraphRunner.padded_bs``: the smallest captured size ``>= bs``; ``replay.py`` writes rows
  ``[:bs]`` and resets or keeps rows ``[bs:padded]``);
- the row counts themselves (``bs`` rows in every per-row tensor, ``bs * n`` tokens, ...),
  which every transition sees at its own ``bs``: a proof runs every ``bs`` of its bound.

So a batch size's class is ``(decision, graph)`` with ``graph`` one of ``eager`` (above the
largest captured size), ``exact`` (a captured size) and ``padded`` (replayed at a larger
captured size). A transition from ``a`` rows to ``b`` rows depends on ``a`` only through
``a``'s class and through the rows ``a``'s replay left in the static buffers, which lie at
``[:a]``: for ``a < b`` the replay at ``b`` overwrites them, for ``a > b`` the rows
``[b:padded(b)]`` are the ones a missing reset would expose, and any ``a > b`` exposes them
(``graph_buffers.py``). One ``a`` per class (the smallest and the largest) therefore stands
for all ``a`` of that class.
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Hashable

from specstate.model.config import SpecConfig, spec_cuda_graph_batch_sizes

if TYPE_CHECKING:
    from specstate.model.family_registry import Family

__all__ = ["BsClass", "bs_class", "representatives", "CAPTURE_LIST_NAMES", "capture_lists", "decision_of"]


@dataclass(frozen=True)
class BsClass:
    """What the shapes of one decode iteration can see of its batch size (besides the rows)."""

    decision: Hashable  #: v1: speculate (bool); v2: the step count the routed slot starts with
    graph: str  #: ``eager`` (bs > the largest captured size), ``exact`` or ``padded``


def decision_of(config: SpecConfig, family: "Family | None" = None) -> Callable[[int], Hashable]:
    """The switch rule of a prepared config as a function of the batch size: the family's
    (``Family.batch_decision``: 0.5.17's ``AdaptiveParams.steps_for_batch`` of the initial slots),
    else the core's, the seed's threshold (``SpecConfig.speculation_allowed``). ``family``: the
    variant's (``Variant.engine_family``); ``None`` only for a core-family config."""
    rule = family.batch_decision if family is not None else None
    if rule is None:
        return functools.partial(_threshold_decision, config)
    return rule(config)


def _threshold_decision(config: SpecConfig, bs: int) -> Hashable:
    return config.speculation_allowed(bs)


def graph_class(capture: tuple[int, ...], bs: int) -> str:
    """``eager`` / ``exact`` / ``padded`` (``specstate.model.runner.can_run``, ``GraphRunner.padded_bs``)."""
    if bs > capture[-1]:
        return "eager"
    return "exact" if capture[bisect.bisect_left(capture, bs)] == bs else "padded"


def bs_class(config: SpecConfig, bs: int, family: "Family | None" = None) -> BsClass:
    """``bs``'s class under ``config`` and the variant's ``family`` (``decision_of``)."""
    return BsClass(decision_of(config, family)(bs), graph_class(config.cuda_graph_bs, bs))


def representatives(config: SpecConfig, below: int,
                    family: "Family | None" = None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The largest and the smallest batch size of every class among ``1 .. below - 1``, each
    ascending (a proof shrinks to the largest, jumps from the smallest)."""
    decide, capture = decision_of(config, family), config.cuda_graph_bs
    first: dict[BsClass, int] = {}
    last: dict[BsClass, int] = {}
    for bs in range(1, below):
        c = BsClass(decide(bs), graph_class(capture, bs))
        first.setdefault(c, bs)
        last[c] = bs
    return tuple(sorted(last.values())), tuple(sorted(first.values()))


#: the capture lists of a proof (``capture_lists``), in the order they run
CAPTURE_LIST_NAMES = ("config", "sglang", "every", "single", "one")


def capture_lists(config: SpecConfig, max_bs: int, names: tuple[str, ...] = CAPTURE_LIST_NAMES
                  ) -> dict[str, tuple[int, ...] | None]:
    """Named ``cuda_graph_bs_override`` values (``None``: the config's own list) that together put
    every batch size ``1 .. max_bs`` in every graph class: ``config`` (the config's list),
    ``sglang`` (``ServerArgs._generate_cuda_graph_batch_sizes`` up to ``max_bs``), ``every``
    (each size captured: nothing padded), ``single`` (only ``max_bs``: everything below padded to
    it, a shrinking batch stays under one captured size), ``one`` (only 1: everything above eager)."""
    table: dict[str, tuple[int, ...] | None] = {
        "config": config.cuda_graph_bs_override,
        "sglang": spec_cuda_graph_batch_sizes(max_bs),
        "every": tuple(range(1, max_bs + 1)),
        "single": (max_bs,),
        "one": (1,),
    }
    return {n: table[n] for n in names}
