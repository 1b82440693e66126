"""Shapes in the state; torch's own errors at the operations, torch itself only when one fails.

States hold only shapes (``Shape = tuple[int, ...]``): they stay hashable, cheap and
printable. The operations that carry shapes in SGLang (``copy_``, ``_foreach_copy_``, ``cat``,
``reshape``, slicing, index selection, ``cumsum``, ``+``, a slice assignment) are the
functions below, each taking and returning shapes. A mismatch must raise PyTorch's own error,
which the model turns into a :class:`~specstate.model.records.Crash` compared by error class and
shapes.

**Shape rules.** Each op has a pure-Python *shape rule* (``_rule_<op>``) that predicts from the
shapes alone whether torch would succeed and, if so, the result's shape. On the common path
(the rule predicts success) no torch runs and torch is never imported: a model command on a
correct variant (``explore``, ``prove``, ``fuzz``, ``run``, ``check``) does without it (about
180 MiB of memory and 1.5-3 s of start-up per process). When a rule predicts a failure, torch
is imported and the real op runs on tiny zero CPU tensors (``_real_<op>``), so the error raised
is PyTorch's own (class and message) exactly as before the rules; if torch then does *not* fail,
the rule is wrong and :class:`ShapeRuleError` (an :class:`~specstate.errors.InternalError`) is
raised, never a silent success. A rule also declines (``_Unknown``) what it was not written for
(a dimension that is not a plain ``int``, a tensor of more than ``_MAX_NUMEL`` elements, where
torch could fail to allocate): then the real op runs, as before. ``tests/test_shape_rules.py``
checks every rule against torch on shapes, dtypes and index sizes Hypothesis draws.

**The switch.** ``SPECSTATE_TORCH=always`` in the environment (read at import), or
:func:`set_torch_mode` ``("always")``, runs the real torch op for every op instead of its rule
(the behaviour before the rules, and the reference the rules are tested against);
``SPECSTATE_TORCH=rules`` (the default) uses the rules.

Every op reads and writes only zeros, so whether it raises, and what it returns (a shape),
depend on nothing but its shapes, sizes and dtypes. :func:`once` computes an op the first time
its key (those shapes) is seen and remembers a *success*; the same key later returns the
remembered result. A failure is never remembered: every failing call runs the real op again
and raises PyTorch's own error, message included. :func:`passed` says whether a key already
succeeded, so a caller can skip building its error report (the ``guarded`` shapes) on the
common path. :func:`zeros`, :func:`shared_zeros` and :func:`foreach_copy` (real tensors, for a
user's own operations) import torch when called.
"""

from __future__ import annotations

import math
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Hashable, Sequence, TypeVar

from specstate._lazy import lazy_module
from specstate.errors import InternalError, InvalidArgument
from specstate.model.values import BoundedMemo

if TYPE_CHECKING:
    import torch  # the checker reads the real module; at run time, the stand-in below
else:
    torch = lazy_module("torch", globals())  # imported at the first real tensor (specstate/_lazy.py)

__all__ = ["Shape", "zeros", "shared_zeros", "shape_of", "foreach_copy", "cat_rows", "take_rows", "select_rows",
           "reshaped", "leading_len", "cat", "sliced", "added", "cumsum", "copy_into", "foreach_copy_shapes",
           "grouped_foreach_copy", "assign_prefix", "once", "passed", "after_fork", "warm", "set_torch_mode", "torch_mode",
           "ShapeRuleError", "TORCH_MODES"]

Shape = tuple[int, ...]
R = TypeVar("R")

#: ``SPECSTATE_TORCH``'s values: ``rules`` (the default: torch only when a rule predicts a
#: failure) and ``always`` (the real op for every op, as before the rules)
TORCH_MODES = ("rules", "always")


class ShapeRuleError(InternalError):
    """A shape rule predicted that torch fails, and torch did not: a bug in the rule
    (specstate's, never a modelled crash: :func:`~specstate.model.runner.guarded` lets it through)."""


