"""The oracle for sglang 0.5.9: upstream's ``Scheduler`` and ``event_loop_normal`` (spec v1,
``EAGLEWorker``, overlap off) on CPU, with a fake model worker: 0.5.12's oracle
(``sglang_0_5_12.py``: what is upstream's and what is the oracle's) over 0.5.9's classes.

What differs from 0.5.12's harness, each 0.5.9's own API, none of it scheduler state:

- ``EagleDraftInput`` carries ``verified_id`` (0.5.12: ``bonus_tokens``), ``EagleVerifyInput``
  ``retrive_*`` (0.5.12: ``retrieve_*``);
- ``EAGLEWorker.forward_batch_generation`` calls ``forward_draft_extend_after_decode`` only while a
  accepted token is left (``batch.spec_info.verified_id.shape[0] > 0``: every unfinished row's
  accepted tokens, flat) and ignores what it returns: the fake leaves the next ``EagleDraftInput``
  of the unfinished rows (``accept_length_cpu``) on the batch, as the draft forward does (0.5.12's
  returns it);
- ``EAGLEWorker.verify`` reads ``enable_nan_detection`` (off); where every row finished,
  ``EagleVerifyInput.verify`` leaves ``EagleDraftInput.create_idle_input`` at the model's hidden
  size (0.5.12: none), which a later ``merge_batch`` concatenates with the fake's ``HIDDEN``-wide
  states: the fake puts its own empty draft input there (zero rows either way);
- the paged allocator's ``alloc_extend_kernel`` takes one more constexpr (the port ignores it),
  and ``alloc_extend`` compares the extend with Triton's ``TRITON_MAX_TENSOR_NUMEL`` (set on the
  stub: both branches are the same allocation, the port and ``alloc_extend_naive``).

Upstream's ``ScheduleBatch.retract_decode`` raises ``ValueError`` where even the last request does
not fit (0.5.12 aborts it: ``oom-abort``); reached as ``oom-crash``, and the 0.5.9 family predicts
it (``retract_decode_0_5_9``: the differential counts a predicted exception as agreement).

Page sizes 1, 16 and 64 run upstream's allocators and paged verify as 0.5.12's oracle does
(``_paged.py``); the model compared with is the 0.5.9 family (``always-spec@sglang-0.5.9``).
"""

from __future__ import annotations

from typing import Any

from specstate.oracle._core import (HIDDEN, OracleRelease, assign_req_to_token_pool, construct_scheduler,
                                   init_distributed, no_watchdog, noting_eviction)
from specstate.oracle._paged import install as install_paged_ports
from specstate.oracle.catalog import _release_of
from specstate.oracle.driver import Driver, WorkloadDone
from specstate.oracle.sglang_0_5_12 import (Release12, _close_sockets, _draft_alloc_paged, _FakeRunner,
                                           _prescribed_verify, _server_args, _target_forward)

__all__ = ["build", "RELEASE", "ORACLE", "run"]

#: the release is this module's name (``catalog.py`` reads it so too), its family's ``always-spec``
RELEASE = _release_of(__name__.rpartition(".")[2])
ORACLE = OracleRelease(RELEASE, variant=f"always-spec@sglang-{RELEASE}", overlap=False)
#: ``triton/language/core.py::TRITON_MAX_TENSOR_NUMEL`` (Triton 3)
TRITON_MAX_TENSOR_NUMEL = 1048576


class _Current:
    """The driver of the workload in progress (the patches are installed once per process)."""

    driver: Driver


def _patch_workers() -> None:
    from sglang.srt.managers import tp_worker
    from sglang.srt.speculative import eagle_info
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    def init_model_runner(self: Any) -> None:
        self._model_runner = _FakeRunner(self.server_args, self.model_config.context_len)

    tp_worker.TpModelWorker._init_model_runner = init_model_runner
    tp_worker.TpModelWorker.forward_batch_generation = lambda self, mwb, **kw: _target_forward(_Current.driver, mwb, **kw)
    fake = _fake_eagle_class()
    SpeculativeAlgorithm.create_worker = lambda self, server_args: fake
    eagle_info.assign_req_to_token_pool_func = assign_req_to_token_pool
    eagle_info.verify_tree_greedy_func = lambda **kw: _prescribed_verify(_Current.driver, **kw)
    install_paged_ports()
    # 0.5.9's ``PagedTokenToKVPoolAllocator.alloc_extend`` reads Triton's tensor limit to choose the
    # kernel or ``alloc_extend_naive``: the stub's attribute is a class, Triton's value an int
    import triton.language as tl

    tl.core.TRITON_MAX_TENSOR_NUMEL = TRITON_MAX_TENSOR_NUMEL


