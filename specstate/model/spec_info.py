"""``batch.spec_info``: the speculative state a batch carries between phases.

Mirrors ``sglang/srt/speculative/eagle_info.py``: ``EagleDraftInput`` (carried from one
iteration to the next), ``EagleVerifyInput`` (built by ``EAGLEWorker.draft`` for verify) and
``EagleDraftExtendInput`` (built by ``EagleVerifyInput.verify`` for the draft-extend forward).

Tensor fields are shapes. ``rows`` is model-only bookkeeping: the request id each row
belongs to. SGLang's rows are positional, so a filter that truncates instead of selecting
(``EagleDraftInput.filter_batch(has_been_filtered=True)``) silently re-assigns rows; keeping
owners lets the ``spec-info-rows`` invariant see it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Union

from specstate.model.modes import CaptureHiddenMode
from specstate.model.tensors import Shape

__all__ = ["EagleDraftInput", "EagleVerifyInput", "EagleDraftExtendInput", "SpecInfo", "spec_info_kind"]


@dataclass(frozen=True)
class EagleDraftInput:
    """``eagle_info.py::EagleDraftInput``."""

    rows: tuple[int, ...]  #: owner rid per row (model-only)
    topk_p: Shape  #: (b, topk) float32
    topk_index: Shape  #: (b, topk) int64
    hidden_states: Shape  #: (b, draft hidden) — draft's own last hidden (``capture_for_decode``)
    bonus_tokens: Shape  #: (b,) the "+1" token per request, KV not yet written
    capture_hidden_mode: CaptureHiddenMode = CaptureHiddenMode.LAST
    kv_indptr: Shape | None = None  #: (b + 1,) set only while drafting; None otherwise
    kv_indices: Shape | None = None
    num_tokens_per_req: int = 1  #: 1 after draft-extend; ``topk`` while drafting
    positions: Shape | None = None  #: (b * topk,) set by ``_draft_preprocess_decode``

    @property
    def num_rows(self) -> int:
        return self.topk_p[0]

    def evolve(self, **changes: object) -> "EagleDraftInput":
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class EagleVerifyInput:
    """``eagle_info.py::EagleVerifyInput`` (built by ``EAGLEWorker.draft``)."""

    rows: tuple[int, ...]
    draft_token: Shape  #: (b * draft_token_num,)
    custom_mask: Shape  #: (draft_token_num * (seq_lens_sum + draft_token_num * b),) bool
    positions: Shape  #: (b * draft_token_num,)
    retrieve_index: Shape  #: (b, draft_token_num)
    retrieve_next_token: Shape
    retrieve_next_sibling: Shape
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

    def evolve(self, **changes: object) -> "EagleVerifyInput":
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class EagleDraftExtendInput:
    """``eagle_info.py::EagleDraftExtendInput`` (built by ``EagleVerifyInput.verify``)."""

    rows: tuple[int, ...]
    hidden_states: Shape  #: (sum accepted, target hidden x aux)
    num_correct_drafts: Shape  #: (b,)
    num_accept_tokens: Shape  #: (b,)
    num_accept_tokens_cpu: tuple[int, ...]
    input_ids: Shape  #: (sum accepted,)
    seq_lens: tuple[int, ...]  #: post-accept lengths of the surviving requests
    req_pool_indices: Shape  #: (b,)
    capture_hidden_mode: CaptureHiddenMode = CaptureHiddenMode.LAST
    num_tokens_per_req: int = -1
    positions: Shape | None = None  #: set by ``prepare_extend_after_decode``
    bonus_tokens: Shape | None = None  #: set by ``prepare_extend_after_decode``

    @property
    def num_rows(self) -> int:
        return self.num_accept_tokens[0]

    def evolve(self, **changes: object) -> "EagleDraftExtendInput":
        return replace(self, **changes)  # type: ignore[arg-type]


SpecInfo = Union[EagleDraftInput, EagleVerifyInput, EagleDraftExtendInput]


def spec_info_kind(info: SpecInfo | None) -> str | None:
    """The class name SGLang would show (``type(batch.spec_info).__name__``)."""
    return None if info is None else type(info).__name__