def _mode_from_env() -> bool:
    value = os.environ.get("SPECSTATE_TORCH", "rules").strip().lower() or "rules"
    if value not in TORCH_MODES:
        raise InvalidArgument(f"SPECSTATE_TORCH: expected one of {', '.join(TORCH_MODES)} but got {value!r}")
    return value == "always"


_ALWAYS = _mode_from_env()

#: ``key -> result`` of every op :func:`once` saw succeed (emptied when it reaches ``_PASSED_LIMIT``)
_PASSED: dict[Hashable, Any] = {}
_PASSED_LIMIT = 65_536


def set_torch_mode(mode: str) -> str:
    """``"always"``: every op runs for real in torch (as ``SPECSTATE_TORCH=always``);
    ``"rules"``: shape rules, torch only where one predicts a failure. Returns the mode before.
    The memo of successes is emptied, so that ops seen before run again in the new mode."""
    global _ALWAYS
    if mode not in TORCH_MODES:
        raise InvalidArgument(f"torch mode: expected one of {', '.join(TORCH_MODES)} but got {mode!r}")
    before = torch_mode()
    _ALWAYS = mode == "always"
    _PASSED.clear()
    return before


def torch_mode() -> str:
    """The mode in force: ``"rules"`` or ``"always"`` (:func:`set_torch_mode`)."""
    return "always" if _ALWAYS else "rules"


def once(key: Hashable, op: Callable[[], R]) -> R:
    """``op()``, an op on zero tensors whose outcome depends only on ``key`` (its shapes,
    sizes, dtypes, and a name for the op): run the first time ``key`` is seen, its result
    remembered when it succeeds; an exception propagates and nothing is remembered."""
    try:
        return _PASSED[key]
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
    """What a forked search process runs first: torch on one thread, if the parent imported it.

    torch's CPU build runs an op of more than ~32k elements on GNU OpenMP's thread team, and
    GNU OpenMP is not fork-safe: a process forked after its parent ran such an op (a user's own
    torch work, a conformance replay at H200 sizes, an earlier test) inherits a team whose
    threads do not exist in it, and its first such op waits for them forever. On one thread
    ATen runs every op inline and never enters OpenMP (torch's DataLoader workers do the same).
    The model's tensors are tiny: nothing is lost. A parent without torch has no team to
    inherit: a torch the child imports later (a rule predicting a crash) starts a fresh one,
    and this does not import it."""
    module = sys.modules.get("torch")
    if module is not None:
        module.set_num_threads(1)


def warm() -> None:
    """What a command runs before it times or forks a search: torch imported now if every op
    will run it (``always``), so that the import is neither timed nor repeated in each forked
    worker; under the rules nothing (a rule predicting a crash imports it where it happens)."""
    if _ALWAYS:
        import torch as _  # noqa: F401


# -- real tensors ------------------------------------------------------------------------


def zeros(shape: Shape, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A tiny CPU tensor with ``shape`` (all zeros: values never matter, shapes do); ``dtype``
    default ``torch.int64``. Imports torch."""
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
    """``cuda_graph_runner.py::_grouped_foreach_copy_``: one ``torch._foreach_copy_`` on real
    tensors (:func:`foreach_copy_shapes` is the same on shapes, without torch)."""
    torch._foreach_copy_(list(dsts), list(srcs))


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


# -- the ops: rules and real ops ------------------------------------------------------------

#: above this many elements in one tensor a rule declines (torch could fail to allocate it)
_MAX_NUMEL = 1 << 28
_MAX_DIM = 1 << 40


class _Fails(Exception):
    """A rule's prediction: the real op raises (the argument says why, for a rule bug's report)."""


class _Unknown(Exception):
    """A rule's input outside what it was written for: the real op decides."""


def _int(v: Any) -> int:
    """``v`` if a plain int within torch's range, else the rule declines."""
    if type(v) is not int or not -_MAX_DIM < v < _MAX_DIM:
        raise _Unknown(v)
    return v


