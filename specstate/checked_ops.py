"""A user's operations, each return value checked against the type its operation declares.

Every field of ``Ops`` holds a default function with a return annotation (``decide_speculation
-> bool``, ``arrive -> Tx``, ``forward_target_extend -> tuple[Tx, ScheduleBatch]``). A user's
variant replaces some of them; a replacement that returns the wrong kind of value
(``decide_speculation`` returning ``'yes'``, which is truthy) would otherwise run on and be
judged as if it were right. ``checked_ops(ops)`` wraps every operation that is not
specstate's own so that a wrong return value is a :class:`~specstate.errors.VariantFailure`
naming the operation, what it declares and what came, with the user's function's file and line.

The check is shallow where a deep one would cost a step's worth of time: classes by
``isinstance`` (``bool`` exactly: ``1`` is not a decision), ``X | None``, tuples element by
element (``tuple[int, ...]`` only by its first element), ``list`` / ``dict`` by their own type.
An annotation it cannot resolve is not checked. The wrapped table is made once per table
(``twin``, a dictionary by ``id``), so each step pays one look-up; built-in variants are not wrapped.
"""

from __future__ import annotations

import functools
import sys
import types
import typing
import weakref
from typing import Any, Callable, Union

from specstate.errors import VariantFailure
from specstate.model.ops import DEFAULT_OPS, OP_NAMES, Ops

__all__ = ["declared_return", "matches", "checked_ops", "twin"]

#: ``id(table)`` -> its checked twin, or ``_SAME`` (the table itself); an entry leaves with its
#: table (``weakref.finalize``), and no entry holds its own table alive
_TWINS: dict[int, Ops] = {}
_SAME: Ops = DEFAULT_OPS.replace()  # a marker, never run


@functools.cache
def declared_return(name: str) -> Any:
    """The return annotation of operation ``name``'s default function (``None``: not resolved)."""
    import specstate.model as model

    fn = getattr(DEFAULT_OPS, name)
    namespace = {**vars(model), **vars(sys.modules[fn.__module__]), "Ops": Ops}
    for extra in ("specstate.model.runner", "specstate.model.state", "specstate.model.config"):
        namespace.update(vars(sys.modules[extra]) if extra in sys.modules else {})
    try:
        return typing.get_type_hints(fn, globalns=namespace).get("return")
    except Exception:  # noqa: BLE001  (an annotation that does not resolve is left unchecked)
        return None


def matches(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits ``hint`` (shallow, as the module doc says)."""
    if hint is None or hint is Any:
        return True
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(matches(value, a) for a in typing.get_args(hint))
    if origin is tuple:
        return isinstance(value, tuple) and _tuple_matches(value, typing.get_args(hint))
    if origin is not None:
        return isinstance(value, origin) if isinstance(origin, type) else True
    if hint is bool:
        return isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, hint) if isinstance(hint, type) else True


def _tuple_matches(value: tuple, args: tuple) -> bool:
    if not args:
        return True
    if len(args) == 2 and args[1] is Ellipsis:
        return not value or matches(value[0], args[0])
    return len(value) == len(args) and all(matches(v, a) for v, a in zip(value, args))


def _show(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("specstate.model.", "")


def _where(fn: Callable[..., Any]) -> str:
    code = getattr(fn, "__code__", None)
    return f" (in {code.co_filename}:{code.co_firstlineno}, {fn.__qualname__})" if code is not None else ""


def _wrapped(name: str, fn: Callable[..., Any], variant: str) -> Callable[..., Any]:
    hint = declared_return(name)
    if hint is None:
        return fn

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        if not matches(out, hint):
            shown = repr(out) if len(repr(out)) <= 80 else repr(out)[:77] + "..."
            raise VariantFailure(f"Expected operation {name} of variant {variant!r} to return {_show(hint)} but it "
                                 f"returned {shown} ({type(out).__name__}){_where(fn)}")
        return out

    return checked


def checked_ops(ops: Ops, variant: str) -> Ops:
    """``ops`` with every operation that is not specstate's own wrapped (module doc)."""
    own = {n: getattr(ops, n) for n in OP_NAMES}
    user = {n: _wrapped(n, fn, variant) for n, fn in own.items()
            if not str(getattr(fn, "__module__", "") or "").startswith("specstate.")}
    return ops.replace(**user) if user else ops


def twin(ops: Ops, variant: Any, builtin: Callable[[Any], bool]) -> Ops:
    """The checked table for ``ops`` (made once per table, dropped with it); ``ops`` itself
    for a built-in variant and for a table that is already checked."""
    found = _TWINS.get(id(ops))
    if found is None:
        wrapped = None if builtin(variant) else checked_ops(ops, variant.name)
        found = _SAME if wrapped is None or wrapped is ops else wrapped
        _remember(ops, found)
        if found is not _SAME:
            _remember(found, _SAME)
    return ops if found is _SAME else found


def _remember(table: Ops, twin_: Ops) -> None:
    """``_TWINS[id(table)] = twin_`` until ``table`` is collected (no strong reference to ``table``)."""
    _TWINS[id(table)] = twin_
    weakref.finalize(table, _TWINS.pop, id(table), None)
