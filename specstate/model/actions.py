"""Actions: what the outside world does to the scheduler, as plain data.

A trace is a list of these. ``Step`` carries the worker's per-request outcomes as data
(accept lengths, EOS), so a step is deterministic: the model never draws random numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from specstate._deprecation import renamed_names

__all__ = ["Arrive", "Abort", "Step", "Action", "action_to_json", "ACTION_BOUNDS"]

#: Inclusive bounds of the actions' numbers in a trace file (``specstate.schema``): lengths a
#: context window can hold, request ids and per-step rows a trace of ``MAX_ACTIONS`` can reach,
#: accept lengths of at most ``num_steps + 1`` for the largest ``num_steps`` (``config.BOUNDS``).
ACTION_BOUNDS: dict[str, tuple[int, int]] = {
    "prompt_len": (1, 1 << 22),
    "max_new_tokens": (1, 1 << 24),
    "shared_len": (0, 1 << 22),
    "rid": (0, 199_999),
    "accept": (1, 33),
    "rows": (0, 200_000),  #: entries of ``accept`` / ``eos``
}


@dataclass(frozen=True)
class Arrive:
    """A request arrives (``Scheduler.handle_generate_request``); its rid is its arrival index."""

    prompt_len: int  #: ``len(input_ids)``
    max_new_tokens: int  #: ``sampling_params.max_new_tokens``
    #: an earlier request (rid) whose prompt this one's first ``shared_len`` tokens equal
    #: (a shared prompt prefix: the radix cache's prefix hits); ``None``: a prompt of its own
    prefix_of: int | None = None
    shared_len: int = 0


@dataclass(frozen=True)
class Abort:
    """``Scheduler.abort_request``: a waiting request is dropped, a running one gets
    ``to_finish = FINISH_ABORT`` and finishes at its next ``check_finished``."""

    rid: int


@dataclass(frozen=True)
class Step:
    """One iteration of ``Scheduler.event_loop_normal``.

    ``accept``: accept length per row of the decode batch (``num_correct_drafts + 1``),
    clipped to ``1 .. num_steps + 1``; rows beyond the tuple accept 1 (no draft correct).
    ``eos``: request ids whose next sampled token is EOS.
    """

    accept: tuple[int, ...] = ()
    eos: tuple[int, ...] = ()


Action = Union[Arrive, Abort, Step]


def action_to_json(a: Action) -> dict[str, Any]:
    if isinstance(a, Arrive):
        d: dict[str, Any] = {"op": "arrive", "prompt_len": a.prompt_len, "max_new_tokens": a.max_new_tokens}
        if a.prefix_of is not None:
            d.update(prefix_of=a.prefix_of, shared_len=a.shared_len)
        return d
    if isinstance(a, Abort):
        return {"op": "abort", "rid": a.rid}
    return {"op": "step", "accept": list(a.accept), "eos": list(a.eos)}


#: ``action_from_json`` moved to ``specstate.schema.action_from_data`` (the schema owns the JSON
#: readers; the model imports no schema): the old name still works, with a deprecation warning
__getattr__ = renamed_names(__name__, {"action_from_json": "specstate.schema:action_from_data"})
