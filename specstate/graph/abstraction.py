"""The abstraction function: one concrete model state -> one node a person recognises.

``abstract_state(state, last_target)`` is the *only* place that decides what a node of the
default graph is; swap it (``build_graph(..., abstraction=my_fn)``) to draw a coarser or
finer picture. A node (``AbstractState``) has six fields:

- ``forward``: forward mode of the last *target* forward (``EXTEND``, ``DECODE``,
  ``TARGET_VERIFY``, ``IDLE``; ``-`` before the first forward);
- ``path``: that forward ran through a CUDA graph (``graph:<capture mode>``, e.g.
  ``graph:TARGET_VERIFY``) or ``eager``;
- ``spec``: the last switch decision (``on`` / ``off``; ``-`` before the first decode);
- ``spec_info``: the kind attached to the batch that decodes next (``none``, ``draft input``,
  ``verify input``, ``draft-extend input``, ``idle stub`` = an ``EagleDraftInput`` of 0 rows);
- ``batch``: decode-batch rows (running + the prefill waiting to merge) relative to the
  threshold T and the largest capture size: ``empty``, ``< T``, ``= T``, ``> T``,
  ``> T, > capture``;
- ``queue``: the waiting queue is ``empty`` or ``waiting``.

The threshold T is the variant's family's (``Family.switch_threshold``): the graph code binds the
family to ``abstract_state`` and ``operation`` (``with_family``: any abstraction with a ``family``
keyword gets it), never infers it from a config field.

``operation(outcome)`` names the edge: ``arrive``, ``prefill``, ``decode-spec``,
``decode-fallback``, ``finish`` (an abort, or a decode whose finished requests moved the
batch to another size bucket),
``retract``, ``cross-up`` (speculation switched off by a decode), ``cross-down`` (switched
back on), ``idle``.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from specstate.model import Abort, Arrive, ForwardRecord, ModelState, StepOutcome, Worker
from specstate.model.spec_info import SpecInfo

if TYPE_CHECKING:
    from specstate.model.config import SpecConfig
    from specstate.model.family_registry import Family

__all__ = ["AbstractState", "Abstraction", "abstract_state", "operation", "last_target_forward", "decode_rows", "OPERATIONS",
           "BATCH_BUCKETS", "with_family"]

OPERATIONS = ("arrive", "prefill", "decode-spec", "decode-fallback", "finish", "retract", "cross-up", "cross-down",
              "idle")
BATCH_BUCKETS = ("empty", "< T", "= T", "> T", "> T, > capture")


@dataclass(frozen=True, order=True)
class AbstractState:
    batch: str
    queue: str
    spec: str
    spec_info: str
    forward: str
    path: str

    @property
    def key(self) -> str:
        """A stable node id (DOT / JSON)."""
        return "|".join((self.batch, self.queue, self.spec, self.spec_info, self.forward, self.path))

    def label(self) -> str:
        q = "queue empty" if self.queue == "empty" else "queue waiting"
        fwd = "no forward yet" if self.forward == "-" else f"{self.forward} {self.path}"
        return f"bs {self.batch} · {q}\nspec {self.spec} · {self.spec_info}\n{fwd}"


#: ``(state, last target forward) -> node``; replace it to change what a node is.
Abstraction = Callable[[ModelState, "ForwardRecord | None"], AbstractState]


def last_target_forward(outcome: StepOutcome, previous: ForwardRecord | None) -> ForwardRecord | None:
    """The last target forward after ``outcome`` (``previous`` if the step ran none)."""
    targets = [f for f in outcome.forwards if f.worker == Worker.TARGET]
    return targets[-1] if targets else previous


def with_family(abstraction: Abstraction, family: Family) -> Abstraction:
    """``abstraction`` with the variant's ``family`` bound, where it takes a ``family`` keyword
    (``abstract_state`` does); another abstraction as it is."""
    try:
        takes = "family" in inspect.signature(abstraction).parameters
    except (TypeError, ValueError):  # a callable without a signature
        takes = False
    general: Callable[..., AbstractState] = abstraction  # it takes ``family`` too
    return functools.partial(general, family=family) if takes else abstraction


def abstract_state(state: ModelState, last_target: ForwardRecord | None, *, family: Family | None = None) -> AbstractState:
    """The default abstraction (see the module doc); ``family``: the variant's (its switch
    threshold draws the batch buckets; the graph code binds it, ``with_family``)."""
    spec = "-" if not state.decisions else ("on" if state.decisions[-1].speculate else "off")
    return AbstractState(_bucket(state, family), "empty" if not state.waiting else "waiting", spec,
                         _spec_kind(_next_batch_spec(state)), *_forward(last_target))


def decode_rows(state: ModelState) -> int:
    """Live requests of the batch that decodes next (running + the prefill that merges)."""
    rids = state.running.rids + (state.last_batch.rids if state.last_batch is not None else ())
    return sum(1 for r in rids if state.req(r).live)


def threshold(config: SpecConfig, family: Family | None) -> int | None:
    """T of ``config`` under ``family`` (``Family.switch_threshold``); without a family (a direct
    call of ``abstract_state(state, last)``, as before the family was bound) the deprecated
    inference from the config's scheduler loop (``family_registry.threshold_of``)."""
    if family is not None:
        return family.switch_threshold(config)
    from specstate.model.family_registry import _threshold_from_loop

    return _threshold_from_loop(config)


def _bucket(state: ModelState, family: Family | None) -> str:
    cfg = state.config
    rows = decode_rows(state)
    t = threshold(cfg, family)
    if rows == 0:
        return "empty"
    if t is None or rows < t:
        return "< T"
    if rows == t:
        return "= T"
    return "> T, > capture" if rows > max(cfg.cuda_graph_bs) else "> T"


def _next_batch_spec(state: ModelState) -> SpecInfo | None:
    if not state.running.is_empty() or state.last_batch is None:
        return state.running.spec_info
    return state.last_batch.spec_info


def _spec_kind(info: SpecInfo | None) -> str:
    if info is None:
        return "none"
    name = type(info).__name__
    if name == "EagleDraftInput":
        return "idle stub" if info.num_rows == 0 else "draft input"
    return {"EagleVerifyInput": "verify input", "EagleDraftExtendInput": "draft-extend input"}.get(name, name)


def _forward(f: ForwardRecord | None) -> tuple[str, str]:
    if f is None:
        return "-", "-"
    path = f"graph:{f.graph.capture_forward_mode.value}" if f.graph is not None else "eager"
    return f.forward_mode.value, path


def operation(outcome: StepOutcome, family: Family | None = None) -> str:
    """The scheduler/worker operation one step performed (see the module doc)."""
    a = outcome.action
    if isinstance(a, Arrive):
        return "arrive"
    if isinstance(a, Abort):
        return "finish"
    if outcome.batch_kind in ("idle", "prefill"):
        return outcome.batch_kind
    if any(e.kind == "retract" for e in outcome.events):
        return "retract"
    spec = any(f.phase == "draft" for f in outcome.forwards)
    before = outcome.before.decisions[-1].speculate if outcome.before.decisions else None
    if before is True and not spec:
        return "cross-up"
    if before is False and spec:
        return "cross-down"
    if outcome.crash is None and _finished(outcome) and _bucket(outcome.state, family) != _bucket(outcome.before, family):
        return "finish"
    return "decode-spec" if spec else "decode-fallback"


def _finished(outcome: StepOutcome) -> bool:
    return any(outcome.before.req(r).live and not outcome.state.req(r).live for r in outcome.batch_rids)
