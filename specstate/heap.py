"""The garbage collector during a search: :func:`frozen_heap`.

A search (``explore``, the graph's sweep, a fuzz run, minimisation) allocates millions of small
objects; every collection of the oldest generations walks everything alive, most of it torch
and the modules, which the search never frees. ``gc.freeze()`` moves what exists before the
search out of the collector's sight for its duration (about 4% of a sweep's time here; a
Hypothesis run gains more: specstate's machine about 1.2x, a trivial one-rule machine about
2x, ``benchmarks/perf.py``), and a process forked during it copies no inherited page for the
collector's sake (``graph.parallel``, ``fuzz.explore_parallel``).
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator

__all__ = ["frozen_heap"]


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """``gc.collect()`` then ``gc.freeze()`` on entry, ``gc.unfreeze()`` on exit; objects a caller froze
    before stay frozen (then this does nothing). The collection first: garbage of earlier work
    (the previous fuzz test's runs, under pytest) would otherwise be frozen with the rest and
    outlive the search (``pytest -m fuzz`` peaked at 840 MiB instead of 546 without it)."""
    mine = gc.get_freeze_count() == 0
    if mine:
        gc.collect()
        gc.freeze()
    try:
        yield
    finally:
        if mine:
            gc.unfreeze()
