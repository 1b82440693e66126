"""The vLLM 0.34.0 engine state the model holds: frozen, hashable, cited field by field.

- :class:`VReq` is ``v1/request.py::Request`` reduced to what scheduling, KV accounting and the
  verify width read.
- :class:`VState` is ``v1/core/sched/scheduler.py::Scheduler``'s queues (``waiting``, ``running``),
  ``v1/core/block_pool.py::BlockPool``'s free count, the DSD lookup
  (``Scheduler.dynamic_sd_lookup``), K of this step and the last, and the engine core's batch
  queue (``v1/engine/core.py::EngineCore.step_with_batch_queue``: async scheduling keeps one step
  in flight).
- :class:`StepRecord` is one step's ``v1/core/sched/output.py::SchedulerOutput`` as the model
  needs it, plus the worker's CUDA-graph choice (``v1/worker/gpu/cudagraph_utils.py::CudaGraphManager.dispatch``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["VReq", "VState", "StepRecord", "Dispatch", "VAction", "WAITING", "RUNNING", "PREEMPTED", "FINISHED"]

WAITING, RUNNING, PREEMPTED, FINISHED = "WAITING", "RUNNING", "PREEMPTED", "FINISHED"


@dataclass(frozen=True)
class VReq:
    """One request: ``v1/request.py::Request``, reduced."""

    rid: int
    num_prompt_tokens: int  #: ``v1/request.py::Request.num_prompt_tokens``
    max_tokens: int  #: ``v1/request.py::Request.max_tokens``
    num_output_tokens: int = 0  #: ``len(Request.output_token_ids)``
    num_computed_tokens: int = 0  #: ``v1/request.py::Request.num_computed_tokens``
    num_output_placeholders: int = 0  #: ``v1/request.py::Request.num_output_placeholders`` (async scheduling)
    #: ``v1/request.py::Request.spec_token_ids``: only their number matters (``-1`` placeholders under async)
    num_spec_tokens: int = 0
    #: the K the held drafts were proposed at (``SchedulerOutput.num_spec_tokens_to_schedule`` of
    #: the step that drafted them); ``None``: no drafts held
    spec_k: int | None = None
    is_prefill_chunk: bool = False  #: ``v1/request.py::Request.is_prefill_chunk``
    blocks: int = 0  #: blocks held (``v1/core/kv_cache_manager.py::KVCacheManager.get_blocks``; one group)
    num_in_flight_tokens: int = 0  #: ``v1/request.py::Request.num_in_flight_tokens``: output not processed yet
    #: ``v1/request.py::Request.num_stale_output_tokens``: the in-flight share a preemption made stale; its tokens
    #: are still delivered but move no counter, and the request waits until it drains
    num_stale_output_tokens: int = 0
    status: str = WAITING  #: ``v1/request.py::Request.status`` (``v1/request.py::RequestStatus``), reduced

    @property
    def num_tokens(self) -> int:
        """``Request.num_tokens``: prompt plus output."""
        return self.num_prompt_tokens + self.num_output_tokens

    @property
    def num_tokens_with_spec(self) -> int:
        """``Request.num_tokens_with_spec``."""
        return self.num_tokens + self.num_spec_tokens

    def with_(self, **kw: Any) -> "VReq":
        return replace(self, **kw)


@dataclass(frozen=True)
class Dispatch:
    """``v1/worker/gpu/cudagraph_utils.py::BatchExecutionDescriptor`` of the step."""

    mode: str  #: ``v1/worker/gpu/cudagraph_utils.py::BatchExecutionDescriptor.cg_mode``: FULL, PIECEWISE or NONE
    num_tokens: int  #: ``v1/worker/gpu/cudagraph_utils.py::BatchExecutionDescriptor.num_tokens``: padded rows
    #: ``v1/worker/gpu/cudagraph_utils.py::BatchExecutionDescriptor.num_reqs`` (``None``: PIECEWISE, no padding)
    num_reqs: int | None
    uniform_token_count: int | None  #: ``v1/worker/gpu/cudagraph_utils.py::BatchExecutionDescriptor.uniform_token_count``
    real_tokens: int  #: the batch's own tokens
    real_reqs: int
    decode_graph_eligible: bool  #: ``v1/worker/gpu/model_runner.py::GPUModelRunner.gather_batch_req_state``'s flag


@dataclass(frozen=True)
class StepRecord:
    """One scheduled step (``SchedulerOutput``) and what the worker did with it."""

    step: int
    scheduled: tuple[tuple[int, int], ...]  #: ``v1/core/sched/output.py::SchedulerOutput.num_scheduled_tokens``
    spec: tuple[tuple[int, int], ...]  #: ``v1/core/sched/output.py::SchedulerOutput.scheduled_spec_decode_tokens`` (their number)
    spec_k: tuple[tuple[int, int | None], ...]  #: (rid, the K those drafts were proposed at)
    samples: tuple[int, ...]  #: the rids that sample this step (not a non-final prefill chunk)
    k: int  #: ``v1/core/sched/output.py::SchedulerOutput.num_spec_tokens_to_schedule``
    skip_drafts: bool  #: ``v1/core/sched/output.py::SchedulerOutput.skip_drafts``
    preempted: tuple[int, ...] = ()
    dispatch: Dispatch | None = None

    @property
    def num_scheduled(self) -> int:
        return len(self.scheduled)

    def tokens_of(self, rid: int) -> int:
        return dict(self.scheduled).get(rid, 0)

    def to_json(self) -> dict[str, Any]:
        d = self.dispatch
        return {"step": self.step, "scheduled": dict(self.scheduled), "spec": dict(self.spec), "k": self.k,
                "samples": list(self.samples), "skip_drafts": self.skip_drafts, "preempted": list(self.preempted),
                "dispatch": None if d is None else {"mode": d.mode, "num_tokens": d.num_tokens,
                                                     "num_reqs": d.num_reqs, "uniform": d.uniform_token_count}}


@dataclass(frozen=True)
class VAction:
    """One engine step (``EngineCore.step`` / ``step_with_batch_queue``): requests that arrive before
    it (``(prompt_len, max_tokens)`` each, ``Scheduler.add_request``) and how many of each verified
    request's drafts the target accepts (``accept[rid % len(accept)]``, capped by its drafts: the
    fake runner's rejection sampler)."""

    arrive: tuple[tuple[int, int], ...] = ()
    accept: tuple[int, ...] = (0,)

    def accepted(self, rid: int, drafts: int) -> int:
        return min(drafts, self.accept[rid % len(self.accept)]) if self.accept else 0

    def to_json(self) -> dict[str, Any]:
        return {"arrive": [list(a) for a in self.arrive], "accept": list(self.accept)}


