"""The 0.5.12 family's citations as the 0.5.9 family inherits them (``specstate/citations.py``).

The 0.5.9 family is the 0.5.12 family (the shared core) with 0.5.9's graph copy. A 0.5.12 citation
it cites again (same file name and symbol, in this folder or ``docs/model-0.5.9.md``) was re-read in
0.5.9's source. The rest are inherited; ``tests/test_release_ranges.py`` fails on any whose 0.5.9
source differs from 0.5.12's unless it is listed here:

- ``GONE``: 0.5.12 symbols that 0.5.9 does not have and that the family's override replaces
  (0.5.12's ``DecodeInputBuffers`` and its grouped copy; 0.5.9's ``GraphInputBuffers``, ``replay.py``);
- ``RENAMED_PAGED``: 0.5.12 paged-KV symbols that 0.5.9 does not have, each with the 0.5.9 symbol
  that does the same (issue 39: cited in docs/model-0.5.9.md, "Paged KV"); in ``GONE`` too;
- ``REVIEWED_PAGED``: the paged-KV entries read in the 0.5.12 -> 0.5.9 diff and found to change
  nothing the model holds, with the release read and the verdict (each cited again in
  docs/model-0.5.9.md, so the release-range check counts it reviewed; ``tests/test_paged_kv.py``
  checks). Those 0.5.9 does differently (``PrefillAdder``'s page overhead, the arrival clamp) are
  the family's overrides (``admission.py``), which cite them;
- ``UNREVIEWED``: 0.5.12 symbols whose AST (docstrings stripped) differs in 0.5.9 (``missing``: not
  there under that name) and that nobody has read for a change reaching the modelled state. Each is
  an open question, not a verdict. Written when the family was made by listing what
  ``check_family`` found (issue 35): 107 of the 0.5.12 family's 123 citations differ in 0.5.9 (4 gone, 1 re-read:
  ``ForwardBatch.init_new``, cited in docs/model-0.5.9.md; 102 here), and 3 the multi-rank model added
  since (``specstate/multirank``: ``Scheduler``, ``EagleVerifyInput.create_idle_input``,
  ``ModelRunnerKVCacheMixin._resolve_max_num_reqs``; then 5 for its routing, issue 40), which
  says how far "0.5.9 = 0.5.12 but the graph copy" is from reviewed. What is measured instead is
  the seed's route: every-rank.md §0-1 ran upstream's own scheduler classes and worker-side
  functions of both releases on CPU and got the same batch.

``(file, symbol)`` pairs, written apart so they are not citations of 0.5.9 themselves.
"""

from __future__ import annotations

__all__ = ["GONE", "RENAMED_PAGED", "REVIEWED_PAGED", "UNREVIEWED"]

#: (file, 0.5.12 symbol, 0.5.9 symbol in the same file, verdict): read in sglang 0.5.9's source
RENAMED_PAGED: tuple[tuple[str, str, str, str], ...] = (
    ("radix_cache.py", "RadixKey.page_aligned", "RadixCache._page_align_keys",
     "the key cut to len // page_size * page_size (match_prefix cuts it inline)"),
    ("radix_cache.py", "RadixKey.child_key", "get_child_key",
     "the first page as a tuple (EAGLE: of bigram tuples), namespaced by extra_key"),
    ("radix_cache.py", "RadixKey.match", "_key_match_paged",
     "whole pages compared until one differs: the match rounded down to pages"),
    ("model_runner_kv_cache_mixin.py", "ModelRunnerKVCacheMixin._init_pools", "ModelRunnerKVCacheMixin.init_memory_pool",
     "ReqToTokenPool rows of context_len + 4 + speculative_num_draft_tokens; the pool rounded down to whole pages"),
)

GONE: tuple[tuple[str, str], ...] = (
    ("cuda_graph_runner.py", "DecodeInputBuffers"),
    ("cuda_graph_runner.py", "DecodeInputBuffers.populate_from_forward_batch"),
    ("cuda_graph_runner.py", "_grouped_foreach_copy_"),
    ("model_executor/cuda_graph_runner.py", "DecodeInputBuffers"),
    *((f, s) for f, s, _, _ in RENAMED_PAGED),
)

