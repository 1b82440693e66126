"""The oracle for sglang 0.5.12: upstream's ``Scheduler`` and ``event_loop_normal`` (spec v1,
``EAGLEWorker``, overlap off) on CPU, with a fake model worker.

What is upstream's, unchanged: ``ServerArgs`` (its post-init derives the sizes), ``Scheduler.__init__``
(policy, radix cache, allocator, ``ReqToTokenPool``, ``TokenToKVPoolAllocator``), the whole loop
(``recv`` aside): ``process_input_requests`` / ``handle_generate_request`` / ``abort_request``,
``get_next_batch_to_run`` (``PrefillAdder``, chunked prefill, ``update_running_batch``,
``check_decode_mem``, ``retract_decode``), ``run_batch``, ``process_batch_result_*``,
``release_kv_cache`` / ``cache_unfinished_req``, ``on_idle`` with its memory-leak check (and the
same check after every busy iteration, ``SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_BUSY``), and of the
worker ``EAGLEWorker.forward_batch_generation``, ``verify`` and ``EagleVerifyInput.prepare_for_verify``
/ ``verify`` (append, ``check_finished``, free the rejected slots, ``seq_lens`` += accepted).

What is the oracle's (the fake model worker, ``_FakeEagle``):

- no forward runs: the target's ``forward_batch_generation`` returns the tokens the workload
  prescribes (``_target_forward``), zeros for logits and hidden states;
- ``EAGLEWorker.draft`` keeps only its scheduler-visible effect, ``_draft_preprocess_decode``'s
  ``alloc_token_slots(..., backup_state=True)`` and the ``restore_state`` after drafting (the tree
  eviction stays), and builds a chain ``EagleVerifyInput`` of ``num_draft_tokens`` per row;
- ``forward_draft_extend`` / ``forward_draft_extend_after_decode``: the next ``EagleDraftInput``
  (upstream's class, zero tensors of the right rows) without the draft forward;
- ports of two kernels to torch: ``spec_utils.py::assign_req_to_token_pool`` (Triton; a row
  copy into ``req_to_token``) and ``eagle_utils.py::verify_tree_greedy_func`` (sgl_kernel; here it
  writes the accept lengths the workload prescribes: this is the workload's choice, as in the model).

Page sizes > 1 run upstream's ``PagedTokenToKVPoolAllocator`` and paged verify with torch ports
of the Triton kernels they launch (``_paged.py``); the fake draft keeps
``_draft_preprocess_decode``'s paged allocation (``alloc_paged_token_slots_extend``, restored).
topk > 1 at page size > 1 is not run here (its verify moves KV with more kernels).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specstate.oracle._core import (HIDDEN, OracleRelease, assign_req_to_token_pool, construct_scheduler,
                                   init_distributed, no_watchdog, noting_eviction, server_args_kwargs)
from specstate.oracle._paged import install as install_paged_ports
from specstate.oracle.driver import Driver, Release, WorkloadDone

__all__ = ["build", "run", "RELEASE", "assign_req_to_token_pool", "ORACLE", "SpecFields", "FIELDS", "fake_eagle_class",
           "patch_workers"]

#: the release is this module's folder's, compared with its family's ``always-spec``
ORACLE = OracleRelease.of(__package__, variant="always-spec", overlap=False)
RELEASE = ORACLE.release


@dataclass(frozen=True)
class SpecFields:
    """What one v1 release calls the fields the fake worker fills (0.5.12's names by default; an
    older release over this oracle passes its own: 0.5.9's ``verified_id``, ``retrive_*``)."""

    #: ``eagle_info.py::EagleDraftInput``'s accepted tokens of the last verify
    bonus: str = "bonus_tokens"
    #: the prefix of ``eagle_info.py::EagleVerifyInput``'s ``*index``, ``*next_token``,
    #: ``*next_sibling``, ``*cum_len`` tensors
    retrieve: str = "retrieve_"
    #: the attributes ``EAGLEWorker.__init__`` sets that the kept methods read, with the fake's value
    #: (0.5.12: ``adaptive_controller``, none; 0.5.9: ``enable_nan_detection``, off)
    worker: tuple[tuple[str, Any], ...] = (("adaptive_controller", None),)


FIELDS = SpecFields()


def _server_args(cfg: dict[str, Any], models: str) -> Any:
    from sglang.srt.server_args import ServerArgs

    return ServerArgs(**server_args_kwargs(cfg, models, overlap=ORACLE.overlap))


class _FakeRunner:
    """The ``ModelRunner`` attributes ``TpModelWorker`` and the scheduler read; the pools are
    upstream's (``ReqToTokenPool``, ``MHATokenToKVPool`` of one 1-wide head, ``TokenToKVPoolAllocator``)."""

    def __init__(self, sa: Any, context_len: int) -> None:
        import torch
        from sglang.srt.mem_cache.allocator import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator
        from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool

        kv = sa.max_total_tokens
        self.device, self.forward_stream = "cpu", None
        self.max_total_num_tokens = self.max_token_pool_size = kv
        self.max_running_requests = sa.max_running_requests
        # ``model_runner_kv_cache_mixin.py::ModelRunnerKVCacheMixin.init_memory_pool``: the row is
        # ``context_len + 4 + speculative_num_draft_tokens`` wide (``extra_max_context_len``)
        extra = 4 + (sa.speculative_num_draft_tokens or 0)
        self.req_to_token_pool = ReqToTokenPool(size=sa.max_running_requests, max_context_len=context_len + extra,
                                                device="cpu", enable_memory_saver=False)
        page = sa.page_size
        self.token_to_kv_pool = MHATokenToKVPool(kv, page_size=page, dtype=torch.bfloat16, head_num=1, head_dim=1,
                                                 layer_num=1, device="cpu", enable_memory_saver=False)
        if page == 1:
            self.token_to_kv_pool_allocator = TokenToKVPoolAllocator(kv, torch.bfloat16, "cpu", self.token_to_kv_pool,
                                                                     need_sort=False)
        else:  # model_runner_kv_cache_mixin.py: the paged allocator for page_size > 1
            self.token_to_kv_pool_allocator = PagedTokenToKVPoolAllocator(kv, page, torch.bfloat16, "cpu",
                                                                          self.token_to_kv_pool, need_sort=False)
        self.model = object()
        for name in ("linear_attn_model_spec", "hybrid_gdn_config", "mamba2_config", "hybrid_lightning_config",
                     "lora_manager", "token_table", "hisparse_coordinator", "sliding_window_size"):
            setattr(self, name, None)
        self.is_hybrid_swa, self.tp_group = False, None
        self.weight_load_mem_usage = self.graph_mem_usage = 0.0


class _Current:
    """The driver of the workload in progress (the patches are installed once per process)."""

    driver: Driver


def _patch_workers() -> None:
    patch_workers(fake_eagle_class())


def patch_workers(fake: type) -> None:
    """The fake workers installed on upstream's classes: the target's runner and forward, the
    speculative worker ``fake`` (``fake_eagle_class``), the ports of the kernels on the path."""
    from sglang.srt.managers import tp_worker
    from sglang.srt.speculative import eagle_info
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    def init_model_runner(self: Any) -> None:
        self._model_runner = _FakeRunner(self.server_args, self.model_config.context_len)

    tp_worker.TpModelWorker._init_model_runner = init_model_runner
    tp_worker.TpModelWorker.forward_batch_generation = lambda self, mwb, **kw: _target_forward(_Current.driver, mwb, **kw)
    SpeculativeAlgorithm.create_worker = lambda self, server_args: fake
    eagle_info.assign_req_to_token_pool_func = assign_req_to_token_pool
    eagle_info.verify_tree_greedy_func = lambda **kw: _prescribed_verify(_Current.driver, **kw)
    install_paged_ports()


def _target_forward(driver: Driver, mwb: Any, is_verify: bool = False, **kwargs: Any) -> Any:
    """The target model: in a prefill, one prescribed token per row; in a verify, logits of
    the verify shape (the accepted tokens come from ``_prescribed_verify``)."""
    import torch
    from sglang.srt.layers.logits_processor import LogitsProcessorOutput
    from sglang.srt.managers.utils import GenerationBatchResult

    if is_verify:
        n = int(mwb.input_ids.shape[0])
        out = LogitsProcessorOutput(next_token_logits=torch.zeros(n, 2), hidden_states=torch.zeros(n, HIDDEN))
        return GenerationBatchResult(logits_output=out, can_run_cuda_graph=False)
    tokens = torch.tensor(driver.prefill_tokens(), dtype=torch.int64)
    bs = int(tokens.shape[0])
    out = LogitsProcessorOutput(next_token_logits=torch.zeros(bs, 2), hidden_states=torch.zeros(bs, HIDDEN))
    return GenerationBatchResult(logits_output=out, next_token_ids=tokens, can_run_cuda_graph=False)


def _prescribed_verify(driver: Driver, *, predicts: Any, accept_index: Any, accept_token_num: Any, **kw: Any) -> Any:
    """``verify_tree_greedy_func``'s outputs for the accept lengths the workload prescribes:
    row ``i`` accepts its first ``a_i`` draft positions (``a_i`` clipped to ``1..min(steps + 1, num_draft_tokens)``, as the model clips it)."""
    n = kw["candidates"].shape[1]
    for i, tokens in enumerate(driver.decode_tokens(min(int(accept_index.shape[1]), int(n)))):
        for j, tok in enumerate(tokens):
            accept_index[i, j] = i * n + j
            predicts[i * n + j] = tok
        accept_token_num[i] = len(tokens) - 1
    return predicts, accept_index, accept_token_num


def fake_eagle_class(fields: SpecFields = FIELDS) -> type:
    """The fake ``EAGLEWorker`` of a v1 release whose spec-info fields are named ``fields``."""
    from sglang.srt.speculative.eagle_worker import EAGLEWorker
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    class _FakeEagle(EAGLEWorker):
        """``EAGLEWorker`` without models (see the module doc for what is kept)."""

        def __init__(self, server_args: Any, target_worker: Any, **kwargs: Any) -> None:
            self.server_args, self.target_worker = server_args, target_worker
            self.page_size, self.topk = server_args.page_size, server_args.speculative_eagle_topk
            self.speculative_num_steps = server_args.speculative_num_steps
            self.speculative_num_draft_tokens = server_args.speculative_num_draft_tokens
            self.speculative_algorithm = SpeculativeAlgorithm.from_string(server_args.speculative_algorithm)
            self.req_to_token_pool, self.token_to_kv_pool_allocator = target_worker.get_memory_pool()
            self.model_config, self._model_runner = target_worker.model_config, target_worker.model_runner
            self.device = "cpu"
            for name, value in fields.worker:
                setattr(self, name, value)

        def clear_cache_pool(self) -> None:
            pass

        def draft_tp_context(self, group: Any) -> Any:
            import contextlib

            return contextlib.nullcontext()

        def forward_draft_extend(self, batch: Any, hidden_states: Any, next_token_ids: Any, *args: Any) -> None:
            batch.spec_info = _draft_input(len(batch.reqs), self.topk, next_token_ids, fields)

        def _draft_preprocess_idle(self, batch: Any) -> None:
            batch.spec_info = _draft_input(0, self.topk, None, fields)

        def draft(self, batch: Any) -> Any:
            return _draft(self, batch, fields)

        def forward_draft_extend_after_decode(self, batch: Any) -> Any:
            ext = batch.spec_info
            if batch.forward_mode.is_idle() or ext.input_ids.shape[0] == 0:
                return _draft_input(0, self.topk, None, fields)
            rows = len(ext.num_accept_tokens_cpu)
            return _draft_input(rows, self.topk, ext.input_ids.new_zeros(rows), fields)

    return _FakeEagle


def _draft_input(rows: int, topk: int, bonus: Any, fields: SpecFields = FIELDS) -> Any:
    """Upstream's ``EagleDraftInput`` for ``rows`` requests (zero tensors; ``filter_batch`` and
    ``merge_batch`` slice and concatenate them as on the GPU); ``bonus``: its accepted tokens
    (``fields.bonus``; ``None``: zeros)."""
    import torch
    from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode
    from sglang.srt.speculative.eagle_info import EagleDraftInput

    return EagleDraftInput(topk_p=torch.zeros(rows, topk), topk_index=torch.zeros(rows, topk, dtype=torch.int64),
                           hidden_states=torch.zeros(rows, HIDDEN), capture_hidden_mode=CaptureHiddenMode.LAST,
                           **{fields.bonus: bonus if bonus is not None else torch.zeros(rows, dtype=torch.int64)})


def _draft(worker: Any, batch: Any, fields: SpecFields = FIELDS) -> Any:
    """``EAGLEWorker.draft``'s effect on the scheduler: ``_draft_preprocess_decode``'s temporary
    ``num_steps * topk`` slots per request (``alloc_token_slots(backup_state=True)``, evicting from
    the tree; ``restore_state`` after drafting), then a chain ``EagleVerifyInput``."""
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
    r = fields.retrieve
    trees = {f"{r}index": (torch.arange(bs, dtype=torch.int64)[:, None] * n + chain).contiguous(),
             f"{r}next_token": nxt.repeat(bs, 1), f"{r}next_sibling": torch.full((bs, n), -1, dtype=torch.int64),
             f"{r}cum_len": None}
    return EagleVerifyInput(
        draft_token=torch.zeros(bs * n, dtype=torch.int64), custom_mask=torch.ones(0, dtype=torch.bool),
        positions=torch.zeros(bs * n, dtype=torch.int64), **trees, spec_steps=steps, topk=worker.topk, draft_token_num=n,
        capture_hidden_mode=CaptureHiddenMode.FULL, seq_lens_sum=int(batch.seq_lens_sum),
        seq_lens_cpu=batch.seq_lens_cpu)


def _draft_alloc_paged(worker: Any, batch: Any, steps: int) -> Any:
    """``EAGLEWorker._draft_preprocess_decode`` at page size > 1: topk 1 extends each row from
    ``seq_len`` by ``num_steps`` (``get_last_loc_large_page_size_top_k_1``), topk > 1 to
    ``seq_len // P * P + ceil((seq_len % P + num_steps) / P) * P * topk`` (the last partial page
    duplicated per branch, ``get_last_loc_large_page_size_large_top_k``), through
    ``alloc_paged_token_slots_extend(backup_state=True)``. Returns the backup."""
    from sglang.srt.mem_cache.common import alloc_paged_token_slots_extend, get_last_loc_torch

    page, topk = worker.page_size, worker.topk
    prefix_cpu = batch.seq_lens_cpu
    if topk == 1:
        seq_cpu = prefix_cpu + steps
    else:
        seq_cpu = prefix_cpu // page * page + (prefix_cpu % page + steps + page - 1) // page * (page * topk)
    last_loc = get_last_loc_torch(batch.req_to_token_pool.req_to_token, batch.req_pool_indices, batch.seq_lens)
    _, backup = alloc_paged_token_slots_extend(batch.tree_cache, batch.seq_lens, prefix_cpu, seq_cpu.to(batch.seq_lens.device),
                                               seq_cpu, last_loc, int((seq_cpu - prefix_cpu).sum()), backup_state=True)
    return backup


def _once() -> None:
    """Per process (``_hf.prepare_process``): the gloo group, the fake workers, the retraction
    record, no watchdog."""
    from specstate.oracle._hf import prepare_process

    prepare_process(_Current, [init_distributed, _patch_workers, _record_retractions, no_watchdog])


def build(cfg: dict[str, Any], models: str, *, once: Any = None) -> Any:
    """Upstream's ``Scheduler``, constructed by its own ``__init__`` on the fake workers
    (``once``: the per-process preparation, this release's ``_once`` unless given)."""
    (once or _once)()
    sched = construct_scheduler(_server_args(cfg, models))
    from sglang.srt.managers.scheduler import SenderWrapper

    _close_sockets(sched)
    sched.send_to_tokenizer = sched.send_to_detokenizer = SenderWrapper(None)  # upstream's sender of a non-zero rank
    return sched


def _close_sockets(sched: Any) -> None:
    """The scheduler's ZMQ sockets (nothing is on their other end): closed, so that a process
    running many workloads keeps its file descriptors."""
    import zmq

    for value in list(vars(sched).values()):
        sock = getattr(value, "socket", value)
        if isinstance(sock, zmq.Socket):
            sock.close(linger=0)


class Release12(Release):
    """0.5.12's request objects (``io_struct.py``)."""

    def generate_req(self, rid: str, prompt: list[int], max_new_tokens: int) -> Any:
        from sglang.srt.managers.io_struct import TokenizedGenerateReqInput
        from sglang.srt.sampling.sampling_params import SamplingParams

        sp = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0, ignore_eos=False)
        sp.normalize(None)
        return TokenizedGenerateReqInput(input_text="", input_ids=list(prompt), mm_inputs=None, sampling_params=sp,
                                         return_logprob=False, logprob_start_len=-1, top_logprobs_num=0,
                                         token_ids_logprob=None, stream=False, rid=rid)

    def abort_req(self, rid: str) -> Any:
        from sglang.srt.managers.io_struct import AbortReq

        return AbortReq(rid=rid)


def run(cfg: dict[str, Any], driver: Driver, models: str, *, builder: Any = None) -> None:
    """The driver's workload through upstream's ``event_loop_normal``; the driver keeps the
    observations (``builder``: the scheduler's, this release's ``build`` unless given)."""
    release = Release12()
    _Current.driver = driver
    sched = (builder or build)(cfg, models)
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
        out = orig(self, server_args)
        _Current.driver.retracted.extend(int(str(r.rid)[1:]) for r in out[0])
        if out[0]:
            _Current.driver.reached.add("retraction")
        if out[2]:
            _Current.driver.reached.add("oom-abort")
        return out

    ScheduleBatch.retract_decode = retract_decode
    from sglang.srt.mem_cache.radix_cache import RadixCache

    RadixCache.evict = noting_eviction(RadixCache.evict, _Current)
