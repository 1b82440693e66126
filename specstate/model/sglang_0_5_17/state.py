"""The v2 family's own state: what the overlap scheduler and the adaptive worker carry between
iterations, beside the shared ``ModelState`` (``ModelState.v2``).

Owns:

- ``pending``: ``Scheduler.result_queue`` (``scheduler.py::Scheduler.event_loop_overlap``): the
  batch launched last iteration, whose result the scheduler processes in *this* iteration, after
  launching the next batch. The device has already run it: its accept lengths (``Step.accept``
  of the step that launched it) are in ``FutureMap.new_seq_lens_buf``
  (``overlap_utils.py::FutureMap.publish``), while the scheduler's ``Req`` fields
  (``output_ids``, ``kv_committed_len``, finished) wait for ``process_batch_result``;
- ``active_steps``: the runtime state applied to the worker (``EAGLEWorkerV2.speculative_num_steps``,
  ``EAGLEWorkerV2.apply_runtime_state``);
- ``adaptive``: the controller's slots (``adaptive.AdaptiveParams``).

Identities (checked by ``kv-accounting`` for v2 states, ``identities.py``)::

    device seq_len(r) == r.kv_committed_len + accepted(r) in the pending decode  (FutureMap relay)
    r.kv_allocated_len >= r.kv_committed_len   (over-allocation: eagle_prepare_for_decode)
    a forward writes KV only below the request's kv_allocated_len
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from specstate.model.values import cached_hash, evolve

from specstate.model.batch import ScheduleBatch
from specstate.model.config import SpecConfig
from specstate.model.state import ModelState, OverlapPart
from specstate.model.sglang_0_5_17 import identities as _identities
from specstate.model.sglang_0_5_17.adaptive import AdaptiveParams, initial_params

__all__ = ["PendingResult", "OverlapState", "initial_overlap_state", "resumed_overlap_state", "routing_capture_list"]


@cached_hash
@dataclass(frozen=True)
class PendingResult:
    """One ``(batch.copy(), batch_result)`` of ``Scheduler.result_queue``."""

    kind: str  #: ``prefill`` or ``decode``
    batch: ScheduleBatch  #: the batch as launched (rows, chunked request)
    #: per row: tokens the verify accepted, bonus included (``GenerationBatchResult.accept_lens``)
    accept: tuple[int, ...] = ()
    eos: tuple[int, ...] = ()  #: rids whose accepted run ends with an EOS token (workload data)
    steps: int = 0  #: the runtime state's step count the batch ran with
    #: ``result.speculative_num_draft_tokens``: the stride of ``next_token_ids``
    draft_tokens: int = 1
    #: the step (``ModelState.step_index``) that launched it: the result is processed one step later
    launch_step: int = -1

    def accepted(self, rid: int) -> int:
        """Tokens of ``rid`` this result commits (0 for a prefill)."""
        if self.kind != "decode" or rid not in self.batch.rids:
            return 0
        return self.accept[self.batch.rids.index(rid)]


@cached_hash
@dataclass(frozen=True)
class OverlapState(OverlapPart):
    """The overlap scheduler's part of the state (module doc); answers the shared code's
    questions (``OverlapPart``) for the v2 family."""

    pending: PendingResult | None = None  #: last iteration's batch, processed in this one
    launched: PendingResult | None = None  #: this iteration's batch, while the iteration runs
    active_steps: int = 0  #: ``EAGLEWorkerV2.speculative_num_steps``
    adaptive: AdaptiveParams | None = None  #: ``None``: static speculation (no ``AdaptiveController``)
    #: the step count the draft worker's topk-1 chain buffers were built for
    #: (``base_spec_worker.py::EagleDraftWorkerBase._rebuild_topk1_chain_buffers``)
    chain_steps: int = 0
    #: ``Scheduler._pending_chunked_abort_req``: the chunked request an abort marked
    #: (``scheduler.py::Scheduler.abort_request``), aborted at the top of the next
    #: ``get_next_batch_to_run`` (``scheduler.py::Scheduler.process_pending_chunked_abort``)
    chunked_abort: int | None = None
    #: the 0.5.23 family's count of ``SchedulePolicy.calc_priority`` calls with waiting requests,
    #: modulo 32: where its next refresh of the waiting requests' tree paths falls (the 0.5.23
    #: family's ``touch_waiting_prefixes``, which cites it); sglang 0.5.17 has no such counter,
    #: and its operations never change it (always 0)
    waiting_refresh_calls: int = 0

    evolve = evolve  #: ``values.evolve``: a copy with some fields changed
    #: the v2 counting identities the shared invariants check in place of theirs (``identities.py``)
    identities = _identities

    def result_rids(self) -> tuple[int, ...]:
        return tuple(r for res in (self.pending, self.launched) if res is not None for r in res.batch.rids)

    def named_rids(self) -> tuple[int, ...]:
        return self.result_rids() + (() if self.chunked_abort is None else (self.chunked_abort,))

    def speculated(self, state: ModelState, forwards: tuple[Any, ...]) -> bool:
        """The adaptive decision of this iteration (steps 1 drafts without a draft forward)."""
        d = state.decisions
        return bool(d) and d[-1].step_index == state.step_index and d[-1].speculate


def routing_capture_list(config: SpecConfig) -> tuple[int, ...] | None:
    """What ``EAGLEWorkerV2.init_cuda_graphs`` hands ``AdaptiveController.init_states``:
    ``get_exec().graph.cuda_graph_bs_decode``, the explicit ``--cuda-graph-bs-decode`` list
    (``SpecConfig.cuda_graph_bs_override``), else ``None`` (batch sizes route unpadded)."""
    if config.cuda_graph_bs_override is None:
        return None
    return tuple(sorted(config.cuda_graph_bs_override))


def initial_overlap_state(config: SpecConfig) -> OverlapState:
    """``AdaptiveController.__init__`` + ``init_states``: slots at the server's step count, the
    initial runtime state active (``_activate(worker.speculative_num_steps)``). A static launch
    (``SpecConfig.speculative_adaptive`` off) has no controller: ``EAGLEWorkerV2.__init__`` leaves
    ``adaptive_controller`` ``None`` and the worker keeps the launch's step count."""
    steps = config.speculative_num_steps
    if not config.speculative_adaptive:
        return OverlapState(active_steps=steps, adaptive=None, chain_steps=steps)
    params = initial_params(config.speculative_adaptive_config, config.speculative_num_steps,
                            routing_capture_list(config))
    return OverlapState(active_steps=steps, adaptive=params, chain_steps=steps)



def resumed_overlap_state(v2: OverlapState, steps: int, slots: Mapping[int, tuple[int, float, int]]) -> OverlapState:
    """An idle engine's overlap state after earlier work: the runtime state last applied
    (``EAGLEWorkerV2.speculative_num_steps``; the chain buffers were rebuilt for it) and the
    controller's slots (``AdaptiveParams.restored``). Nothing is in flight."""
    assert v2.adaptive is not None
    return v2.evolve(pending=None, launched=None, chunked_abort=None, active_steps=int(steps), chain_steps=int(steps),
                     adaptive=v2.adaptive.restored(slots))
