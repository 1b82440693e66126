"""The engine-neutral part of conformance: a recording's records loaded and validated once,
and two lists of ``Observation`` (``backend.py``) compared field by field, iteration by iteration.

The shared route (``walk.py``) compares the observations each release's observers build
(``integration/sglang_X_Y_Z/conformance.py``) with :func:`compare`; a field the recorded side leaves
``None`` (``_OPTIONAL``: not in that recording, or not recorded by that release) is not compared.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specstate.integration.backend import Fwd, Observation

if TYPE_CHECKING:
    from specstate.schema import Recording

__all__ = ["Mismatch", "compare", "load_records"]


def load_records(path: Path | str) -> Recording:
    """The records of a recording, validated by the release its schema names
    (``specstate.schema.read_recording`` over the catalog's ``RECORDING_SCHEMAS``: a truncated,
    corrupt or header-less file, or an unknown schema, is one ``RecordingFormatError``)."""
    from specstate.integration.catalog import RECORDING_SCHEMAS
    from specstate.schema import read_recording

    return read_recording(path, RECORDING_SCHEMAS)


@dataclass(frozen=True)
class Mismatch:
    index: int  #: iteration index (0-based, over iterations that ran a batch)
    field: str
    model: Any
    real: Any
    real_iter: Any

    def describe(self) -> str:
        return f"iteration {self.index} (real iter {self.real_iter}): {self.field}: model {self.model!r} vs real {self.real!r}"


def compare(model: list[Observation], real: list[Observation], *, accept_from_real: bool = True) -> list[Mismatch]:
    """Field-by-field, iteration by iteration; returns mismatches (the first is the report)."""
    out: list[Mismatch] = []
    if len(model) != len(real):
        out.append(Mismatch(min(len(model), len(real)), "iterations", len(model), len(real), None))
    for i, (m, r) in enumerate(zip(model, real)):
        for f in fields(Observation):
            if f.name in ("extra",) or (f.name == "accept_lens" and accept_from_real):
                continue
            mv, rv = getattr(m, f.name), getattr(r, f.name)
            if rv is None and f.name in _OPTIONAL or (f.name == "chunked_after" and rv == "?"):
                continue  # not in this recording
            if f.name == "crash" and mv and rv:
                rv = (rv[0], tuple(sorted(rv[1], reverse=True)))
            if f.name == "req_kv_after" and mv is not None:
                mv = tuple((c, a if rv and rv[0][1] is not None else None) for c, a in mv) if rv else mv
            if f.name == "forwards":
                mv, rv = _align_fwds(mv, rv)
            if mv != rv:
                out.append(Mismatch(i, f.name, mv, rv, r.extra.get("iter")))
    return out


_OPTIONAL = {"extend_lens", "prefix_lens", "kv_after", "req_kv_after", "spec_rows_after", "retracted", "aborted", "waiting_after",
             "ratio_after", "batch_is_full_after", "steps", "processed", "running_after", "adaptive_after"}


def _align_fwds(model: tuple[Fwd, ...], real: tuple[Fwd, ...]) -> tuple[tuple[Fwd, ...], tuple[Fwd, ...]]:
    """Fields a recording lacks (``seq_lens_cpu`` where the forward batch has none) are not compared."""
    if len(model) != len(real):
        return model, real
    pairs = [(m if r.seq_lens is not None else replace(m, seq_lens=None),
              r) for m, r in zip(model, real)]
    pairs = [(m if r.loc is not None else replace(m, loc=None), r) for m, r in pairs]
    return tuple(m for m, _ in pairs), tuple(r for _, r in pairs)
