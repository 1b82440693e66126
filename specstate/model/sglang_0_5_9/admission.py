"""Admission as sglang 0.5.9 counts it: no page of overhead per request, no pool clamp at arrival,
no cap by the free ``req_to_token`` rows.

Owns nothing; replaces ``add_one_req``, ``schedule_prefill`` and ``arrive`` of the 0.5.12 family
(``specstate/model/admission.py``, ``specstate/model/scheduler.py``). sglang 0.5.12 reserves one
page per request for the paged allocator's page-alignment overhead, in three places written as
one fix ("Keep this bound consistent with PrefillAdder's admission budget"); 0.5.9 has none of
them (read in 0.5.9's source):

- ``managers/schedule_policy.py::PrefillAdder._update_prefill_budget`` adds
  ``ceil_paged_tokens(extend) + max_new_tokens`` to ``rem_total_token_offset`` and
  ``ceil_paged_tokens(extend)`` to ``cur_rem_token_offset`` (0.5.12: ``+ page_size`` to both);
- ``managers/schedule_policy.py::PrefillAdder.add_one_req`` compares
  ``total_tokens = extend_input_len + min(max_new, CLIP)`` with ``rem_total_tokens`` (0.5.12:
  ``+ page_size``), and cuts a new chunk to ``rem_chunk_tokens // page_size * page_size`` only
  (0.5.12 also cuts prefix + chunk to whole pages, a no-op here: a radix match is whole pages
  and ``rem_chunk_tokens`` stays a multiple of the page size);
- ``managers/scheduler.py::Scheduler.init_req_max_new_tokens`` clamps ``max_new_tokens`` to
  ``max_req_len - input_len - 1`` only (0.5.12 also to ``max_total_num_tokens -
  ceil_page(input_len) - page_size - 1``).

and ``managers/scheduler.py::Scheduler._get_new_batch_prefill_raw`` bounds a prefill by
``managers/scheduler.py::Scheduler.get_num_allocatable_reqs`` without the free ``req_to_token``
rows (0.5.12 caps it by them), its early exit on no room taken only while a chunk is pending.
Found by the CPU oracle for 0.5.9 (``specstate oracle --engine 0.5.9``): a prefill of a continuing
chunk and one new request where the model, counting the chunk's row, admitted the chunk alone.

At page size 1 the overhead is one token a request, so these differ there too (the entries left
in ``ledger.py``'s ``UNREVIEWED`` before issue 39's paged review). ``add_chunked_req`` is
0.5.12's (only a hybrid-SWA branch differs); its budget update is this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from specstate.model.admission import (
    CLIP_MAX_NEW_TOKENS, AddReqResult, Admission, _add_chunked_req, _Budget, _start, schedule_admission,
)
from specstate.model.radix import inc_lock_ref
from specstate.model.request import ReqStatus
from specstate.model.bs_compare import room
from specstate.model.scheduler import arrive, prefill_from_admission

if TYPE_CHECKING:
    from specstate.model.actions import Arrive
    from specstate.model.batch import ScheduleBatch
    from specstate.model.ops_table import Ops
    from specstate.model.request import Req
    from specstate.model.state import ModelState
    from specstate.model.tx import Tx

__all__ = ["add_one_req_0_5_9", "schedule_prefill_0_5_9", "arrive_0_5_9"]


@dataclass
class _Budget059(_Budget):
    """``PrefillAdder``'s budgets as 0.5.9 spends them."""

    def update(self, extend: int, max_new: int) -> None:
        """``_update_prefill_budget`` of 0.5.9: ``ceil_paged_tokens(extend)``, no page overhead."""
        page = self.page
        if page > 1:
            extend = -(-extend // page) * page
        self.rem_total_offset += extend + max_new
        self.cur_rem_offset += extend
        self.rem_input -= extend
        self.rem_chunk -= extend


def _budget(s: "ModelState") -> _Budget059:
    b = _start(s)
    return _Budget059(b.rem_total_offset, b.cur_rem_offset, b.rem_input, b.rem_chunk, b.page)


def add_one_req_0_5_9(ops: "Ops", s: "ModelState", b: _Budget, req: "Req",
                      adm: Admission) -> tuple["ModelState", AddReqResult]:
    """``PrefillAdder.add_one_req`` of 0.5.9 (radix cache path): ``total_tokens`` without a page,
    the chunk cut to whole pages of ``rem_chunk_tokens``."""
    extend = req.fill_len - req.prefix_len
    page = b.page
    paged = -(-extend // page) * page  # ceil_paged_tokens
    total = extend + min(max(req.max_new_tokens - req.output_len, 0), CLIP_MAX_NEW_TOKENS)
    if total >= b.rem_total(s):
        return s, AddReqResult.NO_TOKEN
    if paged >= b.rem_input and adm.picked:
        return s, AddReqResult.OTHER
    locked = s.evolve(tree=inc_lock_ref(s.tree, req.last_node))  # _lock_node
    if total >= b.rem_total(locked):
        return s, AddReqResult.NO_TOKEN
    if paged <= b.rem_chunk:
        adm.picked.append((req.rid, req.prefix_len, extend))
        b.update(paged, min(req.max_new_tokens, CLIP_MAX_NEW_TOKENS))
    else:
        trunc = b.rem_chunk // page * page  # "make sure at least one page is available"
        if trunc <= 0:
            return s, AddReqResult.OTHER
        adm.picked.append((req.rid, req.prefix_len, trunc))
        adm.chunked_rid = req.rid
        b.update(trunc, 0)
    return locked, b.state(locked)


def allocatable_reqs(s: "ModelState", running_bs: int) -> int:
    """``Scheduler.get_num_allocatable_reqs`` of 0.5.9: ``pp_max_micro_batch_size`` (=
    ``max_running_requests``) minus the running batch's rows; the free ``req_to_token_pool`` rows
    cap it only with pipeline parallelism (0.5.12: always)."""
    return room(s.config.max_running_requests, running_bs)


def schedule_prefill_0_5_9(ops: "Ops", tx: "Tx") -> tuple["Tx", "ScheduleBatch | None"]:
    """``Scheduler._get_new_batch_prefill_raw`` of 0.5.9: the early exit on no room fires only
    while a chunked request is pending (``and self.chunked_req is not None``; 0.5.12: ``is None``,
    as its comment "Ignore the check if self.chunked_req is not None" says), the bound of 0.5.9's
    ``get_num_allocatable_reqs``, 0.5.9's ``PrefillAdder`` budget, then 0.5.12's ``prepare_for_extend``."""
    s = tx.state
    if (s.running.batch_is_full or not s.waiting) and s.chunked_rid is None:
        return tx, None
    if allocatable_reqs(s, s.running.batch_size) <= 0 and s.chunked_rid is not None:
        return tx.with_running(s.running.evolve(batch_is_full=True)), None
    s, adm = schedule_admission(ops, s, allocatable_reqs(s, s.running.batch_size), start=_budget)
    return prefill_from_admission(ops, tx, s, adm)


def arrive_0_5_9(ops: "Ops", tx: "Tx", action: "Arrive") -> "Tx":
    """``Scheduler.handle_generate_request`` with 0.5.9's ``init_req_max_new_tokens``:
    ``min(max_new_tokens, max_req_len - input_len - 1)``, no clamp to the pool."""
    tx = arrive(ops, tx, action)
    s = tx.state
    req = s.reqs[-1]
    if req.status == ReqStatus.ABORTED:
        return tx  # refused by the tokenizer manager: it never reaches the scheduler
    max_new = max(0, min(action.max_new_tokens, s.config.max_req_len - action.prompt_len - 1))
    return tx.with_state(s.with_reqs([req.evolve(max_new_tokens=max_new)]))
