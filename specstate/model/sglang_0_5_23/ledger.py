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
  (each is cited again in ``start.py`` or the docs: ``tests/test_v23_start.py`` checks);
- ``REVIEWED_SCHEDULER``: the same for scheduler, worker and class entries read against the 0.5.17 -> 0.5.23
  diff (cited again in docs/model-0.5.23.md, "Re-read in 0.5.23 and unchanged for the model";
  ``tests/test_v23_model.py`` checks).

``(file, symbol)`` pairs, written apart so they are not citations of 0.5.23 themselves.
"""

from __future__ import annotations

__all__ = ["GONE", "UNREVIEWED", "REVIEWED_START", "REVIEWED_SCHEDULER"]

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

#: the 0.5.17 scheduler / worker citations that changed by 0.5.23, read in the 0.5.17 -> 0.5.23 diff
#: (AST, docstrings stripped) and found to change nothing the model holds: (file, symbol, release read, verdict)
REVIEWED_SCHEDULER: tuple[tuple[str, str, str, str], ...] = (
    ("scheduler.py", "Scheduler.process_pending_chunked_abort", "0.5.23",
     "a marked request already out of chunked prefill and unfinished is aborted again where it is (unreachable here: the mark is processed at the next scheduling step, before chunked_req can change); checkpoint=False as is_insert=False"),
    ("allocation.py", "alloc_for_spec_decode", "0.5.23",
     "a HiSparse branch; kv_allocated_len = max(kv_allocated_len, next length) as before"),
    ("decode_cuda_graph_runner.py", "DecodeCudaGraphRunner.can_run_graph", "0.5.23",
     "DP and attention-variant keys; with padding and no DP still bs <= max_bs"),
    ("eagle_draft_cuda_graph_runner.py", "EAGLEDraftCudaGraphRunner.can_run_graph", "0.5.23",
     "a sampling-variant key without padding, DP flags; with padding still bs <= max_bs"),
    ("eagle_worker_v2.py", "EAGLEWorkerV2.verify", "0.5.23",
     "passes pipeline-parallel proxy tensors through; the same run_eagle_verify"),
    ("forward_batch_info.py", "ForwardMode", "0.5.23",
     "one predicate more (is_dllm_extend): no mode the model runs"),
    ("overlap_utils.py", "resolve_forward_inputs", "0.5.23",
     "only the mixed-chunk branch changed (mixed spec tails): the model runs no mixed chunk"),
    ("schedule_batch.py", "ScheduleBatch.copy", "0.5.23",
     "copies more fields (req_pool_indices_cpu, DP, mamba, idle gap): the same reqs and spec_info"),
    ("schedule_batch.py", "ScheduleBatch.merge_batch", "0.5.23",
     "beam tails stripped first, more mamba fields reset: the same merge"),
    ("schedule_batch.py", "ScheduleBatch.prepare_for_decode", "0.5.23",
     "the speculative branch returns into spec_prepare_for_decode as before; only the non-speculative branch moved kv_committed_len's increment"),
    ("scheduler.py", "Scheduler.event_loop_normal", "0.5.23",
     "recv + process as ingest_requests, pause bookkeeping: the same order"),
    ("scheduler.py", "Scheduler.flush_cache", "0.5.23",
     "idle check ignores waiting when paused; aux cache reset: not modelled"),
    ("scheduler.py", "Scheduler.on_idle", "0.5.23",
     "metrics and load publishing, a byte-accounting check (none for static pools): the same leak checks, then the ratio reset"),
    ("scheduler.py", "Scheduler.process_batch_result", "0.5.23",
     "trace and load publishing, the tree's flush_pending_backups (HiCache only): the same dispatch"),
    ("scheduler.py", "Scheduler.abort_request", "0.5.23",
     "a waiting request is still popped (now with hicache / beam / disaggregation release), a chunked one still marked, an in-flight one still gets to_finish = FINISH_ABORT (a 503 with abort_message); the in-flight set is still running_batch and last_batch on one PP rank without continuous polling"),
    ("overlap_utils.py", "FutureMap._resolve_spec_extras", "0.5.23",
     "an NGRAM branch; record_stream only off CPU; draft_probs copied whenever the map holds a buffer, which it allocates only for payloads that carry draft probs (none under greedy EAGLE)"),
    ("scheduler.py", "Scheduler.maybe_init_draft_worker", "0.5.23",
     "the draft worker gets the server args themselves (the draft's copy is gone; the spec bag is published instead, the change runtime_states models); a PP rank without a draft worker: not modelled"),
    ("spec_info.py", "SpeculativeAlgorithm.create_worker", "0.5.23",
     "an out-of-tree platform worker class and UNO first; EAGLE with the overlap scheduler on CUDA still gets EAGLEWorkerV2"),
    ("scheduler.py", "Scheduler.run_batch", "0.5.23",
     "the overlap path keeps its order (resolve_seq_lens_cpu, resolve_forward_inputs, forward, relay the payload, copy to CPU); pipeline-parallel verify rounds and stage metrics besides"),
    ("eagle_info.py", "EagleDraftInput", "0.5.23",
     "sliding-window KV fields, pad_batch for draft probs, the cuda_graph_compatible flag merged (read under DP attention only): the same rows merged and filtered"),
    ("eagle_info.py", "EagleVerifyInput", "0.5.23",
     "prepared out_cache_loc / mrope / KVLocPlan fields and attention arguments through the KV index translator (0.5.22's KVLocPlan, not modelled): the same rows"),
    ("utils.py", "GenerationBatchResult", "0.5.23",
     "more fields (output stride, verify chain, KVLocPlan, auxiliary host output); get_num_generated_tokens is still accepted drafts plus one per row"),
    ("eagle_worker_v2.py", "EAGLEWorkerV2.forward_batch_generation", "0.5.23",
     "the prefill path moved into _forward_prefill_batch with the same order (target forward capturing hidden states, new_seq_lens = seq_lens, on_publish, draft extend); the decode path the same (trivial verify at steps 0, else draft; verify; publish; draft extend), with DP prefill coordination and pipeline-parallel rounds besides"),
    ("eagle_worker_v2.py", "EagleDraftWorker.draft", "0.5.23",
     "KVLocPlan (0.5.22, not modelled) attached to the verify input, graph draft probs cloned, a topology return for PP: the same verify input"),
    ("eagle_worker_v2.py", "EagleDraftWorker._draft_extend_for_decode", "0.5.23",
     "the graph replay selects the accepted rows itself (execute(forward_batch, select_index): the select_index buffer the family models in runtime_states); eager it selects after as before; inputs prepared by a kernel on CUDA: one row per request either way"),
    ("eagle_worker_v2.py", "EagleDraftWorker._draft_extend_for_prefill", "0.5.23",
     "multimodal embeddings rotated with the ids, KVLocPlan, seeded sampling: one token per request as before"),
    ("eagle_worker_common.py", "run_eagle_verify", "0.5.23",
     "on CUDA the commit outputs come from one kernel (prepare_verify_commit_outputs in sglang/kernels/ops/speculative/eagle (outside srt): new_seq_lens = seq_lens + accept_lens, the bonus token the last accepted one, as fill_bonus_tokens gave), the eager path unchanged; watermark, UNO and PP options besides"),
    ("eagle_worker_common.py", "prepare_for_draft_extend", "0.5.23",
     "on CUDA the lengths come from one kernel (prepare_draft_extend_lengths, the same kernels file: prefix max(seq_lens - front, 0), extend width + front, seq_lens + width after), the same values as the eager path; KVLocPlan passed on"),
    ("eagle_utils.py", "build_tree_kernel_efficient", "0.5.23",
     "the per-platform kernel choice folded into build_tree_kernel_efficient_func: the same outputs"),
    ("eagle_utils.py", "eagle_prepare_for_verify", "0.5.23",
     "the verify's out_cache_loc is the draft's planned write window when there is one (0.5.22's KVLocPlan: the same num_draft_tokens slots from seq_lens), else assigned as before; HiSparse and mrope positions besides"),
    ("eagle_worker_common.py", "prepare_for_draft", "0.5.23",
     "with topk 1 on CUDA the draft's out_cache_loc spans the num_draft_tokens window it shares with the verify (KVLocPlan), but it writes num_steps columns (write_cols), as before; positions prepared by the slot kernel"),
    ("eagle_worker_v2.py", "EagleDraftWorker.draft_forward", "0.5.23",
     "the same loop (steps - 1 draft forwards, step i writing out_cache_loc[i]); an idle batch returns early, draft probs only for non-greedy rejection sampling, the topk-1 chain on HIP too, DSA index sharing as a context, mrope positions advanced"),
    ("overlap_utils.py", "FutureMap", "0.5.23",
     "each forward buffer allocated at the first payload that carries its field (0.5.19's _maybe_init_forward_bufs, under Not modelled), relay buffers adopted from a shared pool, NGRAM buffers, staged spec inputs, mixed-chunk tails: the model holds no FutureMap slots, and the sequence lengths relayed are FutureMap.publish / resolve_seq_lens_cpu's, re-read above"),
    ("decode_cuda_graph_runner.py", "DecodeCudaGraphRunner", "0.5.23",
     "reads the spec / exec / parallel globals for the server args; the target-verify runner still captures get_batch_sizes_to_capture's list at captured_req_width tokens per request with max_num_token = max_bs * width (capture_num_tokens, the ragged-verify token buckets, is set only for DSpark's compact ragged verify, None for EAGLE) and the same pooled input buffers; the logits rows through _next_token_logits_buffer_capacity_rows (the graph_shared_output override); metadata-glue graphs, early verify metadata (unshared staged slots), prefilled-input skips and attention graph variants are DSpark / DSV4.1 / DLLM only, LoRA no-LoRA graphs besides"),
    ("eagle_draft_cuda_graph_runner.py", "EAGLEDraftCudaGraphRunner", "0.5.23",
     "reads the spec bag (get_spec()) for topk and resolve_num_tokens_per_req(phase='draft_decode') instead of the server args, num_steps still passed per runtime state; the same buffers (seq_lens, out_cache_loc, positions, topk_p, topk_index, hidden_states, req_pool_indices) pooled as before, plus top_ks and a sampling_seed (deterministic rejection sampling only) and a greedy sampling-variant graph key under rejection sampling: none under greedy EAGLE"),
    ("schedule_batch.py", "Req", "0.5.23",
     "kv_committed_len / prefix_indices moved into Req.kv (ReqKvInfo, cited) and prefix_len, extend_range into extend_end / extend_len, _refresh_fill_ids made public: the same lengths; effective_kv_committed_len became owned_kv_len (0.5.21, the release_kv_cache override), next_output_finishes_by_length (0.5.22, the update_running_batch override) and _cap_finished_len_at_max_new_tokens (0.5.18, the update_finish_state override) are modelled; set_finish_with_abort takes a status code; multimodal, beam, HiCache, mamba-backup and reasoning helpers besides"),
    ("schedule_policy.py", "PrefillAdder", "0.5.23",
     "budgets through memory_budget (prefill_budget.py PrefillBudget for a plain pool: remaining_total / remaining_current as 0.5.17's rem_total_tokens / cur_rem_tokens, reserve adding ceil_paged(extend) + page_size + max_new_tokens, available_chunk_tokens min(chunk, rem_total) or the chunk when <= 0, fit_chunk the chunk); add_chunked_req's new cuts are 0 or off here (chunked_req_limit only under shortest-prefill-first, no KV sharding, no mamba grid, request_slot_reserve 0, replay_len 0 without encoder SWA replay, exact_chunk_fill equal at page size 1); admission split into _select / _commit (re-cited above); SWA helpers moved into SWAPrefillBudget, a tile budget (AMD) and preempt_to_schedule without server_args besides"),
    ("server_args.py", "ServerArgs", "0.5.23",
     "now a msgspec struct assembled from the arg_groups/fields namespaces (its derivations in the arg_groups hooks, the speculative one re-read under the engine start); every field the model reads keeps its type and default (speculative_num_steps / eagle_topk / num_draft_tokens / algorithm / adaptive_config None, max_running_requests, chunked_prefill_size, page_size, max_total_tokens, context_length and cuda_graph_max_bs_decode / cuda_graph_bs_decode None, enable_mixed_chunk, disable_overlap_schedule, disable_radix_cache False, max_prefill_tokens 16384, schedule_conservativeness 1.0); the release's own defaults are specstate/server_args's"),
)

#: the kept citations still open (0.5.17 -> 0.5.23; 38 before the scheduler review above, the last
#: 5 the graph-runner classes, Req, PrefillAdder and ServerArgs): none
UNREVIEWED: tuple[tuple[str, str], ...] = ()
