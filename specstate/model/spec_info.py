"""``batch.spec_info``: the speculative state a batch carries between phases.

Mirrors ``sglang/srt/speculative/eagle_info.py``: ``EagleDraftInput`` (carried from one
iteration to the next), ``EagleVerifyInput`` (built by ``EAGLEWorker.draft`` for verify) and
``EagleDraftExtendInput`` (built by ``EagleVerifyInput.verify`` for the draft-extend forward).

Tensor fields are shapes. ``rows`` is model-only bookkeeping: the request id each row
belongs to. SGLang's rows are positional, so a filter that truncates instead of selecting
(``EagleDraftInput.filter_batch(has_been_filtered=True)``) silently re-assigns rows; keeping
owners lets the ``spec-info-rows`` invariant see it.

Per-row fields are *discovered*, not listed: a tensor field annotated :data:`BatchShape`
(a leading batch dimension, one row per request) is filtered, merged and row-checked by
:func:`batch_fields`, including fields a variant's subclass adds (older sglang and the v2
worker carry per-request accept lengths on the draft input:
``eagle_info.py::EagleDraftInput.filter_batch`` must select them too).
"""

from __future__ import annotations

import functools
import typing
from dataclasses import dataclass, fields
from specstate.model.values import cached_hash, evolve
from typing import Annotated, Union

from specstate.model.modes import CaptureHiddenMode, ForwardMode, Worker
from specstate.model.tensors import Shape

__all__ = ["EagleDraftInput", "EagleVerifyInput", "EagleDraftExtendInput", "SpecInfo", "spec_info_kind",
           "BATCH_DIM", "BatchShape", "batch_fields", "SPEC_FOR_MODE", "spec_info_for"]

#: marker of a tensor field whose leading dimension is the batch (one row per request)
BATCH_DIM = "batch-dim"
BatchShape = Annotated[Shape, BATCH_DIM]


@cached_hash
@dataclass(frozen=True)
class EagleDraftInput:
    """``eagle_info.py::EagleDraftInput``."""

    rows: tuple[int, ...]  #: owner rid per row (model-only)
    topk_p: BatchShape  #: (b, topk) float32
    topk_index: BatchShape  #: (b, topk) int64
    hidden_states: BatchShape  #: (b, draft hidden) — draft's own last hidden (``capture_for_decode``)
    bonus_tokens: BatchShape  #: (b,) the "+1" token per request, KV not yet written
    capture_hidden_mode: CaptureHiddenMode = CaptureHiddenMode.LAST
    kv_indptr: Shape | None = None  #: (b + 1,) set only while drafting; None otherwise
    kv_indices: Shape | None = None
    num_tokens_per_req: int = 1  #: 1 after draft-extend; ``topk`` while drafting
    positions: Shape | None = None  #: (b * topk,) set by ``_draft_preprocess_decode``

    @property
    def num_rows(self) -> int:
        return self.topk_p[0]

    evolve = evolve  #: ``values.evolve``: a copy with some fields changed


@cached_hash
@dataclass(frozen=True)
class EagleVerifyInput:
    """``eagle_info.py::EagleVerifyInput`` (built by ``EAGLEWorker.draft``)."""

    rows: tuple[int, ...]
    draft_token: Shape  #: (b * draft_token_num,)
    custom_mask: Shape  #: (draft_token_num * (seq_lens_sum + draft_token_num * b),) bool
    positions: Shape  #: (b * draft_token_num,)
    retrieve_index: BatchShape  #: (b, draft_token_num)
    retrieve_next_token: BatchShape
    retrieve_next_sibling: BatchShape
    spec_steps: int
    topk: int
    draft_token_num: int
    seq_lens_sum: int
    capture_hidden_mode: CaptureHiddenMode = CaptureHiddenMode.FULL
    num_tokens_per_req: int = -1  #: -1 auto-fills from draft_token_num; verify sets steps + 1
    hidden_states: Shape | None = None  #: target hidden states, set in ``EAGLEWorker.verify``

    def __post_init__(self) -> None:
        if self.num_tokens_per_req < 0:
            object.__setattr__(self, "num_tokens_per_req", self.draft_token_num)

    @property
    def num_rows(self) -> int:
        return self.retrieve_index[0]

    evolve = evolve  #: ``values.evolve``: a copy with some fields changed


