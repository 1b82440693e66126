"""Engine start of sglang 0.5.17's ``EAGLEWorkerV2`` with adaptive speculation, as named operations.

Owns the start's outcome (``EngineStart``): which runtime states were built, what each runner
captured over its capture list, how many rows each took from the graph-shared logits buffer, and
the input buffers pooled by name and size. Runtime states themselves stay a pure function of
the config (``runtime.py``); the start checks what upstream checks while building them and
raises ``EngineStartRefused`` where upstream raises, naming the runtime state, the buffer, the
sizes asked and held and upstream's ``file::symbol``.

The order of a 0.5.17 start (each step an ``Ops`` entry, first argument the table):

0. the running-request cap (``resolve_max_num_reqs``, plain arithmetic, not an ``Ops`` entry):
   ``mem_cache/kv_cache_configurator.py::KVCacheConfigurator.resolve_max_num_reqs`` caps
   ``--max-running-requests`` (per DP worker: one here) at ``token_capacity // 2``, the KV pool's
   ``max_total_num_tokens`` halved; the request pool (``ReqToTokenPool(size=max_num_reqs)``) is that
   size, and ``base_cuda_graph_runner.py::get_batch_sizes_to_capture`` clamps every capture list
   to it (adding the cap itself). A small pool (``--max-total-tokens 64`` with the default 48
   requests: 32) therefore captures smaller lists and sizes the shared logits buffer from them;
1. ``init_adaptive_speculative_params``: the server arguments
   (``arg_groups/speculative_hook.py::_init_adaptive_speculative_params``): the adaptive config is
   loaded (``adaptive_spec_params.py::_load_adaptive_config``: ``ValueError`` for a slot whose
   ``candidate_steps`` is not a non-empty list of non-negative ints, or no integer BS key), and
   ``--speculative-num-steps`` must be one of the candidates (``ValueError``);
2. ``graph_shared_output``: the target model runner's capture
   (``model_runner_components/cuda_graph_setup.py::capture_cuda_graphs``) creates the logits buffer
   every graph runner of the process shares, sized once
   (``graph_shared_output.py::GraphSharedOutput.create_for_model_runner``) from
   ``model_runner.py::ModelRunner.max_decode_logits_rows``: the largest captured batch size times
   the *startup* ``speculative_num_draft_tokens``;
3. the startup runtime state's runners capture (target verify, draft decode for steps > 1, draft
   extend), and ``AdaptiveController.register`` keeps them;
4. ``AdaptiveController.init_states``: every other candidate, ascending, is built by
   ``EAGLEWorkerV2.build_adaptive_runtime_state``; each of its runners captures over the full
   capture list (``base_cuda_graph_runner.py::get_batch_sizes_to_capture`` reads the startup
   server arguments) and takes ``max_bs * captured width`` logits rows from the shared buffer:
   ``GraphSharedOutput.get_logits_buffer`` asserts ``rows <= self.max_rows``. A candidate with
   more steps than the startup one therefore cannot start (``AssertionError``: "shared logits
   buffer holds H rows but caller needs A"); its input buffers join the process-wide pool
   (``input_buffers.py::share_input_buffer``: one allocation per name and size);
5. ``AdaptiveController._activate`` of the startup step count (``initial_overlap_state``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from specstate.errors import InvalidConfig
from specstate.model.bs_compare import at_most
from specstate.model.config import SpecConfig
from specstate.model.modes import ForwardMode
from specstate.model.runner import GraphRunner
from specstate.model.sglang_0_5_17.adaptive import candidate_steps
from specstate.model.sglang_0_5_17.runtime import RuntimeState, build_runtime_state

if TYPE_CHECKING:
    from specstate.model.ops_table import Ops
    from specstate.model.variant_registry import Variant

__all__ = ["BUFFER_DTYPE_BYTES", "Capture", "EngineStart", "EngineStartRefused", "engine_start", "init_adaptive_speculative_params",
           "graph_shared_output", "build_adaptive_runtime_state", "capture_runner", "runner_capture", "share_input_buffer",
           "start_engine", "starts", "resolve_max_num_reqs"]

_HOOK = "arg_groups/speculative_hook.py::_init_adaptive_speculative_params"
_LOAD = "adaptive_spec_params.py::_load_adaptive_config"
_LOGITS = "graph_shared_output.py::GraphSharedOutput.get_logits_buffer"


class EngineStartRefused(InvalidConfig):
    """A config sglang 0.5.17 cannot start: upstream raises ``upstream`` (its exception class) at
    ``where`` while building the runtime state of ``state`` steps; ``buffer``, ``asked`` and
    ``held`` name the buffer and its sizes when a size check failed."""

    def __init__(self, upstream: str, where: str, message: str, *, state: int | None = None,
                 buffer: str | None = None, asked: int | None = None, held: int | None = None) -> None:
        self.upstream, self.where, self.message = upstream, where, message
        self.state, self.buffer, self.asked, self.held = state, buffer, asked, held
        super().__init__(self.describe())

    def describe(self) -> str:
        at = "" if self.state is None else f" building the runtime state steps={self.state}"
        size = "" if self.buffer is None else f" ({self.buffer}: asked {self.asked} rows, held {self.held})"
        return f"sglang 0.5.17 refuses this config at engine start{at}: {self.upstream} at {self.where}: " \
               f"{self.message}{size}"


@dataclass(frozen=True)
class Capture:
    """One runner's capture at start."""

    state: int  #: the runtime state's step count
    runner: str  #: ``GraphRunner.name``
    capture_bs: tuple[int, ...]
    logits_rows: int  #: rows taken from the shared logits buffer (``max_bs * captured width``; 0: none)
    buffer_elements: int  #: elements of its static input buffers (before pooling)
    buffer_bytes: int  #: their bytes at the model's dtypes (``BUFFER_DTYPE_BYTES``)


