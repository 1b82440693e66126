"""Every abort path of sglang 0.5.17, with what each does to the KV pool and the radix tree.

Owns no state of its own beyond ``OverlapState.chunked_abort`` (``Scheduler._pending_chunked_abort_req``).
An ``AbortReq`` reaches ``scheduler.py::Scheduler.abort_request`` in ``process_input_requests``,
between two loop iterations; what happens next depends on where the request is:

| where the request is | what 0.5.17 does | KV and tree |
| --- | --- | --- |
| waiting queue (new, or retracted) | popped from ``waiting_queue`` (abort method 1) | it owns nothing: none |
| the request being chunk-prefilled (``chunked_req``) | only marked: ``_pending_chunked_abort_req``; the first call of ``get_next_batch_to_run``, ``scheduler.py::Scheduler.process_pending_chunked_abort``, aborts it: ``prepare_abort``, ``release_kv_cache(req, tree_cache, is_insert=False)``, ``chunked_req = None`` | its slots past the tree's prefix go back to the allocator, the earlier chunks stay in the tree (unlocked), nothing is inserted; no further chunk is launched, the chunk in flight is skipped when its result is processed (``batch_result_processor.py::SchedulerBatchResultProcessor.process_batch_result_prefill``, the chunked branch) |
| running batch or the batch in flight (abort method 3) | ``req.to_finish = FINISH_ABORT()``: it decodes once more, ``Req.update_finish_state`` finishes it when that result is processed | ``release_kv_cache`` (inserted into the tree, as any finished request) |
| out of memory (``schedule_batch.py::ScheduleBatch.retract_decode``: even the last request does not fit) | ``to_finish = FINISH_ABORT(...)``, ``release_req(last_idx, 0)`` (``release_kv_cache(is_insert=False)``, ``Req.reset_for_retract``), dropped from the batch, never re-queued | its own slots go back, nothing is inserted, the tree keeps its prefix (unlocked) |

The first three are ``abort_v2`` and ``process_pending_chunked_abort`` here; the out-of-memory
abort is the shared retraction loop (``specstate.model.scheduler.retract_in_order``, ordered by
``retract_decode_v2``), which releases the request without inserting and marks it finished with
``FINISH_ABORT`` (0.5.17 leaves ``finished_reason`` unset but no queue, batch or pool holds it
any more: nothing can tell the two apart).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specstate.model.actions import Abort
from specstate.model.batch import ScheduleBatch
from specstate.model.request import FinishReason, ReqStatus
from specstate.model.scheduler import abort, get_next_batch_to_run
from specstate.model.tx import Tx
from specstate.model.sglang_0_5_17.scheduler import overlap, with_overlap

if TYPE_CHECKING:
    from specstate.model.ops_table import Ops

__all__ = ["abort_v2", "process_pending_chunked_abort", "get_next_batch_to_run_v2", "OOM_ABORT_MESSAGE"]

#: the log line of the out-of-memory abort (``specstate.model.scheduler.retract_in_order``)
OOM_ABORT_MESSAGE = "Out of memory even after retracting all other requests"


def abort_v2(ops: "Ops", tx: Tx, action: Abort) -> Tx:
    """``Scheduler.abort_request``: the chunked request is only marked
    (``_pending_chunked_abort_req``; its ``to_finish``, set too because the prefill in flight
    holds it, is cleared again when the mark is processed); a waiting request is popped; any
    other live one gets ``to_finish`` (the shared ``abort``)."""
    s = tx.state
    req = s.req(action.rid)
    if req.live and action.rid == s.chunked_rid:
        tx = with_overlap(tx, chunked_abort=action.rid)
        return tx.log("abort", "_pending_chunked_abort_req = chunked_req", action.rid)
    return abort(ops, tx, action)


def process_pending_chunked_abort(ops: "Ops", tx: Tx) -> Tx:
    """``Scheduler.process_pending_chunked_abort``: ``prepare_abort`` (finished with
    ``FINISH_ABORT``), ``release_kv_cache(req, tree_cache, is_insert=False)`` (the request's
    slots back, nothing inserted, its tree lock released), ``chunked_req = None``."""
    rid = overlap(tx.state).chunked_abort
    if rid is None:
        return tx
    tx = with_overlap(tx, chunked_abort=None)
    s = tx.state
    if s.chunked_rid != rid:  # past chunked prefill: the running-batch path handles it
        return tx
    s, req = ops.release_kv_cache(ops, s, s.req(rid).evolve(to_abort=False), is_insert=False)
    s = s.with_reqs([req.evolve(status=ReqStatus.FINISHED, finish_reason=FinishReason.ABORT)])
    tx = tx.with_state(s.evolve(chunked_rid=None))
    return tx.log("abort", "chunked prefill aborted: KV released without insert, chunked_req = None", rid)


def get_next_batch_to_run_v2(ops: "Ops", tx: Tx) -> tuple[Tx, ScheduleBatch | None]:
    """``Scheduler.get_next_batch_to_run``: ``process_pending_chunked_abort`` first, then the
    shared schedule (merge the last prefill, a new prefill, else ``update_running_batch``)."""
    return get_next_batch_to_run(ops, ops.process_pending_chunked_abort(ops, tx))
