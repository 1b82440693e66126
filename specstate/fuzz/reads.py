"""What the exploration's canonical key may erase, derived from what the operations in use can read.

Owns no state. The key of a search (``explore.canonical_renamed``; ``shortest_violation``, the
shrinker's breadth-first check, uses its unreduced form) forgets parts of a state that no
operation and no invariant of specstate's reads: the :data:`ERASURES` below. That argument
(docs/fuzzing.md, "Reduction") covers specstate's own code only. A variant's own operation can
read anything it is handed: a ``decide_speculation`` that reads ``tx.state.decisions[-2]`` (the
decision before the last, which the reduced key drops) behaves differently on a representative
than on the states it stands for, and the search silently misses what the concrete one finds
(issue 36: "no violation" over 24,787 reduced states, a 9-action counterexample unreduced).

So each erasure names what it forgets and the kinds of argument through which an operation can
reach it (:attr:`Erasure.reached_by`); what an operation is handed is read from its slot's
signature in the table (``DEFAULT_OPS``: the caller passes that, whatever the override declares;
:func:`reach`, an argument of a type not listed reaches everything). An operation that is not
specstate's own (:func:`own`), or an invariant that is not, keeps every erasure its arguments
reach (:func:`kept`): conservative (an override that never looks at the older decision still
keeps it) and sound without looking inside the user's code. An override handed the state (``tx``,
``ModelState``: most operations) keeps them all; one handed a batch or a request only keeps what
those hold. A user's operations can pass data to each other (a module global), so what they keep
is the union over all of them.

What stays outside: specstate's own functions put in another operation's slot are trusted with
the reads they have in their own (the argument for them rests on the control flow of the built-in
variants); a user's code that reaches a state by other means than its arguments (a global the
user set before the search) is not seen.
"""

from __future__ import annotations

import functools
import inspect
import re
from dataclasses import dataclass
from types import FunctionType
from typing import Any, Callable, Iterable, Mapping

from specstate.model import Ops
from specstate.model.ops import DEFAULT_OPS, OP_NAMES

__all__ = ["Erasure", "ERASURES", "ERASURE_NAMES", "own", "reach", "kept", "reduction_notes", "user_invariants",
           "interval_notes"]


@dataclass(frozen=True)
class Erasure:
    """One thing the canonical key forgets."""

    name: str  #: short name (``decisions``)
    what: str  #: what is forgotten, for the notice
    reduce_only: bool  #: only under ``--reduce`` (False: ``--no-reduce`` forgets it too)
    #: the kinds of argument (:data:`_KINDS`) through which an operation can read it
    reached_by: frozenset[str]


def _e(name: str, what: str, reduce_only: bool, *kinds: str) -> Erasure:
    return Erasure(name, what, reduce_only, frozenset(kinds) | {"state"})


#: every erasure of the key, in the order the notice lists them
ERASURES: tuple[Erasure, ...] = (
    _e("step-counters", "step counters", False, "graphs", "iteration", "pending"),
    _e("retractions", "retraction counts", False, "req"),
    _e("graph-writers", "graph-buffer writers", False, "graphs"),
    _e("settled", "finished requests' fields", True, "req"),
    _e("extend-lens", "the decode batch's extend_lens", True, "batch", "pending"),
    _e("decisions", "the older switch decision", True),
    _e("tree", "radix node ids and access times", True, "req"),
    _e("ids", "request ids (symmetry)", True, "batch", "pending", "req", "ids", "graphs"),
)
ERASURE_NAMES: tuple[str, ...] = tuple(e.name for e in ERASURES)

#: an annotation's type name -> the kind of argument it is (``state`` reaches everything; a name
#: not listed here is taken as ``state``); ``None``: reaches nothing the key erases
_KINDS: dict[str, str | None] = {
    "Tx": "state", "ModelState": "state",
    "ScheduleBatch": "batch", "ForwardBatch": "batch", "PendingResult": "pending", "Req": "req",
    "SpecInfo": "ids", "EagleDraftInput": "ids", "EagleVerifyInput": "ids", "EagleDraftExtendInput": "ids",
    "Admission": "ids", "Arrive": "ids", "Abort": "ids", "GraphBuffers": "graphs",  # an arrival may name a prefix's owner
    # plain values: a tuple or list of ints may be request ids (rows, keep lists)
    "int": None, "bool": None, "float": None, "str": None, "None": None, "tuple": None, "list": None, "dict": None,
    "SpecConfig": None, "GraphRunner": None, "RuntimeState": None, "_Budget": None, "Ops": None, "object": None,
}
#: parameters whose name says more than their type: the graph replay's iteration is the step counter
_NAMED: dict[str, str] = {"iteration": "iteration"}


