"""The oracle for sglang 0.5.17: upstream's ``Scheduler`` and ``event_loop_overlap`` (spec v2,
``EAGLEWorkerV2`` under the overlap scheduler) on CPU, with a fake model worker.

What is upstream's, unchanged: ``ServerArgs`` (its post-init derives the sizes), ``Scheduler.__init__``
(policy, radix cache, ``ReqToTokenPool``, ``TokenToKVPoolAllocator``, the future map), the whole
overlap loop (``recv`` aside): ``process_input_requests`` / ``abort_request``,
``get_next_batch_to_run`` (``process_pending_chunked_abort``, ``PrefillAdder``, chunked prefill,
``update_running_batch``, ``check_decode_mem``, ``retract_decode``), ``run_batch`` (the future
map's ``resolve`` / ``publish``), ``batch.copy()`` into the result queue, ``process_batch_result``
one iteration later (``_resolve_spec_v2_tokens``, ``update_finish_state``, ``release_kv_cache``),
``prepare_for_decode`` -> ``eagle_prepare_for_decode`` (the over-allocation), ``on_idle`` with its
memory-leak check (and the same check after every busy iteration,
``SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_BUSY``), and of the worker ``EAGLEWorkerV2``'s own
``activate_step_by_batch`` / ``on_verify_complete_cpu`` with upstream's ``AdaptiveController``.

What is the oracle's (``_FakeEagleV2``, a subclass of ``EAGLEWorkerV2`` without models):

- no forward runs: a prefill returns one prescribed token per row; a decode returns the accepted
  run the workload prescribes (``Step.accept``, clipped to ``1..steps + 1``), EOS as the last
  accepted token of a row the step names (``Step.eos``), as the model reads it;
- ``forward_batch_generation`` keeps upstream's order: ``activate_step_by_batch(bs)`` first, then
  ``on_publish(new_seq_lens)`` (``seq_lens + accept``), then the next ``EagleDraftInput``;
- ports of kernels to torch, each cited where it is defined below.
"""

from __future__ import annotations

from array import array
from pathlib import Path
from typing import Any

from specstate.oracle._paged import install as install_paged_ports
from specstate.oracle._core import (HIDDEN, OracleRelease, assign_req_to_token_pool, construct_scheduler,
                                    init_distributed, no_watchdog, noting_eviction, private_dir, private_file,
                                    server_args_kwargs)
from specstate.oracle.driver import Driver, Release, WorkloadDone
from specstate.oracle.tokens import EOS, output_token

__all__ = ["build", "run", "RELEASE", "ORACLE"]

#: the release is this module's folder's
ORACLE = OracleRelease.of(__package__, variant="upstream-adaptive", overlap=True)
RELEASE = ORACLE.release


def _server_args(cfg: dict[str, Any], models: str) -> Any:
    """Upstream's ``ServerArgs`` of a workload's config: ``--speculative-adaptive`` with the config's
    adaptive JSON written to a file, or without it (``speculative_adaptive`` false: static
    speculation, ``EAGLEWorkerV2`` with no ``AdaptiveController``)."""
    from sglang.srt.server_args import ServerArgs

    kw: dict[str, Any] = {}
    if cfg.get("speculative_adaptive", True) is False:  # a static launch: no --speculative-adaptive
        pass
    elif cfg.get("speculative_adaptive_config"):
        for old in Path(private_dir()).glob("*-adaptive.json"):  # the previous workload's: one at a time
            old.unlink()
        path = private_file("adaptive.json")
        with open(path, "x") as f:
            f.write(cfg["speculative_adaptive_config"])
        kw.update(speculative_adaptive=True, speculative_adaptive_config=path)
    return ServerArgs(**server_args_kwargs(cfg, models, overlap=ORACLE.overlap), disable_cuda_graph=True, **kw)


