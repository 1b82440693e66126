"""What one step did: the forwards it ran, the events it logged, the crash it hit.

``ForwardRecord`` is the model's analogue of one line of the GPU recorder: one call into a
model runner (``ModelRunner.forward`` for target or draft) with the shapes it saw and the
path it took (graph replay at a padded batch size, or eager). Invariants that speak about
token counts, graph padding and mode consistency check these records; conformance compares
them with the recorded real ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from specstate.model.values import cached_hash
from typing import Any

from specstate.model.graph_buffers import BufferRead, Row
from specstate.model.modes import CaptureHiddenMode, ForwardMode, Worker
from specstate.model.tensors import Shape

__all__ = ["ForwardRecord", "GraphUse", "Crash", "Event"]


@cached_hash
@dataclass(frozen=True)
class GraphUse:
    """A CUDA-graph replay (``CudaGraphRunner.replay_prepare``)."""

    runner: str  #: which runner (``target_verify``, ``draft_decode``, ``draft_extend``, ...)
    capture_forward_mode: ForwardMode
    num_tokens_per_bs: int
    raw_bs: int
    padded_bs: int  #: ``capture_bs[bisect_left(capture_bs, raw_bs)]``
    #: padding rows of a resetting buffer held an earlier replay's rows before this one
    padding_dirty: bool = False
    iteration: int = 0  #: the step that replayed (``Writer.iteration`` of fresh rows)
    #: what the graph read: per buffer, rows ``[:padded]`` after ``replay_prepare``
    reads: tuple[BufferRead, ...] = field(default=(), repr=False)
    #: the buffers' full contents after ``replay_prepare`` (applied by ``Tx.record``)
    writes: tuple[tuple[str, tuple[Row, ...]], ...] = field(default=(), compare=False, repr=False)


@cached_hash
@dataclass(frozen=True)
class ForwardRecord:
    """One forward through a model runner."""

    phase: str  #: the worker function that ran it (``forward_target_extend``, ``draft``, ...)
    worker: Worker
    forward_mode: ForwardMode
    rids: tuple[int, ...]
    batch_size: int
    input_ids: Shape
    positions: Shape | None
    out_cache_loc: Shape | None
    extend_lens: tuple[int, ...] | None
    spec_info: str | None  #: class name of ``forward_batch.spec_info``
    num_tokens_per_req: int | None  #: ``spec_info.num_tokens_per_req``
    capture_hidden_mode: CaptureHiddenMode
    graph: GraphUse | None  #: ``None``: eager
    seq_lens: tuple[int, ...] = ()
    draft_kv_lens: tuple[int, ...] = ()  #: draft KV per row when the forward started
    expected_tokens: int | None = None  #: tokens this phase should carry (model's own count)
    hidden_rows: int | None = None  #: rows of hidden states fed in (draft phases)
    hidden_size: int | None = None
    #: the class of ``forward_batch.spec_info`` (model-only; invariants compare with ``issubclass``)
    spec_info_type: type | None = field(default=None, compare=False, repr=False)
    #: ``out_cache_loc`` entries this phase should carry, when not ``expected_tokens`` (v2 drafting)
    expected_loc: int | None = None
    #: per row: the end of the KV positions the forward writes, and the slots the request owns
    #: (v2, ``eagle_utils.py`` ``assign_*_cache_locs`` read ``req_to_token`` up to there)
    kv_write_end: tuple[int, ...] = ()
    kv_allocated: tuple[int, ...] = ()
    #: the graph runner ``ModelRunner._forward_raw`` asked and its answer (``forward_mode.is_cuda_graph()
    #: and can_run``): ``(runner, verdict)``; ``None`` where none was asked (no runner, the corrected
    #: fallback's bypass, a v2 runner's own decision). Model-only: the worker oracle feeds these forwards
    #: to upstream's ``can_run`` / ``replay_prepare`` (``specstate/oracle/worker``)
    graph_offer: tuple[Any, bool] | None = field(default=None, compare=False, repr=False)
    #: where ``input_ids`` / ``out_cache_loc`` came from (``batch.Provenance``, model-only)
    input_ids_from: Any = field(default=None, compare=False, repr=False)
    out_cache_loc_from: Any = field(default=None, compare=False, repr=False)
    #: a graph replay's token-sized slices, ``(field, rows)`` (``runner.graph_slices``), also on a
    #: replay that crashed while copying (model-only; the ``graph-input-rows`` invariant reads them)
    graph_slices: tuple[tuple[str, int], ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class Crash:
    """A modelled crash: the real worker would raise here.

    Compared by ``error_class`` and ``shapes``; ``message`` is what PyTorch (or Python) said.
    """

    error_class: str  #: e.g. ``RuntimeError``, ``AttributeError``
    where: str  #: the SGLang symbol that raises, e.g. ``cuda_graph_runner.py::CudaGraphRunner.replay_prepare``
    message: str
    shapes: dict[str, Any] = field(default_factory=dict)

    def signature(self) -> tuple[str, str, tuple[tuple[str, Any], ...]]:
        return (self.error_class, self.where, tuple(sorted((k, _freeze(v)) for k, v in self.shapes.items())))


@dataclass(frozen=True)
class Event:
    """A notable thing the scheduler or worker did (a warning, a retraction, a switch)."""

    kind: str
    detail: str
    rid: int | None = None


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v
