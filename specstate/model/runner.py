"""Model runners: CUDA-graph runners, the attention backend's metadata step, one forward.

Mirrors:

- ``model_executor/cuda_graph_runner.py::CudaGraphRunner`` (``can_run``, ``replay_prepare``,
  ``DecodeInputBuffers.populate_from_forward_batch`` -> ``_grouped_foreach_copy_``): the
  target runner, captured for TARGET_VERIFY with ``num_tokens_per_bs = num_draft_tokens``.
  ``can_run`` checks the batch size and the capture-hidden mode; it never compares the
  forward mode with ``capture_forward_mode``.
- ``speculative/eagle_draft_cuda_graph_runner.py::EAGLEDraftCudaGraphRunner`` (``can_run``,
  ``replay``) and ``eagle_draft_extend_cuda_graph_runner.py::EAGLEDraftExtendCudaGraphRunner``.
- ``model_executor/model_runner.py::ModelRunner._forward_raw``: a forward mode for which
  ``ForwardMode.is_cuda_graph()`` holds goes to the graph runner when ``can_run``, else eager.
- ``layers/attention/triton_backend.py::TritonAttnBackend.init_forward_metadata``: a DECODE
  batch with ``spec_info`` attached takes the speculative branch and reads
  ``spec_info.kv_indptr``, which is ``None`` outside drafting.

Each runner declares its static buffers (``BufferSpec``: rows per request, capacity sized at
capture, whether its replay resets padding rows); their contents live in the state
(``graph_buffers.py``) and the copies run in ``replay.py`` (``Ops.replay_prepare``) as shape ops
(``tensors.py``: a shape rule, torch where it predicts a failure), so a copy of the wrong size
raises PyTorch's own error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from specstate.model.values import evolve
from typing import TYPE_CHECKING, Any, Callable, Hashable

from specstate.errors import InternalError
from specstate.model.bs_compare import at_most, padded
from specstate.model.config import SpecConfig
from specstate.model.graph_buffers import EMPTY_GRAPH_BUFFERS, BufferSpec
from specstate.model.modes import CaptureHiddenMode, ForwardMode, Worker
from specstate.model.records import ForwardRecord, GraphUse
from specstate.model.spec_info import SpecInfo, spec_info_kind
from specstate.model.tensors import Shape, once, passed

if TYPE_CHECKING:
    from specstate.model.ops_table import Ops
    from specstate.model.tx import Tx

__all__ = [
    "ForwardBatch",
    "GraphRunner",
    "ModelledCrash",
    "default_graph_runners",
    "can_run",
    "target_buffers",
    "target_verify_runner",
    "max_context_len",
    "init_forward_metadata",
    "run_forward",
    "graph_slices",
    "guarded",
    "guarded_once",
    "check_once",
    "sglang_assert",
]


class ModelledCrash(Exception):
    """Raised inside an operation where the real worker raises; ``step`` turns it into a
    :class:`~specstate.model.records.Crash`."""

    def __init__(self, cause: BaseException, where: str, shapes: dict[str, Any]) -> None:
        super().__init__(str(cause))
        self.attempted: ForwardRecord | None = None
        self.cause = cause
        self.where = where
        self.shapes = shapes


def guarded(where: str, shapes: dict[str, Any], fn: Callable[[], Any]) -> Any:
    """Run ``fn``; a PyTorch / Python error becomes a :class:`ModelledCrash` at ``where``."""
    try:
        return fn()
    except (ModelledCrash, InternalError):  # a shape rule's bug (tensors.ShapeRuleError) is no modelled crash
        raise
    except (RuntimeError, AttributeError, IndexError, ValueError, AssertionError, TypeError) as e:
        raise ModelledCrash(e, where, shapes) from e


def guarded_once(where: str, key: Hashable, shapes: Callable[[], dict[str, Any]], op: Callable[[], Any]) -> Any:
    """:func:`guarded` around ``tensors.once(key, op)``: a shape op (``tensors.py``) that depends on
    ``key`` (its shapes) alone, run the first time ``key`` is seen; the error report's ``shapes()``
    is built only while ``key`` has not passed (a failure is never remembered, so it reruns and
    reports every time)."""
    if passed(key):
        return once(key, op)
    return guarded(where, shapes(), lambda: once(key, op))


def check_once(where: str, key: Hashable, shapes: Callable[[], dict[str, Any]], op: Callable[[], Any]) -> None:
    """:func:`guarded_once` for an op run only for whether it raises: its result (a tensor) is
    dropped, not remembered beside ``key``."""
    guarded_once(where, key, shapes, lambda: _dropped(op))


def _dropped(op: Callable[[], Any]) -> None:
    op()


def sglang_assert(ok: bool, message: str) -> None:
    """SGLang's ``assert cond, message``, raised explicitly: the model's crash text must not
    depend on ``python -O`` or on pytest rewriting assertions of plugin packages."""
    if not ok:
        raise AssertionError(message)


@dataclass(frozen=True)
class ForwardBatch:
    """``forward_batch_info.py::ForwardBatch`` as built from ``ScheduleBatch.get_model_worker_batch``."""

    forward_mode: ForwardMode
    rids: tuple[int, ...]
    seq_lens: tuple[int, ...]
    input_ids: Shape
    positions: Shape | None
    out_cache_loc: Shape | None
    spec_info: SpecInfo | None
    capture_hidden_mode: CaptureHiddenMode  #: ``ModelWorkerBatch.capture_hidden_mode``
    extend_lens: tuple[int, ...] | None = None
    #: where the batch's ``input_ids`` / ``out_cache_loc`` rows came from (``batch.Provenance``;
    #: model-only, no part of equality)
    input_ids_from: Any = field(default=None, compare=False, repr=False)
    out_cache_loc_from: Any = field(default=None, compare=False, repr=False)

    @property
    def batch_size(self) -> int:
        return len(self.rids)


@dataclass(frozen=True)
class GraphRunner:
    """A captured CUDA-graph runner (what matters of it for shapes)."""

    name: str
    worker: Worker
    capture_forward_mode: ForwardMode
    num_tokens_per_bs: int
    capture_hidden_mode: CaptureHiddenMode
    capture_bs: tuple[int, ...]
    symbol: str  #: the SGLang class it mirrors
    buffers: tuple[BufferSpec, ...] = ()  #: static buffers, sized at capture (maybe shared)
    #: ``TritonAttnBackend.cuda_graph_custom_mask``: ``max_num_tokens * max_context_len``
    custom_mask_capacity: int = 0
    #: draft steps the runner was captured for (v2 runtime states); ``None``: the config's
    steps: int | None = None
    #: the release's symbol a replay's copies fail in (``file::Class.method``), the ``where`` of the
    #: crash it reports; set by the release that builds the runner (empty: ``symbol``)
    fails_in: str = ""

    @property
    def max_bs(self) -> int:
        return max(self.capture_bs)

    def padded_bs(self, raw_bs: int) -> int:
        """``capture_bs[bisect.bisect_left(capture_bs, raw_bs)]`` (``replay_prepare``)."""
        size = padded(self.capture_bs, raw_bs)
        if size is None:  # as ``capture_bs[len(capture_bs)]`` would: callers replay only where ``can_run``
            raise IndexError(f"batch size {raw_bs} above the largest captured size {self.capture_bs[-1]}")
        return size


def max_context_len(config: SpecConfig) -> int:
    """``model_config.context_len`` (model-only bound: no request outgrows the KV pool)."""
    return config.kv_pool_size + config.speculative_num_draft_tokens


def target_buffers(prefix: str, n: int, max_bs: int, sized_for: int) -> tuple[BufferSpec, ...]:
    """``DecodeInputBuffers`` of a target runner with ``n`` tokens per request; token
    buffers hold ``max_bs * sized_for`` rows (``sized_for`` > ``n`` when shared with a
    runner of more draft tokens, as 0.5.14+'s runtime states share them)."""
    def b(name: str, per_bs: int, cap_per_bs: int, resets: bool = False) -> BufferSpec:
        return BufferSpec(name, f"{prefix}.{name}", per_bs, max_bs * cap_per_bs, (), resets)
    return (b("input_ids", n, sized_for), b("req_pool_indices", 1, 1), b("seq_lens", 1, 1, True),
            b("out_cache_loc", n, sized_for, True), b("positions", n, sized_for))


def _draft_decode_buffers(config: SpecConfig, max_bs: int) -> tuple[BufferSpec, ...]:
    """``EAGLEDraftCudaGraphRunner``'s buffers (all reset when padded)."""
    k, s = config.speculative_eagle_topk, config.speculative_num_steps
    rows = (("seq_lens", 1, ()), ("out_cache_loc", k * s, ()), ("positions", k, ()), ("topk_p", 1, (k,)),
            ("topk_index", 1, (k,)), ("hidden_states", 1, (config.draft_hidden_size,)), ("req_pool_indices", 1, ()))
    return tuple(BufferSpec(n, f"draft_decode.{n}", p, max_bs * p, t, True) for n, p, t in rows)


def _draft_extend_buffers(config: SpecConfig, max_bs: int) -> tuple[BufferSpec, ...]:
    """``EAGLEDraftExtendCudaGraphRunner``'s buffers; ``resets``: the ones its replay resets."""
    t = config.speculative_num_steps + 1
    rows = (("input_ids", t, (), False), ("seq_lens", 1, (), True), ("extend_seq_lens", 1, (), True),
            ("out_cache_loc", t, (), True), ("positions", t, (), True),
            ("hidden_states", t, (config.extend_hidden_size,), False), ("num_correct_drafts", 1, (), True),
            ("num_accept_tokens", 1, (), True), ("req_pool_indices", 1, (), False))
    return tuple(BufferSpec(n, f"draft_extend.{n}", p, max_bs * p, tr, r) for n, p, tr, r in rows)


def target_verify_runner(name: str, config: SpecConfig, n: int, buffers: tuple[BufferSpec, ...]) -> GraphRunner:
    """A target runner captured for TARGET_VERIFY with ``n`` tokens per request."""
    bs = config.cuda_graph_bs
    return GraphRunner(name, Worker.TARGET, ForwardMode.TARGET_VERIFY, n, CaptureHiddenMode.FULL, bs,
                       "model_executor/cuda_graph_runner.py::CudaGraphRunner", buffers,
                       max(bs) * n * max_context_len(config),
                       fails_in="cuda_graph_runner.py::CudaGraphRunner.replay_prepare")


def default_graph_runners(config: SpecConfig) -> dict[str, GraphRunner]:
    """The runners ``EAGLEWorker.init_cuda_graphs`` and ``ModelRunner.init_device_graphs`` capture
    (built once per config, as the worker captures once at start: a fresh dict of the same
    frozen runners on every call, so a caller may add or replace runners in it)."""
    memo = config.__dict__.get("_default_graph_runners")
    if memo is None:
        memo = config.__dict__["_default_graph_runners"] = _build_default_graph_runners(config)
    return dict(memo)


def _build_default_graph_runners(config: SpecConfig) -> dict[str, GraphRunner]:
    bs = config.cuda_graph_bs
    n = config.speculative_num_draft_tokens
    return {
        "target_verify": target_verify_runner("target_verify", config, n, target_buffers("target", n, max(bs), n)),
        "draft_decode": GraphRunner(
            "draft_decode", Worker.DRAFT, ForwardMode.DECODE,
            config.speculative_eagle_topk, CaptureHiddenMode.LAST, bs,
            "speculative/eagle_draft_cuda_graph_runner.py::EAGLEDraftCudaGraphRunner",
            _draft_decode_buffers(config, max(bs)),
            fails_in="eagle_draft_cuda_graph_runner.py::EAGLEDraftCudaGraphRunner.replay",
        ),
        "draft_extend": GraphRunner(
            "draft_extend", Worker.DRAFT, ForwardMode.DRAFT_EXTEND,
            config.speculative_num_steps + 1, CaptureHiddenMode.LAST, bs,
            "speculative/eagle_draft_extend_cuda_graph_runner.py::EAGLEDraftExtendCudaGraphRunner",
            _draft_extend_buffers(config, max(bs)),
            fails_in="eagle_draft_extend_cuda_graph_runner.py::EAGLEDraftExtendCudaGraphRunner.replay",
        ),
    }


def _requested_capture_mode(fb: ForwardBatch) -> CaptureHiddenMode:
    spec_mode = getattr(fb.spec_info, "capture_hidden_mode", None)
    return max(fb.capture_hidden_mode, spec_mode if spec_mode is not None else CaptureHiddenMode.NULL)


def can_run(runner: GraphRunner, fb: ForwardBatch) -> bool:
    """``CudaGraphRunner.can_run``: batch size and capture-hidden mode; NOT the forward mode."""
    requested = _requested_capture_mode(fb)
    mode_ok = requested == CaptureHiddenMode.NULL or requested == runner.capture_hidden_mode
    return at_most(fb.batch_size, runner.max_bs) and mode_ok


def init_forward_metadata(fb: ForwardBatch) -> None:
    """``TritonAttnBackend.init_forward_metadata`` (eager path), the part that reads spec_info."""
    spec_info = fb.spec_info

    def decode_branch() -> int:
        if spec_info is None:
            return fb.batch_size
        kv_indptr = getattr(spec_info, "kv_indptr", None)
        return kv_indptr.shape[0] - 1  # type: ignore[union-attr]  # AttributeError on None, as in SGLang

    if fb.forward_mode.is_decode_or_idle():
        shapes = {"spec_info": spec_info_kind(spec_info), "kv_indptr": None if spec_info is None else getattr(spec_info, "kv_indptr", None)}
        guarded("triton_backend.py::TritonAttnBackend.init_forward_metadata", shapes, decode_branch)


def run_forward(
    phase: str,
    worker: Worker,
    fb: ForwardBatch,
    runner: GraphRunner | None,
    config: SpecConfig,
    *,
    allow_graph: bool = True,
    own_attn_metadata: bool = False,
    draft_kv_lens: tuple[int, ...] = (),
    expected_tokens: int | None = None,
    ops: "Ops | None" = None,
    tx: "Tx | None" = None,
    graph_decision: bool | None = None,
    record_fields: dict[str, Any] | None = None,
) -> ForwardRecord:
    """``ModelRunner.forward`` -> ``_forward_raw``: graph replay when it can run, else eager.

    ``own_attn_metadata``: the caller's own attention backend builds the metadata (the
    drafting loop's multi-step backend, ``TritonMultiStepDraftBackend``, which sets
    ``spec_info.kv_indptr`` itself), so the plain backend's step is skipped.

    A replay goes through ``ops.replay_prepare`` (the caller's table: a replay without one is an
    internal error) over the static buffers of ``tx.state`` (the capture-time buffers without
    ``tx``); its writes reach the state when the caller records the returned forward (``Tx.record``).

    ``graph_decision``: the caller's own ``can_run_graph`` verdict (v2 runners) instead of
    v1's ``is_cuda_graph`` and ``can_run``; ``record_fields``: further ``ForwardRecord`` fields."""
    offer: tuple[GraphRunner, bool] | None = None
    if graph_decision is not None:
        use_graph = graph_decision and runner is not None
    else:
        use_graph = allow_graph and runner is not None and fb.forward_mode.is_cuda_graph() and can_run(runner, fb)
        if allow_graph and runner is not None:
            offer = (runner, use_graph)
    attempted = _record(phase, worker, fb, None, draft_kv_lens, expected_tokens, offer)
    if record_fields:
        attempted = evolve(attempted, **record_fields)
    if use_graph:
        assert runner is not None
        attempted = evolve(attempted, graph_slices=graph_slices(runner, fb))
    try:
        if use_graph:
            assert runner is not None
            return evolve(attempted, graph=_replay(runner, fb, config, ops, tx))
        if not own_attn_metadata:
            init_forward_metadata(fb)
    except ModelledCrash as e:
        e.attempted = attempted  # the forward that was entered when it crashed
        raise
    return attempted


#: the token-sized sources a runner copies into ``buffer[:raw_bs * per_bs]`` (the per-request
#: ones are ``raw_bs`` by construction; a draft-extend runner sizes its slices by ``input_ids``)
_TOKEN_SOURCES = ("input_ids", "out_cache_loc", "positions")


def graph_slices(runner: GraphRunner, fb: ForwardBatch) -> tuple[tuple[str, int], ...]:
    """``(field, rows)`` of each token-sized graph slice a replay of ``fb`` copies a batch field
    into: ``raw_bs * num_tokens_per_bs`` for the target (``replay_prepare``: ``raw_num_token``),
    ``raw_bs * per_bs`` of the buffer for the draft decode runner; none for draft extend."""
    if runner.capture_forward_mode in (ForwardMode.DRAFT_EXTEND, ForwardMode.DRAFT_EXTEND_V2):
        return ()
    raw_bs = fb.batch_size
    return tuple((b.name, raw_bs * b.per_bs) for b in runner.buffers if b.name in _TOKEN_SOURCES)


def _replay(runner: GraphRunner, fb: ForwardBatch, config: SpecConfig, ops: "Ops | None", tx: "Tx | None") -> GraphUse:
    if ops is None:  # every operation that replays a graph passes its table (the variant's ``replay_prepare``)
        raise InternalError(f"Expected the table of operations for the graph replay of {runner.name!r} (run_forward(..., ops=))")
    graphs = tx.state.graphs if tx is not None else EMPTY_GRAPH_BUFFERS
    iteration = tx.state.step_index if tx is not None else 0
    return ops.replay_prepare(ops, runner, fb, graphs, iteration, config)


def _record(phase: str, worker: Worker, fb: ForwardBatch, graph: GraphUse | None,
            draft_kv_lens: tuple[int, ...], expected_tokens: int | None,
            offer: "tuple[GraphRunner, bool] | None" = None) -> ForwardRecord:
    info = fb.spec_info
    hidden = getattr(info, "hidden_states", None)
    return ForwardRecord(
        phase=phase,
        worker=worker,
        forward_mode=fb.forward_mode,
        rids=fb.rids,
        batch_size=fb.batch_size,
        input_ids=fb.input_ids,
        positions=fb.positions,
        out_cache_loc=fb.out_cache_loc,
        extend_lens=fb.extend_lens,
        spec_info=spec_info_kind(info),
        spec_info_type=type(info) if info is not None else None,
        num_tokens_per_req=getattr(info, "num_tokens_per_req", None),
        capture_hidden_mode=_requested_capture_mode(fb),
        graph=graph,
        seq_lens=fb.seq_lens,
        draft_kv_lens=draft_kv_lens,
        expected_tokens=expected_tokens,
        hidden_rows=hidden[0] if hidden else None,
        hidden_size=hidden[1] if hidden and len(hidden) > 1 else None,
        graph_offer=offer,
        input_ids_from=fb.input_ids_from,
        out_cache_loc_from=fb.out_cache_loc_from,
    )