class _FakeRunner:
    """The ``ModelRunner`` attributes ``TpModelWorker`` and the scheduler read; the pools are
    upstream's (``ReqToTokenPool``, ``MHATokenToKVPool`` of one 1-wide head, ``TokenToKVPoolAllocator``),
    built by ``alloc_memory_pool`` as the real runner builds them."""

    def __init__(self, sa: Any, model_config: Any) -> None:
        self.server_args, self.model_config = sa, model_config
        import torch

        self.device, self.forward_stream = "cpu", torch.get_device_module("cpu").Stream()  # as ModelRunner makes it
        self.max_total_num_tokens = self.effective_max_total_num_tokens = sa.max_total_tokens
        self.max_running_requests = sa.max_running_requests
        self.dcp_size = 1
        self.memory_pool_config: Any = None
        self.req_to_token_pool: Any = None
        self.token_to_kv_pool_allocator: Any = None
        self.token_to_kv_pool: Any = None
        self.model = object()
        self.weight_load_mem_usage = self.graph_mem_usage = self.weight_load_time = 0.0
        self.graph_memory_usage: dict[str, float] = {}
        self.graph_time_usage: dict[str, float] = {}
        self.is_hybrid_swa, self.tp_group, self.attn_backend = False, None, None
        self.decode_cuda_graph_runner = None
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        self.spec_algorithm = SpeculativeAlgorithm.from_string(sa.speculative_algorithm)

    def __getattr__(self, name: str) -> Any:  # anything else the runner holds: none on CPU
        if name.startswith("__"):
            raise AttributeError(name)
        return None

    def alloc_memory_pool(self, memory_pool_config: Any = None) -> None:
        self.build_pools(memory_pool_config)
        # upstream's own (``ModelRunner.init_ngram_embedding_manager``): a stand-in dropped every batch once
        self.ngram_embedding_manager = self.ngram_manager(server_args=self.server_args)

    def build_pools(self, memory_pool_config: Any) -> None:
        import torch
        from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
        from sglang.srt.mem_cache.allocator.token import TokenToKVPoolAllocator
        from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool

        kv, page = self.max_total_num_tokens, self.server_args.page_size
        self.memory_pool_config = memory_pool_config or object()
        if self.req_to_token_pool is None:
            self.req_to_token_pool = ReqToTokenPool(size=self.max_running_requests,
                                                    max_context_len=self.model_config.context_len + row_headroom(self),
                                                    device="cpu", enable_memory_saver=False)
        self.token_to_kv_pool = MHATokenToKVPool(kv, page_size=page, dtype=torch.bfloat16, head_num=1, head_dim=1,
                                                 layer_num=1, device="cpu", enable_memory_saver=False)
        if self.token_to_kv_pool_allocator is None and page == 1:
            self.token_to_kv_pool_allocator = TokenToKVPoolAllocator(kv, torch.bfloat16, "cpu", self.token_to_kv_pool,
                                                                     need_sort=False)
        elif self.token_to_kv_pool_allocator is None:  # kv_cache_builder.py: the paged allocator for page_size > 1
            self.token_to_kv_pool_allocator = PagedTokenToKVPoolAllocator(kv, page, torch.bfloat16, "cpu",
                                                                          self.token_to_kv_pool, need_sort=False)

    def ngram_manager(self, **extra: Any) -> Any:
        """Upstream's ``NgramEmbeddingManager.from_model`` over the pools (``extra``: what a release adds)."""
        import torch
        from sglang.srt.model_executor.model_runner_components.ngram_embedding_manager import NgramEmbeddingManager

        return NgramEmbeddingManager.from_model(model=torch.nn.Module(), model_config=self.model_config,
                                                req_to_token_pool=self.req_to_token_pool,
                                                max_running_requests=self.max_running_requests, device="cpu", **extra)

    def init_attention_backends(self, *a: Any, **k: Any) -> None:
        pass

    def init_cuda_graphs(self, *a: Any, **k: Any) -> None:
        pass


def row_headroom(runner: Any) -> int:
    """The ``req_to_token`` row's width beyond the context length, as upstream sizes it
    (``kv_cache_configurator.py::KVCacheConfigurator._build_req_to_token_pool``):
    ``allocation_sizing.py::get_req_to_token_extra_context_len`` (0.5.17: of the server args;
    0.5.23: of the published bags, no argument). Upstream's own function, so a revert of it
    (``SGLANG_DEBUG_REVERT_PR=26972``) sizes the oracle's rows too."""
    import inspect

    from sglang.srt.mem_cache.allocation_sizing import get_req_to_token_extra_context_len as extra

    return int(extra(runner.server_args) if inspect.signature(extra).parameters else extra())