def _fake_eagle_class() -> type:
    from sglang.srt.speculative.eagle_worker import EAGLEWorker
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    class _FakeEagle(EAGLEWorker):
        """0.5.9's ``EAGLEWorker`` without models (``sglang_0_5_12.py``: what is kept)."""

        def __init__(self, server_args: Any, target_worker: Any, **kwargs: Any) -> None:
            self.server_args, self.target_worker = server_args, target_worker
            self.page_size, self.topk = server_args.page_size, server_args.speculative_eagle_topk
            self.speculative_num_steps = server_args.speculative_num_steps
            self.speculative_num_draft_tokens = server_args.speculative_num_draft_tokens
            self.speculative_algorithm = SpeculativeAlgorithm.from_string(server_args.speculative_algorithm)
            self.req_to_token_pool, self.token_to_kv_pool_allocator = target_worker.get_memory_pool()
            self.model_config, self._model_runner = target_worker.model_config, target_worker.model_runner
            self.device, self.enable_nan_detection = "cpu", False

        def clear_cache_pool(self) -> None:
            pass

        def draft_tp_context(self, group: Any) -> Any:
            import contextlib

            return contextlib.nullcontext()

        @property
        def draft_model_runner(self) -> Any:
            return self._model_runner

        def forward_draft_extend(self, batch: Any, hidden_states: Any, next_token_ids: Any, *args: Any) -> None:
            batch.spec_info = _draft_input(len(batch.reqs), self.topk, next_token_ids)

        def _draft_preprocess_idle(self, batch: Any) -> None:
            batch.spec_info = _draft_input(0, self.topk, None)

        def draft(self, batch: Any) -> Any:
            return _draft(self, batch)

        def verify(self, batch: Any, spec_info: Any) -> Any:
            out = super().verify(batch, spec_info)
            if batch.spec_info.verified_id.shape[0] == 0:  # every row finished: upstream's idle draft
                batch.spec_info = _draft_input(0, self.topk, None)  # input, at the fake's hidden width
            return out

        def forward_draft_extend_after_decode(self, batch: Any) -> None:
            rows = len(batch.spec_info.accept_length_cpu)  # the unfinished rows (``verify``'s draft input)
            batch.spec_info = _draft_input(rows, self.topk, batch.spec_info.verified_id.new_zeros(rows))

    return _FakeEagle


def _draft_input(rows: int, topk: int, verified: Any) -> Any:
    """0.5.9's ``EagleDraftInput`` for ``rows`` requests (zero tensors)."""
    import torch
    from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode
    from sglang.srt.speculative.eagle_info import EagleDraftInput

    return EagleDraftInput(topk_p=torch.zeros(rows, topk), topk_index=torch.zeros(rows, topk, dtype=torch.int64),
                           hidden_states=torch.zeros(rows, HIDDEN), capture_hidden_mode=CaptureHiddenMode.LAST,
                           verified_id=verified if verified is not None else torch.zeros(rows, dtype=torch.int64))


def _draft(worker: Any, batch: Any) -> Any:
    """``EAGLEWorker.draft``'s effect on the scheduler (``sglang_0_5_12._draft``), 0.5.9's
    ``EagleVerifyInput``."""
    import torch
    from sglang.srt.mem_cache.common import alloc_token_slots
    from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode
    from sglang.srt.speculative.eagle_info import EagleVerifyInput

    for req in batch.reqs:
        req.decode_batch_idx += 1
    bs, n, steps = batch.batch_size(), worker.speculative_num_draft_tokens, worker.speculative_num_steps
    if worker.page_size == 1:
        _, backup = alloc_token_slots(batch.tree_cache, bs * steps * worker.topk, backup_state=True)
    else:
        backup = _draft_alloc_paged(worker, batch, steps)
    worker.token_to_kv_pool_allocator.restore_state(backup)
    chain = torch.arange(n, dtype=torch.int64)
    nxt = torch.where(chain + 1 < n, chain + 1, torch.full_like(chain, -1))
    return EagleVerifyInput(
        draft_token=torch.zeros(bs * n, dtype=torch.int64), custom_mask=torch.ones(0, dtype=torch.bool),
        positions=torch.zeros(bs * n, dtype=torch.int64),
        retrive_index=(torch.arange(bs, dtype=torch.int64)[:, None] * n + chain).contiguous(),
        retrive_next_token=nxt.repeat(bs, 1), retrive_next_sibling=torch.full((bs, n), -1, dtype=torch.int64),
        retrive_cum_len=None, spec_steps=steps, topk=worker.topk, draft_token_num=n,
        capture_hidden_mode=CaptureHiddenMode.FULL, seq_lens_sum=int(batch.seq_lens_sum),
        seq_lens_cpu=batch.seq_lens_cpu)


def _once() -> None:
    """Per process (``_hf.prepare_process``): the gloo group, the fake workers, the retraction
    record, no watchdog."""
    from specstate.oracle._hf import prepare_process

    prepare_process(_Current, [init_distributed, _patch_workers, _record_retractions, no_watchdog])


def build(cfg: dict[str, Any], models: str) -> Any:
    """Upstream's ``Scheduler``, constructed by its own ``__init__`` on the fake workers."""
    _once()
    sched = construct_scheduler(_server_args(cfg, models))
    from sglang.srt.managers.scheduler import SenderWrapper

    _close_sockets(sched)
    sched.send_to_tokenizer = sched.send_to_detokenizer = SenderWrapper(None)
    return sched


def run(cfg: dict[str, Any], driver: Driver, models: str) -> None:
    """The driver's workload through upstream's ``event_loop_normal``; the driver keeps the observations."""
    release = Release12()
    _Current.driver = driver
    sched = build(cfg, models)
    driver.sched = sched
    run_batch = sched.run_batch
    sched.recv_requests = lambda: driver.recv_requests(release)
    sched.run_batch = lambda batch, *a: driver.around_run_batch(release, lambda b: run_batch(b, *a), batch)
    try:
        sched.event_loop_normal()
    except WorkloadDone:
        pass
    driver.finish(release)


def _record_retractions() -> None:
    from sglang.srt.managers.schedule_batch import ScheduleBatch

    orig = ScheduleBatch.retract_decode

    def retract_decode(self: Any, server_args: Any) -> Any:
        try:
            out = orig(self, server_args)
        except ValueError:  # 0.5.9: "Out of memory even after retracting all other requests" (0.5.12 aborts)
            _Current.driver.reached.add("oom-crash")
            raise
        _Current.driver.retracted.extend(int(str(r.rid)[1:]) for r in out[0])
        if out[0]:
            _Current.driver.reached.add("retraction")
        return out

    ScheduleBatch.retract_decode = retract_decode
    from sglang.srt.mem_cache.radix_cache import RadixCache

    RadixCache.evict = noting_eviction(RadixCache.evict, _Current)
