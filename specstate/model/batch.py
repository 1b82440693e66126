"""``ScheduleBatch``: the batch the scheduler hands to the worker.

Mirrors ``sglang/srt/managers/schedule_batch.py::ScheduleBatch`` fields ``reqs``,
``forward_mode``, ``seq_lens``, ``req_pool_indices``, ``out_cache_loc``, ``input_ids``,
``positions`` (on the ``ForwardBatch``), ``extend_lens``, ``spec_info`` and ``chunked_req``.

Between iterations some fields are stale on purpose, as in SGLang: under speculation
``prepare_for_decode`` returns early, so a fresh decode batch still carries the prefill's
``input_ids`` / ``out_cache_loc`` (seen on the real worker: [617] at bs 10). Token counts are
therefore checked on each *forward* (``ForwardRecord``), not on the resting batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from specstate.model.values import cached_hash, evolve

from specstate.model.modes import ForwardMode
from specstate.model.spec_info import SpecInfo
from specstate.model.tensors import Shape

__all__ = ["ScheduleBatch", "EMPTY_BATCH"]


@cached_hash
@dataclass(frozen=True)
class ScheduleBatch:
    """``schedule_batch.py::ScheduleBatch`` (shapes and the values that matter)."""

    rids: tuple[int, ...] = ()  #: ``reqs``, in row order
    forward_mode: ForwardMode = ForwardMode.DECODE
    seq_lens: tuple[int, ...] = ()  #: ``seq_lens`` values, one per row
    req_pool_indices: tuple[int, ...] = ()  #: ``req_pool_indices`` (the model uses rids)
    input_ids: Shape = (0,)
    positions: Shape | None = None
    out_cache_loc: Shape | None = None  #: ``None`` after ``filter_batch`` / ``merge_batch``
    extend_lens: tuple[int, ...] | None = None  #: prefill only
    spec_info: SpecInfo | None = None
    chunked_rid: int | None = None  #: ``ScheduleBatch.chunked_req``
    batch_is_full: bool = False  #: ``ScheduleBatch.batch_is_full`` (sticky: no prefill until reset)
    #: ``ScheduleBatch.seq_lens_sum``: a stored field, recomputed by ``filter_batch`` and
    #: ``prepare_for_extend``, added to by ``merge_batch``, left stale by ``verify`` (``None``: sum)
    stored_seq_lens_sum: int | None = None

    @property
    def batch_size(self) -> int:
        """``ScheduleBatch.batch_size()``."""
        return len(self.rids)

    def is_empty(self) -> bool:
        """``ScheduleBatch.is_empty()``."""
        return not self.rids

    @property
    def seq_lens_sum(self) -> int:
        return sum(self.seq_lens)

    @property
    def stored_sum(self) -> int:
        """``ScheduleBatch.seq_lens_sum`` as stored (possibly stale)."""
        return self.seq_lens_sum if self.stored_seq_lens_sum is None else self.stored_seq_lens_sum

    def row_of(self, rid: int) -> int:
        return self.rids.index(rid)

    evolve = evolve  #: ``values.evolve``: a copy with some fields changed


EMPTY_BATCH = ScheduleBatch()
