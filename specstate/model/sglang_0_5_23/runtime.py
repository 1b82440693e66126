"""The runtime states of sglang 0.5.23: the draft-extend graph at each state's own width.

Owns nothing that changes; replaces the ``runtime_states`` operation. What changed (0.5.18 on,
read from code, **not run**: the GPU host cannot run 0.5.18+):

- ``speculative/spec_utils.py::resolve_num_tokens_per_req`` reads the spec bag
  (``get_spec()``), not the server arguments, for ``phase="draft_extend"``;
  ``speculative/eagle_worker_v2.py::EAGLEWorkerV2._override_worker_state`` overrides that bag
  while a runtime state captures (and ``speculative/eagle_worker_v2.py::EAGLEWorkerV2.apply_runtime_state``
  publishes the active state's counts into it). So every state's draft-extend runner
  (``speculative/eagle_draft_extend_cuda_graph_runner.py::EAGLEDraftExtendCudaGraphRunner``:
  ``captured_req_width``) is captured at the state's own ``steps + 1`` tokens per request, and
  ``speculative/eagle_draft_extend_cuda_graph_runner.py::EAGLEDraftExtendCudaGraphRunner.can_run_graph``'s
  uniform-width check passes: at steps 0 the draft extend replays a graph (0.5.17: eager, the
  startup width never matched one token per request).
- (0.5.20 on) the runner selects one row per request before ``lm_head``: a ``select_index`` buffer of
  ``max_bs`` rows, never shared between runners (``share_buffers(exclude={"select_index"})``:
  its values depend on the width).

``runtime_states_startup_width`` is the 0.5.17 reading (every state at the startup width), the
flip a user makes with ``--variant upstream-v23-startup-width`` if the GPU shows otherwise.
"""

from __future__ import annotations

import functools
from dataclasses import replace

from specstate.model.config import SpecConfig
from specstate.model.graph_buffers import BufferSpec
from specstate.model.modes import CaptureHiddenMode, ForwardMode, Worker
from specstate.model.runner import GraphRunner
from specstate.model.sglang_0_5_17.adaptive import candidate_steps_of
from specstate.model.sglang_0_5_17.runtime import RuntimeState, adaptive_runtime_states, build_runtime_state, v2_buffers

__all__ = ["draft_extend_runner", "runtime_states_v23", "runtime_states_own_width", "runtime_states_startup_width"]

#: the draft-extend runner's class in 0.5.23; a replay's copies fail in its ``execute``
_EXTEND = "speculative/eagle_draft_extend_cuda_graph_runner.py::EAGLEDraftExtendCudaGraphRunner"


def draft_extend_runner(config: SpecConfig, steps: int, width: int) -> GraphRunner:
    """``EAGLEDraftExtendCudaGraphRunner`` captured at ``width`` tokens per request."""
    bs, w = config.cuda_graph_bs, width
    rows = (("input_ids", w, (), False), ("seq_lens", 1, (), True), ("extend_seq_lens", 1, (), True),
            ("out_cache_loc", w, (), True), ("positions", w, (), True),
            ("hidden_states", w, (config.extend_hidden_size,), False), ("num_correct_drafts", 1, (), True),
            ("num_accept_tokens", 1, (), True), ("req_pool_indices", 1, (), True))
    select = BufferSpec("select_index", f"v23.select_index@{steps}#{max(bs)}", 1, max(bs), (), False)
    return GraphRunner(f"draft_extend@{steps}", Worker.DRAFT, ForwardMode.DRAFT_EXTEND_V2, w, CaptureHiddenMode.LAST,
                       bs, _EXTEND,
                       v2_buffers(rows, max(bs)) + (select,), steps=steps, fails_in=f"{_EXTEND}.execute")


@functools.lru_cache(maxsize=256)
def runtime_states_v23(config: SpecConfig) -> dict[int, RuntimeState]:
    """``AdaptiveController.init_states`` with each state's draft extend at its own width."""
    steps = set(candidate_steps_of(config)) | {config.speculative_num_steps}  # static: the launch's own
    return {s: replace(build_runtime_state(config, s), draft_extend=draft_extend_runner(config, s, s + 1))
            for s in sorted(steps)}


def runtime_states_own_width(ops: object, config: SpecConfig) -> dict[int, RuntimeState]:
    """The operation ``runtime_states`` of the 0.5.23 family (the reading of 0.5.23's code)."""
    return runtime_states_v23(config)


def runtime_states_startup_width(ops: object, config: SpecConfig) -> dict[int, RuntimeState]:
    """The 0.5.17 reading: every draft extend at the startup ``speculative_num_draft_tokens``."""
    return adaptive_runtime_states(ops, config)
