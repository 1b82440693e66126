"""The scheduler's idle iteration and its retraction's last resort as sglang 0.5.9 runs them.

Owns nothing; replaces ``idle`` and ``retract_decode`` of the 0.5.12 family (``specstate/model/scheduler.py``). In 0.5.9
``managers/scheduler.py::Scheduler.event_loop_normal`` calls
``managers/scheduler_runtime_checker_mixin.py::SchedulerRuntimeCheckerMixin.self_check_during_idle``
whenever ``get_next_batch_to_run`` returns no batch, and outside disaggregation that checks the
pools and resets ``new_token_ratio`` to its initial value with no guard: requests still waiting
(a queue the adder could not admit from) do not stop the reset. 0.5.12's ``on_idle`` resets it only
when ``is_fully_idle`` (nothing running, waiting or chunked). Found by the CPU oracle for 0.5.9
(``specstate oracle --engine 0.5.9``: the ratio 0.7 upstream where the model had decayed it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specstate.model.runner import ModelledCrash
from specstate.model.scheduler import retract_decode

if TYPE_CHECKING:
    from specstate.model.ops_table import Ops
    from specstate.model.tx import Tx

__all__ = ["idle_0_5_9", "retract_decode_0_5_9", "RETRACT_OOM", "RETRACT_WHERE"]


def idle_0_5_9(ops: "Ops", tx: "Tx") -> "Tx":
    """No batch to run: ``self_check_during_idle`` (the memory check is the ``kv-accounting``
    invariant), ``new_token_ratio`` back to its initial value."""
    s = tx.state
    tx = tx.with_state(s.evolve(new_token_ratio=s.config.init_new_token_ratio))
    return tx.log("idle", "no batch to run")


#: ``managers/schedule_batch.py::ScheduleBatch.retract_decode`` of 0.5.9, where it raises
RETRACT_WHERE = "managers/schedule_batch.py::ScheduleBatch.retract_decode"
RETRACT_OOM = "Out of memory even after retracting all other requests in the decode batch."


def retract_decode_0_5_9(ops: "Ops", tx: "Tx") -> "Tx":
    """``ScheduleBatch.retract_decode`` of 0.5.9: 0.5.12's retraction, except that when even the
    last request left does not fit it raises ``ValueError`` (the scheduler process dies) where
    0.5.12 aborts that request (``FINISH_ABORT``, 500) and goes on. Found by the CPU oracle for
    0.5.9 (upstream raised on a workload the model had aborted one request of)."""
    out = retract_decode(ops, tx)
    if out.state.running.is_empty():  # 0.5.12 keeps one row unless it aborted the last
        raise ModelledCrash(ValueError(RETRACT_OOM), RETRACT_WHERE,
                            {"running": list(tx.state.running.rids), "available": tx.state.kv_available})
    return out