@dataclass(frozen=True)
class EngineStart:
    """What the start built (``engine_start``)."""

    startup_steps: int
    candidates: tuple[int, ...]  #: every slot's candidate steps, ascending
    logits_rows_held: int  #: ``GraphSharedOutput.max_rows`` (0: no decode graphs)
    captures: tuple[Capture, ...]  #: in capture order: the startup state, then the others ascending
    pooled: tuple[tuple[str, int], ...]  #: the input-buffer pool: (name#size key, elements), one per allocation

    def describe(self) -> str:
        lines = [f"engine start: steps {self.startup_steps}, candidates {list(self.candidates)}, "
                 f"shared logits buffer {self.logits_rows_held} rows"]
        for c in self.captures:
            lines.append(f"  steps={c.state} {c.runner}: capture_bs {list(c.capture_bs)}, logits rows {c.logits_rows}, "
                         f"input buffers {c.buffer_elements} elements ({c.buffer_bytes} bytes)")
        lines.append(f"  input-buffer pool: {len(self.pooled)} allocations, {sum(n for _, n in self.pooled)} elements")
        return "\n".join(lines)


def init_adaptive_speculative_params(ops: "Ops", config: SpecConfig) -> tuple[int, ...]:
    """``_init_adaptive_speculative_params``: the candidate steps (``resolve_candidate_steps_from_config``)
    and ``--speculative-num-steps`` among them. A static launch skips it (the hook runs only
    ``if server_args.speculative_adaptive``): its one step count, no adaptive config read."""
    if not config.speculative_adaptive:
        return (config.speculative_num_steps,)
    try:
        steps = candidate_steps(config.speculative_adaptive_config)
    except InvalidConfig as e:
        raise EngineStartRefused("ValueError", _LOAD, str(e)) from None
    if config.speculative_num_steps not in steps:
        raise EngineStartRefused("ValueError", _HOOK, f"--speculative-num-steps={config.speculative_num_steps} is not "
                                 f"in the adaptive config candidate_steps {list(steps)}. Pass one of those values.")
    return steps


def graph_shared_output(ops: "Ops", config: SpecConfig) -> int:
    """``GraphSharedOutput.create_for_model_runner`` -> ``ModelRunner.max_decode_logits_rows``:
    ``max(capture_bs) * decode_num_tokens_per_req()`` (the startup draft token count)."""
    return max(config.cuda_graph_bs) * (config.speculative_num_steps + 1)


def capture_runner(ops: "Ops", config: SpecConfig, steps: int, runner: GraphRunner, held: int) -> Capture:
    """A runner's capture: target verify (``DecodeCudaGraphRunner.__init__``) and draft extend
    (``EAGLEDraftExtendCudaGraphRunner.__init__``) take ``max_bs * captured_req_width`` rows of the
    shared logits buffer (``get_logits_buffer``: ``assert rows <= self.max_rows``); draft decode
    takes none."""
    takes = runner.capture_forward_mode in (ForwardMode.TARGET_VERIFY, ForwardMode.DRAFT_EXTEND_V2)
    return runner_capture(steps, runner, runner.max_bs * runner.num_tokens_per_bs if takes else 0, held)


def runner_capture(steps: int, runner: GraphRunner, rows: int, held: int,
                   refused: "type[EngineStartRefused] | None" = None) -> Capture:
    """A runner that takes ``rows`` of the shared logits buffer of ``held`` rows
    (``graph_shared_output.py::GraphSharedOutput.get_logits_buffer``: ``assert rows <= self.max_rows``),
    and what its capture allocates; a later release's ``capture_runner`` computes other ``rows``
    and names itself in ``refused`` (default ``EngineStartRefused``)."""
    if rows > held:
        raise (refused or EngineStartRefused)(
            "AssertionError", _LOGITS, f"shared logits buffer holds {held} rows but caller needs {rows}", state=steps,
            buffer=f"graph_shared_output logits ({runner.name})", asked=rows, held=held)
    elements = sum(b.capacity * _prod(b.trailing) for b in runner.buffers)
    size = sum(b.capacity * _prod(b.trailing) * BUFFER_DTYPE_BYTES.get(b.name, 8) for b in runner.buffers)
    return Capture(steps, runner.name, runner.capture_bs, rows, elements, size)


