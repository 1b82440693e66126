"""Every comparison of a batch size with a constant the model makes, in one place.

Owns: the four functions through which the model (and the variants built on it) branch on a
batch size: :func:`at_most` (``bs <= limit``: the switch threshold, ``can_run``'s largest
captured size), :func:`padded` (the smallest captured size ``>= bs``: ``replay_prepare``,
adaptive routing's ``_pad_to_cuda_graph_bs``), :func:`floor_key` (the largest key ``<= bs``:
``AdaptiveSpeculativeParams._find_closest_bs``) and :func:`room` (``limit - used``:
``get_num_allocatable_reqs``' request slots left), and the recorder that notes what each
one compared with (:func:`recording`).

Why one place: ``specstate prove`` checks one batch size per *interval* of batch sizes on
which nothing of the model's branching can change (``specstate/prove/_intervals.py``,
``docs/prove.md``). That argument holds only if every branch on a batch size goes through
these functions, which record their constants while a proof runs; a proof meeting a
constant it did not derive adds it and starts that capture list again, and
``tests/test_prove_bs_compare.py`` fails on a comparison of a batch size anywhere in
``specstate/model/`` that does not come through here.

What is recorded: a constant ``c`` (behaviour may differ between ``bs = c`` and ``c + 1``)
and a capture list (behaviour may differ between captured, padded and above the largest
entry). Comparisons of two batch sizes with each other (did the batch shrink) record
nothing: a proof's paths take both directions at every checked batch size.
"""

from __future__ import annotations

import bisect
from contextlib import contextmanager
from typing import Iterator

__all__ = ["at_most", "padded", "floor_key", "room", "recording", "Recorded"]


class Recorded:
    """What the comparisons met while recording: constants and capture lists."""

    __slots__ = ("constants", "captures")

    def __init__(self) -> None:
        self.constants: set[int] = set()  #: ``c``: behaviour may change between ``c`` and ``c + 1``
        self.captures: set[tuple[int, ...]] = set()  #: capture lists a batch size was padded to


_RECORDING: Recorded | None = None


@contextmanager
def recording() -> Iterator[Recorded]:
    """Record the constants of every comparison made inside the block (not reentrant: an
    inner block records into its own ``Recorded`` and the outer one resumes after it)."""
    global _RECORDING
    outer, _RECORDING = _RECORDING, Recorded()
    try:
        yield _RECORDING
    finally:
        _RECORDING = outer


def at_most(bs: int, limit: int) -> bool:
    """``bs <= limit``."""
    if _RECORDING is not None:
        _RECORDING.constants.add(limit)
    return bs <= limit


def padded(capture: tuple[int, ...], bs: int) -> int | None:
    """``capture[bisect_left(capture, bs)]``: the smallest captured size ``>= bs``, ``None`` above
    the largest (``capture`` ascending)."""
    if _RECORDING is not None:
        _RECORDING.captures.add(capture)
    i = bisect.bisect_left(capture, bs)
    return capture[i] if i < len(capture) else None


def floor_key(keys: tuple[int, ...], bs: int) -> int:
    """``keys[max(0, bisect_right(keys, bs) - 1)]``: the largest key ``<= bs`` (the first below
    all of them)."""
    if _RECORDING is not None:
        _RECORDING.constants.update(k - 1 for k in keys)
    return keys[max(0, bisect.bisect_right(keys, bs) - 1)]


def room(limit: int, used: int) -> int:
    """``limit - used``: what is left of ``limit`` (a caller branches on it being positive)."""
    if _RECORDING is not None:
        _RECORDING.constants.add(limit - 1)
    return limit - used
