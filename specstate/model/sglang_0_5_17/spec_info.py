"""``EagleDraftInput`` as the v2 overlap worker carries it between iterations.

sglang 0.5.17 ``speculative/eagle_info.py::EagleDraftInput`` gains ``future_indices`` (the
batch's ``req_pool_indices``, the keys of ``overlap_utils.py::FutureMap``'s buffers) and
``num_tokens_for_logprob_per_req``. Under the overlap scheduler the draft tensors of the next
iteration (``topk_p``, ``topk_index``, ``hidden_states``, ``bonus_tokens``) live in the FutureMap;
``run_batch`` sets ``batch.spec_info = next_draft_input`` with ``future_indices``, and
``filter_batch`` / ``merge_batch`` then select / concatenate ``future_indices`` only (the other
fields keep their launch-time rows, stale after a filter). ``FutureMap._resolve_spec_extras``
gathers fresh rows by ``future_indices`` when the next batch launches (``resolve``).
"""

from __future__ import annotations

from dataclasses import dataclass
from specstate.model.values import cached_hash

from specstate.model.config import SpecConfig
from specstate.model.modes import CaptureHiddenMode
from specstate.model.spec_info import BatchShape, EagleDraftInput
from specstate.model.tensors import cat_rows, select_rows

__all__ = ["EagleDraftInputV2", "next_draft_input", "resolve", "filter_future", "merge_future"]


@cached_hash
@dataclass(frozen=True)
class EagleDraftInputV2(EagleDraftInput):
    """``EagleDraftInput`` with ``future_indices`` (v2 overlap worker)."""

    future_indices: BatchShape = (0,)  #: (b,) ``req_pool_indices``: the FutureMap rows to gather
    num_tokens_for_logprob_per_req: int = -1


def next_draft_input(config: SpecConfig, rows: tuple[int, ...]) -> EagleDraftInputV2:
    """``batch_result.next_draft_input`` after ``run_batch`` (``future_indices`` set)."""
    b, k = len(rows), config.speculative_eagle_topk
    return EagleDraftInputV2(rows=rows, topk_p=(b, k), topk_index=(b, k), hidden_states=(b, config.draft_hidden_size),
                             bonus_tokens=(b,), capture_hidden_mode=CaptureHiddenMode.LAST, num_tokens_per_req=1,
                             future_indices=(b,), num_tokens_for_logprob_per_req=1)


def resolve(config: SpecConfig, info: EagleDraftInputV2) -> EagleDraftInputV2:
    """``FutureMap._resolve_spec_extras``: the draft tensors gathered by ``future_indices``."""
    b, k = info.future_indices[0], config.speculative_eagle_topk
    return info.evolve(topk_p=(b, k), topk_index=(b, k), hidden_states=(b, config.draft_hidden_size), bonus_tokens=(b,))


def filter_future(info: EagleDraftInputV2, keep: list[int]) -> EagleDraftInputV2:
    """``EagleDraftInput.filter_batch`` with ``future_indices``: those rows, nothing else."""
    return info.evolve(rows=tuple(info.rows[i] for i in keep), future_indices=select_rows(info.future_indices, keep))


def merge_future(mine: EagleDraftInputV2, other: EagleDraftInputV2) -> EagleDraftInputV2:
    """``EagleDraftInput.merge_batch`` with ``future_indices``: concatenated, nothing else."""
    return mine.evolve(rows=mine.rows + other.rows, future_indices=cat_rows(mine.future_indices, other.future_indices))
