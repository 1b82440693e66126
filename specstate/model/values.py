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

What stays the same: equality, ``repr``, ``dataclasses.fields`` / ``asdict``, the field values.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Callable, TypeVar

__all__ = ["evolve", "cached_hash"]

T = TypeVar("T")

_FIELDS: dict[type, frozenset[str]] = {}
_HASH = "_hash"


def _field_names(cls: type) -> frozenset[str]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = frozenset(f.name for f in fields(cls))
    return names


def evolve(obj: T, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)`` without re-running ``__init__`` (see the module doc)."""
    cls = type(obj)
    names = _field_names(cls)
    if not names.issuperset(changes):
        bad = sorted(set(changes) - names)
        raise TypeError(f"Expected fields of {cls.__name__} ({sorted(names)}) but got {bad}")
    new = object.__new__(cls)
    d = new.__dict__
    old = obj.__dict__
    if len(old) == len(names):
        d.update(old)
    else:  # cached hash or cached properties: copy the fields only
        for k in names:
            d[k] = old[k]
    d.update(changes)
    return new


def cached_hash(cls: type[T]) -> type[T]:
    """Class decorator: the dataclass-generated ``__hash__``, remembered per instance."""
    field_hash: Callable[[Any], int] = cls.__hash__  # type: ignore[assignment]

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

    cls.__hash__ = __hash__  # type: ignore[assignment]
    cls.__getstate__ = __getstate__  # type: ignore[attr-defined]
    cls.__setstate__ = __setstate__  # type: ignore[attr-defined]
    return cls
