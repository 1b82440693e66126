"""Shapes in the state, real tensors at the operations.

States hold only shapes (``Shape = tuple[int, ...]``): they stay hashable, cheap and
printable. Operations that carry shapes in SGLang materialise tiny CPU tensors with
:func:`zeros` and run the same torch op SGLang runs (``copy_``, ``_foreach_copy_``, ``cat``,
``reshape``, indexing), so a mismatch raises PyTorch's own error, which the model turns into
a :class:`~specstate.model.records.Crash` compared by error class and shapes.

Every such op reads and writes only zeros, so whether it raises, and what it returns (a
shape), depend on nothing but its shapes, sizes and dtypes. :func:`once` runs an op the first
time its key (those shapes) is seen and remembers a *success*; the same key later returns the
remembered result without calling torch. A failure is never remembered: every failing call
runs the real op again and raises PyTorch's own error, message included. :func:`passed` says
whether a key already succeeded, so a caller can skip building its error report (the
``guarded`` shapes) on the common path.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Sequence, TypeVar

from specstate._lazy import lazy_module
from specstate.model.values import BoundedMemo

torch = lazy_module("torch", globals())  # imported at the first tensor (specstate/_lazy.py)

__all__ = ["Shape", "zeros", "shared_zeros", "shape_of", "foreach_copy", "cat_rows", "take_rows", "select_rows",
           "reshaped", "leading_len", "once", "passed", "after_fork"]

Shape = tuple[int, ...]
R = TypeVar("R")

#: ``key -> result`` of every op :func:`once` saw succeed (emptied when it reaches ``_PASSED_LIMIT``)
_PASSED: dict[Hashable, Any] = {}
_PASSED_LIMIT = 65_536


def once(key: Hashable, op: Callable[[], R]) -> R:
    """``op()``, a torch op on zero tensors whose outcome depends only on ``key`` (its shapes,
    sizes, dtypes, and a name for the op): run the first time ``key`` is seen, its result
    remembered when it succeeds; an exception propagates and nothing is remembered."""
    try:
        return _PASSED[key]  # type: ignore[no-any-return]
    except KeyError:
        pass
    except TypeError:  # an unhashable key (a list for a shape, from a user's variant): run it every time
        return op()
    out = op()
    if len(_PASSED) >= _PASSED_LIMIT:
        _PASSED.clear()
    _PASSED[key] = out
    return out


def passed(key: Hashable) -> bool:
    """``key``'s op already succeeded (:func:`once` would not run it)."""
    try:
        return key in _PASSED
    except TypeError:
        return False


def after_fork() -> None:
    """What a forked search process runs first: torch on one thread.

    torch's CPU build runs an op of more than ~32k elements on GNU OpenMP's thread team, and
    GNU OpenMP is not fork-safe: a process forked after its parent ran such an op (a user's own
    torch work, a conformance replay at H200 sizes, an earlier test) inherits a team whose
    threads do not exist in it, and its first such op waits for them forever. On one thread
    ATen runs every op inline and never enters OpenMP (torch's DataLoader workers do the same).
    The model's tensors are tiny: nothing is lost."""
    torch.set_num_threads(1)


def zeros(shape: Shape, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A tiny CPU tensor with ``shape`` (all zeros: values never matter, shapes do); ``dtype``
    default ``torch.int64``."""
    return torch.zeros(shape, dtype=torch.int64 if dtype is None else dtype)


#: ``(shape, dtype) -> tensor`` of :func:`shared_zeros`
_SHARED: BoundedMemo[tuple[Shape, torch.dtype], torch.Tensor] = BoundedMemo(
    lambda k: torch.zeros(k[0], dtype=k[1]), 4096)


def shared_zeros(shape: Shape, dtype: torch.dtype | None = None) -> torch.Tensor:
    """:func:`zeros`, one tensor per (shape, dtype) for the whole process: for a tensor an
    operation only reads (a copy's source, the input of a slice, ``cat`` or ``reshape``) or
    writes zeros into. Never hand it to code that writes other values or resizes it."""
    return _SHARED((shape, torch.int64 if dtype is None else dtype))


def shape_of(t: torch.Tensor) -> Shape:
    return tuple(int(d) for d in t.shape)


def foreach_copy(dsts: Sequence[torch.Tensor], srcs: Sequence[torch.Tensor]) -> None:
    """``cuda_graph_runner.py::_grouped_foreach_copy_``: one ``torch._foreach_copy_``."""
    torch._foreach_copy_(list(dsts), list(srcs))


def cat_rows(a: Shape, b: Shape) -> Shape:
    """``torch.cat([a, b])`` along dim 0, for real (raises on a trailing-dim mismatch)."""
    return once(("cat", a, b), lambda: shape_of(torch.cat([shared_zeros(a), shared_zeros(b)])))


def take_rows(shape: Shape, n: int) -> Shape:
    """``t[:n]`` for real."""
    return once(("take", shape, n), lambda: shape_of(shared_zeros(shape)[:n]))


def reshaped(shape: Shape, dims: Shape) -> Shape:
    """``t.reshape(dims)`` for real (raises when the element counts differ)."""
    return once(("reshape", shape, dims), lambda: shape_of(shared_zeros(shape).reshape(dims)))


def leading_len(shape: Shape) -> int:
    """``len(t)`` for real (``TypeError`` on a 0-d tensor)."""
    return once(("len", shape), lambda: len(shared_zeros(shape)))


def select_rows(shape: Shape, keep: Sequence[int]) -> Shape:
    """``t[torch.tensor(keep)]`` for real (raises ``IndexError`` on an out-of-range row)."""
    rows = tuple(keep)
    return once(("select", shape, rows),
                lambda: shape_of(shared_zeros(shape)[torch.tensor(list(rows), dtype=torch.int64)]))
