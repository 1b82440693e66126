"""The oracle for sglang 0.5.23: the 0.5.17 adapter (``integration/sglang_0_5_17/oracle.py``) with what 0.5.23 moved.

Upstream's, unchanged, as for 0.5.17: ``Scheduler.__init__``, ``run_event_loop`` ->
``event_loop_overlap`` and everything it calls (admission, chunked prefill, the radix cache's
``checkpoint``, retraction, ``update_finish_state``, ``release_kv_cache``, the leak checks), and
of the worker ``EAGLEWorkerV2``'s adaptive half (``AdaptiveController`` over upstream's
``AdaptiveSpeculativeParams`` policy). The fake worker's forward is 0.5.17's (``_forward``).

What 0.5.23 moved, each met here:

- the process-wide config: ``runtime_context.py::publish`` projects the server args into the
  config bags (``get_spec()``, ``get_schedule()``, ...) as ``run_scheduler_process`` does;
  ``Scheduler(server_args, port_args)`` (the ranks come from the bags);
- ``EAGLEWorkerV2.__init__(server_args, gpu_id, nccl_port, target_worker)`` reads the bags, and
  ``AdaptiveController(worker, policy)`` takes upstream's ``AdaptiveSpeculativeParams``;
- ``Scheduler.__init__`` runs ``distributed/bootstrap.py::init_parallel_runtime`` (the gloo
  group), once per process (``_parallel_once``);
- the memory-pool start reads more of the runner (``_FakeRunner23``) and of the draft worker;
- the request intake takes ``local_reqs``; ``req.kv`` (``ReqKvInfo``) holds the KV lengths
  (``Release23``); ``retract_decode()`` takes no argument; the default tree is
  ``UnifiedRadixCache`` (``_record_events``);
- the Triton stub lives in ``sglang/_platform_stubs.py`` (``stubs.py`` installs it);
- ``configure_hf_hub_logger`` at the scheduler's import reads the stubbed Hub (``_quiet_hub_logger``).

docs/oracle.md ("sglang 0.5.23") lists each with why it is safe.
"""

from __future__ import annotations

import contextlib
import types
from typing import Any

from specstate.integration.sglang_0_5_17 import oracle as v17
from specstate.oracle._core import OracleRelease, no_watchdog
from specstate.oracle.driver import Driver

__all__ = ["build", "run", "RELEASE", "DRIVER", "ORACLE"]

#: the release is this module's folder's
ORACLE = OracleRelease.of(__package__, variant="upstream-v23", overlap=True)
RELEASE = ORACLE.release
DRIVER = v17.Driver17


def _fake_eagle_class() -> type:
    from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2

    base = v17.fake_eagle_class()

    class _FakeEagleV23(base):  # type: ignore[misc, valid-type]
        """0.5.17's fake ``EAGLEWorkerV2`` with 0.5.23's constructor: no ``ps`` argument, the
        step counts read from the spec bag, the adaptive controller over upstream's policy;
        no draft weights, no draft parallel layout (one rank)."""

        preloaded_weights_bytes = 0
        draft_parallel_layout = None

        def __init__(self, server_args: Any, gpu_id: int, nccl_port: int, target_worker: Any) -> None:
            from sglang.srt.runtime_context import get_spec
            from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController
            from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams

            super(EAGLEWorkerV2, self).__init__()  # upstream's BaseSpecWorker.__init__
            v17.init_fake_worker(self, server_args, gpu_id, target_worker)
            # one rank: no draft TP group (``spec_utils.py::draft_tp_context`` enters nothing)
            self._draft_worker.parallel_layout = types.SimpleNamespace(tp_group=None, disable_cp=False)
            self._draft_worker.draft_runners = [self._draft_worker.draft_runner]  # 0.5.23's list of them
            self._hosts_draft, self.plan_stream, self.plan_stream_ctx = True, None, contextlib.nullcontext()
            spec = get_spec()
            if spec.speculative_adaptive:
                self.adaptive_controller = AdaptiveController(self, AdaptiveSpeculativeParams(
                    initial_steps=self.speculative_num_steps, cfg_path=spec.speculative_adaptive_config))

    return _FakeEagleV23