#: bytes per element of a static input buffer (``DecodeInputBuffers``, the EAGLE runners' buffers):
#: bf16 hidden states, fp32 ``topk_p``, int64 otherwise (token ids, positions, cache locations,
#: sequence lengths); an estimate of the start's cost, not compared with the GPU
BUFFER_DTYPE_BYTES = {"hidden_states": 2, "topk_p": 4}


def _prod(shape: tuple[int, ...]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def build_adaptive_runtime_state(ops: "Ops", config: SpecConfig, steps: int, held: int) -> tuple[Capture, ...]:
    """``EAGLEWorkerV2.build_adaptive_runtime_state`` (``_override_worker_state``: steps, ``steps + 1``
    draft tokens): its runners capture in upstream's order (draft decode, draft extend, target verify)."""
    st: RuntimeState = build_runtime_state(config, steps)
    runners = [r for r in (st.draft_decode, st.draft_extend, st.target_verify) if r is not None]
    return tuple(ops.capture_runner(ops, config, steps, r, held) for r in runners)


_REQS = "mem_cache/kv_cache_configurator.py::KVCacheConfigurator.resolve_max_num_reqs"


def resolve_max_num_reqs(config: SpecConfig) -> SpecConfig:
    """``KVCacheConfigurator.resolve_max_num_reqs``: ``min(max_running_requests // attn_dp_size,
    token_capacity // 2)`` with one DP worker and ``token_capacity`` the target pool
    (``config_from_budget``: ``min(budget, --max-total-tokens)``, whole pages at page size > 1); the config the
    engine captures with (``config`` itself when the pool is large enough)."""
    cap = min(config.max_running_requests, config.target_kv_pool_size // 2)
    if cap < 1:
        raise EngineStartRefused("AssertionError", "base_cuda_graph_runner.py::get_batch_sizes_to_capture",
                                 f"capture_bs=[0]: a KV pool of {config.target_kv_pool_size} tokens leaves "
                                 f"max_num_reqs {cap} ({_REQS})", buffer="req_to_token_pool", asked=1, held=cap)
    return config if at_most(config.max_running_requests, cap) else config.with_(max_running_requests=cap)


def engine_start(ops: "Ops", config: SpecConfig) -> EngineStart:
    """``EAGLEWorkerV2.init_cuda_graphs`` with the server arguments before it (module doc); the
    captures run on the running-request cap the pool leaves (``resolve_max_num_reqs``)."""
    config = resolve_max_num_reqs(config)
    candidates = ops.init_adaptive_speculative_params(ops, config)
    held = ops.graph_shared_output(ops, config)
    order = [config.speculative_num_steps] + [s for s in candidates if s != config.speculative_num_steps]
    captures = tuple(c for s in order for c in ops.build_adaptive_runtime_state(ops, config, s, held))
    return EngineStart(config.speculative_num_steps, candidates, held, captures, _pool(config, order))


def _pool(config: SpecConfig, order: list[int]) -> tuple[tuple[str, int], ...]:
    """``share_input_buffer`` over every runner of every state, in start order."""
    states = [build_runtime_state(config, s) for s in order]
    return share_input_buffer(r for st in states for r in (st.draft_decode, st.target_verify, st.draft_extend)
                              if r is not None)


def share_input_buffer(runners: Iterable[GraphRunner]) -> tuple[tuple[str, int], ...]:
    """``model_executor/input_buffers.py::share_input_buffer``: one allocation per (name, size)
    over the runners, in capture order; (key, elements), sorted."""
    seen: dict[str, int] = {}
    for r in runners:
        for b in r.buffers:
            seen.setdefault(b.key, b.capacity * _prod(b.trailing))
    return tuple(sorted(seen.items()))


@functools.lru_cache(maxsize=256)
def start_engine(ops: "Ops", config: SpecConfig) -> EngineStart:
    """The family's start (``Family.start``): ``ops.engine_start`` once per table and config."""
    return ops.engine_start(ops, config)


def starts(variant: Variant | str, config: SpecConfig) -> bool:
    """Whether ``variant``'s engine starts on ``config`` (``Variant.configure`` runs the start)."""
    from specstate.model.variant_registry import as_variant

    try:
        as_variant(variant).configure(config)
    except EngineStartRefused:
        return False
    return True