#: the paged-KV citations of the shared core that differ in 0.5.9, read in the 0.5.12 -> 0.5.9 diff
#: (AST, docstrings stripped; issue 39): (file, symbol, release read, verdict)
REVIEWED_PAGED: tuple[tuple[str, str, str, str], ...] = (
    ("allocator.py", "PagedTokenToKVPoolAllocator", "0.5.9",
     "alloc_extend_kernel's full pages in one constexpr-sized block (the largest extend seen), "
     "alloc_extend_naive past TRITON_MAX_TENSOR_NUMEL: the same pages and slots"),
    ("allocator.py", "PagedTokenToKVPoolAllocator.alloc_extend", "0.5.9",
     "no num_new_pages argument: get_num_new_pages inside, as 0.5.12 does when none is passed"),
    ("eagle_worker.py", "get_last_loc_large_page_size_top_k_1", "0.5.9",
     "torch.compile disabled on NPU only (0.5.12 also MUSA): the same body"),
    ("spec_utils.py", "assign_draft_cache_locs", "0.5.9", "one condition not parenthesised: the same kernel"),
    ("spec_utils.py", "get_src_tgt_cache_loc", "0.5.9", "accept_length for num_correct_drafts: a rename"),
    ("eagle_info.py", "EagleVerifyInput.prepare_for_verify", "0.5.9",
     "keeps last_loc on the input, no mamba fields: the same paged alloc_paged_token_slots_extend"),
    ("eagle_info.py", "EagleVerifyInput.verify", "0.5.9",
     "renames, grammar before check_finished, no TP broadcast: the same whole-page frees "
     "(align_evict_mask_to_page_size, get_src_tgt_cache_loc)"),
    ("eagle_worker.py", "EAGLEWorker._draft_preprocess_decode", "0.5.9",
     "penalties read verified_id for bonus_tokens: the same paged draft allocation"),
    ("schedule_batch.py", "ScheduleBatch.new_tokens_required_next_decode", "0.5.9",
     "v2's over-allocation inline (num_tokens * (1 + is_spec_v2)): for the v1 worker the same pages"),
    ("server_args.py", "ServerArgs._handle_page_size", "0.5.9", "default 1 (0.5.12: 64 on MUSA only)"),
    ("mem_cache/common.py", "release_kv_cache", "0.5.9",
     "no streaming-session skip_radix_cache_insert, no strip_thinking_cache (both off): the same frees"),
    ("radix_cache.py", "RadixCache.match_prefix", "0.5.9", "bigram keys as tuples, cut to whole pages inline"),
    ("radix_cache.py", "RadixCache.insert", "0.5.9", "callers cut the key to pages (_page_align_keys)"),
    ("radix_cache.py", "RadixCache.cache_finished_req", "0.5.9",
     "bigram tuples cut by _page_align_keys, the unaligned tail freed: the same lengths"),
    ("radix_cache.py", "RadixCache.cache_unfinished_req", "0.5.9",
     "the same, cache_protected_len = the page-aligned match"),
    ("radix_cache.py", "RadixCache._split_node", "0.5.9", "no hit count (HiCache): the same page-aligned split"),
    ("radix_cache.py", "RadixCache.inc_lock_ref", "0.5.9", "returns the delta bare"),
    ("radix_cache.py", "RadixCache.dec_lock_ref", "0.5.9", "returns the delta bare"),
    ("schedule_batch.py", "Req.init_next_round_input", "0.5.9",
     "no streaming sessions, embedding overrides or forced miss; cache_protected_len = len(prefix_indices), "
     "as 0.5.12's RadixCache (no cache_protected_len in its MatchResult)"),
)