def _made(shape: Any) -> Shape:
    """``torch.zeros(shape)``'s shape: a tuple or list of plain ints, each >= 0."""
    if type(shape) not in (tuple, list):
        raise _Unknown(shape)
    dims = tuple(_int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise _Fails(f"zeros({list(dims)}): a negative dimension")
    if math.prod(dims) > _MAX_NUMEL:
        raise _Unknown(shape)
    return dims


def _broadcast(a: Shape, b: Shape) -> Shape:
    """The broadcast shape of ``a`` and ``b`` (``torch.broadcast_shapes``)."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise _Fails(f"{list(a)} and {list(b)} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def _slice0(shape: Shape, stop: int) -> Shape:
    """``t[:stop]``'s shape (Python's slice rules: negative from the end, clamped)."""
    if not shape:
        raise _Fails("slice of a 0-d tensor")
    return (len(range(shape[0])[:stop]),) + shape[1:]


def _rule_cat(shapes: Sequence[Shape], dim: int) -> Shape:
    """``torch.cat``: one or more tensors; a 1-d empty one is skipped (legacy); the rest of one
    rank >= 1, ``dim`` in range, every other dimension equal; the sizes along ``dim`` add up."""
    made = [_made(s) for s in shapes]
    dim = _int(dim)
    if not made:
        raise _Fails("cat of no tensors")
    if any(len(s) == 0 for s in made):
        raise _Fails("cat of a 0-d tensor")
    kept = [s for s in made if s != (0,)]
    if not kept:
        return made[0]
    rank = len(kept[0])
    if any(len(s) != rank for s in kept):
        raise _Fails("cat of tensors of different ranks")
    if not -rank <= dim < rank:
        raise _Fails(f"cat along dim {dim} of rank {rank}")
    dim %= rank
    for s in kept[1:]:
        if s[:dim] + s[dim + 1:] != kept[0][:dim] + kept[0][dim + 1:]:
            raise _Fails(f"cat of {list(kept[0])} and {list(s)} along {dim}")
    return kept[0][:dim] + (sum(s[dim] for s in kept),) + kept[0][dim + 1:]


def _real_cat(shapes: Sequence[Shape], dim: int, dtype: str = "int64") -> Shape:
    return shape_of(torch.cat([shared_zeros(tuple(s), _dtype(dtype)) for s in shapes], dim=dim))


def _rule_sliced(shape: Shape, dim: int, stop: int) -> Shape:
    """``t[:, ..., :stop]`` (``dim`` full slices, then ``:stop``): rank > ``dim`` (``dim`` >= 0)."""
    s, dim, stop = _made(shape), _int(dim), _int(stop)
    if dim < 0:
        raise _Unknown(dim)
    if len(s) <= dim:
        raise _Fails(f"slice of dim {dim} of rank {len(s)}")
    return s[:dim] + _slice0(s[dim:], stop)


def _real_sliced(shape: Shape, dim: int, stop: int, dtype: str = "int64") -> Shape:
    return shape_of(shared_zeros(tuple(shape), _dtype(dtype))[(slice(None),) * dim + (slice(None, stop),)])


def _rule_reshaped(shape: Shape, dims: Shape) -> Shape:
    """``t.reshape(dims)``: at most one ``-1``, no other negative size, the same element count
    (with a ``-1``: a multiple of the others' product, which must not be 0)."""
    s = _made(shape)
    if type(dims) not in (tuple, list):
        raise _Unknown(dims)
    want = tuple(_int(d) for d in dims)
    numel = math.prod(s)
    if want.count(-1) > 1:
        raise _Fails("two inferred dimensions")
    if any(d < -1 for d in want):
        raise _Fails("a negative dimension")
    rest = math.prod(d for d in want if d != -1)
    if -1 in want:
        if rest == 0 or numel % rest:
            raise _Fails(f"{numel} elements into {list(want)}")
        return tuple(numel // rest if d == -1 else d for d in want)
    if rest != numel:
        raise _Fails(f"{numel} elements into {list(want)}")
    return want


def _real_reshaped(shape: Shape, dims: Shape, dtype: str = "int64") -> Shape:
    return shape_of(shared_zeros(tuple(shape), _dtype(dtype)).reshape(tuple(dims)))


def _rule_leading_len(shape: Shape) -> int:
    """``len(t)``: ``TypeError`` on a 0-d tensor."""
    s = _made(shape)
    if not s:
        raise _Fails("len() of a 0-d tensor")
    return s[0]


def _real_leading_len(shape: Shape, dtype: str = "int64") -> int:
    return len(shared_zeros(tuple(shape), _dtype(dtype)))


def _rule_select_rows(shape: Shape, rows: Sequence[int]) -> Shape:
    """``t[torch.tensor(rows)]``: rank >= 1; no row of an empty first dimension; every row in
    ``-len .. len - 1``, unless a row holds no element (a later dimension 0: torch's index kernel
    then checks no bounds)."""
    s = _made(shape)
    if type(rows) not in (tuple, list):
        raise _Unknown(rows)
    keep = [_int(r) for r in rows]
    if not s:
        raise _Fails("index of a 0-d tensor")
    if keep and s[0] == 0:
        raise _Fails("a row of an empty dimension")
    if 0 not in s[1:]:
        for r in keep:
            if not -s[0] <= r < s[0]:
                raise _Fails(f"row {r} of {s[0]}")
    return (len(keep),) + s[1:]


def _real_select_rows(shape: Shape, rows: Sequence[int], dtype: str = "int64") -> Shape:
    return shape_of(shared_zeros(tuple(shape), _dtype(dtype))[torch.tensor(list(rows), dtype=torch.int64)])


def _rule_added(a: Shape, b: Shape) -> Shape:
    """``a + b``: the broadcast shape."""
    return _broadcast(_made(a), _made(b))


def _real_added(a: Shape, b: Shape, dtype: str = "int64") -> Shape:
    return shape_of(shared_zeros(tuple(a), _dtype(dtype)) + shared_zeros(tuple(b), _dtype(dtype)))


def _rule_cumsum(shape: Shape, dim: int) -> Shape:
    """``torch.cumsum(t, dim)``: ``dim`` in range (0 or -1 on a 0-d tensor); the same shape."""
    s, dim = _made(shape), _int(dim)
    rank = max(len(s), 1)
    if not -rank <= dim < rank:
        raise _Fails(f"cumsum along {dim} of rank {len(s)}")
    return s


def _real_cumsum(shape: Shape, dim: int, dtype: str = "int64") -> Shape:
    return shape_of(torch.cumsum(shared_zeros(tuple(shape), _dtype(dtype)), dim=dim))


def _rule_copy_into(dst: Shape, src: Shape | None) -> None:
    """``dst.copy_(src)``: ``src`` broadcasts to ``dst``'s shape exactly (no rank beyond it); a
    ``None`` source (a batch field set to ``None``) is torch's ``TypeError``."""
    d = _made(dst)
    if src is None:
        raise _Fails("copy_ of None")
    s = _made(src)
    if _broadcast(d, s) != d:
        raise _Fails(f"copy of {list(s)} into {list(d)}")


def _real_copy_into(dst: Shape, src: Shape | None, dtype: str = "int64") -> None:
    # a None source: torch's own error (``copy_`` of ``None``), as upstream's copy of a batch field left None
    zeros(tuple(dst), _dtype(dtype)).copy_(None if src is None else shared_zeros(tuple(src), _dtype(dtype)))  # type: ignore[arg-type]


def _rule_foreach_copy_shapes(dsts: Sequence[Shape], srcs: Sequence[Shape]) -> None:
    """``torch._foreach_copy_(dsts, srcs)`` on CPU: two lists of one length >= 1, then each
    ``copy_`` in order."""
    if type(dsts) not in (tuple, list) or type(srcs) not in (tuple, list):
        raise _Unknown((dsts, srcs))
    made = [(_made(d), _made(s)) for d, s in zip(dsts, srcs)]
    if len(dsts) != len(srcs) or not dsts:
        raise _Fails(f"lists of {len(dsts)} and {len(srcs)} tensors")
    for d, s in made:
        _rule_copy_into(d, s)


def _real_foreach_copy_shapes(dsts: Sequence[Shape], srcs: Sequence[Shape], dtype: str = "int64") -> None:
    torch._foreach_copy_([zeros(tuple(d), _dtype(dtype)) for d in dsts],
                         [shared_zeros(tuple(s), _dtype(dtype)) for s in srcs])


def _rule_grouped_foreach_copy(dsts: Sequence[Shape], srcs: Sequence[Shape | None]) -> None:
    """``cuda_graph_runner.py::_grouped_foreach_copy_`` (0.5.10+): group the pairs by ``(dst.dtype,
    src.dtype)`` (a ``None`` source: Python's ``AttributeError`` before any copy), then one
    ``torch._foreach_copy_`` per group (one group here: every tensor of one dtype)."""
    if type(dsts) not in (tuple, list) or type(srcs) not in (tuple, list):
        raise _Unknown((dsts, srcs))
    for t in (*dsts, *srcs):  # every tensor is made first (upstream's: made by the batch)
        if t is not None:
            _made(t)
    n = min(len(dsts), len(srcs))  # ``zip`` drops the unpaired ones
    if any(s is None for s in srcs[:n]):
        raise _Fails("a None source has no dtype")
    if n:
        _rule_foreach_copy_shapes(tuple(dsts[:n]), tuple(srcs[:n]))  # type: ignore[arg-type]


def _real_grouped_foreach_copy(dsts: Sequence[Shape], srcs: Sequence[Shape | None], dtype: str = "int64") -> None:
    d_t = [zeros(tuple(d), _dtype(dtype)) for d in dsts]
    s_t = [None if s is None else shared_zeros(tuple(s), _dtype(dtype)) for s in srcs]
    groups: dict[Any, tuple[list[Any], list[Any]]] = {}
    for dst, src in zip(d_t, s_t):
        key = (dst.dtype, src.dtype)  # type: ignore[union-attr]  # AttributeError on None, as upstream
        groups.setdefault(key, ([], []))
        groups[key][0].append(dst)
        groups[key][1].append(src)
    for group_dsts, group_srcs in groups.values():
        torch._foreach_copy_(group_dsts, group_srcs)


def _rule_assign_prefix(dst: Shape, stop: int, src: Shape) -> None:
    """``t[:stop] = v`` (``t`` of ``dst``, ``v`` of ``src``): ``t`` of rank >= 1; ``v``'s
    leading 1s dropped, it expands to ``t[:stop]``'s shape (a size-1 dimension to any size)."""
    d, s, stop = _made(dst), _made(src), _int(stop)
    view = _slice0(d, stop)
    if s == view:
        return
    while s and s[0] == 1:
        s = s[1:]
    if len(s) > len(view):
        raise _Fails(f"{list(s)} expanded to {list(view)}")
    for want, have in zip(view[len(view) - len(s):], s):
        if have != 1 and have != want:
            raise _Fails(f"{list(s)} expanded to {list(view)}")


def _real_assign_prefix(dst: Shape, stop: int, src: Shape, dtype: str = "int64") -> None:
    zeros(tuple(dst), _dtype(dtype))[:stop] = shared_zeros(tuple(src), _dtype(dtype))


#: ``op name -> (rule, real)``: the rule takes the op's arguments, the real op those and a dtype
#: name (``tests/test_shape_rules.py`` compares each pair)
OPS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "cat": (_rule_cat, _real_cat),
    "sliced": (_rule_sliced, _real_sliced),
    "reshape": (_rule_reshaped, _real_reshaped),
    "len": (_rule_leading_len, _real_leading_len),
    "select": (_rule_select_rows, _real_select_rows),
    "add": (_rule_added, _real_added),
    "cumsum": (_rule_cumsum, _real_cumsum),
    "copy": (_rule_copy_into, _real_copy_into),
    "foreach_copy": (_rule_foreach_copy_shapes, _real_foreach_copy_shapes),
    "grouped_foreach_copy": (_rule_grouped_foreach_copy, _real_grouped_foreach_copy),
    "assign_prefix": (_rule_assign_prefix, _real_assign_prefix),
}


def _decide(name: str, args: tuple[Any, ...], dtype: str) -> Any:
    """The op's outcome: its rule's result; the real op where the rule predicts a failure (it
    raises torch's error; if it does not, :class:`ShapeRuleError`) or declines, or ``always``."""
    rule, real = OPS[name]
    if _ALWAYS:
        return real(*args, dtype=dtype)
    try:
        return rule(*args)
    except _Unknown:
        return real(*args, dtype=dtype)
    except _Fails as predicted:
        got = real(*args, dtype=dtype)  # raises PyTorch's own error
        raise ShapeRuleError(f"shape rule of {name}{args!r} predicted a failure ({predicted}) but torch returned "
                             f"{got!r}; run with SPECSTATE_TORCH=always to use torch for every op") from None
    except Exception as e:  # a rule fails only by _Fails: anything else is its bug, never a modelled crash
        raise ShapeRuleError(f"shape rule of {name}{args!r} raised {type(e).__name__}: {e}; run with "
                             "SPECSTATE_TORCH=always to use torch for every op") from e


def _op(name: str, *args: Any, dtype: str = "int64") -> Any:
    """:func:`once` of op ``name`` on ``args`` (key: the name, the arguments, the dtype)."""
    key = (name, dtype) + args if dtype != "int64" else (name,) + args
    return once(key, lambda: _decide(name, args, dtype))


def cat(shapes: Sequence[Shape], dim: int = 0) -> Shape:
    """``torch.cat(shapes, dim)``'s shape (raises PyTorch's error on a mismatch)."""
    return _op("cat", tuple(shapes), dim)


def cat_rows(a: Shape, b: Shape) -> Shape:
    """``torch.cat([a, b])`` along dim 0 (raises PyTorch's error on a trailing-dim mismatch)."""
    return _op("cat", (a, b), 0)


def sliced(shape: Shape, dim: int, stop: int) -> Shape:
    """``t[:, ..., :stop]`` (``dim`` full slices before it)'s shape."""
    return _op("sliced", shape, dim, stop)


def take_rows(shape: Shape, n: int) -> Shape:
    """``t[:n]``'s shape (``IndexError`` on a 0-d tensor)."""
    return _op("sliced", shape, 0, n)


def reshaped(shape: Shape, dims: Shape) -> Shape:
    """``t.reshape(dims)``'s shape (raises when the element counts differ)."""
    return _op("reshape", shape, dims)


def leading_len(shape: Shape) -> int:
    """``len(t)`` (``TypeError`` on a 0-d tensor)."""
    return _op("len", shape)


def select_rows(shape: Shape, keep: Sequence[int]) -> Shape:
    """``t[torch.tensor(keep)]``'s shape (``IndexError`` on an out-of-range row)."""
    return _op("select", shape, tuple(keep))


def added(a: Shape, b: Shape) -> Shape:
    """``a + b``'s shape (raises when they do not broadcast)."""
    return _op("add", a, b)


def cumsum(shape: Shape, dim: int = 0) -> Shape:
    """``torch.cumsum(t, dim)``'s shape."""
    return _op("cumsum", shape, dim)


def copy_into(dst: Shape, src: Shape | None) -> None:
    """``dst.copy_(src)`` (raises unless ``src`` broadcasts to ``dst``; ``None``: torch's ``TypeError``)."""
    _op("copy", dst, src)


def foreach_copy_shapes(dsts: Sequence[Shape], srcs: Sequence[Shape]) -> None:
    """``torch._foreach_copy_(dsts, srcs)`` on shapes (``cuda_graph_runner.py::_grouped_foreach_copy_``)."""
    _op("foreach_copy", tuple(dsts), tuple(srcs))


def grouped_foreach_copy(dsts: Sequence[Shape], srcs: Sequence[Shape | None]) -> None:
    """``cuda_graph_runner.py::_grouped_foreach_copy_`` on shapes: a ``None`` source raises Python's
    ``AttributeError`` (``None.dtype``) before any copy, else :func:`foreach_copy_shapes`."""
    _op("grouped_foreach_copy", tuple(dsts), tuple(srcs))


def assign_prefix(dst: Shape, stop: int, src: Shape, dtype: str = "int64") -> None:
    """``t[:stop] = v`` with ``t`` of shape ``dst`` and ``v`` of ``src``, both of ``dtype``."""
    _op("assign_prefix", dst, stop, src, dtype=dtype)
