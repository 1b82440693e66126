"""Admission: which queued requests one prefill takes, and how much of each.

Mirrors ``sglang/srt/managers/schedule_policy.py::PrefillAdder`` (``add_chunked_req``,
``add_one_req``, ``_update_prefill_budget``, ``budget_state``, ``rem_total_tokens``,
``cur_rem_tokens``, ``_get_running_request_total_token_offset``, ``_lock_node``) as
``Scheduler._get_new_batch_prefill_raw`` drives it, FCFS (``schedule_policy="fcfs"``, sglang's
default: no reordering), no mixed chunk, no priority preemption; paged (``page_size`` P > 1)
as 0.5.12 pages it: ``ceil_paged_tokens(extend)`` and one page of overhead per request in the
budgets, ``total = extend + max_new + P`` in ``add_one_req``, a new chunk cut so that prefix +
chunk is whole pages.

The budgets, as sglang keeps them::

    rem_total_tokens = available + evictable - rem_total_offset
        rem_total_offset = sum(min(max_new - out_len, CLIP) * new_token_ratio  for running rows)
                         + sum(ceil_P(extend) + min(max_new, CLIP) + P         for admitted rows)
    cur_rem_tokens   = available + evictable - sum(ceil_P(extend) + P for admitted rows)
    rem_input_tokens = max_prefill_tokens - sum(ceil_P(extend))
    rem_chunk_tokens = chunked_prefill_size - sum(ceil_P(extend))

(``ceil_P``: ``PrefillAdder.ceil_paged_tokens``, the identity at page size 1.)

``evictable`` moves while admission runs: matching a prefix locks its path (``_lock_node``),
which turns evictable slots into protected ones. ``rem_total_offset`` is a float, summed in
sglang's order, so the comparisons agree bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from typing import TYPE_CHECKING, Callable

from specstate.model.radix import inc_lock_ref
from specstate.model.request import Req
from specstate.model.state import ModelState

if TYPE_CHECKING:
    from specstate.model.ops_table import Ops

__all__ = ["CLIP_MAX_NEW_TOKENS", "add_one_req", "add_one_req_checked", "AddReqResult", "Admission",
           "schedule_admission"]

#: ``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION`` (``environ.py``)
CLIP_MAX_NEW_TOKENS = 4096


class AddReqResult(Enum):
    """``schedule_policy.py::AddReqResult``."""

    CONTINUE = "continue"
    NO_TOKEN = "no_token"
    OTHER = "other"


@dataclass
class _Budget:
    """``PrefillAdder``'s remaining budgets (a scratch object inside one admission)."""

    rem_total_offset: float
    cur_rem_offset: int
    rem_input: int
    rem_chunk: int
    page: int = 1  #: ``PrefillAdder.page_size``

    def rem_total(self, s: ModelState) -> float:
        return s.kv_available + s.tree.evictable - self.rem_total_offset

    def cur_rem(self, s: ModelState) -> int:
        return s.kv_available + s.tree.evictable - self.cur_rem_offset

    def update(self, extend: int, max_new: int) -> None:
        """``_update_prefill_budget``: ``ceil_paged_tokens(extend)`` plus one page of overhead
        per request ("alloc_extend reserves an extra page_size per request")."""
        page = self.page
        if page > 1:
            extend = -(-extend // page) * page
        self.rem_total_offset += extend + max_new + page
        self.cur_rem_offset += extend + page
        self.rem_input -= extend
        self.rem_chunk -= extend

    def state(self, s: ModelState) -> AddReqResult:
        """``PrefillAdder.budget_state``."""
        if self.rem_total(s) <= 0 or self.cur_rem(s) <= 0:
            return AddReqResult.NO_TOKEN
        if self.rem_input <= 0 or self.rem_chunk <= 0:
            return AddReqResult.OTHER
        return AddReqResult.CONTINUE


@dataclass
class Admission:
    """What one ``_get_new_batch_prefill_raw`` decided."""

    picked: list[tuple[int, int, int]] = field(default_factory=list)  #: (rid, prefix_len, extend_len)
    chunked_rid: int | None = None  #: ``Scheduler.chunked_req`` after this prefill
    batch_is_full: bool = False  #: set ``running_batch.batch_is_full``


def _start(s: ModelState) -> _Budget:
    cfg = s.config
    offset = sum([min(s.req(r).max_new_tokens - s.req(r).output_len, CLIP_MAX_NEW_TOKENS) * s.new_token_ratio
                  for r in s.running.rids])
    return _Budget(0 + offset, 0, cfg.max_prefill_tokens, cfg.chunked_prefill_size, cfg.page_size)


def _add_chunked_req(s: ModelState, b: _Budget, req: Req, adm: Admission) -> None:
    """``PrefillAdder.add_chunked_req``: the chunked request always goes in (else a leak)."""
    extend = req.fill_len - req.prefix_len
    rem = min(b.rem_chunk, int(b.rem_total(s)))
    if rem <= 0:
        rem = b.rem_chunk
    truncated = extend > rem
    extend = min(extend, rem)
    adm.picked.append((req.rid, req.prefix_len, extend))
    b.update(extend, 0 if truncated else min(req.max_new_tokens, CLIP_MAX_NEW_TOKENS))
    adm.chunked_rid = req.rid if truncated else None


def add_one_req(ops: "Ops", s: ModelState, b: _Budget, req: Req, adm: Admission) -> tuple[ModelState, AddReqResult]:
    """``PrefillAdder.add_one_req`` (radix cache path; a named operation of ``Ops``). Returns
    the state with the request's prefix locked when it was taken."""
    return add_one_req_checked(s, b, req, adm, input_budget=True)


def add_one_req_checked(s: ModelState, b: _Budget, req: Req, adm: Admission, *,
                        input_budget: bool) -> tuple[ModelState, AddReqResult]:
    """``add_one_req``; ``input_budget``: a request that does not fit ``rem_input_tokens``
    beside earlier ones is refused (``OTHER``) even with chunked prefill on (0.5.12)."""
    extend = req.fill_len - req.prefix_len
    page = b.page
    paged = extend if page == 1 else -(-extend // page) * page  # ceil_paged_tokens
    max_new = min(max(req.max_new_tokens - req.output_len, 0), CLIP_MAX_NEW_TOKENS)
    total = extend + max_new + page
    if total >= b.rem_total(s):
        return s, AddReqResult.NO_TOKEN
    if input_budget and paged >= b.rem_input and adm.picked:
        return s, AddReqResult.OTHER
    locked = s.evolve(tree=inc_lock_ref(s.tree, req.last_node))  # _lock_node
    if total >= b.rem_total(locked):
        return s, AddReqResult.NO_TOKEN
    if paged <= b.rem_chunk:
        adm.picked.append((req.rid, req.prefix_len, extend))
        b.update(extend, min(req.max_new_tokens, CLIP_MAX_NEW_TOKENS))
    else:
        trunc = b.rem_chunk // page * page  # "make sure at least one page is available"
        if trunc <= 0:
            return s, AddReqResult.OTHER
        if page > 1:  # prefix + chunk cut to whole pages
            trunc = (trunc + req.prefix_len) // page * page - req.prefix_len
            if trunc <= 0:
                return s, AddReqResult.OTHER
        adm.picked.append((req.rid, req.prefix_len, trunc))
        adm.chunked_rid = req.rid
        b.update(trunc, 0)
    # _req_inc_lock_ref inside _lock_node: the temporary lock is released, this one stays
    return locked, b.state(locked)


def schedule_admission(ops: "Ops", s: ModelState, allocatable: int,
                       start: "Callable[[ModelState], _Budget]" = _start) -> tuple[ModelState, Admission]:
    """The adder's loop in ``_get_new_batch_prefill_raw``: the chunked request first, then
    the waiting queue in order until a request does not fit (``start``: the release's
    ``PrefillAdder.__init__`` budget; 0.5.9 passes its own)."""
    b, adm = start(s), Admission()
    if s.chunked_rid is not None:
        _add_chunked_req(s, b, s.req(s.chunked_rid), adm)
    for rid in s.waiting:
        if len(adm.picked) >= allocatable:
            adm.batch_is_full = True
            break
        s, req = ops.init_next_round_input(ops, s, s.req(rid))
        s = s.with_reqs([req])
        s, res = ops.add_one_req(ops, s, b, req, adm)
        if res != AddReqResult.CONTINUE:
            adm.batch_is_full = adm.batch_is_full or res == AddReqResult.NO_TOKEN
            break
    return s, adm