class _FakeDraftWorker:
    """``EagleDraftWorker`` without a draft model: its runner is the target's fake runner (the
    scheduler reads only its KV pool, for disaggregation / HiCache registration, both off)."""

    def __init__(self, runner: Any) -> None:
        self.draft_runner = runner
        self.draft_attn_backend = self.draft_extend_attn_backend = None
        self.cuda_graph_runner = self.cuda_graph_runner_for_draft_extend = None
        self.weight_load_time = 0.0
        self.graph_memory_usage: dict[str, float] = {}
        self.graph_time_usage: dict[str, float] = {}

    def draft_tp_context(self, group: Any) -> Any:
        import contextlib

        return contextlib.nullcontext()

    def init_cuda_graphs(self) -> None:
        pass

    def _rebuild_topk1_chain_buffers(self) -> None:
        pass


class _Current:
    driver: Driver17


def _patch_workers() -> None:
    patch_workers(fake_eagle_class(), _FakeRunner)


def patch_workers(fake: type, runner: type) -> None:
    """The target worker's ``ModelRunner`` is ``runner``; the speculative worker is ``fake``."""
    from sglang.srt.managers import tp_worker
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    def init_model_runner(self: Any) -> None:
        self._model_runner = runner(self.server_args, self.model_config)

    tp_worker.TpModelWorker._init_model_runner = init_model_runner
    SpeculativeAlgorithm.create_worker = lambda self, server_args: fake


def init_fake_worker(worker: Any, server_args: Any, gpu_id: int, target_worker: Any) -> None:
    """The attributes ``EAGLEWorkerV2.__init__`` sets that the scheduler and the adaptive half
    read (the step counts, the page size, the fake draft worker); no adaptive controller yet."""
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    worker.server_args, worker._target_worker, worker.gpu_id = server_args, target_worker, gpu_id
    worker.topk = server_args.speculative_eagle_topk
    worker.speculative_num_steps = server_args.speculative_num_steps
    worker.speculative_num_draft_tokens = server_args.speculative_num_draft_tokens
    worker.page_size, worker.device = server_args.page_size, "cpu"
    worker.speculative_algorithm = SpeculativeAlgorithm.from_string(server_args.speculative_algorithm)
    worker._draft_worker = _FakeDraftWorker(target_worker.model_runner)
    worker.adaptive_controller = None


def fake_eagle_class() -> type:
    from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2

    class _FakeEagleV2(EAGLEWorkerV2):
        """``EAGLEWorkerV2`` without models (see the module doc for what is kept)."""

        def __init__(self, server_args: Any, gpu_id: int, ps: Any, nccl_port: int, target_worker: Any) -> None:
            from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController

            super(EAGLEWorkerV2, self).__init__()  # upstream's BaseSpecWorker.__init__
            init_fake_worker(self, server_args, gpu_id, target_worker)
            self.ps = ps
            if server_args.speculative_adaptive:
                self.adaptive_controller = AdaptiveController(self, config_path=server_args.speculative_adaptive_config)

        @property
        def target_worker(self) -> Any:
            return self._target_worker

        def alloc_memory_pool(self, **kw: Any) -> None:
            pass

        def init_attention_backends(self, *a: Any, **k: Any) -> None:
            pass

        def build_adaptive_runtime_state(self, speculative_num_steps: int, speculative_num_draft_tokens: int,
                                         cuda_graph_bs: Any = None) -> Any:
            """A candidate's ``SpecRuntimeState`` without backends or graphs (none run on CPU):
            the step count and draft tokens, which is what ``apply_runtime_state`` (upstream's)
            puts on the worker."""
            from sglang.srt.speculative.adaptive_runtime_state import SpecRuntimeState

            return SpecRuntimeState(speculative_num_steps=speculative_num_steps,
                                    speculative_num_draft_tokens=speculative_num_draft_tokens, draft_attn_backend=None,
                                    cuda_graph_runner=None, target_attn_backend=None, target_graph_runner=None,
                                    draft_extend_attn_backend=None, cuda_graph_runner_for_draft_extend=None)

        def clear_cache_pool(self) -> None:
            pass

        def forward_batch_generation(self, batch: Any, on_publish: Any = None, grammar_barrier: Any = None) -> Any:
            return _forward(self, _Current.driver, batch, on_publish)

    return _FakeEagleV2


