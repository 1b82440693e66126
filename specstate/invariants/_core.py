"""Violations and the registry of named invariants.

An *invariant* is an ``always`` property: a named function from one ``StepOutcome`` (the
state before and after, the forwards the step ran, its crash) to the violations it finds.
Each one documents the SGLang code it mirrors. A violation names the invariant, the step
index, the request, the field, what was expected and what was seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, Callable, Iterable

from specstate.errors import UnknownName
from specstate.model.step import StepOutcome

__all__ = ["Violation", "Invariant", "invariant", "all_invariants", "get_invariant", "check_outcome"]


@dataclass(frozen=True)
class Violation:
    invariant: str
    step: int  #: 1-based index of the action that produced the bad state
    rid: int | None  #: the request concerned, if one is
    field: str
    expected: Any
    actual: Any
    detail: str = ""
    shapes: dict[str, Any] = dc_field(default_factory=dict)

    def describe(self) -> str:
        who = f" request {self.rid}" if self.rid is not None else ""
        text = f"[{self.invariant}] step {self.step}{who}: {self.field}: expected {self.expected}, got {self.actual}"
        if self.detail:
            text += f" ({self.detail})"
        return text

    def to_json(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "step": self.step, "rid": self.rid, "field": self.field,
                "expected": _plain(self.expected), "actual": _plain(self.actual), "detail": self.detail,
                "shapes": _plain(self.shapes)}

    def key(self) -> tuple[str, int, int | None, str]:
        """What "the same violation" means when reproducing: invariant, step, request, field."""
        return (self.invariant, self.step, self.rid, self.field)


def _plain(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return str(v)


Check = Callable[[StepOutcome], Iterable[Violation]]


@dataclass(frozen=True)
class Invariant:
    name: str
    doc: str  #: what must hold
    mirrors: str  #: the SGLang code whose assumption it states
    check: Check


_INVARIANTS: dict[str, Invariant] = {}


def invariant(name: str, mirrors: str) -> Callable[[Check], Check]:
    """Register ``fn`` as the ``always`` property ``name`` (docstring = what must hold)."""

    def deco(fn: Check) -> Check:
        _INVARIANTS[name] = Invariant(name, (fn.__doc__ or "").strip(), mirrors, fn)
        return fn

    return deco


def all_invariants() -> tuple[Invariant, ...]:
    """Every registered invariant, in registration order (``specstate.invariants`` imports the
    entry modules ``_always`` then ``_provenance``, so the registry is full once the package is)."""
    return tuple(_INVARIANTS.values())


def get_invariant(name: str) -> Invariant:
    for inv in all_invariants():
        if inv.name == name:
            return inv
    raise UnknownName(f"Expected an invariant from {[i.name for i in all_invariants()]} but got {name!r}")


def check_outcome(outcome: StepOutcome, only: Iterable[str] | None = None) -> list[Violation]:
    """Every violation of every (or the named) invariant in this step, in registry order."""
    chosen = set(only) if only is not None else None
    out: list[Violation] = []
    for inv in all_invariants():
        if chosen is None or inv.name in chosen:
            out.extend(inv.check(outcome))
    return out
