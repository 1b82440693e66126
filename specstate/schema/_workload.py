"""A workload file for ``specstate replay --engine sglang WORKLOAD.json`` (the format is
``integration/workloads.py``'s): waves of requests with their lengths and timings.

Checked here before anything starts an engine; the cross-request rules (unique rids, no rid
a prefix of another when aborts are used, ``prefix_of`` naming an earlier request) stay with
``Workload`` and come back as the same ``WorkloadFormatError``.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

from pydantic import BaseModel, Field, ValidationError

from specstate.errors import WorkloadFormatError
from specstate.schema._config import STRICT
from specstate.schema._messages import describe_error

__all__ = ["WorkloadFile", "parse_workload"]

Length = Annotated[int, Field(ge=1, le=1 << 20)]
Seconds = Annotated[float, Field(ge=0, le=3600)]
Name = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:-]+$")]


class _Request(BaseModel):
    model_config = STRICT
    rid: Name
    prompt_len: Optional[Length] = None
    #: ``null``: no cap of the request's own (sglang then generates up to the context length: the
    #: row-overflow workloads of ``sglang_0_5_17/reverts17.py``)
    max_new_tokens: Optional[Length]
    abort_after_s: Optional[Seconds] = None
    delay_s: Optional[Seconds] = 0.0
    ignore_eos: bool = True
    temperature: Annotated[float, Field(ge=0, le=2)] = 0.0
    input_ids: Optional[Annotated[list[Annotated[int, Field(ge=0, le=1 << 22)]], Field(min_length=1, max_length=1 << 20)]] = None
    prefix_group: Optional[Name] = None
    shared_len: Annotated[int, Field(ge=0, le=1 << 20)] = 0
    prefix_of: Optional[Name] = None


class WorkloadFile(BaseModel):
    model_config = STRICT
    name: Optional[Annotated[str, Field(max_length=200)]] = None
    seed: Annotated[int, Field(ge=0, le=(1 << 63) - 1)] = 0
    meta: dict[str, Any] = {}
    waves: Annotated[list[Annotated[list[_Request], Field(max_length=4096)]], Field(min_length=1, max_length=10_000)]


def parse_workload(text: str, source: str = "workload") -> dict[str, Any]:
    """The workload's JSON data, validated (``Workload.from_json`` builds it)."""
    try:
        m = WorkloadFile.model_validate_json(text)
    except ValidationError as e:
        raise WorkloadFormatError(describe_error(e, source)) from None
    data = m.model_dump(exclude_unset=True)
    for wave in data["waves"]:
        for r in wave:
            if r.get("prompt_len") is None and r.get("input_ids") is None:
                raise WorkloadFormatError(f"{source}: request {r['rid']!r}: expected prompt_len or input_ids")
    return data