def _forward(worker: Any, driver: "Driver17", batch: Any, on_publish: Any) -> Any:
    """``EAGLEWorkerV2.forward_batch_generation`` without models: upstream's order (extend:
    target, publish ``seq_lens``, draft extend; decode: ``activate_step_by_batch``, verify,
    publish ``seq_lens + accept_lens``, draft extend), the tokens the workload prescribes."""
    import torch
    from sglang.srt.layers.logits_processor import LogitsProcessorOutput
    from sglang.srt.managers.utils import GenerationBatchResult

    bs = len(batch.reqs)
    hidden = torch.zeros(bs, _hidden(worker))
    if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
        tokens = torch.tensor(driver.prefill_tokens_v2(batch), dtype=torch.int64)
        out = GenerationBatchResult(logits_output=LogitsProcessorOutput(next_token_logits=torch.zeros(bs, 2),
                                                                        hidden_states=hidden),
                                    next_token_ids=tokens, can_run_cuda_graph=False)
        out.new_seq_lens = batch.seq_lens
        if on_publish is not None:
            on_publish(out.new_seq_lens)
        out.next_draft_input = _draft_input(worker, bs, tokens, hidden)
        driver.on_launched("prefill", int(worker.speculative_num_steps))
        return out
    worker.activate_step_by_batch(batch.seq_lens.shape[0])
    n = int(worker.speculative_num_draft_tokens)
    rows = driver.decode_tokens_v2(batch, min(worker.speculative_num_steps + 1, n))
    predict = torch.zeros(bs * n, dtype=torch.int64)
    for i, run in enumerate(rows):
        predict[i * n:i * n + len(run)] = torch.tensor(run, dtype=torch.int64)
    accept = torch.tensor([len(r) for r in rows], dtype=torch.int32)
    bonus = torch.tensor([r[-1] for r in rows], dtype=torch.int32)
    out = GenerationBatchResult(logits_output=LogitsProcessorOutput(next_token_logits=torch.zeros(bs * n, 2),
                                                                    hidden_states=torch.zeros(bs * n, _hidden(worker))),
                                next_token_ids=predict, can_run_cuda_graph=False, speculative_num_draft_tokens=n,
                                accept_lens=accept, new_seq_lens=batch.seq_lens + accept)
    if on_publish is not None:
        on_publish(out.new_seq_lens)
    out.next_draft_input = _draft_input(worker, bs, bonus, hidden)
    driver.on_launched("decode", int(worker.speculative_num_steps))
    return out


def _hidden(worker: Any) -> int:
    return int(worker._target_worker.model_runner.model_config.spec_hidden_size or HIDDEN)


def _draft_input(worker: Any, rows: int, bonus: Any, hidden: Any) -> Any:
    """Upstream's ``EagleDraftInput`` as ``_draft_extend_for_prefill`` / ``_draft_extend_for_decode``
    return it, zero tensors of the right rows (the future map stores and gathers them)."""
    import torch
    from sglang.srt.speculative.eagle_info import EagleDraftInput

    return EagleDraftInput(topk_p=torch.ones(rows, worker.topk),
                           topk_index=torch.zeros(rows, worker.topk, dtype=torch.int64),
                           hidden_states=hidden, bonus_tokens=bonus.to(torch.int32) if rows else bonus,
                           num_tokens_per_req=1, num_tokens_for_logprob_per_req=1)


def _keep_overlap() -> None:
    """``arg_groups/speculative_hook.py::_disable_overlap_schedule_for_cpu`` turns the overlap
    scheduler off on ``device="cpu"`` (its forward streams and kernels are GPU-only); the oracle
    runs no forward, and the loop it must compare is the GPU's ``event_loop_overlap``: kept on."""
    from sglang.srt.arg_groups import speculative_hook

    speculative_hook._disable_overlap_schedule_for_cpu = lambda server_args: None


def _once() -> None:
    """Per process (``_hf.prepare_process``): overlap kept on CPU, the gloo group, the fake
    workers, the CPU ports of the kernels and streams, the retraction record, no watchdog, no sockets."""
    from specstate.oracle._hf import prepare_process

    prepare_process(_Current, [_keep_overlap, init_distributed, _patch_workers, _port_kernels, _cpu_streams,
                               _record_retractions, no_watchdog, _no_sockets])


