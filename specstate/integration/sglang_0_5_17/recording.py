"""A sglang 0.5.17 recording (schema ``specstate-sglang17-rec/1``): the JSON lines
``recorder.py`` beside it writes, read by ``specstate conform`` and ``conformance.py``.

Same rules as the 0.5.12 recording (``sglang_0_5_12/recording.py``), over the shared record
types (``specstate/schema/_record_types.py``): one object per line with ``ev``; the fields
conformance reads are checked strictly, the others pass through (``extra="allow"``). The loader
(``specstate.schema.read_recording``) picks these models (``model_for``, this adapter's
``record_models`` part) once the header names this schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, Field

from specstate.schema._record_types import (Count, Rid, Rids, Size, _AbortCore, _ArriveCore, _Error, _FwdCore, _HeaderCore, _Kv,
                                            _Open, _Retract, SnapMaybeRatio, _ServerArgsCore)

__all__ = ["SCHEMA_V17", "RECORD_MODELS_V17", "model_for_v17", "model_for", "typed_header"]

SCHEMA_V17 = "specstate-sglang17-rec/1"


class _ServerArgs(_ServerArgsCore):
    #: ``false``: a static launch (absent in recordings made before it was written: adaptive)
    speculative_adaptive: Optional[bool] = None
    speculative_adaptive_config: Optional[str] = None
    cuda_graph_max_bs_decode: Optional[Size] = None
    cuda_graph_bs_decode: Optional[Annotated[list[Size], Field(min_length=1, max_length=4096)]] = None


class _Adaptive(_Open):
    steps: Optional[Count] = None
    slots: dict[str, Annotated[list[float], Field(min_length=3, max_length=3)]] = {}


class _Patch(_Open):
    """The switch patch on ``EAGLEWorkerV2`` (``switch_patch.SwitchConfig.header``): conformance's variant and threshold."""
    name: Literal["v2-switch-naive", "v2-switch"]
    threshold: Count
    variant: Literal["v2-static-switch-naive", "v2-static-switch"]


class _Sizes(_Open):
    """The scheduler's own sizes the header reports (``recorder.header``: ``Scheduler.max_running_requests``,
    ``max_total_num_tokens``, ``max_prefill_tokens``, ``chunked_prefill_size``, ``model_config.context_len``)."""

    max_running_requests: Optional[Size] = None
    max_total_num_tokens: Optional[Size] = None
    max_prefill_tokens: Optional[Size] = None
    chunked_prefill_size: Optional[int] = None
    context_len: Optional[Size] = None


class _Header(_HeaderCore, _Sizes):
    schema_: Literal["specstate-sglang17-rec/1"] = Field(alias="schema")
    server_args: _ServerArgs
    adaptive_config_text: Optional[Annotated[str, Field(max_length=1 << 20)]] = None
    #: the adaptive controller as the recording starts (absent in recordings made before it was written)
    adaptive_start: Optional[_Adaptive] = None
    #: the switch patch the scheduler ran (absent or null: none; recordings made before it was written)
    patch: Optional[_Patch] = None


class _Brief(_Open):
    mode: Optional[str] = None
    rids: Rids = []


class _Loop(_Open):
    ev: Literal["loop"]
    loop: Count
    idle_before: Count = 0
    batch: Optional[_Brief] = None
    last: Optional[_Brief] = None


class _Fwd(_FwdCore):
    padded_bs: Optional[Count] = None


class _Launch(_Open):
    ev: Literal["fbg", "fbg_error"]
    loop: Count
    mode_in: Optional[str] = None
    rids: Rids = []
    steps: Optional[Count] = None
    path: Optional[Literal["extend", "spec", "trivial"]] = None
    events: Annotated[list[_Fwd], Field(max_length=4096)] = []
    error: Optional[_Error] = None
    #: a prefill's radix match and extend length per request (recorder.admitted; absent in
    #: recordings made before they were written: then not compared)
    prefix_lens: Optional[Annotated[list[Count], Field(max_length=4096)]] = None
    extend_lens: Optional[Annotated[list[Count], Field(max_length=4096)]] = None


class _Reqs(_Open):
    rid: Rids = []
    out_len: list[Count] = []
    kv_committed: list[Count] = []
    kv_allocated: list[Count] = []


class _Post(_Open):
    ev: Literal["post"]
    loop: Count
    rids: Rids = []
    accept_lens: Optional[list[Annotated[int, Field(ge=0, le=64)]]] = None
    reqs: Optional[_Reqs] = None
    adaptive: Optional[_Adaptive] = None


class _End(SnapMaybeRatio):
    ev: Literal["end"]
    loop: Count
    reqs: Optional[_Reqs] = None
    adaptive: Optional[_Adaptive] = None


class _Arrive(_ArriveCore):
    ev: Literal["arrive", "requeue"]
    prompt_len: Optional[Size] = None
    kv: Optional[_Kv] = None
    ratio: Optional[float] = None


class _Abort(_AbortCore):
    rid: Optional[Rid] = None


#: the model that checks a 0.5.17 record, by its ``ev``
RECORD_MODELS_V17: dict[str, type[BaseModel]] = {
    "header": _Header, "loop": _Loop, "fbg": _Launch, "fbg_error": _Launch, "post": _Post, "end": _End,
    "arrive": _Arrive, "requeue": _Arrive, "abort": _Abort, "retract": _Retract,
}


def model_for_v17(data: dict) -> dict[str, type[BaseModel]]:
    """The models for one record: a line the recorder could not describe (``desc_err``: it
    caught an exception rather than stop the scheduler) is checked as any record; conformance
    then reports what it lacks."""
    return {} if "desc_err" in data else RECORD_MODELS_V17


#: this release's ``record_models`` part (``integration/adapter.py``)
model_for = model_for_v17


def typed_header(records: Any) -> "_Header | None":
    """The header of typed records (the first ``_Header``), ``None`` where there is none."""
    return next((r for r in records if isinstance(r, _Header)), None)
