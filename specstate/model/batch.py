"""``ScheduleBatch``: the batch the scheduler hands to the worker.

Mirrors ``sglang/srt/managers/schedule_batch.py::ScheduleBatch`` fields ``reqs``,
``forward_mode``, ``seq_lens``, ``req_pool_indices``, ``out_cache_loc``, ``input_ids``,
``positions`` (on the ``ForwardBatch``), ``extend_lens``, ``spec_info`` and ``chunked_req``.

Between iterations some fields are stale on purpose, as in SGLang: under speculation
``prepare_for_decode`` returns early, so a fresh decode batch still carries the prefill's
``input_ids`` / ``out_cache_loc`` (seen on the real worker: [617] at bs 10). Token counts are
therefore checked on each *forward* (``ForwardRecord``), not on the resting batch.

**Provenance** (model-only, no part of equality or hashing, so a search's state space is the
same with it): ``input_ids_from`` / ``out_cache_loc_from`` say which operation at which step set
the rows the tensor holds and for which requests, then each operation that kept them (a
:class:`Provenance`). A report can then say where a tensor of the wrong length came from:
``input_ids (2,) set by prepare_for_extend at step 12 for requests 8, 9; kept by merge_batch at
step 14``. Explore's symmetry reduction renames the request ids named here with the rest
(``fuzz/symmetry.py``); two states it merges may differ in provenance (steps, operations): a
report from a reduced search tells one history of the state, the first explored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from specstate.model.values import cached_hash, evolve

from specstate.model.modes import ForwardMode
from specstate.model.spec_info import SpecInfo
from specstate.model.tensors import Shape

__all__ = ["ScheduleBatch", "EMPTY_BATCH", "Provenance", "set_rows", "kept_rows"]


@dataclass(frozen=True)
class Provenance:
    """Where the rows of a batch tensor came from: the operation and step that set them, the
    requests they belong to, and the operations that carried them on unchanged."""

    op: str  #: the sglang symbol that set the tensor (``schedule_batch.py::ScheduleBatch.prepare_for_extend``)
    step: int  #: the step (``ModelState.step_index``) in which it ran
    rids: tuple[int, ...]  #: the requests whose rows it set, in row order
    rows: int  #: the tensor's leading length when set
    kept: tuple[tuple[str, int], ...] = ()  #: ``(operation, step)`` of each operation that kept it

    def keep(self, op: str, step: int) -> "Provenance":
        """This provenance, carried on by ``op`` at ``step`` (once per operation and step)."""
        if self.kept and self.kept[-1] == (op, step):
            return self
        return Provenance(self.op, self.step, self.rids, self.rows, self.kept + ((op, step),))

    def describe(self) -> str:
        """``set by OP at step S for requests [..]; kept by OP at step S, ...``"""
        rids = ", ".join(map(str, self.rids))
        who = f"request {rids}" if len(self.rids) == 1 else f"requests {rids}"
        text = f"set by {_short(self.op)} at step {self.step} ({self.rows} rows, {who})"
        if self.kept:
            text += "; kept by " + ", ".join(f"{_short(op)} at step {s}" for op, s in self.kept)
        return text


def _short(op: str) -> str:
    """``schedule_batch.py::ScheduleBatch.merge_batch`` -> ``ScheduleBatch.merge_batch``."""
    return op.rpartition("::")[2]


def set_rows(batch: "ScheduleBatch", step: int, *, input_ids: str | None = None,
             out_cache_loc: str | None = None) -> "ScheduleBatch":
    """``batch`` with the provenance of the tensors an operation just set (its symbol per tensor)."""
    changes = {}
    if input_ids is not None:
        changes["input_ids_from"] = Provenance(input_ids, step, batch.rids, batch.input_ids[0] if batch.input_ids else 0)
    if out_cache_loc is not None:
        loc = batch.out_cache_loc  # ``None`` (set to None by ``op``): 0 rows
        changes["out_cache_loc_from"] = Provenance(out_cache_loc, step, batch.rids, loc[0] if loc else 0)
    return batch.evolve(**changes)


def kept_rows(batch: "ScheduleBatch", op: str, step: int, *, input_ids: bool = True,
              out_cache_loc: bool = True) -> "ScheduleBatch":
    """``batch`` with ``op`` at ``step`` noted on the provenance of the tensors it carried on."""
    changes = {}
    if input_ids and batch.input_ids_from is not None:
        changes["input_ids_from"] = batch.input_ids_from.keep(op, step)
    if out_cache_loc and batch.out_cache_loc_from is not None:
        changes["out_cache_loc_from"] = batch.out_cache_loc_from.keep(op, step)
    return batch.evolve(**changes) if changes else batch


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
    #: provenance of ``input_ids`` / ``out_cache_loc`` (model-only bookkeeping, no part of
    #: equality, hashing or ``repr``: see the module docstring)
    input_ids_from: Provenance | None = field(default=None, compare=False, repr=False)
    out_cache_loc_from: Provenance | None = field(default=None, compare=False, repr=False)

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
