"""``step(state, action, ops) -> StepOutcome``: the model's one transition function.

A ``Step`` action is one scheduler loop iteration (the operation ``iteration``); for the v1
family one ``Scheduler.event_loop_normal`` iteration (``scheduler.event_loop_normal``)::

    batch = get_next_batch_to_run()      # merge last prefill; new prefill, else update_running_batch
    if batch is None: idle
    elif batch is a prefill: forward_batch_generation -> process_batch_result_prefill
    else:                    forward_batch_generation -> process_batch_result_decode

and for the v2 family one ``Scheduler.event_loop_overlap`` iteration
(``specstate.model.sglang_0_5_17.scheduler.event_loop_overlap``): launch the next batch, then process
last iteration's result.

A crash the real worker would have (PyTorch's shape error, an ``AttributeError`` on a stale
field, running out of KV slots) ends the step with ``outcome.crash`` set and the state as it
was before the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from specstate.model.actions import Abort, Action, Arrive, Step
from specstate.model.kv import OutOfSlots
from specstate.model.config import SpecConfig
from specstate.model.ops import DEFAULT_OPS, DEFAULT_OVERLAP_START, Ops
from specstate.model.records import Crash, Event, ForwardRecord
from specstate.model.runner import ModelledCrash
from specstate.model.state import ModelState, OverlapPart, build_initial_state
from specstate.model.tx import Tx
from specstate.errors import InvalidAction

__all__ = ["StepOutcome", "step", "initial_state"]


@dataclass(frozen=True)
class StepOutcome:
    before: ModelState
    action: Action
    state: ModelState  #: after the step (== ``before`` advanced by one index if it crashed)
    forwards: tuple[ForwardRecord, ...] = ()
    events: tuple[Event, ...] = ()
    crash: Crash | None = None
    batch_kind: str = "none"  #: ``prefill``, ``decode``, ``idle`` or ``none`` (not a Step)
    batch_rids: tuple[int, ...] = ()  #: the requests of the batch this iteration ran
    #: v2 (overlap scheduler): the requests of last iteration's batch whose result this one processed
    processed: tuple[int, ...] = ()


def initial_state(config: SpecConfig,
                  overlap_start: Callable[[SpecConfig], OverlapPart] | None = DEFAULT_OVERLAP_START) -> ModelState:
    """The state before the first action: ``state.build_initial_state`` with the overlap scheduler's
    initial part that the release modelling it gives (``DEFAULT_OVERLAP_START``, asked of the releases
    by the operations' catalog), or the one handed."""
    return build_initial_state(config, overlap_start)


def step(state: ModelState, action: Action, ops: Ops = DEFAULT_OPS) -> StepOutcome:
    _validate(state, action)
    tx = Tx(state.evolve(step_index=state.step_index + 1, reqs_delta=None),
            accept=action.accept if isinstance(action, Step) else ())
    kind: str = "none"
    rids: tuple[int, ...] = ()
    try:
        if isinstance(action, Arrive):
            tx = ops.arrive(ops, tx, action)
        elif isinstance(action, Abort):
            tx = ops.abort(ops, tx, action)
        else:
            tx, kind, rids = _iteration(ops, _mark_eos(tx, action))
    except (ModelledCrash, OutOfSlots) as e:
        kind, rids, tx = getattr(e, "batch", (kind, rids, tx))
        if isinstance(e, ModelledCrash):
            crash = Crash(type(e.cause).__name__, e.where, str(e.cause), dict(e.shapes))
        else:
            crash = Crash("RuntimeError", "mem_cache/common.py::alloc_token_slots", str(e), {"available": tx.state.kv_available})
        after = state.evolve(step_index=state.step_index + 1)
        entered = getattr(e, "attempted", None)
        forwards = tx.forwards + ((entered,) if entered is not None else ())
        return StepOutcome(state, action, after, forwards, tx.events, crash, kind, rids)
    return StepOutcome(state, action, tx.state, tx.forwards, tx.events, None, kind, rids, tx.processed)


def _iteration(ops: Ops, tx: Tx) -> tuple[Tx, str, tuple[int, ...]]:
    return ops.iteration(ops, tx)  # v1: scheduler.event_loop_normal; v2: sglang_0_5_17.scheduler.event_loop_overlap


def _mark_eos(tx: Tx, action: Step) -> Tx:
    s = tx.state
    marks = [s.req(r).evolve(eos_pending=True) for r in action.eos if s.req(r).live]
    return tx.with_reqs(*marks) if marks else tx


def _validate(state: ModelState, action: Action) -> None:
    if isinstance(action, Arrive):
        if not all(type(x) is int for x in (action.prompt_len, action.max_new_tokens, action.shared_len)):
            raise InvalidAction(f"Expected integer prompt_len, max_new_tokens and shared_len but got {action!r}")
        if action.prompt_len < 1 or action.max_new_tokens < 1:
            raise InvalidAction(f"Expected prompt_len >= 1 and max_new_tokens >= 1 but got {action!r}")
        if action.prefix_of is not None and not (type(action.prefix_of) is int and 0 <= action.prefix_of < len(state.reqs)
                                                 and 0 < action.shared_len <= action.prompt_len):
            raise InvalidAction(f"Expected prefix_of an earlier rid in [0, {len(state.reqs)}) and "
                                f"0 < shared_len <= prompt_len but got {action!r}")
    elif isinstance(action, Abort):
        if type(action.rid) is not int or not 0 <= action.rid < len(state.reqs):
            raise InvalidAction(f"Expected a request id in [0, {len(state.reqs)}) but got rid={action.rid!r}")
    elif isinstance(action, Step):
        bad = [r for r in action.eos if type(r) is not int or not 0 <= r < len(state.reqs)]
        if bad:
            raise InvalidAction(f"Expected eos to name requests that have arrived (rids in [0, {len(state.reqs)})) "
                                f"but got eos={list(action.eos)[:10]!r}")
        if any(type(a) is not int for a in action.accept):
            raise InvalidAction(f"Expected integer accept lengths but got accept={list(action.accept)[:10]!r}")
    else:
        raise InvalidAction(f"Expected Arrive, Abort or Step but got {type(action).__name__}={action!r}")
