"""The CUDA-graph runners' static buffers, as state that persists between replays.

Owns: for every static buffer (by key; runners that share a buffer share its key), what
each row along its leading dimension holds: the request and iteration that last wrote it
(:class:`Writer`), or ``None``, the fill value (capture-time zeros, or the value
``replay_prepare`` resets padding rows to: ``seq_len_fill_value`` for ``seq_lens``, 0 for
``out_cache_loc``).

Mirrors ``model_executor/cuda_graph_runner.py::DecodeInputBuffers`` (allocated once at
capture, written in place by ``DecodeInputBuffers.populate_from_forward_batch``: rows
``[:raw_bs]`` are copied, rows ``raw_bs:bs`` keep whatever they held unless the padding
reset runs), and the buffers of ``eagle_draft_cuda_graph_runner.py::EAGLEDraftCudaGraphRunner``
and ``eagle_draft_extend_cuda_graph_runner.py::EAGLEDraftExtendCudaGraphRunner``.

The identity the ``graph-padding`` invariant keeps: when a graph runs at captured size
``bs`` for ``raw_bs`` requests, rows ``[:raw]`` of every buffer it copies were written in
this iteration, and rows ``raw:bs`` of every buffer the runner resets hold the fill value.
A first replay at a padded size reads capture-time fill values: harmless; a replay that
shrinks under the same captured size after a larger one reads the larger one's rows unless
the reset runs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import NamedTuple
from specstate.model.values import BoundedMemo, cached_hash

from specstate.model.tensors import Shape

__all__ = ["Writer", "Row", "BufferSpec", "BufferRead", "GraphBuffers", "EMPTY_GRAPH_BUFFERS"]


class Writer(NamedTuple):
    """Who last wrote a buffer row. A named tuple, not a dataclass: a state holds one per
    buffer row (thousands), and hashing and comparing them then runs in C."""

    rid: int  #: the request whose data the row holds
    iteration: int  #: the step (``ModelState.step_index``) that wrote it


Row = Writer | None  #: ``None``: the fill value


@dataclass(frozen=True)
class BufferSpec:
    """One static buffer of a runner, sized at capture."""

    name: str  #: the buffer's attribute (``seq_lens``, ``out_cache_loc``, ...)
    key: str  #: state key; runners sharing a buffer (0.5.14+ runtime states) share it
    per_bs: int  #: rows along the leading dim per captured request (tokens per request, or 1)
    capacity: int  #: rows allocated at capture (``max_bs * per_bs`` of the runner that sized it)
    trailing: Shape = ()  #: trailing dims (``topk``, hidden size)
    resets: bool = False  #: padding rows are reset to the fill value before a padded replay


class BufferRead(NamedTuple):
    """What the graph read from one buffer at replay: rows ``[:padded]`` after ``replay_prepare``.
    (A named tuple: every replay makes one per buffer; hashing and comparing run in C.)"""

    name: str  #: the buffer's attribute
    raw: int  #: rows holding this batch's data (``raw_bs * per_bs``, or ``num_tokens``)
    resets: bool
    rows: tuple[Row, ...]  #: contents of rows ``[:padded]`` when the graph runs


@cached_hash
@dataclass(frozen=True)
class GraphBuffers:
    """Contents of every static buffer written so far (absent key: all fill values)."""

    contents: tuple[tuple[str, tuple[Row, ...]], ...] = field(default=())

    @functools.cached_property
    def _table(self) -> dict[str, tuple[Row, ...]]:
        return dict(self.contents)

    def rows(self, spec: BufferSpec) -> tuple[Row, ...]:
        """Every row of ``spec``'s buffer, its capacity long."""
        stored, cap = self._table.get(spec.key, ()), spec.capacity
        return stored if len(stored) == cap else stored[:cap] + (None,) * (cap - len(stored))

    def written(self, writes: tuple[tuple[str, tuple[Row, ...]], ...]) -> "GraphBuffers":
        table = dict(self._table)
        for key, rows in writes:
            old = table.get(key, ())
            table[key] = rows + old[len(rows):] if len(old) > len(rows) else rows
        out = GraphBuffers(tuple(sorted(table.items())))
        out.__dict__["_table"] = table  # the ``cached_property``, already known
        return out

    def canonical(self) -> "GraphBuffers":
        """Only which rows hold some earlier replay's data (``Writer(-1, -1)``) and which the
        fill value, for canonical states: ``graph-padding`` compares a row's writer with the
        current step only, and reads rows this step did not write only for "written or not";
        the writer's request id appears in reports alone. Trailing fill rows are dropped.

        Equal canonical buffers are one object (``_CANONICAL``), remembered on ``self`` too: an
        exploration keeps one per state it has seen, and they are few distinct values."""
        d = self.__dict__
        got = d.get("_canonical")
        if got is None:
            out = []
            for key, rows in self.contents:
                end = len(rows)
                while end and rows[end - 1] is None:
                    end -= 1
                if end:
                    out.append((key, _marks(rows, end)))
            got = d["_canonical"] = _CANONICAL(tuple(out))
        return got


def _marks(rows: tuple[Row, ...], end: int) -> tuple[Row, ...]:
    """``rows[:end]`` with every writer replaced by ``_EARLIER``."""
    earlier = _EARLIER
    return tuple([None if r is None else earlier for r in rows[:end]])


EMPTY_GRAPH_BUFFERS = GraphBuffers()


def _canonical_buffers(contents: tuple[tuple[str, tuple[Row, ...]], ...]) -> GraphBuffers:
    g = GraphBuffers(contents)
    g.__dict__["_canonical"] = g  # already canonical
    return g


#: canonical contents -> the one ``GraphBuffers`` holding them (``GraphBuffers.canonical``)
_CANONICAL: BoundedMemo[tuple[tuple[str, tuple[Row, ...]], ...], GraphBuffers] = BoundedMemo(_canonical_buffers, 65_536)
_EARLIER = Writer(-1, -1)  #: "some request, some earlier step" (canonical states)
