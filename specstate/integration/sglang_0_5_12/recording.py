"""A sglang 0.5.12 recording (schemas ``specstate-sglang-rec/1`` and ``/2``): the JSON lines
``integration/sglang_recorder.py`` writes on a GPU host, read by ``specstate conform`` and
``conformance.py`` beside this file.

Only the fields conformance reads are checked, strictly (types, bounds), over the shared record
types (``specstate/schema/_record_types.py``); the recorder writes many more for people to read,
and those pass through (``extra="allow"``). The loader (``specstate.schema.read_recording``)
picks these models (``model_for``, this adapter's ``record_models`` part) once the header names
one of this release's schemas.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, Field

from specstate.schema._record_types import (Count, Counts, Rid, Rids, Size, _AbortCore, _ArriveCore, _Error, _FwdCore,
                                            _HeaderCore, _Kv, _Open, _Retract, SnapWithRatio, _ServerArgsCore)

__all__ = ["RECORD_MODELS", "model_for", "typed_header"]


class _ServerArgs(_ServerArgsCore):
    cuda_graph_max_bs: Optional[Size] = None
    max_running_requests: Optional[Size] = None


class _Runner(_Open):
    capture_bs: Optional[Annotated[list[Size], Field(min_length=1, max_length=4096)]] = None


class _Header(_HeaderCore):
    schema_: Optional[str] = Field(default=None, alias="schema")
    topk: Size
    speculative_num_steps: Size
    speculative_num_draft_tokens: Size
    server_args: Optional[_ServerArgs] = None
    graph_runners: Optional[dict[str, Optional[_Runner]]] = None
    #: ``EAGLEWorker.page_size`` (recordings made before ``server_args.page_size`` was written)
    page_size: Optional[Size] = None


class _Arrive(_ArriveCore, SnapWithRatio):
    ev: Literal["arrive"]
    prompt_len: Size
    t: Optional[float] = None


class _Abort(_AbortCore):
    rid: Rid
    iter: Optional[int] = None


class _Post(SnapWithRatio):
    ev: Literal["post"]
    iter: Optional[int] = None
    rids: Rids = []
    out_len: Counts = []
    finished: Annotated[list[Optional[str]], Field(max_length=1 << 16)] = []
    kv_committed: Counts = []
    kv_allocated: Optional[Counts] = None


class _Graph(_Open):
    padded_bs: Optional[Count] = None
    raw_num_token: Optional[Count] = None


class _Fwd(_FwdCore):
    graph: Optional[_Graph] = None
    via: Optional[str] = None
    spec: Optional[str] = None


class _Reqs(_Open):
    rid: Rids = []
    prompt_len: Counts = []
    out_len: Counts = []
    finished: Annotated[list[Optional[str]], Field(max_length=1 << 16)] = []


class _Spec(_Open):
    cls: Optional[str] = None
    fields: Optional[dict[str, Any]] = None


class _Snapshot(_Open):
    seq_lens: Optional[list[Count]] = None
    extend_lens: Optional[list[Count]] = None
    spec_info: Optional[_Spec] = None


class _Result(_Open):
    accept_lens: Optional[list[Annotated[int, Field(ge=0, le=64)]]] = None


class _Iteration(_Open):
    ev: Literal["fbg", "fbg_error"]
    iter: Optional[int] = None
    path: Optional[str] = None
    bs: Optional[Count] = None
    rids: Rids = []
    mode_in: Optional[str] = None
    t: Optional[float] = None
    dt_ms: Optional[float] = None
    result: Optional[_Result] = None
    events: Annotated[list[_Fwd], Field(max_length=4096)] = []
    reqs_before: Optional[_Reqs] = None
    reqs_after: Optional[_Reqs] = None
    before: Optional[_Snapshot] = None
    after: Optional[_Snapshot] = None
    kv_before: Optional[_Kv] = None
    error: Optional[_Error] = None


#: the model that checks a record, by its ``ev``
RECORD_MODELS: dict[str, type[BaseModel]] = {
    "header": _Header, "arrive": _Arrive, "abort": _Abort, "retract": _Retract, "post": _Post,
    "fbg": _Iteration, "fbg_error": _Iteration,
}


def model_for(data: dict) -> dict[str, type[BaseModel]]:
    """The models for one record (this release's ``record_models`` part): the same for every line."""
    return RECORD_MODELS


def typed_header(records: Any) -> "_Header | None":
    """The header of typed records (the first ``_Header``), ``None`` where there is none."""
    return next((r for r in records if isinstance(r, _Header)), None)
