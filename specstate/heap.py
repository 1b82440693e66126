"""The garbage collector during a search: :func:`frozen_heap`.

A search (``explore``, the graph's sweep) allocates millions of small objects; every collection
of the oldest generations walks everything alive, most of it torch and the modules, which the
search never frees. ``gc.freeze()`` moves what exists before the search out of the collector's
sight for its duration (about 4% of a sweep's time here), and a process forked during it copies
no inherited page for the collector's sake (``graph.parallel``, ``fuzz.explore_parallel``).

Fuzz runs do not freeze (tried: specstate's machine ran about 1.2x faster frozen, but under
pytest the previous test's garbage froze with the rest, ``pytest -m fuzz`` peaking at 840 MiB
instead of 546; collecting first cost about as much time as freezing saved, docs/fuzzing.md).
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator

__all__ = ["frozen_heap"]


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """``gc.freeze()`` on entry, ``gc.unfreeze()`` on exit; objects a caller froze before stay frozen
    (then this does nothing)."""
    mine = gc.get_freeze_count() == 0
    if mine:
        gc.freeze()
    try:
        yield
    finally:
        if mine:
            gc.unfreeze()
