"""How many requests a prefill may admit, as sglang 0.5.23 counts them: the rows that counted
requests already hold go back into the budget.

Owns nothing; replaces ``schedule_prefill`` of the 0.5.17 family. sglang 0.5.23
``managers/scheduler.py::Scheduler.get_num_allocatable_reqs`` takes ``num_held_rows``: the
``req_to_token_pool`` rows the requests in the adder's ``can_run_list`` already hold
(``managers/schedule_batch.py::ReqKvInfo.holds_kv``), added to the free rows::

    row_budget = req_to_token_pool.available_size() + num_held_rows
    res = min(pp_max_micro_batch_size - running_bs, row_budget)

and ``managers/scheduler.py::Scheduler._get_new_batch_prefill_raw`` passes
``sum(r.kv.holds_kv for r in adder.can_run_list)`` in its loop over the waiting queue. Without
beams or sessions the only such request is the chunked one (its row is kept across chunks; it
is the adder's first entry, ``PrefillAdder.add_chunked_req``). 0.5.17 counted the free rows
only, so beside a continuing chunk one fewer request was admitted (and ``batch_is_full`` set).
First shipped in 0.5.23 (0.5.18-0.5.22 have no ``num_held_rows``). The early exit before the
loop calls it with no held rows (as 0.5.17), and it never fires while a chunk continues.

Also new in 0.5.23, at the top of that loop: ``if adder.budget_state() == AddReqResult.OTHER:
break`` ("a spent pass budget admits no one, even before the first candidate"), before the
bound's check. A chunk that spends the chunk (or input) budget therefore admits no one *and
leaves ``batch_is_full`` as it was*; 0.5.17 reached the bound first and set it. After any other
admitted request the old loop already stopped on ``add_one_req``'s ``OTHER``, so the chunk is
the one case where the order shows.

Both found by the CPU oracle (docs/oracle.md): upstream admitted a waiting request beside the
chunked one where the model set the batch full, and left the batch not full where a
``max_running_requests`` 1 chunk spent the budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specstate.model.admission import AddReqResult, Admission, _add_chunked_req, _start
from specstate.model.batch import ScheduleBatch
from specstate.model.bs_compare import room
from specstate.model.state import ModelState
from specstate.model.scheduler import _build_prefill, schedule_admission, schedule_prefill
from specstate.model.tx import Tx

if TYPE_CHECKING:
    from specstate.model.ops import Ops

__all__ = ["schedule_prefill_v23", "allocatable_reqs_v23", "chunk_spends_budget"]


def allocatable_reqs_v23(ops: "Ops", tx: Tx, held_rows: int) -> int:
    """``Scheduler.get_num_allocatable_reqs(running_bs, num_held_rows=held_rows)``."""
    s = tx.state
    cfg = s.config
    return min(room(cfg.max_running_requests, s.running.batch_size),
               room(cfg.max_running_requests, s.req_slots_held()) + held_rows)


def chunk_spends_budget(s: ModelState) -> bool:
    """``adder.budget_state() == AddReqResult.OTHER`` after ``PrefillAdder.add_chunked_req``
    (on a scratch budget: nothing is admitted here)."""
    assert s.chunked_rid is not None
    budget = _start(s)
    _add_chunked_req(s, budget, s.req(s.chunked_rid), Admission())
    return budget.state(s) == AddReqResult.OTHER


def schedule_prefill_v23(ops: "Ops", tx: Tx) -> tuple[Tx, ScheduleBatch | None]:
    """``_get_new_batch_prefill_raw`` of 0.5.23: with no chunk continuing no row is held and it
    is 0.5.17's; beside one, a spent budget admits no one (bound 1: the chunk alone, before any
    prefix match) and sets nothing, else the bound counts the chunk's row back in."""
    if tx.state.chunked_rid is None:
        return schedule_prefill(ops, tx)
    spent = chunk_spends_budget(tx.state)
    s, adm = schedule_admission(ops, tx.state, 1 if spent else allocatable_reqs_v23(ops, tx, 1))
    if adm.batch_is_full and not spent:
        s = s.evolve(running=s.running.evolve(batch_is_full=True))
    tx = tx.with_state(s)
    return (tx, None) if not adm.picked else _build_prefill(ops, tx, adm.picked, adm.chunked_rid)
