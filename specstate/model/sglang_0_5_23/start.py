"""The engine start of sglang 0.5.23: the shared logits buffer sized for every candidate.

Owns the 0.5.23 replacements of four start operations of ``specstate/model/sglang_0_5_17/start.py`` (its
module doc gives the order of a start, which 0.5.23 keeps); the outcome is the same
``EngineStart``. What changed on the way to 0.5.23, read in 0.5.23's source:

- ``graph_shared_output`` (0.5.19): ``model_executor/graph_shared_output.py::GraphSharedOutput.create_for_model_runner``
  sizes the buffer by ``model_executor/model_runner.py::ModelRunner.max_shared_logits_buffer_rows``
  (0.5.21; it returns ``model_executor/model_runner.py::ModelRunner.max_decode_logits_rows``), which
  since 0.5.19 takes the largest ``max(capture_bs) * tokens per request`` over the draft-token
  counts ``[runtime_context.py::max_speculative_num_draft_tokens] + [steps + 1 for every
  candidate]`` (0.5.17: the startup count only). ``max_speculative_num_draft_tokens`` under
  adaptive speculation is ``max(candidates) + 1``
  (``speculative/spec_info.py::SpeculativeAlgorithm.resolve_max_speculative_num_draft_tokens``).
  So no runtime state's capture outgrows the buffer: the 0.5.17 refusal "shared logits buffer
  holds 48 rows but caller needs 64" (a candidate above the startup step count) is gone.
- ``capture_runner`` (0.5.20): the draft-extend runner selects one row per request before
  ``lm_head`` and takes ``max_bs`` rows
  (``speculative/eagle_draft_extend_cuda_graph_runner.py::EAGLEDraftExtendCudaGraphRunner.__init__``:
  ``get_logits_buffer(vocab_size, rows=self.max_bs)``; 0.5.17: ``max_bs * captured_req_width``);
  target verify still takes ``max_num_token = max_bs * captured_req_width``
  (``model_executor/runner/decode_cuda_graph_runner.py::DecodeCudaGraphRunner._next_token_logits_buffer_capacity_rows``);
  ``model_executor/graph_shared_output.py::GraphSharedOutput.get_logits_buffer``'s assert is 0.5.17's.
- ``build_adaptive_runtime_state`` and ``engine_start``: the runners a state captures are the
  family's runtime states (``ops.runtime_states``: 0.5.23's draft extend at each state's own
  width, ``runtime.py``), and the input-buffer pool counts those runners
  (``model_executor/input_buffers.py::share_input_buffer``); the 0.5.17 operations build every
  state at the startup width. The order is 0.5.17's:
  ``speculative/eagle_worker_v2.py::EAGLEWorkerV2.init_cuda_graphs`` registers the startup state,
  then ``speculative/adaptive_runtime_state.py::AdaptiveController.init_states`` builds the others
  ascending through ``speculative/eagle_worker_v2.py::EAGLEWorkerV2.build_adaptive_runtime_state``
  (0.5.23 adds only an out-of-tree runner class choice).

Unchanged for the model, re-read: ``arg_groups/speculative_hook.py::_init_adaptive_speculative_params``
(the same checks, written through ``resolving_view`` / ``declare_resolution``: the operation
``init_adaptive_speculative_params`` stays 0.5.17's) and
``model_executor/model_runner_components/cuda_graph_setup.py::capture_cuda_graphs`` (still creates
the shared output first; new: a deferred distributed setup, a DeepGEMM budget, ``finalize``).

A refusal names 0.5.23 (``EngineStartRefused23``, an ``EngineStartRefused``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

from specstate.model.config import SpecConfig
from specstate.model.modes import ForwardMode
from specstate.model.runner import GraphRunner
from specstate.model.sglang_0_5_17.adaptive import candidate_steps_of, max_draft_tokens_of
from specstate.model.sglang_0_5_17.start import (Capture, EngineStart, EngineStartRefused, resolve_max_num_reqs, runner_capture,
                                                share_input_buffer)

if TYPE_CHECKING:
    from specstate.model.ops import Ops

__all__ = ["EngineStartRefused23", "graph_shared_output_v23", "capture_runner_v23", "build_adaptive_runtime_state_v23",
           "engine_start_v23", "start_engine_v23", "START_OVERRIDES"]



class EngineStartRefused23(EngineStartRefused):
    """A config sglang 0.5.23 cannot start (the fields of ``EngineStartRefused``)."""

    def describe(self) -> str:
        return super().describe().replace("sglang 0.5.17 refuses", "sglang 0.5.23 refuses", 1)


def graph_shared_output_v23(ops: "Ops", config: SpecConfig) -> int:
    """``ModelRunner.max_shared_logits_buffer_rows`` -> ``max_decode_logits_rows``: the largest
    ``max(capture_bs) * draft tokens`` over ``max_speculative_num_draft_tokens`` and every
    candidate's ``steps + 1`` (topk 1: target verify takes ``num_draft_tokens`` rows per request);
    the candidates only ``if spec.speculative_adaptive``: a static launch counts its own draft tokens."""
    counts = [max_draft_tokens_of(config)] + [s + 1 for s in candidate_steps_of(config)]
    return max(config.cuda_graph_bs) * max(counts)


def capture_runner_v23(ops: "Ops", config: SpecConfig, steps: int, runner: GraphRunner, held: int) -> Capture:
    """A runner's capture: target verify takes ``max_bs * captured_req_width`` rows, draft extend
    ``max_bs`` (one row per request), draft decode none; ``get_logits_buffer`` asserts
    ``rows <= max_rows``."""
    if runner.capture_forward_mode is ForwardMode.TARGET_VERIFY:
        rows = runner.max_bs * runner.num_tokens_per_bs
    elif runner.capture_forward_mode is ForwardMode.DRAFT_EXTEND_V2:
        rows = runner.max_bs
    else:
        rows = 0
    return runner_capture(steps, runner, rows, held, EngineStartRefused23)


def _runners(ops: "Ops", config: SpecConfig, steps: int) -> list[GraphRunner]:
    """The state's runners in upstream's capture order (draft decode, draft extend, target verify)."""
    st = ops.runtime_states(ops, config)[steps]
    return [r for r in (st.draft_decode, st.draft_extend, st.target_verify) if r is not None]


def build_adaptive_runtime_state_v23(ops: "Ops", config: SpecConfig, steps: int, held: int) -> tuple[Capture, ...]:
    """``EAGLEWorkerV2.build_adaptive_runtime_state``: the family's runtime state of ``steps``
    (``ops.runtime_states``) captures its runners."""
    return tuple(ops.capture_runner(ops, config, steps, r, held) for r in _runners(ops, config, steps))


def engine_start_v23(ops: "Ops", config: SpecConfig) -> EngineStart:
    """``EAGLEWorkerV2.init_cuda_graphs`` with the server arguments before it: 0.5.17's order over
    the family's runtime states, on the running-request cap the pool leaves: 0.5.23's
    ``mem_cache/kv_cache_configurator.py::KVCacheConfigurator.resolve_max_num_reqs`` is 0.5.17's but for
    ``max(1, max_running_requests // attn_dp_size)``, the same with one DP worker
    (``sglang_0_5_17.start.resolve_max_num_reqs``)."""
    config = resolve_max_num_reqs(config)
    candidates = ops.init_adaptive_speculative_params(ops, config)
    held = ops.graph_shared_output(ops, config)
    order = [config.speculative_num_steps] + [s for s in candidates if s != config.speculative_num_steps]
    captures = tuple(c for s in order for c in ops.build_adaptive_runtime_state(ops, config, s, held))
    pool = share_input_buffer(r for s in order for r in _runners(ops, config, s))
    return EngineStart(config.speculative_num_steps, candidates, held, captures, pool)


@functools.lru_cache(maxsize=256)
def start_engine_v23(ops: "Ops", config: SpecConfig) -> EngineStart:
    """The family's start (``Family.start``): ``ops.engine_start``; a refusal of an inherited
    operation is re-raised naming 0.5.23."""
    try:
        return ops.engine_start(ops, config)
    except EngineStartRefused23:
        raise
    except EngineStartRefused as e:
        raise EngineStartRefused23(e.upstream, e.where, e.message, state=e.state, buffer=e.buffer, asked=e.asked,
                                   held=e.held) from None


#: the start operations 0.5.23 replaces (``init_adaptive_speculative_params`` stays 0.5.17's)
START_OVERRIDES: dict[str, Callable[..., Any]] = {
    "engine_start": engine_start_v23,
    "graph_shared_output": graph_shared_output_v23,
    "build_adaptive_runtime_state": build_adaptive_runtime_state_v23,
    "capture_runner": capture_runner_v23,
}
