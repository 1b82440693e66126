"""Adaptive runtime states: one set of CUDA-graph runners per candidate step count.

Owns nothing that changes: ``runtime_states(config)`` is a pure function of the config (what
``EAGLEWorkerV2.init_cuda_graphs`` captured at start). Which state is active is
``OverlapState.active_steps`` (``state.py``).

Mirrors sglang 0.5.17:

- ``adaptive_runtime_state.py::SpecRuntimeState`` (``RuntimeState``): the step count, the draft
  token count (steps + 1, topk 1), and per stage its graph runner: draft decode
  (``EAGLEDraftCudaGraphRunner``, built only for steps > 1: ``EagleDraftWorker._capture_cuda_graphs``),
  target verify (``DecodeCudaGraphRunner`` captured for TARGET_VERIFY at ``steps + 1`` tokens per
  request: ``EAGLEWorkerV2.build_adaptive_runtime_state``), draft extend
  (``EAGLEDraftExtendCudaGraphRunner``);
- ``adaptive_runtime_state.py::AdaptiveController.init_states``: the initial state (the server's
  ``--speculative-num-steps``) is registered from the worker's own runners, every other candidate
  is built once;
- capture lists: every runner calls ``runner/base_cuda_graph_runner.py::get_batch_sizes_to_capture``,
  which reads the startup ``server_args.cuda_graph_config`` (the capture-time override of
  ``cuda_graph_bs_decode`` in ``_override_worker_state`` is not read there), so every state
  captures the full list (``SpecConfig.cuda_graph_bs``);
- widths: the target verify width is the state's draft token count
  (``DecodeCudaGraphRunner.__init__``: ``decode_num_tokens_per_req(num_draft_tokens=...)``); the
  draft-extend width is the *startup* ``speculative_num_draft_tokens``
  (``spec_utils.py::resolve_num_tokens_per_req`` reads ``server_args``), so a state with another
  draft token count never replays its draft-extend graph (``can_run_graph``'s uniform-width check).

Static buffers: graph input buffers are pooled process-wide by name and size
(``input_buffers.py::share_input_buffer``): runners whose buffer of one name has one size share it
(``BufferSpec.key`` = ``v2.<name>#<rows>``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from specstate.model.values import cached_hash

from specstate.model.config import SpecConfig
from specstate.model.graph_buffers import BufferSpec
from specstate.model.modes import CaptureHiddenMode, ForwardMode, Worker
from specstate.model.runner import GraphRunner, max_context_len
from specstate.model.sglang_0_5_17.adaptive import candidate_steps_of

__all__ = ["RuntimeState", "runtime_states", "adaptive_runtime_states", "build_runtime_state", "v2_buffers"]

#: the runners' classes in 0.5.17; a replay's copies fail in their ``execute`` (``GraphRunner.fails_in``)
_DECODE = "model_executor/runner/decode_cuda_graph_runner.py::DecodeCudaGraphRunner"
_DRAFT = "speculative/eagle_draft_cuda_graph_runner.py::EAGLEDraftCudaGraphRunner"
_EXTEND = "speculative/eagle_draft_extend_cuda_graph_runner.py::EAGLEDraftExtendCudaGraphRunner"


@cached_hash
@dataclass(frozen=True)
class RuntimeState:
    """``SpecRuntimeState`` (the runners; attention backends are not modelled)."""

    steps: int  #: ``speculative_num_steps``
    draft_tokens: int  #: ``speculative_num_draft_tokens`` (steps + 1, topk 1)
    draft_decode: GraphRunner | None  #: ``cuda_graph_runner`` (None for steps <= 1)
    target_verify: GraphRunner | None  #: ``target_graph_runner``
    draft_extend: GraphRunner | None  #: ``cuda_graph_runner_for_draft_extend``


def v2_buffers(names: tuple[tuple[str, int, tuple[int, ...], bool], ...], max_bs: int) -> tuple[BufferSpec, ...]:
    """Buffers ``(name, rows per request, trailing dims, padding reset)`` pooled by name and size."""
    return tuple(BufferSpec(n, f"v2.{n}#{max_bs * p}x{t}", p, max_bs * p, t, r) for n, p, t, r in names)


def _target(config: SpecConfig, n: int) -> GraphRunner:
    bs = config.cuda_graph_bs
    bufs = v2_buffers((("input_ids", n, (), False), ("req_pool_indices", 1, (), True), ("seq_lens", 1, (), True),
                       ("out_cache_loc", n, (), True), ("positions", n, (), False)), max(bs))
    return GraphRunner(f"target_verify@{n - 1}", Worker.TARGET, ForwardMode.TARGET_VERIFY, n, CaptureHiddenMode.FULL,
                       bs, _DECODE, bufs, max(bs) * n * max_context_len(config),
                       fails_in=f"{_DECODE}.execute")


def _draft_decode(config: SpecConfig, steps: int) -> GraphRunner:
    bs, k = config.cuda_graph_bs, config.speculative_eagle_topk
    rows = (("seq_lens", 1, (), True), ("out_cache_loc", k * steps, (), True), ("positions", k, (), True),
            ("topk_p", 1, (k,), True), ("topk_index", 1, (k,), True),
            ("hidden_states", 1, (config.draft_hidden_size,), True), ("req_pool_indices", 1, (), True))
    return GraphRunner(f"draft_decode@{steps}", Worker.DRAFT, ForwardMode.DECODE, k, CaptureHiddenMode.LAST, bs,
                       _DRAFT,
                       v2_buffers(rows, max(bs)), steps=steps, fails_in=f"{_DRAFT}.execute")


def _draft_extend(config: SpecConfig, steps: int) -> GraphRunner:
    bs, w = config.cuda_graph_bs, config.speculative_num_draft_tokens
    rows = (("input_ids", w, (), False), ("seq_lens", 1, (), True), ("extend_seq_lens", 1, (), True),
            ("out_cache_loc", w, (), True), ("positions", w, (), True),
            ("hidden_states", w, (config.extend_hidden_size,), False), ("num_correct_drafts", 1, (), True),
            ("num_accept_tokens", 1, (), True), ("req_pool_indices", 1, (), True))
    return GraphRunner(f"draft_extend@{steps}", Worker.DRAFT, ForwardMode.DRAFT_EXTEND_V2, w, CaptureHiddenMode.LAST,
                       bs, _EXTEND,
                       v2_buffers(rows, max(bs)), steps=steps, fails_in=f"{_EXTEND}.execute")


def build_runtime_state(config: SpecConfig, steps: int) -> RuntimeState:
    """``EAGLEWorkerV2.build_adaptive_runtime_state`` (topk 1: ``steps + 1`` draft tokens)."""
    n = steps + 1
    return RuntimeState(steps, n, _draft_decode(config, steps) if steps > 1 else None, _target(config, n),
                        _draft_extend(config, steps))


@functools.lru_cache(maxsize=256)
def runtime_states(config: SpecConfig) -> dict[int, RuntimeState]:
    """``AdaptiveController.init_states``: the initial state plus one per other candidate; a static
    launch (no controller) has the worker's own runners only, its launch step count's."""
    steps = set(candidate_steps_of(config)) | {config.speculative_num_steps}
    return {s: build_runtime_state(config, s) for s in sorted(steps)}


def adaptive_runtime_states(ops: object, config: SpecConfig) -> dict[int, RuntimeState]:
    """The operation ``runtime_states``: ``runtime_states(config)``."""
    return runtime_states(config)
