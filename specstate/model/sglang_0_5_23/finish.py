"""How a request finishes and what it leaves in the tree, as sglang 0.5.23 does it.

Owns nothing; replaces two of the 0.5.17 family's operations (``update_finish_state``,
``release_kv_cache``). sglang 0.5.23:

- ``managers/schedule_batch.py::Req.update_finish_state`` (0.5.18 on): an abort first, then the
  stop token / EOS, *then* the length; a stop found past ``max_new_tokens`` (a verify accepts a
  whole run) is demoted to a length finish at the cap
  (``managers/schedule_batch.py::Req._cap_finished_len_at_max_new_tokens``). 0.5.17 checked the
  length first: a run that reaches the cap and ends in EOS finished by length there, by EOS here.
  The model's EOS is the last token of the accepted run (``Step.eos``), so its ``finished_len``
  (``managers/schedule_batch.py::Req._check_token_based_finish``) is the output length.
- ``managers/schedule_batch.py::Req.owned_kv_len`` (0.5.21 on): on release the tree gets at most
  ``prompt + len(output_ids_through_stop)`` tokens
  (``managers/schedule_batch.py::Req.output_ids_through_stop``: ``output_ids[:finished_len]``), the
  committed tokens past the stop are freed as over-allocated
  (``mem_cache/common.py::release_kv_cache``, ``mem_cache/common.py::_release_overallocated_kv_indices``).
  A length finish has ``finished_len = max_new_tokens``: a run that overshot the cap by two or
  more tokens leaves fewer tokens in the tree than 0.5.17 did.
- the tree insert is ``mem_cache/radix_cache.py::RadixCache.checkpoint`` (0.5.22 on; it replaced
  ``cache_finished_req`` / ``cache_unfinished_req``; ``mem_cache/common.py::checkpoint_kv_cache``
  for a running request): for page size 1 it inserts the same tokens the model inserts, and then
  splits the node at the prompt boundary (``tree.py``).

The result processing around them is 0.5.17's, which calls the ``update_finish_state`` operation
(``managers/scheduler_components/batch_result_processor.py::SchedulerBatchResultProcessor.process_batch_result_decode``,
``managers/scheduler_components/batch_result_processor.py::SchedulerBatchResultProcessor.process_batch_result_prefill``):
rows finished or retracted since launch are skipped, the others get their tokens, finish, and
release or checkpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specstate.model.request import FinishReason, Req, ReqStatus
from specstate.model.sglang_0_5_17.scheduler import release_kv_cache_v2
from specstate.model.sglang_0_5_23.tree import split_at_prompt

if TYPE_CHECKING:
    from specstate.model.ops_table import Ops
    from specstate.model.state import ModelState

__all__ = ["update_finish_state", "finished_len", "owned_kv_len", "release_kv_cache_owned", "release_kv_cache_v23",
           "update_finish_state_v23"]


def update_finish_state(req: Req, eos: bool) -> Req:
    """``Req.update_finish_state`` of 0.5.18+: abort, then EOS (capped at ``max_new_tokens``:
    past the cap it is a length finish), then the length."""
    reason = None
    if req.to_abort:
        reason = FinishReason.ABORT
    elif eos:
        reason = FinishReason.LENGTH if req.output_len > req.max_new_tokens else FinishReason.EOS
    elif req.output_len >= req.max_new_tokens:
        reason = FinishReason.LENGTH
    if reason is None:
        return req
    return req.evolve(status=ReqStatus.FINISHED, finish_reason=reason, eos_pending=False)


def finished_len(req: Req) -> int | None:
    """``Req.finished_len``: ``max_new_tokens`` for a length finish, the EOS position (the end of
    the accepted run) for a stop; ``None`` for an abort or an unfinished request."""
    if req.finish_reason is FinishReason.LENGTH:
        return req.max_new_tokens
    if req.finish_reason is FinishReason.EOS:
        return req.output_len
    return None


def owned_kv_len(req: Req) -> int:
    """``Req.owned_kv_len`` (no thinking-strip): the committed tokens, at most through the stop."""
    n = finished_len(req)
    return req.kv_committed_len if n is None else min(req.kv_committed_len, req.prompt_len + n)


def release_kv_cache_owned(ops: "Ops", s: "ModelState", req: Req, is_insert: bool = True) -> tuple["ModelState", Req]:
    """0.5.17's ``release_kv_cache`` up to ``owned_kv_len`` (the rest of the row freed as
    over-allocated); ``kv_committed_len`` stays as 0.5.17 leaves it. No split at the prompt
    boundary (``release_kv_cache_v23`` adds it)."""
    committed = req.kv_committed_len
    s, out = release_kv_cache_v2(ops, s, req.evolve(kv_committed_len=owned_kv_len(req)), is_insert)
    return s, out.evolve(kv_committed_len=committed)


def release_kv_cache_v23(ops: "Ops", s: "ModelState", req: Req, is_insert: bool = True) -> tuple["ModelState", Req]:
    """The operation ``release_kv_cache`` of 0.5.23 (``mem_cache/common.py::release_kv_cache`` with
    ``checkpoint=is_insert``): ``RadixCache.checkpoint`` up to ``owned_kv_len``
    (``release_kv_cache_owned``), then its split at the prompt boundary (``tree.py``)."""
    s, out = release_kv_cache_owned(ops, s, req, is_insert)
    return (split_at_prompt(s, req, owned_kv_len(req)) if is_insert else s), out


def update_finish_state_v23(ops: "Ops", req: Req, eos: bool) -> Req:
    """The operation ``update_finish_state`` of 0.5.18+ (``managers/schedule_batch.py::Req.update_finish_state``):
    the 0.5.17 result processing (``sglang_0_5_17.scheduler.process_batch_result_prefill_v2`` / ``_decode_v2``)
    calls it, so only the order and the cap change."""
    return update_finish_state(req, eos)