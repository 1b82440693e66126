"""Shapes in the state, real tensors at the operations.

States hold only shapes (``Shape = tuple[int, ...]``): they stay hashable, cheap and
printable. Operations that carry shapes in SGLang materialise tiny CPU tensors with
:func:`zeros` and run the same torch op SGLang runs (``copy_``, ``_foreach_copy_``, ``cat``,
``reshape``, indexing), so a mismatch raises PyTorch's own error, which the model turns into
a :class:`~specstate.model.records.Crash` compared by error class and shapes.
"""

from __future__ import annotations

from typing import Sequence

import torch

from specstate.model.values import BoundedMemo

__all__ = ["Shape", "zeros", "shared_zeros", "shape_of", "foreach_copy", "cat_rows", "take_rows", "select_rows"]

Shape = tuple[int, ...]


def zeros(shape: Shape, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """A tiny CPU tensor with ``shape`` (all zeros: values never matter, shapes do)."""
    return torch.zeros(shape, dtype=dtype)


#: ``(shape, dtype) -> tensor`` of :func:`shared_zeros`
_SHARED: BoundedMemo[tuple[Shape, torch.dtype], torch.Tensor] = BoundedMemo(
    lambda k: torch.zeros(k[0], dtype=k[1]), 4096)


def shared_zeros(shape: Shape, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """:func:`zeros`, one tensor per (shape, dtype) for the whole process: for a tensor an
    operation only reads (a copy's source, the input of a slice, ``cat`` or ``reshape``) or
    writes zeros into. Never hand it to code that writes other values or resizes it."""
    return _SHARED((shape, dtype))


def shape_of(t: torch.Tensor) -> Shape:
    return tuple(int(d) for d in t.shape)


def foreach_copy(dsts: Sequence[torch.Tensor], srcs: Sequence[torch.Tensor]) -> None:
    """``cuda_graph_runner.py::_grouped_foreach_copy_``: one ``torch._foreach_copy_``."""
    torch._foreach_copy_(list(dsts), list(srcs))


def cat_rows(a: Shape, b: Shape) -> Shape:
    """``torch.cat([a, b])`` along dim 0, for real (raises on a trailing-dim mismatch)."""
    return shape_of(torch.cat([shared_zeros(a), shared_zeros(b)]))


def take_rows(shape: Shape, n: int) -> Shape:
    """``t[:n]`` for real."""
    return shape_of(shared_zeros(shape)[:n])


def select_rows(shape: Shape, keep: Sequence[int]) -> Shape:
    """``t[torch.tensor(keep)]`` for real (raises ``IndexError`` on an out-of-range row)."""
    return shape_of(shared_zeros(shape)[torch.tensor(list(keep), dtype=torch.int64)])
