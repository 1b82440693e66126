"""The scheduling step of sglang 0.5.23 under the overlap loop: which rows a decode runs with.

Owns nothing; replaces ``get_next_batch_to_run``. sglang 0.5.23
``managers/scheduler.py::Scheduler.get_next_batch_to_run``::

    process_pending_chunked_abort()                         # as 0.5.17
    merge the last prefill into the running batch           # as 0.5.17
    running_batch.filter_batch()                            # 0.5.23: every step, finished rows out
    new prefill? run it                                     # as 0.5.17
    else update_running_batch(running_batch)                # 0.5.22: see below

- *finished rows out at every step* (0.5.23): 0.5.17 dropped them only in
  ``update_running_batch``, so after a step that ran a prefill the running batch still held
  requests that had finished, and admission counted them
  (``managers/scheduler.py::Scheduler.get_num_allocatable_reqs``).
- *skip finishing decode* (0.5.22, on under the overlap loop:
  ``managers/scheduler.py::Scheduler.event_loop_overlap`` sets ``enable_skip_finishing_decode``):
  ``managers/scheduler.py::Scheduler.update_running_batch`` first leaves out the requests of the
  result still queued whose next output finishes them by length
  (``managers/scheduler.py::Scheduler._reqs_finishing_inflight``,
  ``managers/schedule_batch.py::Req.next_output_finishes_by_length``: ``output + 1 >=
  max_new_tokens``), so they are not decoded once more; and when the rest does not fit in
  memory while some were left out, it skips this decode (the queued result frees their KV)
  instead of retracting.

The rest of ``update_running_batch`` (memory check, retraction, ``prepare_for_decode``) is
0.5.17's, the ``update_running_batch`` operation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specstate.model.batch import ScheduleBatch
from specstate.model.tx import Tx
from specstate.model.sglang_0_5_17.scheduler import overlap

if TYPE_CHECKING:
    from specstate.model.ops_table import Ops

__all__ = ["get_next_batch_to_run_v23", "filter_finished_rows", "reqs_finishing_inflight", "skip_finishing_decode"]


def get_next_batch_to_run_v23(ops: "Ops", tx: Tx) -> tuple[Tx, ScheduleBatch | None]:
    """``Scheduler.get_next_batch_to_run`` of 0.5.23 (no DP attention, no dLLM, no HiSparse):
    ``process_pending_chunked_abort`` first, as in 0.5.17."""
    tx = ops.merge_last_batch(ops, ops.process_pending_chunked_abort(ops, tx))
    tx = filter_finished_rows(ops, tx)
    tx, prefill = ops.schedule_prefill(ops, tx)
    if prefill is not None:
        return tx, prefill
    if tx.state.running.is_empty():
        return tx, None
    tx, skip = skip_finishing_decode(ops, tx)
    if skip or tx.state.running.is_empty():
        return tx, None
    tx = ops.update_running_batch(ops, tx)
    running = tx.state.running
    return tx, (None if running.is_empty() else running)


def filter_finished_rows(ops: "Ops", tx: Tx) -> Tx:
    """``running_batch.filter_batch()`` at the start of the step; a batch that shrank is no
    longer full."""
    s = tx.state
    keep = [i for i, rid in enumerate(s.running.rids) if s.req(rid).live]
    if len(keep) == s.running.batch_size:
        return tx
    tx, running = ops.filter_batch(ops, tx, s.running, keep, True)
    return tx.with_running(running.evolve(batch_is_full=False))


def reqs_finishing_inflight(tx: Tx) -> tuple[int, ...]:
    """``Scheduler._reqs_finishing_inflight``: running rows of the queued result whose next
    output reaches ``max_new_tokens``."""
    pending = overlap(tx.state).pending
    if pending is None:
        return ()
    queued = set(pending.batch.rids)
    s = tx.state
    return tuple(r for r in s.running.rids if r in queued and s.req(r).output_len + 1 >= s.req(r).max_new_tokens)


def skip_finishing_decode(ops: "Ops", tx: Tx) -> tuple[Tx, bool]:
    """The head of 0.5.22's ``update_running_batch``: leave the finishing rows out; ``True``
    (skip this decode) when the rest does not fit while some were left out."""
    finishing = reqs_finishing_inflight(tx)
    if not finishing:
        return tx, False
    s = tx.state
    keep = [i for i, rid in enumerate(s.running.rids) if rid not in finishing]
    tx, running = ops.filter_batch(ops, tx, s.running, keep, True)
    tx = tx.with_running(running.evolve(batch_is_full=False))
    if running.is_empty():
        return tx, True
    s, ok = ops.check_decode_mem(ops, tx.state, running.rids)
    return tx.with_state(s), not ok