def _no_sockets() -> None:
    """``SchedulerIpcChannels.create`` as a non-zero rank gets it (no ZMQ sockets,
    ``SenderWrapper(None)``): nothing is on the other end of the rank-zero sockets, and a
    ``zmq.Context`` per ``Scheduler`` (two I/O threads each) would pile up over many workloads.
    The request intake is the oracle's own (``_Intake``); outputs go nowhere, as on a non-zero rank."""
    from sglang.srt.managers.scheduler_components.ipc_channels import SchedulerIpcChannels

    create = SchedulerIpcChannels.create.__func__

    def create_as_other_rank(cls: Any, **kw: Any) -> Any:
        return create(cls, **dict(kw, is_rank_zero=False, metrics_enabled=False))

    SchedulerIpcChannels.create = classmethod(create_as_other_rank)


def _port_kernels() -> None:
    """Two Triton kernels in torch. ``mem_cache/allocation.py::assign_req_to_token_pool_func`` (the Triton kernel
    ``allocation.py::assign_req_to_token_pool``, reached from ``eagle_prepare_for_decode`` ->
    ``alloc_for_spec_decode``; its CPU branch calls an ``sgl_kernel`` op, stubbed here) in torch:
    row ``i`` of ``req_to_token`` gets ``out_cache_loc``'s next ``end - start`` entries at
    ``start..end`` (the shared port: ``_core.py::assign_req_to_token_pool``)."""
    from sglang.srt.mem_cache import allocation

    allocation.assign_req_to_token_pool_func = assign_req_to_token_pool
    install_paged_ports()  # the paged allocator's kernels (--page-size > 1)
    from sglang.srt.managers import overlap_utils

    overlap_utils.gather_spec_extras = gather_spec_extras


def gather_spec_extras(indices: Any, topk_p_buf: Any, topk_index_buf: Any, output_tokens_buf: Any,
                       hidden_states_buf: Any) -> tuple[Any, Any, Any, Any]:
    """``kernels/ops/speculative/gather_spec_extras.py::gather_spec_extras`` (the Triton
    ``_gather_rows_kernel``: row ``i`` of each output is row ``indices[i]`` of its buffer, the
    future map's gather at launch) in torch: ``index_select`` per buffer."""
    idx = indices.long()
    hidden = hidden_states_buf.index_select(0, idx) if hidden_states_buf is not None else None
    return (topk_p_buf.index_select(0, idx), topk_index_buf.index_select(0, idx),
            output_tokens_buf.index_select(0, idx), hidden)


def _cpu_streams() -> None:
    """``Tensor.record_stream`` as a no-op: it tells the CUDA caching allocator that another
    stream uses a tensor (lifetime only, never a value); torch's CPU streams reject it, and on
    CPU every "stream" runs in order on the one thread (upstream's CPU schedule stream is a no-op too,
    ``Scheduler.run_event_loop``)."""
    import torch

    torch.Tensor.record_stream = lambda self, stream: None  # type: ignore[method-assign, assignment]


def build(cfg: dict[str, Any], models: str) -> Any:
    _once()
    return construct_scheduler(_server_args(cfg, models))


