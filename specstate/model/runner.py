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

Buffers are real tiny CPU tensors, so a copy of the wrong size raises PyTorch's own error.
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass, replace
from typing import Any, Callable

import torch

from specstate.model.config import SpecConfig
from specstate.model.modes import CaptureHiddenMode, ForwardMode, Worker
from specstate.model.records import ForwardRecord, GraphUse
from specstate.model.spec_info import EagleDraftInput, SpecInfo, spec_info_kind
from specstate.model.tensors import Shape, foreach_copy, zeros

__all__ = [
    "ForwardBatch",
    "GraphRunner",
    "ModelledCrash",
    "default_graph_runners",
    "can_run",
    "replay_prepare",
    "init_forward_metadata",
    "run_forward",
    "guarded",
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
    except ModelledCrash:
        raise
    except (RuntimeError, AttributeError, IndexError, ValueError, AssertionError, TypeError) as e:
        raise ModelledCrash(e, where, shapes) from e


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

    @property
    def max_bs(self) -> int:
        return max(self.capture_bs)

    def padded_bs(self, raw_bs: int) -> int:
        """``capture_bs[bisect.bisect_left(capture_bs, raw_bs)]`` (``replay_prepare``)."""
        return self.capture_bs[bisect.bisect_left(self.capture_bs, raw_bs)]


def default_graph_runners(config: SpecConfig) -> dict[str, GraphRunner]:
    """The runners ``EAGLEWorker.init_cuda_graphs`` and ``ModelRunner.init_device_graphs`` capture."""
    bs = config.cuda_graph_bs
    return {
        "target_verify": GraphRunner(
            "target_verify", Worker.TARGET, ForwardMode.TARGET_VERIFY,
            config.speculative_num_draft_tokens, CaptureHiddenMode.FULL, bs,
            "model_executor/cuda_graph_runner.py::CudaGraphRunner",
        ),
        "draft_decode": GraphRunner(
            "draft_decode", Worker.DRAFT, ForwardMode.DECODE,
            config.speculative_eagle_topk, CaptureHiddenMode.LAST, bs,
            "speculative/eagle_draft_cuda_graph_runner.py::EAGLEDraftCudaGraphRunner",
        ),
        "draft_extend": GraphRunner(
            "draft_extend", Worker.DRAFT, ForwardMode.DRAFT_EXTEND,
            config.speculative_num_steps + 1, CaptureHiddenMode.LAST, bs,
            "speculative/eagle_draft_extend_cuda_graph_runner.py::EAGLEDraftExtendCudaGraphRunner",
        ),
    }


def _requested_capture_mode(fb: ForwardBatch) -> CaptureHiddenMode:
    spec_mode = getattr(fb.spec_info, "capture_hidden_mode", None)
    return max(fb.capture_hidden_mode, spec_mode if spec_mode is not None else CaptureHiddenMode.NULL)


def can_run(runner: GraphRunner, fb: ForwardBatch) -> bool:
    """``CudaGraphRunner.can_run``: batch size and capture-hidden mode; NOT the forward mode."""
    requested = _requested_capture_mode(fb)
    mode_ok = requested == CaptureHiddenMode.NULL or requested == runner.capture_hidden_mode
    return fb.batch_size <= runner.max_bs and mode_ok


def replay_prepare(runner: GraphRunner, fb: ForwardBatch, config: SpecConfig) -> GraphUse:
    """Copy the batch into the runner's static buffers, as the runner's replay does."""
    raw_bs = fb.batch_size
    padded = runner.padded_bs(raw_bs)
    if runner.name == "draft_decode":
        _replay_draft_decode(runner, fb, config)
    elif runner.name == "draft_extend":
        _replay_draft_extend(runner, fb, config)
    else:
        _replay_target(runner, fb)
    return GraphUse(runner.name, runner.capture_forward_mode, runner.num_tokens_per_bs, raw_bs, padded, True)


def _buf(runner: GraphRunner, per_bs: int = 1) -> torch.Tensor:
    return zeros((runner.max_bs * runner.num_tokens_per_bs * per_bs,))


def _replay_target(runner: GraphRunner, fb: ForwardBatch) -> None:
    """``CudaGraphRunner.replay_prepare`` -> ``populate_from_forward_batch``."""
    raw_bs = fb.batch_size
    raw_num_token = raw_bs * runner.num_tokens_per_bs
    dsts = [_buf(runner)[:raw_num_token], zeros((runner.max_bs,))[:raw_bs], zeros((runner.max_bs,))[:raw_bs],
            _buf(runner)[:raw_num_token], _buf(runner)[:raw_num_token]]
    srcs = [zeros(fb.input_ids), zeros((raw_bs,)), zeros((len(fb.seq_lens),)),
            zeros(fb.out_cache_loc or (0,)), zeros(fb.positions or (0,))]
    shapes = {"input_ids_buffer": [raw_num_token], "input_ids": list(fb.input_ids),
              "num_tokens_per_bs": runner.num_tokens_per_bs, "raw_bs": raw_bs}
    guarded("cuda_graph_runner.py::CudaGraphRunner.replay_prepare", shapes, lambda: foreach_copy(dsts, srcs))


def _replay_draft_decode(runner: GraphRunner, fb: ForwardBatch, config: SpecConfig) -> None:
    """``EAGLEDraftCudaGraphRunner.replay``: seq_lens, out_cache_loc, positions, topk_p/index, hidden."""
    raw_bs = fb.batch_size
    raw_num_token = raw_bs * runner.num_tokens_per_bs
    info = fb.spec_info
    assert isinstance(info, EagleDraftInput)
    pairs: list[tuple[str, torch.Tensor, Shape]] = [
        ("seq_lens", zeros((runner.max_bs,))[:raw_bs], (len(fb.seq_lens),)),
        ("out_cache_loc", _buf(runner, config.speculative_num_steps)[: raw_num_token * config.speculative_num_steps], fb.out_cache_loc or (0,)),
        ("positions", _buf(runner)[:raw_num_token], fb.positions or (0,)),
        ("topk_p", zeros((runner.max_bs, config.speculative_eagle_topk))[:raw_bs], info.topk_p),
        ("topk_index", zeros((runner.max_bs, config.speculative_eagle_topk))[:raw_bs], info.topk_index),
        ("hidden_states", zeros((runner.max_bs, config.draft_hidden_size))[:raw_bs], info.hidden_states),
    ]
    for name, dst, src in pairs:
        shapes = {"field": name, "buffer": list(dst.shape), "source": list(src), "raw_bs": raw_bs}
        guarded("eagle_draft_cuda_graph_runner.py::EAGLEDraftCudaGraphRunner.replay", shapes,
                functools.partial(_copy_into, dst, src))


def _copy_into(dst: torch.Tensor, src: Shape) -> None:
    dst.copy_(zeros(src))


def _replay_draft_extend(runner: GraphRunner, fb: ForwardBatch, config: SpecConfig) -> None:
    """``EAGLEDraftExtendCudaGraphRunner.replay``: copies ``input_ids.shape[0]`` tokens."""
    num_tokens = fb.input_ids[0]
    pairs = [
        ("input_ids", _buf(runner)[:num_tokens], fb.input_ids),
        ("seq_lens", zeros((runner.max_bs,))[: fb.batch_size], (len(fb.seq_lens),)),
        ("out_cache_loc", _buf(runner)[:num_tokens], fb.out_cache_loc or (0,)),
        ("positions", _buf(runner)[:num_tokens], fb.positions or (0,)),
    ]
    for name, dst, src in pairs:
        shapes = {"field": name, "buffer": list(dst.shape), "source": list(src), "raw_bs": fb.batch_size}
        guarded("eagle_draft_extend_cuda_graph_runner.py::EAGLEDraftExtendCudaGraphRunner.replay", shapes,
                functools.partial(_copy_into, dst, src))


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
) -> ForwardRecord:
    """``ModelRunner.forward`` -> ``_forward_raw``: graph replay when it can run, else eager.

    ``own_attn_metadata``: the caller's own attention backend builds the metadata (the
    drafting loop's multi-step backend, ``TritonMultiStepDraftBackend``, which sets
    ``spec_info.kv_indptr`` itself), so the plain backend's step is skipped."""
    attempted = _record(phase, worker, fb, None, draft_kv_lens, expected_tokens)
    use_graph = allow_graph and runner is not None and fb.forward_mode.is_cuda_graph() and can_run(runner, fb)
    try:
        if use_graph:
            assert runner is not None
            return replace(attempted, graph=replay_prepare(runner, fb, config))
        if not own_attn_metadata:
            init_forward_metadata(fb)
    except ModelledCrash as e:
        e.attempted = attempted  # the forward that was entered when it crashed
        raise
    return attempted


def _record(phase: str, worker: Worker, fb: ForwardBatch, graph: GraphUse | None,
            draft_kv_lens: tuple[int, ...], expected_tokens: int | None) -> ForwardRecord:
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
        num_tokens_per_req=getattr(info, "num_tokens_per_req", None),
        capture_hidden_mode=_requested_capture_mode(fb),
        graph=graph,
        seq_lens=fb.seq_lens,
        draft_kv_lens=draft_kv_lens,
        expected_tokens=expected_tokens,
        hidden_rows=hidden[0] if hidden else None,
        hidden_size=hidden[1] if hidden and len(hidden) > 1 else None,
    )