def _annotation_kinds(name: str, annotation: Any) -> set[str]:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
    tokens = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", text.replace("'", "").replace('"', "")))
    if annotation is inspect.Parameter.empty or not tokens:
        return {"state"}
    out = {k for t in tokens for k in [_KINDS.get(t, "state")] if k is not None}
    if tokens & {"tuple", "list"} and "int" in tokens:
        out.add("ids")
    if name in _NAMED:
        out.add(_NAMED[name])
    return out


@functools.lru_cache(maxsize=None)
def reach(op: str) -> frozenset[str]:
    """The erasures an operation in slot ``op`` can read: those whose :attr:`Erasure.reached_by`
    meets the kinds of the arguments its caller passes (the slot's signature in ``DEFAULT_OPS``,
    after the table itself)."""
    params = list(inspect.signature(getattr(DEFAULT_OPS, op)).parameters.values())[1:]
    kinds = set().union(*[_annotation_kinds(p.name, p.annotation) for p in params]) if params else set()
    return frozenset(e.name for e in ERASURES if e.reached_by & kinds)


def own(fn: Callable[..., Any]) -> bool:
    """``fn`` is specstate's own code: a plain function defined in a ``specstate.`` module whose
    closure holds no callable that is not (a partial, a bound method, a callable object: not)."""
    if not isinstance(fn, FunctionType) or not (fn.__module__ or "").startswith("specstate."):
        return False
    cells = fn.__closure__ or ()
    return all(_own_value(c.cell_contents) for c in cells if _filled(c))


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # an empty cell
        return False
    return True


def _own_value(v: Any) -> bool:
    return not callable(v) or isinstance(v, type) or own(v)


def user_invariants() -> list[str]:
    """The registered invariants that are not specstate's own (they are handed every state)."""
    from specstate.invariants import all_invariants

    return [inv.name for inv in all_invariants() if not own(inv.check)]


def kept(ops: Ops, invariants: Iterable[str] | None = None) -> dict[str, tuple[str, ...]]:
    """Erasure name -> what keeps it: the operations of ``ops`` that are not specstate's own and can
    read it (:func:`reach`), and the invariants of your own (``invariants``, default
    :func:`user_invariants`), as ``invariant NAME``. Empty: every erasure holds."""
    readers: dict[str, list[str]] = {}
    for op in OP_NAMES:
        if not own(getattr(ops, op)):
            for name in reach(op):
                readers.setdefault(name, []).append(op)
    for inv in user_invariants() if invariants is None else invariants:
        for name in ERASURE_NAMES:
            readers.setdefault(name, []).append(f"invariant {inv}")
    return {e: tuple(readers[e]) for e in ERASURE_NAMES if e in readers}


def reduction_notes(keep: Mapping[str, tuple[str, ...]], *, reduce: bool = True) -> list[str]:
    """One line saying which erasures the key gives up and why, or none: ``reduction: kept the
    older switch decision (variant overrides decide_speculation)``. ``reduce=False`` names only the
    erasures the unreduced key makes too."""
    names = [e for e in ERASURES if e.name in keep and (reduce or not e.reduce_only)]
    if not names:
        return []
    why = sorted({r for e in names for r in keep[e.name]})
    ops = [r for r in why if not r.startswith("invariant ")]
    invs = [r.removeprefix("invariant ") for r in why if r.startswith("invariant ")]
    reasons = ([f"variant overrides {', '.join(ops)}"] if ops else []) + (
        [f"invariants of your own: {', '.join(invs)}"] if invs else [])
    return [f"reduction: kept {', '.join(e.what for e in names)} ({'; '.join(reasons)})"]


def interval_notes(ops: Ops, *, exhaustive: bool) -> list[str]:
    """``specstate prove``'s counterpart: the proof erases no state (it runs concrete paths), but its
    intervals skip batch sizes no *recorded* comparison tells apart (``bs_compare``), and only
    specstate's own code is known to compare through it (``tests/test_prove_bs_compare.py``). One
    line naming the variant's own operations that are handed more than the config (a batch size
    among it), unless every bound runs (``exhaustive``)."""
    users = [op for op in OP_NAMES if not own(getattr(ops, op)) and reach(op)]
    if exhaustive or not users:
        return []
    return [f"intervals: variant overrides {', '.join(users)}: a batch size compared there counts only through "
            f"bs_compare.at_most (docs/prove.md); --exhaustive checks every bound"]
