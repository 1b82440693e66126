"""Fast copies and hashes of the model's frozen values.

Owns no state. Every model value is a frozen dataclass; a transition copies a dozen of them
with a few fields changed. ``dataclasses.replace`` does that through ``__init__`` (keyword
matching, ``__post_init__``, one ``object.__setattr__`` per field), which was a quarter of a
transition's time. :func:`evolve` copies the instance dictionary instead and sets the changed
fields; it is ``replace`` for values whose ``__post_init__`` only fills or checks fields that
the copy already holds (every model value: ``EagleVerifyInput`` fills ``num_tokens_per_req``
once, at construction). Configs keep ``dataclasses.replace``: ``SpecConfig._check`` must run on
every new config.

:func:`cached_hash` makes a frozen dataclass remember its hash: a state's hash walks every
request, batch and buffer, and the exploration hashes each state it meets; the values it
shares with its predecessor (most requests, the tree, the buffers) are hashed once. The
remembered hash lives in the instance dictionary under ``_hash`` and is dropped by
:func:`evolve` and by pickling (``str`` hashes differ between processes; pickling keeps the
fields only).

Bookkeeping entries of the instance dictionary (not fields) either check themselves against the
fields they were derived from (by identity) and travel with a copy, or are named in the class's
``__evolve_drop__`` (or are ``functools.cached_property`` values) and are dropped by it.

What stays the same: equality, ``repr``, ``dataclasses.fields`` / ``asdict``, the field values.
"""

from __future__ import annotations

import functools
from dataclasses import fields
from typing import Any, Callable, Generic, Hashable, TypeVar

__all__ = ["evolve", "cached_hash", "BoundedMemo"]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_FIELDS: dict[type, tuple[frozenset[str], frozenset[str]]] = {}
_HASH = "_hash"


def _names(cls: type) -> tuple[frozenset[str], frozenset[str]]:
    """(field names, instance-dictionary entries a copy must drop): the remembered hash, the
    class's ``functools.cached_property`` values and its ``__evolve_drop__`` names. Other
    bookkeeping entries travel with the copy and check themselves (by identity, e.g.
    ``ModelState._live``)."""
    got = _FIELDS.get(cls)
    if got is None:
        cached = {k for c in cls.__mro__ for k, v in vars(c).items() if isinstance(v, functools.cached_property)}
        got = _FIELDS[cls] = (frozenset(f.name for f in fields(cls)),
                              frozenset({_HASH, *cached, *getattr(cls, "__evolve_drop__", ())}))
    return got


def _field_names(cls: type) -> frozenset[str]:
    return _names(cls)[0]


_new = object.__new__
_set = object.__setattr__


def evolve(obj: T, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)`` without re-running ``__init__`` (see the module doc):
    a copy of the instance dictionary (in C) less the entries a copy drops, plus ``changes``,
    installed as the new instance's dictionary. Classes alias it as their ``evolve`` method."""
    cls = obj.__class__
    got = _FIELDS.get(cls) or _names(cls)
    if not changes.keys() <= got[0]:
        bad = sorted(set(changes) - got[0])
        raise TypeError(f"Expected fields of {cls.__name__} ({sorted(got[0])}) but got {bad}")
    d = obj.__dict__.copy()
    for k in got[1]:
        if k in d:
            del d[k]
    d.update(changes)
    new = _new(cls)
    _set(new, "__dict__", d)
    return new


def cached_hash(cls: type[T]) -> type[T]:
    """Class decorator: the dataclass-generated ``__hash__``, remembered per instance."""
    field_hash: Callable[[Any], int] = cls.__hash__

    def __hash__(self: Any) -> int:
        d = self.__dict__
        h = d.get(_HASH)
        if h is None:
            h = d[_HASH] = field_hash(self)
        return h

    def __getstate__(self: Any) -> dict[str, Any]:
        names = _field_names(type(self))
        return {k: v for k, v in self.__dict__.items() if k in names}

    def __setstate__(self: Any, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # methods replaced on the class (the checker forbids assigning to a method)
    for name, method in (("__hash__", __hash__), ("__getstate__", __getstate__), ("__setstate__", __setstate__)):
        setattr(cls, name, method)
    return cls


class BoundedMemo(Generic[K, V]):
    """``key -> value``, each value made once by ``make(key)``, for the whole process; emptied when
    it holds ``limit`` entries (a cache of values that are cheap to remake, never a record)."""

    def __init__(self, make: Callable[[K], V], limit: int) -> None:
        self.make, self.limit = make, limit
        self.table: dict[K, V] = {}

    def __call__(self, key: K) -> V:
        got = self.table.get(key)
        if got is None:
            if len(self.table) >= self.limit:
                self.table.clear()
            got = self.table[key] = self.make(key)
        return got
