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

Third, before the adder: ``managers/schedule_policy.py::SchedulePolicy.calc_priority`` ends with
``_touch_waiting_prefixes`` (absent from 0.5.17): under a cache-agnostic policy (FCFS, the
default), LRU eviction and a tree without ``supports_fast_match_prefix`` (the Python tree and the
Rust tree core alike answer no), every ``WAITING_PREFIX_REFRESH_INTERVAL`` (32)-th call with a
non-empty waiting queue walks each waiting request's key (``origin_input_ids + output_ids``, no
limit) through the tree, the queue's head last (``mem_cache/common.py::touch_waiting_prefix`` ->
``touch_prefix``, the walk of ``match_prefix``): the path is stamped most recent and the node
where the key ends inside one is split. A waiting request's cached prefix therefore outlives an
older-stamped leaf at the next eviction (``touch_waiting_prefixes``). First shipped in 0.5.22
(0.5.21's ``schedule_policy.py`` has no ``_touch_waiting_prefixes``). Found by the CPU oracle
(``docs/results/oracle-0_5_23-evict-8-vs-6.json``): at the 33rd call a waiting 2-token prompt's
one bigram split a 6-bigram leaf 1 + 5 and stamped both, so a chunk's eviction of 5 took the
older 1 + 7 of another request (8) where the model, without the refresh, took the 6.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specstate.model.admission import AddReqResult, Admission, _add_chunked_req, _start
from specstate.model.batch import ScheduleBatch
from specstate.model.bs_compare import room
from specstate.model.prefix_cache import bigram_key
from specstate.model.radix import match_prefix
from specstate.model.sglang_0_5_17.scheduler import overlap
from specstate.model.state import ModelState
from specstate.model.scheduler import _build_prefill, schedule_admission, schedule_prefill
from specstate.model.tx import Tx

if TYPE_CHECKING:
    from specstate.model.ops import Ops

__all__ = ["schedule_prefill_v23", "nothing_to_serve_not_full", "allocatable_reqs_v23", "chunk_spends_budget", "touch_waiting_prefixes",
           "WAITING_PREFIX_REFRESH_INTERVAL", "WAITING_QUEUE_PREFIX_MATCH_MAX"]

#: ``managers/schedule_policy.py::WAITING_PREFIX_REFRESH_INTERVAL``
WAITING_PREFIX_REFRESH_INTERVAL = 32
#: ``managers/schedule_policy.py::WAITING_QUEUE_PREFIX_MATCH_MAX``
WAITING_QUEUE_PREFIX_MATCH_MAX = 128


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


def touch_waiting_prefixes(s: ModelState) -> ModelState:
    """``SchedulePolicy._touch_waiting_prefixes`` at the end of ``calc_priority`` (FCFS, LRU, no
    fast match: the oracle's and the default launch): a call with waiting requests counts
    (``_waiting_prefix_refresh_calls``), and each ``WAITING_PREFIX_REFRESH_INTERVAL``-th, from
    the first on, walks ``reversed(waiting_queue[:WAITING_QUEUE_PREFIX_MATCH_MAX])`` through the
    tree (``mem_cache/common.py::touch_waiting_prefix``: ``match_prefix``'s walk over
    ``origin_input_ids + output_ids``, stamping and splitting). Without a radix tree
    (``supports_prefix_sharing`` false) nothing counts."""
    if not s.waiting or s.config.disable_radix_cache:
        return s
    v2 = overlap(s)
    calls = v2.waiting_refresh_calls
    s = s.evolve(v2=v2.evolve(waiting_refresh_calls=(calls + 1) % WAITING_PREFIX_REFRESH_INTERVAL))
    if calls:
        return s
    tree = s.tree
    for rid in reversed(s.waiting[:WAITING_QUEUE_PREFIX_MATCH_MAX]):
        req = s.req(rid)
        tree, _matched, _node = match_prefix(tree, bigram_key(req.segments, req.fill_len))
    return s.evolve(tree=tree)


def nothing_to_serve_not_full(tx: Tx, batch: ScheduleBatch | None) -> tuple[Tx, ScheduleBatch | None]:
    """``_get_new_batch_prefill_raw``'s ``NO_TOKEN`` branch of 0.5.22 on: ``running_batch.batch_is_full =
    len(adder.can_run_list) > 0 or not running_batch.is_empty()`` ("Set batch_is_full after making
    sure there are requests that can be served"; 0.5.17-0.5.21 set it so only with the hierarchical
    cache or an external cache linker, else always). Past the early exits the flag was clear, so a schedule that admitted no one beside
    an empty running batch and set it, set it on ``NO_TOKEN`` (the allocatable bound is at least 1
    there): 0.5.23 leaves it clear. Found by the CPU oracle at page size 16 (a 32-token prompt that
    with its page of overhead does not fit a 48-token pool)."""
    s = tx.state
    if batch is None and s.running.is_empty() and s.running.batch_is_full:
        tx = tx.with_state(s.evolve(running=s.running.evolve(batch_is_full=False)))
    return tx, batch


def schedule_prefill_v23(ops: "Ops", tx: Tx) -> tuple[Tx, ScheduleBatch | None]:
    """``_get_new_batch_prefill_raw`` of 0.5.23: past the early exits ``calc_priority`` refreshes
    the waiting requests' tree paths (``touch_waiting_prefixes``); with no chunk continuing no
    row is held and it is 0.5.17's; beside one, a spent budget admits no one (bound 1: the chunk
    alone, before any prefix match) and sets nothing, else the bound counts the chunk's row back in."""
    s = tx.state
    if s.chunked_rid is None:
        if s.running.batch_is_full or not s.waiting or allocatable_reqs_v23(ops, tx, 0) <= 0:
            return schedule_prefill(ops, tx)  # its early exits
        return nothing_to_serve_not_full(*schedule_prefill(ops, tx.with_state(touch_waiting_prefixes(s))))
    tx = tx.with_state(touch_waiting_prefixes(s))
    spent = chunk_spends_budget(tx.state)
    s, adm = schedule_admission(ops, tx.state, 1 if spent else allocatable_reqs_v23(ops, tx, 1))
    if adm.batch_is_full and not spent:
        s = s.evolve(running=s.running.evolve(batch_is_full=True))
    tx = tx.with_state(s)
    return (tx, None) if not adm.picked else _build_prefill(ops, tx, adm.picked, adm.chunked_rid)