class Driver17(Driver):
    """The v2 harness: one observation per ``event_loop_overlap`` iteration (what it launched,
    what it processed, the scheduler at its end), as the 0.5.17 recorder reads them
    (``integration/sglang_0_5_17/recorder.py``)."""

    def __init__(self, actions: Any, max_accept: int) -> None:
        super().__init__(actions, max_accept)
        self.cur: dict[str, Any] | None = None  #: the observation of the iteration in progress
        self.aborted: list[int] = []  #: rids ``retract_decode`` aborted out of memory this iteration
        self.release: Any = None  #: the release's request objects and state (``run`` sets it)

    def recv_requests(self, release: "Release") -> list[Any]:
        """Top of an iteration: the last one's observation is complete (its end state read)."""
        if self.cur is not None:
            self.cur.update(release.post(self.sched, None))
            self.observations.append(self.cur)
            self.cur = None
        self.retracted, self.aborted = [], []
        if self.pos >= len(self.actions):
            raise WorkloadDone
        inputs = super().recv_requests(release)  # up to and including one Step (no pending: v1 path unused)
        self.cur = {"kind": "none", "rids": [], "path": "none", "steps": None, "processed": [], "out_lens_after": []}
        return inputs

    def on_plan(self, batch: Any) -> None:
        """``get_next_batch_to_run`` returned: the batch to launch, the retractions it made."""
        assert self.cur is not None
        self.cur["retracted"], self.cur["aborted"] = list(self.retracted), list(self.aborted)
        if batch is None:
            return
        kind = "prefill" if batch.forward_mode.is_extend() else "decode"
        self.cur.update(kind=kind, rids=[_rid(r) for r in batch.reqs])
        if kind == "prefill":
            if any(int(p) > 0 for p in batch.prefix_lens):
                self.reached.add("prefix-hit")
            if self.sched.chunked_req is not None:
                self.reached.add("chunked-prefill")

    def on_launched(self, kind: str, steps: int) -> None:
        assert self.cur is not None
        self.cur.update(steps=steps, path="extend" if kind == "prefill" else ("trivial" if steps == 0 else "spec"))

    def on_processed(self, batch: Any) -> None:
        assert self.cur is not None
        self.cur.update(processed=[_rid(r) for r in batch.reqs], out_lens_after=[len(r.output_ids) for r in batch.reqs])

    def finish(self, release: "Release") -> None:
        if self.cur is not None:
            self.cur.update(release.post(self.sched, None))
            self.observations.append(self.cur)
            self.cur = None

    def prefill_tokens_v2(self, batch: Any) -> list[int]:
        """One token per prefill row; EOS for a row the step names whose prefill completes (the
        mark is used up by any launch of the row, as the model's ``eos_pending``)."""
        out = []
        for i, req in enumerate(batch.reqs):
            rid = _rid(req)
            eos = rid in self.eos
            done = int(batch.prefix_lens[i]) + int(batch.extend_lens[i]) >= len(req.origin_input_ids) + len(req.output_ids)
            self.eos.discard(rid)
            out.append(EOS if eos and done else output_token(rid, len(req.output_ids)))
        return out

    def decode_tokens_v2(self, batch: Any, width: int) -> list[list[int]]:
        """Each row's accepted run: ``Step.accept`` (1 beyond it), clipped to ``1..width``; EOS
        as its last token for a row the step names."""
        accept = self.step.accept if self.step is not None else ()
        rows = []
        for i, req in enumerate(batch.reqs):
            rid = _rid(req)
            a = max(1, min(accept[i] if i < len(accept) else 1, width))
            run = [output_token(rid, self.release.committed(req) + j) for j in range(a)]
            if rid in self.eos:
                self.eos.discard(rid)
                run[-1] = EOS
            rows.append(run)
        return rows


def _rid(req: Any) -> int:
    return int(str(req.rid)[1:])


class Release17(Release):
    """0.5.17's request objects (``io_struct.py``) and scheduler state (``req.kv``, the ratio tracker)."""

    def generate_req(self, rid: str, prompt: list[int], max_new_tokens: int) -> Any:
        from sglang.srt.managers.io_struct import TokenizedGenerateReqInput
        from sglang.srt.sampling.sampling_params import SamplingParams

        sp = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0, ignore_eos=False)
        sp.normalize(None)
        return TokenizedGenerateReqInput(input_text="", input_ids=array("q", prompt), input_embeds=None, mm_inputs=None,
                                         token_type_ids=None, sampling_params=sp,
                                         return_logprob=False, logprob_start_len=-1, top_logprobs_num=0,
                                         token_ids_logprob=None, stream=False, rid=rid)

    def abort_req(self, rid: str) -> Any:
        from sglang.srt.managers.io_struct import AbortReq

        return AbortReq(rid=rid)

    def committed(self, req: Any) -> int:
        """``Req.kv_committed_len`` (0.5.23: ``req.kv.kv_committed_len``)."""
        return int(req.kv_committed_len)

    def req_kv(self, req: Any) -> tuple[int, int]:
        """(committed, allocated) of a running row (``req.kv`` is ``None`` once released: 0 allocated)."""
        return self.committed(req), int(req.kv.kv_allocated_len) if req.kv is not None else 0

    def post(self, sched: Any, batch: Any) -> dict[str, Any]:
        """The scheduler at the end of an iteration, as the recorder's ``end`` line reads it
        (``recorder.py::snapshot``): allocator, tree, waiting queue, running batch and its requests'
        KV, ``new_token_ratio``, the chunked request, the adaptive state."""
        alloc, tree, rb = sched.token_to_kv_pool_allocator, sched.tree_cache, sched.running_batch
        chunked = sched.chunked_req
        return {"kv_after": [int(alloc.available_size()), int(tree.evictable_size()), int(tree.protected_size())],
                "waiting_after": [_rid(r) for r in sched.waiting_queue], "running_after": [_rid(r) for r in rb.reqs],
                "chunked_after": _rid(chunked) if chunked is not None else None,
                "ratio_after": round(float(sched.new_token_ratio_tracker.current), 12),
                "batch_is_full_after": bool(rb.batch_is_full),
                "req_kv_after": [list(self.req_kv(r)) for r in rb.reqs],
                "adaptive_after": _adaptive(sched.model_worker)}