@cached_hash
@dataclass(frozen=True)
class EagleDraftExtendInput:
    """``eagle_info.py::EagleDraftExtendInput`` (built by ``EagleVerifyInput.verify``)."""

    rows: tuple[int, ...]
    hidden_states: Shape  #: (sum accepted, target hidden x aux)
    num_correct_drafts: BatchShape  #: (b,)
    num_accept_tokens: BatchShape  #: (b,)
    num_accept_tokens_cpu: tuple[int, ...]
    input_ids: Shape  #: (sum accepted,)
    seq_lens: tuple[int, ...]  #: post-accept lengths of the surviving requests
    req_pool_indices: BatchShape  #: (b,)
    capture_hidden_mode: CaptureHiddenMode = CaptureHiddenMode.LAST
    num_tokens_per_req: int = -1
    positions: Shape | None = None  #: set by ``prepare_extend_after_decode``
    bonus_tokens: Shape | None = None  #: set by ``prepare_extend_after_decode``

    @property
    def num_rows(self) -> int:
        return self.num_accept_tokens[0]

    evolve = evolve  #: ``values.evolve``: a copy with some fields changed


SpecInfo = Union[EagleDraftInput, EagleVerifyInput, EagleDraftExtendInput]


def spec_info_kind(info: SpecInfo | None) -> str | None:
    """The class name SGLang would show (``type(batch.spec_info).__name__``)."""
    return None if info is None else type(info).__name__


def _batch_fields(cls: type) -> tuple[str, ...]:
    """Names of the fields of spec_info class ``cls`` (and its subclasses' additions) that
    are tensors with a leading batch dimension (annotated :data:`BatchShape`), in
    declaration order."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return tuple(f.name for f in fields(cls) if _has_batch_dim(hints.get(f.name)))


#: typed as taking a class: ``lru_cache``'s wrapper takes ``Hashable``, which mypy does not grant a
#: dataclass' class object (``type[EagleDraftInput]``: its ``__hash__`` is read as the instances')
batch_fields: typing.Callable[[type], tuple[str, ...]] = functools.lru_cache(maxsize=None)(_batch_fields)


def _has_batch_dim(hint: object) -> bool:
    if BATCH_DIM in getattr(hint, "__metadata__", ()):
        return True
    return any(_has_batch_dim(a) for a in typing.get_args(hint) if a is not type(None))


#: the ``spec_info`` a forward carries, by worker and mode (``None``: none; a pair not listed:
#: unconstrained): the ``mode-consistency`` invariant's table (``invariants/_always.py``, where it
#: is cited), which 0.5.12's checks on recorded forwards read too (``spec_info_for``)
SPEC_FOR_MODE: dict[tuple[Worker, ForwardMode], type | None] = {
    (Worker.TARGET, ForwardMode.TARGET_VERIFY): EagleVerifyInput,
    (Worker.TARGET, ForwardMode.DECODE): None,
    (Worker.DRAFT, ForwardMode.DECODE): EagleDraftInput,
    (Worker.DRAFT, ForwardMode.DRAFT_EXTEND): EagleDraftExtendInput,
    (Worker.DRAFT, ForwardMode.DRAFT_EXTEND_V2): EagleDraftExtendInput,
}


def spec_info_for(worker: str | None, mode: str | None) -> tuple[bool, str | None]:
    """Whether ``SPEC_FOR_MODE`` constrains the ``spec_info`` of a ``worker`` forward in ``mode``
    (``Worker`` / ``ForwardMode`` values, as a recording names them), and the class name it must
    carry (``None``: none)."""
    try:
        key = (Worker(worker), ForwardMode(mode))
    except ValueError:
        return False, None
    if key not in SPEC_FOR_MODE:
        return False, None
    want = SPEC_FOR_MODE[key]
    return True, want.__name__ if want is not None else None
