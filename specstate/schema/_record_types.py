"""The record types every release's recording schema shares: the strict-but-open base model,
bounded counts and ids, the KV counters, the server arguments, scheduler snapshot, arrival and
forward fields both recorders write, a retraction and an error.

Each release's record models (``integration/sglang_X_Y_Z/recording.py``, beside its recorder)
build on these and add only their own fields; they live here, below both, so that no release's
schema imports another's for them.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Count", "Counts", "Rid", "Rids", "Size", "_AbortCore", "_ArriveCore", "_Error", "_FwdCore", "_Kv", "_Open",
           "_HeaderCore", "_Retract", "_SchedCore", "SchedWithRatio", "SchedMaybeRatio", "SnapWithRatio", "SnapMaybeRatio",
           "_ServerArgsCore"]

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


class _ServerArgsCore(_Open):
    """The server arguments both releases' headers carry (``server_args``) that conformance reads."""

    speculative_eagle_topk: Optional[Size] = None
    speculative_num_steps: Optional[Size] = None
    speculative_num_draft_tokens: Optional[Size] = None
    chunked_prefill_size: Optional[int] = None
    max_prefill_tokens: Optional[Size] = None
    schedule_conservativeness: Optional[float] = None
    disable_radix_cache: Optional[bool] = None
    page_size: Optional[Size] = None


class _SchedCore(_Open):
    """The scheduler's queues as both recorders snapshot them (``sched``)."""

    waiting: Rids = []
    running: Rids = []
    chunked: Optional[Rid] = None
    batch_is_full: bool = False


class SchedWithRatio(_SchedCore):
    """``sched`` with ``Scheduler.new_token_ratio``, which the 0.5.12 recorder always writes."""

    new_token_ratio: float = 0.0


class SchedMaybeRatio(_SchedCore):
    """``sched`` whose ``new_token_ratio`` a recorder may leave out (0.5.17's)."""

    new_token_ratio: Optional[float] = None


class SnapWithRatio(_Open):
    """The allocator and the scheduler's queues as a record snapshots them (``kv``, ``sched``):
    the 0.5.12 recorder's, whose ``sched`` always has ``new_token_ratio``."""

    kv: Optional[_Kv] = None
    sched: Optional[SchedWithRatio] = None


class SnapMaybeRatio(_Open):
    """``kv`` and ``sched`` as the 0.5.17 recorder snapshots them (``new_token_ratio`` may be left out)."""

    kv: Optional[_Kv] = None
    sched: Optional[SchedMaybeRatio] = None


class _HeaderCore(_Open):
    """The header's fields both recorders write: the KV pool's size (``max_total_num_tokens``)
    and the environment variables sglang reads that the recorder kept."""

    ev: Literal["header"]
    kv_size: Optional[Size] = None
    env: Optional[dict[str, str]] = None


class _AbortCore(_Open):
    """``abort``: a request aborted (by the client, or the scheduler out of memory)."""

    ev: Literal["abort"]


class _ArriveCore(_Open):
    """An arrival's fields both recorders write (``arrive``): the request and its radix match."""

    rid: Rid
    max_new_tokens: Optional[Size] = None
    lcp: Optional[Count] = None
    lcp_rid: Optional[Rid] = None


class _Retract(_Open):
    """``retract``: the requests ``retract_decode`` sent back to the queue."""

    ev: Literal["retract"]
    retracted: Rids = []
    #: the requests aborted out of memory there (0.5.17's recorder: ``around_retract_decode``)
    aborted: Rids = []


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
    #: the traceback's last lines (0.5.17's recorder)
    tb_tail: Optional[Annotated[list[Annotated[str, Field(max_length=1 << 16)]], Field(max_length=4096)]] = None