def _adaptive(worker: Any) -> Any:
    """(active steps, ((slot, current steps, EMA, batch count), ...)) or ``None`` without a controller."""
    ctl = worker.adaptive_controller
    if ctl is None:
        return None
    slots = sorted((int(k), int(v.current_steps), float(v.ema_accept_len), int(v._batch_count))
                   for k, v in ctl.params._slots.items())
    return [int(worker.speculative_num_steps), [list(x) for x in slots]]


DRIVER = Driver17  #: the harness ``child.py`` builds for this release


class _Intake:
    """The request intake (``SchedulerRequestReceiver``, frozen: replaced as a whole): the workload's next inputs."""

    def __init__(self, recv: Any) -> None:
        self.recv_requests = recv


def run(cfg: dict[str, Any], driver: Driver, models: str, *, build: Any = build,
        release: "Release | None" = None) -> None:
    """The driver's workload through upstream's ``event_loop_overlap`` (``build``: the release's
    ``Scheduler``; ``release``: its request objects and state, 0.5.17's by default)."""
    assert isinstance(driver, Driver17)
    release = release or Release17()
    _Current.driver = driver
    sched = build(cfg, models)
    driver.sched, driver.release = sched, release
    # (0.5.23's receiver also takes this rank's timeout aborts, ``local_reqs``, appended after the pulled ones)
    sched.request_receiver = _Intake(lambda local_reqs=None: [*driver.recv_requests(release), *(local_reqs or [])])
    plan_fn, process = sched.get_next_batch_to_run, sched.process_batch_result

    def get_next_batch_to_run(*a: Any, **k: Any) -> Any:
        plan = plan_fn(*a, **k)
        driver.on_plan(plan.batch_to_run)
        return plan

    def process_batch_result(batch: Any, result: Any, *a: Any, **k: Any) -> Any:
        out = process(batch, result, *a, **k)
        driver.on_processed(batch)
        return out

    sched.get_next_batch_to_run, sched.process_batch_result = get_next_batch_to_run, process_batch_result
    overlap = sched.event_loop_overlap
    entered: list[bool] = []

    def event_loop_overlap() -> None:
        entered.append(True)
        overlap()

    sched.event_loop_overlap = event_loop_overlap
    try:
        sched.run_event_loop()  # upstream's streams, then dispatch_event_loop picks the loop
    except WorkloadDone:
        pass
    if not entered:
        raise RuntimeError("dispatch_event_loop did not choose event_loop_overlap")
    driver.finish(release)


def _record_retractions() -> None:
    from sglang.srt.mem_cache.radix_cache import RadixCache

    record_events(RadixCache, ("evict",))


def record_events(tree_cls: type, evictions: tuple[str, ...]) -> None:
    """What upstream went through, read from its own calls: ``retract_decode``'s retracted and
    out-of-memory-aborted requests, and an eviction when one of ``tree_cls``'s ``evictions``
    methods shrank the evictable size."""
    from sglang.srt.managers.schedule_batch import ScheduleBatch

    orig = ScheduleBatch.retract_decode

    def retract_decode(self: Any, *args: Any) -> Any:  # (server_args) in 0.5.17, none in 0.5.23
        out = orig(self, *args)
        d = _Current.driver
        d.retracted.extend(_rid(r) for r in out[0])
        d.aborted.extend(_rid(r) for r in out[2])
        if out[0]:
            d.reached.add("retraction")
        if out[2]:
            d.reached.add("oom-abort")
        return out

    ScheduleBatch.retract_decode = retract_decode
    for name in evictions:
        setattr(tree_cls, name, noting_eviction(getattr(tree_cls, name), _Current))