class _FakeRunner23(v17._FakeRunner):
    """0.5.17's fake runner with what 0.5.23's ``Scheduler.init_target_memory_pool`` reads: no
    weights preloaded, ``alloc_memory_pool(..., draft_parallel_layout=)``, and
    ``NgramEmbeddingManager.from_model`` without the server args."""

    preloaded_weights_bytes = 0

    def account_preloaded_weights(self, preloaded_weights_bytes: int) -> None:
        pass

    def prewarm_sampling(self) -> None:
        """``ModelRunner.prewarm_sampling`` warms the sampler's kernels up: no sampling runs here."""

    @property
    def logical_max_total_num_tokens(self) -> int:
        """``ModelRunner.logical_max_total_num_tokens`` on one rank (no DCP, ``loc_space_scale`` 1):
        the pool's own ``schedulable_token_capacity`` of the pool size."""
        return int(self.req_to_token_pool.schedulable_token_capacity(self.max_total_num_tokens))

    @property
    def effective_logical_max_total_num_tokens(self) -> int:  # not hybrid SWA
        return self.logical_max_total_num_tokens

    def alloc_memory_pool(self, memory_pool_config: Any = None, *, draft_parallel_layout: Any = None) -> None:
        self.build_pools(memory_pool_config)
        self.ngram_embedding_manager = self.ngram_manager()


def _patch_workers() -> None:
    v17.patch_workers(_fake_eagle_class(), _FakeRunner23)


def _quiet_hub_logger() -> None:
    """``utils/common.py::configure_hf_hub_logger`` (run at the scheduler's import) routes the
    Hub's logger, which is a stub here (``huggingface_hub``: no download): nothing to route."""
    from sglang.srt.utils import common

    common.configure_hf_hub_logger = lambda: None


def _parallel_once() -> None:
    """Upstream's ``distributed/bootstrap.py::init_parallel_runtime`` (0.5.23's ``Scheduler.__init__``
    builds the one-process gloo group itself) runs for the process's first ``Scheduler``; it refuses a
    second run in a process, and the oracle builds a fresh ``Scheduler`` per workload: later ones
    reuse the groups (one process, one rank: the same groups every time)."""
    from sglang.srt.distributed import bootstrap

    init = bootstrap.init_parallel_runtime

    def init_parallel_runtime(**kwargs: Any) -> None:
        if not bootstrap._PARALLEL_INITIALISED:
            init(**kwargs)

    bootstrap.init_parallel_runtime = init_parallel_runtime


def _record_events() -> None:
    """0.5.17's record on 0.5.23's default tree, ``mem_cache/unified_radix_cache.py::UnifiedRadixCache``
    (``mem_cache/registry.py::create_unified_radix_cache``), which evicts for an allocation
    through its own ``evict_for_alloc``."""
    from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

    v17.record_events(UnifiedRadixCache, ("evict", "evict_for_alloc"))


def _once() -> None:
    from specstate.oracle._hf import prepare_process

    prepare_process(v17._Current, [_quiet_hub_logger, v17._keep_overlap, _parallel_once, _patch_workers,
                                   v17._port_kernels, v17._cpu_streams, _record_events, no_watchdog,
                                   v17._no_sockets])


def build(cfg: dict[str, Any], models: str) -> Any:
    _once()
    sa = v17._server_args(cfg, models)
    from sglang.srt.runtime_context import SpawnRanks, publish
    from sglang.srt.server_args import PortArgs

    publish(sa, role="scheduler", ranks=SpawnRanks(world_rank=0, dp_rank=None, gpu_id=0))  # run_scheduler_process
    from sglang.srt.managers.scheduler import Scheduler

    return Scheduler(sa, PortArgs.init_new(sa))


class Release23(v17.Release17):
    """0.5.17's request objects; the request's KV bookkeeping moved into ``req.kv``
    (``schedule_batch.py::ReqKvInfo``: ``kv_committed_len`` and ``kv_allocated_len``, always present;
    ``Req.detach_kv`` leaves a fresh one)."""

    def committed(self, req: Any) -> int:
        return int(req.kv.kv_committed_len)

    def req_kv(self, req: Any) -> tuple[int, int]:
        return int(req.kv.kv_committed_len), int(req.kv.kv_allocated_len)


def run(cfg: dict[str, Any], driver: Driver, models: str) -> None:
    """The driver's workload through upstream's ``event_loop_overlap`` (0.5.17's harness)."""
    v17.run(cfg, driver, models, build=build, release=Release23())