@dataclass(frozen=True)
class VState:
    reqs: tuple[VReq, ...] = ()  #: every request added, by rid (``v1/core/sched/scheduler.py::Scheduler.requests``)
    waiting: tuple[int, ...] = ()  #: ``v1/core/sched/scheduler.py::Scheduler.waiting`` (FCFS)
    running: tuple[int, ...] = ()  #: ``v1/core/sched/scheduler.py::Scheduler.running``
    free_blocks: int = 0  #: ``v1/core/block_pool.py::BlockPool.get_num_free_blocks``
    lookup: tuple[int, ...] | None = None  #: ``v1/core/sched/scheduler.py::Scheduler.dynamic_sd_lookup`` (``None``: DSD off)
    k_this: int | None = None  #: K of the last scheduled step
    k_last: int | None = None  #: K of the step before it
    step: int = 0  #: ``v1/core/sched/scheduler.py::Scheduler.current_step``
    #: ``v1/core/sched/scheduler.py::Scheduler.finished_req_ids`` not yet sent: the next ``schedule`` runs
    finished_pending: bool = False
    #: the engine core's batch queue: scheduled steps whose output is not processed yet (async)
    in_flight: tuple[StepRecord, ...] = ()
    records: tuple[StepRecord, ...] = field(default=(), compare=False, hash=False)  #: the last few steps

    def req(self, rid: int) -> VReq:
        return self.reqs[rid]

    def put(self, *reqs: VReq) -> "VState":
        out = list(self.reqs)
        for r in reqs:
            out[r.rid] = r
        return replace(self, reqs=tuple(out))

    def with_(self, **kw: Any) -> "VState":
        return replace(self, **kw)

    def has_requests(self) -> bool:
        """``v1/core/sched/scheduler.py::Scheduler.has_requests``: anything waiting or running, or finished
        requests whose ids the worker has not been sent (``has_finished_requests``)."""
        return bool(self.waiting or self.running or self.finished_pending)
