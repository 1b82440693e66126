"""The 0.5.17 family's citations as the 0.5.23 family inherits them (``specstate/citations.py``).

A 0.5.17 citation the 0.5.23 family cites again (same file name and symbol, in its own modules or
``docs/model-0.5.23.md``) was re-read in 0.5.23's source: reviewed. The rest are inherited as
they are; ``tests/test_release_ranges.py`` fails on any that changed between 0.5.17 and a release
of the family's range unless it is listed here:

- ``GONE``: 0.5.17 symbols that 0.5.23 removed, replaced by what the family's overrides cite;
- ``UNREVIEWED``: symbols whose AST (docstrings stripped) differs between 0.5.17 and 0.5.23 and
  that nobody has yet read for a change reaching the modelled state. Each is an open question,
  not a verdict: review one, cite it in the family's docs with what changed, and drop it here;
- ``REVIEWED_START``: the engine start's entries so dropped, with the release read and the verdict
  (each is cited again in ``start.py`` or the docs: ``tests/test_v23_start.py`` checks).

``(file, symbol)`` pairs, written apart so they are not citations of 0.5.23 themselves.
"""

from __future__ import annotations

__all__ = ["GONE", "UNREVIEWED", "REVIEWED_START"]

GONE: tuple[tuple[str, str], ...] = (
    ("radix_cache.py", "RadixCache.cache_finished_req"),
    ("radix_cache.py", "RadixCache.cache_unfinished_req"),
)

#: the 0.5.17 engine-start citations that changed by 0.5.23, re-read in sglang 0.5.23's source
#: (``start.py``, docs/model-0.5.23.md "The engine start"): (file, symbol, release read, verdict)
REVIEWED_START: tuple[tuple[str, str, str, str], ...] = (
    ("speculative_hook.py", "_init_adaptive_speculative_params", "0.5.23", "same checks (resolving_view)"),
    ("graph_shared_output.py", "GraphSharedOutput.create_for_model_runner", "0.5.23", "overridden: graph_shared_output"),
    ("model_runner.py", "ModelRunner.max_decode_logits_rows", "0.5.23", "overridden: graph_shared_output"),
    ("cuda_graph_setup.py", "capture_cuda_graphs", "0.5.23", "same order (finalize, DeepGEMM budget)"),
    ("adaptive_runtime_state.py", "AdaptiveController", "0.5.23", "same params, passed in as a policy"),
    ("adaptive_runtime_state.py", "SpecRuntimeState", "0.5.23", "annotations only"),
    ("adaptive_spec_params.py", "adaptive_unsupported_reason", "0.5.23", "same for CUDA, built-in worker, no DP"),
    ("eagle_worker_v2.py", "EAGLEWorkerV2.build_adaptive_runtime_state", "0.5.23", "overridden: own-width states"),
    ("eagle_worker_v2.py", "EAGLEWorkerV2.init_cuda_graphs", "0.5.23", "same order (draft_tp_context moved)"),
    ("eagle_worker_v2.py", "EagleDraftWorker._capture_cuda_graphs", "0.5.23", "runner class choice; FA3 draft extend"),
)

#: 38 of the kept citations (0.5.17 -> 0.5.23)
UNREVIEWED: tuple[tuple[str, str], ...] = (
    # inherited from 0.5.17's abort path (issue 23), changed in 0.5.23, not yet read for 0.5.23
    ("scheduler.py", "Scheduler.abort_request"),
    ("scheduler.py", "Scheduler.process_pending_chunked_abort"),
    ("allocation.py", "alloc_for_spec_decode"),
    ("decode_cuda_graph_runner.py", "DecodeCudaGraphRunner"),
    ("decode_cuda_graph_runner.py", "DecodeCudaGraphRunner.can_run_graph"),
    ("eagle_draft_cuda_graph_runner.py", "EAGLEDraftCudaGraphRunner"),
    ("eagle_draft_cuda_graph_runner.py", "EAGLEDraftCudaGraphRunner.can_run_graph"),
    ("eagle_info.py", "EagleDraftInput"),
    ("eagle_info.py", "EagleVerifyInput"),
    ("eagle_utils.py", "build_tree_kernel_efficient"),
    ("eagle_utils.py", "eagle_prepare_for_verify"),
    ("eagle_worker_common.py", "prepare_for_draft"),
    ("eagle_worker_common.py", "prepare_for_draft_extend"),
    ("eagle_worker_common.py", "run_eagle_verify"),
    ("eagle_worker_v2.py", "EAGLEWorkerV2.forward_batch_generation"),
    ("eagle_worker_v2.py", "EAGLEWorkerV2.verify"),
    ("eagle_worker_v2.py", "EagleDraftWorker._draft_extend_for_decode"),
    ("eagle_worker_v2.py", "EagleDraftWorker._draft_extend_for_prefill"),
    ("eagle_worker_v2.py", "EagleDraftWorker.draft"),
    ("eagle_worker_v2.py", "EagleDraftWorker.draft_forward"),
    ("forward_batch_info.py", "ForwardMode"),
    ("overlap_utils.py", "FutureMap"),
    ("overlap_utils.py", "FutureMap._resolve_spec_extras"),
    ("overlap_utils.py", "resolve_forward_inputs"),
    ("schedule_batch.py", "Req"),
    ("schedule_batch.py", "ScheduleBatch.copy"),
    ("schedule_batch.py", "ScheduleBatch.merge_batch"),
    ("schedule_batch.py", "ScheduleBatch.prepare_for_decode"),
    ("schedule_policy.py", "PrefillAdder"),
    ("scheduler.py", "Scheduler.event_loop_normal"),
    ("scheduler.py", "Scheduler.flush_cache"),
    ("scheduler.py", "Scheduler.maybe_init_draft_worker"),
    ("scheduler.py", "Scheduler.on_idle"),
    ("scheduler.py", "Scheduler.process_batch_result"),
    ("scheduler.py", "Scheduler.run_batch"),
    ("server_args.py", "ServerArgs"),
    ("spec_info.py", "SpeculativeAlgorithm.create_worker"),
    ("utils.py", "GenerationBatchResult"),
)
