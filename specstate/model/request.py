"""Requests as the scheduler sees them.

Owns: one request's lengths and lifecycle. Mirrors ``sglang/srt/managers/schedule_batch.py::Req``
(``origin_input_ids``, ``output_ids``, ``sampling_params.max_new_tokens``, ``kv_committed_len``,
``kv_allocated_len``, ``to_finish``, ``is_retracted``, ``reset_for_retract``, ``check_finished``).

Identity kept (page size 1), for a request that is running decode::

    kv_committed_len == prompt_len + output_len - 1     # the last output token (the bonus
                                                        # token) has no KV yet
    cache_protected_len <= kv_committed_len              # the radix tree owns that prefix
    kv_allocated_len == kv_committed_len                # between iterations
    draft_kv_len     == kv_committed_len                # draft KV in step with the target

``draft_kv_len`` is the model's name for the number of positions whose KV the *draft* model
has written into its own pool (the draft runner's ``token_to_kv_pool``), at the same slots.
"""

from __future__ import annotations

from dataclasses import dataclass
from specstate.model.values import cached_hash, evolve
from enum import Enum

__all__ = ["ReqStatus", "FinishReason", "Req"]


class ReqStatus(Enum):
    WAITING = "waiting"  #: in ``Scheduler.waiting_queue`` (new or retracted)
    PREFILLING = "prefilling"  #: ``Scheduler.chunked_req``: part of its prompt is prefilled
    RUNNING = "running"  #: in a prefill batch or the running decode batch
    FINISHED = "finished"  #: ``Req.finished()``; KV released
    ABORTED = "aborted"  #: aborted while waiting (never ran, or retracted)


_WAITING, _PREFILLING, _RUNNING = ReqStatus.WAITING, ReqStatus.PREFILLING, ReqStatus.RUNNING


class FinishReason(Enum):
    LENGTH = "length"  #: ``FINISH_LENGTH``: ``max_new_tokens`` reached
    EOS = "eos"  #: ``FINISH_MATCHED_TOKEN``
    ABORT = "abort"  #: ``FINISH_ABORT``


@cached_hash
@dataclass(frozen=True)
class Req:
    """``schedule_batch.py::Req``, reduced to lengths."""

    rid: int  #: ``Req.rid`` (here: arrival index)
    prompt_len: int  #: ``len(origin_input_ids)``
    max_new_tokens: int  #: ``sampling_params.max_new_tokens``
    output_len: int = 0  #: ``len(output_ids)``
    status: ReqStatus = ReqStatus.WAITING
    kv_committed_len: int = 0  #: ``Req.kv_committed_len``: tokens with target KV written
    kv_allocated_len: int = 0  #: ``Req.kv_allocated_len``: token slots owned
    draft_kv_len: int = 0  #: positions with draft KV written (model-only name)
    to_abort: bool = False  #: ``Req.to_finish = FINISH_ABORT(...)`` pending
    eos_pending: bool = False  #: the next sampled token is EOS (data of the workload)
    finish_reason: FinishReason | None = None
    retractions: int = 0  #: times ``retract_decode`` took it back
    #: token ownership: ``((end, owner), ...)``; tokens ``[previous end, end)`` are ``owner``'s
    #: (the earliest request with the same prompt prefix); see ``prefix_cache``
    segments: tuple[tuple[int, int], ...] = ()
    prefix_len: int = 0  #: ``len(Req.prefix_indices)``: KV reused from the tree / earlier chunks
    cache_protected_len: int = 0  #: ``Req.cache_protected_len``: leading slots the radix tree owns
    last_node: int = 0  #: ``Req.last_node``: the radix node it locks (0: the root, no lock)
    is_retracted: bool = False  #: ``Req.is_retracted`` (until its re-prefill)

    @property
    def fill_len(self) -> int:
        """``len(origin_input_ids + output_ids)``: what a (re-)prefill extends over."""
        return self.prompt_len + self.output_len

    @property
    def live(self) -> bool:
        """Holds or may hold KV slots: not finished, not aborted."""
        s = self.status
        return s is _WAITING or s is _RUNNING or s is _PREFILLING

    @property
    def done(self) -> bool:
        return not self.live

    @property
    def own_slots(self) -> int:
        """Slots the request owns outside the radix tree (a queued request's prefix match
        owns nothing until it is admitted)."""
        return self.kv_allocated_len - self.cache_protected_len if self.kv_allocated_len else 0

    def would_finish_after(self, new_tokens: int) -> bool:
        return self.output_len + new_tokens >= self.max_new_tokens

    evolve = evolve  #: ``values.evolve``: a copy with some fields changed