#: (file, symbol): differs in 0.5.9 (a trailing comment: ``missing`` where 0.5.9 has no such symbol)
UNREVIEWED: tuple[tuple[str, str], ...] = (
    ("adaptive_runtime_state.py", "SpecRuntimeState"),  # missing
    ("allocator.py", "TokenToKVPoolAllocator"),
    ("chunk_cache.py", "ChunkCache"),
    ("cuda_graph_runner.py", "CudaGraphRunner"),
    ("cuda_graph_runner.py", "CudaGraphRunner.can_run"),
    ("cuda_graph_runner.py", "get_batch_sizes_to_capture"),
    ("eagle_draft_cuda_graph_runner.py", "EAGLEDraftCudaGraphRunner"),
    ("eagle_draft_cuda_graph_runner.py", "EAGLEDraftCudaGraphRunner.__init__"),
    ("eagle_draft_cuda_graph_runner.py", "EAGLEDraftCudaGraphRunner.replay"),
    ("eagle_draft_extend_cuda_graph_runner.py", "EAGLEDraftExtendCudaGraphRunner"),
    ("eagle_draft_extend_cuda_graph_runner.py", "EAGLEDraftExtendCudaGraphRunner.replay"),
    ("eagle_info.py", "EagleDraftExtendInput"),  # missing
    ("eagle_info.py", "EagleDraftExtendInput.prepare_extend_after_decode"),  # missing
    ("eagle_info.py", "EagleDraftInput"),
    ("eagle_info.py", "EagleDraftInput.create_idle_input"),
    ("eagle_info.py", "EagleDraftInput.filter_batch"),
    ("eagle_info.py", "EagleDraftInput.merge_batch"),
    ("eagle_info.py", "EagleDraftInput.prepare_for_extend"),
    ("eagle_info.py", "EagleVerifyInput"),
    ("eagle_info.py", "EagleVerifyInput.create_idle_input"),
    ("eagle_worker.py", "EAGLEWorker._draft_preprocess_idle"),
    ("eagle_worker.py", "EAGLEWorker.draft"),
    ("eagle_worker.py", "EAGLEWorker.draft_forward"),
    ("eagle_worker.py", "EAGLEWorker.forward_batch_generation"),
    ("eagle_worker.py", "EAGLEWorker.forward_draft_extend"),
    ("eagle_worker.py", "EAGLEWorker.forward_draft_extend_after_decode"),
    ("eagle_worker.py", "EAGLEWorker.forward_target_extend"),
    ("eagle_worker.py", "EAGLEWorker.init_cuda_graphs"),
    ("eagle_worker.py", "EAGLEWorker.verify"),
    ("forward_batch_info.py", "ForwardBatch"),
    ("forward_batch_info.py", "ForwardMode"),
    ("layers/attention/triton_backend.py", "TritonAttnBackend.init_forward_metadata"),
    ("mem_cache/allocator.py", "TokenToKVPoolAllocator"),
    ("mem_cache/chunk_cache.py", "ChunkCache"),
    ("model_executor/cuda_graph_runner.py", "CudaGraphRunner"),
    ("model_executor/model_runner.py", "ModelRunner._forward_raw"),
    ("model_runner.py", "ModelRunner._forward_raw"),
    ("model_runner.py", "ModelRunner.forward"),
    ("model_runner_kv_cache_mixin.py", "ModelRunnerKVCacheMixin._resolve_max_num_reqs"),  # missing
    ("radix_cache.py", "RadixCache"),
    ("radix_cache.py", "RadixKey.maybe_to_bigram_view"),  # missing
    ("schedule_batch.py", "Req"),
    ("schedule_batch.py", "Req.reset_for_retract"),
    ("schedule_batch.py", "ScheduleBatch"),
    ("schedule_batch.py", "ScheduleBatch.filter_batch"),
    ("schedule_batch.py", "ScheduleBatch.get_model_worker_batch"),
    ("schedule_batch.py", "ScheduleBatch.merge_batch"),
    ("schedule_batch.py", "ScheduleBatch.prepare_for_decode"),
    ("schedule_batch.py", "ScheduleBatch.prepare_for_extend"),
    ("schedule_batch.py", "ScheduleBatch.release_req"),
    ("schedule_policy.py", "PrefillAdder"),
    ("schedule_policy.py", "PrefillAdder.add_chunked_req"),
    ("schedule_policy.py", "PrefillAdder.budget_state"),
    ("scheduler.py", "Scheduler"),
    ("scheduler.py", "Scheduler.get_new_batch_prefill"),
    ("scheduler.py", "Scheduler.get_next_batch_to_run"),
    ("scheduler.py", "Scheduler.handle_generate_request"),
    ("scheduler.py", "Scheduler.init_schedule_policy"),
    ("scheduler.py", "Scheduler.stash_chunked_request"),
    ("scheduler.py", "Scheduler.update_running_batch"),
    ("scheduler_output_processor_mixin.py", "SchedulerOutputProcessorMixin.process_batch_result_decode"),
    ("scheduler_output_processor_mixin.py", "SchedulerOutputProcessorMixin.process_batch_result_prefill"),
    ("scheduler_runtime_checker_mixin.py", "SchedulerRuntimeCheckerMixin._check_all_pools"),  # missing
    ("scheduler_runtime_checker_mixin.py", "SchedulerRuntimeCheckerMixin.on_idle"),  # missing
    ("server_args.py", "ServerArgs"),
    ("server_args.py", "ServerArgs._generate_cuda_graph_batch_sizes"),
    ("server_args.py", "ServerArgs._handle_speculative_decoding"),
    ("server_args.py", "ServerArgs.check_server_args"),
    ("sglang/srt/managers/schedule_batch.py", "Req"),
    ("sglang/srt/managers/schedule_batch.py", "ScheduleBatch"),
    ("sglang/srt/managers/schedule_policy.py", "PrefillAdder"),
    ("sglang/srt/mem_cache/allocator.py", "TokenToKVPoolAllocator"),
    ("sglang/srt/mem_cache/radix_cache.py", "RadixCache"),
    ("sglang/srt/model_executor/forward_batch_info.py", "ForwardMode"),
    ("sglang/srt/server_args.py", "ServerArgs"),
    ("sglang/srt/server_args.py", "ServerArgs.add_cli_args"),
    ("sglang/srt/speculative/eagle_worker.py", "EAGLEWorker"),
    ("speculative/eagle_draft_cuda_graph_runner.py", "EAGLEDraftCudaGraphRunner"),
    ("speculative/eagle_draft_extend_cuda_graph_runner.py", "EAGLEDraftExtendCudaGraphRunner"),
    ("tokenizer_manager.py", "TokenizerManager._validate_one_request"),
    ("triton_backend.py", "TritonAttnBackend.init_cuda_graph_state"),
    ("triton_backend.py", "TritonAttnBackend.init_forward_metadata"),
    ("triton_backend.py", "TritonAttnBackend.init_forward_metadata_replay_cuda_graph"),
    ("utils/common.py", "human_readable_int"),  # missing
    # issue 39: what sglang derives from the model and GPU (server_args/_settings.py, _hardware.py),
    # 0.5.12's rules applied to the 0.5.9 family's launches (it reads 0.5.12's flags)
    ("configs/model_config.py", "ModelConfig._derive_context_length"),
    ("configs/model_config.py", "is_deepseek_nsa"),
    ("server_args.py", "ServerArgs._get_default_attn_backend"),  # missing
    ("server_args.py", "ServerArgs._handle_attention_backend_compatibility"),
    ("server_args.py", "ServerArgs._handle_gpu_memory_settings"),
    ("server_args.py", "ServerArgs._handle_model_specific_adjustments"),
    ("server_args.py", "auto_choose_speculative_params"),
    ("utils/common.py", "get_nvgpu_memory_capacity"),
    # the multi-rank model's routing (issue 40, specstate/multirank/_routing.py): the DP controller's
    # load report and the request field, differing in 0.5.9, not reviewed
    ("io_struct.py", "GenerateReqInput"),
    ("io_struct.py", "GenerateReqInput.normalize_batch_and_arguments"),
    ("scheduler_output_processor_mixin.py", "SchedulerOutputProcessorMixin.stream_output_generation"),
    ("server_args.py", "ServerArgs._handle_load_balance_method"),
    ("tokenizer_manager.py", "TokenizerManager._handle_batch_output"),
)
