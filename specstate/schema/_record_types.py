"""The record types both recording schemas share: the strict-but-open base model, bounded
counts and ids, the KV counters, a forward's common fields and an error.

``_recording.py`` (sglang 0.5.12's schema, and the loader) and ``_recording17.py`` (sglang
0.5.17's) both build on these; they live apart so that neither schema imports the other for them.
"""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Count", "Counts", "Rid", "Rids", "Size", "_Error", "_FwdCore", "_Kv", "_Open"]

_OPEN = ConfigDict(strict=True, extra="allow", allow_inf_nan=False, frozen=True)
Count = Annotated[int, Field(ge=0, le=1 << 40)]
Size = Annotated[int, Field(ge=1, le=1 << 30)]
Rid = Annotated[str, Field(max_length=1000)]
#: a list of request ids in one record (the waiting queue is the longest: 64 Ki requests)
Rids = Annotated[list[Rid], Field(max_length=1 << 16)]
Counts = Annotated[list[Count], Field(max_length=1 << 16)]


class _Open(BaseModel):
    model_config = _OPEN


class _Kv(_Open):
    available: Optional[Count] = None
    evictable: Optional[Count] = None
    protected: Optional[Count] = None


class _FwdCore(_Open):
    """One forward, the fields both recording schemas share (0.5.17's ``_Fwd`` too)."""

    ev: Optional[str] = None
    worker: Optional[str] = None
    mode: Optional[str] = None
    bs: Optional[Count] = None
    input_ids: Optional[list[Count]] = None
    out_cache_loc: Optional[list[Count]] = None
    seq_lens_cpu: Optional[list[Count]] = None
    graph_ran: Optional[bool] = None


class _Error(_Open):
    cls: Optional[str] = None
    msg: str = ""
