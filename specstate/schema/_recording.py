"""A recording: the JSON lines ``integration/sglang_recorder.py`` writes on a GPU host, read by
``specstate conform``, ``graph --from-recording`` and ``replay --engine sglang`` (a sglang 0.5.17
recording: ``_recording17.py``).

One object per line, each with ``ev``; the header (``ev: header``) names the engine's
configuration. Only the fields conformance reads are checked, strictly (types, bounds); the
recorder writes many more for people to read, and those pass through (``extra="allow"``). A
line that is not JSON, a record of the wrong shape, a file with no header, a truncated or
corrupt ``.gz``: each is one ``RecordingFormatError`` naming the file, the line and the
record's JSON path. What makes the records judgeable together (the header first and only,
a known schema, a header that agrees with itself, records in the recorder's order) is
``_recording_checks.py``; ``Recording.family`` is the family the schema names.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, Field, ValidationError

from specstate.errors import RecordingFormatError
from specstate.schema._files import read_lines
from specstate.schema._messages import describe_error, printable, shorten
from specstate.schema._record_types import (  # noqa: F401  (the shared record types; Count etc. re-exported)
    Count, Counts, Rid, Rids, Size, _Error, _FwdCore, _Kv, _Open)

__all__ = ["Recording", "load_recording", "RECORD_MODELS"]



class _ServerArgs(_Open):
    speculative_eagle_topk: Optional[Size] = None
    speculative_num_steps: Optional[Size] = None
    speculative_num_draft_tokens: Optional[Size] = None
    cuda_graph_max_bs: Optional[Size] = None
    max_running_requests: Optional[Size] = None
    chunked_prefill_size: Optional[int] = None
    max_prefill_tokens: Optional[Size] = None
    schedule_conservativeness: Optional[float] = None
    disable_radix_cache: Optional[bool] = None


class _Runner(_Open):
    capture_bs: Optional[Annotated[list[Size], Field(min_length=1, max_length=4096)]] = None


class _Header(_Open):
    ev: Literal["header"]
    schema_: Optional[str] = Field(default=None, alias="schema")
    topk: Size
    speculative_num_steps: Size
    speculative_num_draft_tokens: Size
    server_args: Optional[_ServerArgs] = None
    graph_runners: Optional[dict[str, Optional[_Runner]]] = None
    kv_size: Optional[Size] = None
    env: Optional[dict[str, str]] = None


class _Sched(_Open):
    waiting: Rids = []
    running: Rids = []
    chunked: Optional[Rid] = None
    new_token_ratio: float = 0.0
    batch_is_full: bool = False


class _Arrive(_Open):
    ev: Literal["arrive"]
    rid: Rid
    prompt_len: Size
    max_new_tokens: Optional[Size] = None
    lcp: Optional[Count] = None
    lcp_rid: Optional[Rid] = None
    t: Optional[float] = None
    kv: Optional[_Kv] = None
    sched: Optional[_Sched] = None


class _Abort(_Open):
    ev: Literal["abort"]
    rid: Rid
    iter: Optional[int] = None


class _Retract(_Open):
    ev: Literal["retract"]
    retracted: Rids = []


class _Post(_Open):
    ev: Literal["post"]
    iter: Optional[int] = None
    rids: Rids = []
    out_len: Counts = []
    finished: Annotated[list[Optional[str]], Field(max_length=1 << 16)] = []
    kv: Optional[_Kv] = None
    kv_committed: Counts = []
    kv_allocated: Optional[Counts] = None
    sched: Optional[_Sched] = None


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


class _Other(_Open):
    ev: str


#: the model that checks a record, by its ``ev``
RECORD_MODELS: dict[str, type[BaseModel]] = {
    "header": _Header, "arrive": _Arrive, "abort": _Abort, "retract": _Retract, "post": _Post,
    "fbg": _Iteration, "fbg_error": _Iteration,
}


class Recording(list):  # type: ignore[type-arg]
    """The validated records (plain dicts, as written) of one file; ``header`` is its first
    record, ``family`` the engine family its schema names."""

    header: dict[str, Any]
    family: str


#: the deepest nesting a record line may have (the recorder writes 4 at most); deeper lines are
#: refused before ``json.loads``, whose recursion would otherwise depend on the caller's stack
#: (in-process, under a test runner, or in a forked worker it fails at a smaller depth)
MAX_NESTING = 64
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]")


def nesting_depth(line: str) -> int:
    """The deepest nesting of ``[`` / ``{`` in one JSON line, strings left out (an unbalanced
    line is measured as far as it goes; ``json.loads`` then says what is wrong with it)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub('""', line))
    return max(itertools.accumulate(1 if c in "[{" else -1 for c in brackets), default=0)


def _parse(path: Path, n: int, line: str) -> dict[str, Any]:
    try:
        if line.count("[") + line.count("{") > MAX_NESTING and nesting_depth(line) > MAX_NESTING:
            raise RecursionError
        data = json.loads(line)
    except RecursionError:
        raise RecordingFormatError(f"{path}: line {n}: expected a record but it nests too deeply") from None
    except ValueError as e:
        raise RecordingFormatError(f"{path}: line {n}: expected a JSON record but it does not parse: {e}") from None
    if not isinstance(data, dict):
        raise RecordingFormatError(f"{path}: line {n}: expected a JSON object but got {shorten(data)}")
    return data


def _record(path: Path, n: int, data: dict[str, Any], models: dict[str, type[BaseModel]]) -> dict[str, Any]:
    ev = data.get("ev")
    model = models.get(ev, _Other) if isinstance(ev, str) else _Other
    try:
        model.model_validate(data)
    except ValidationError as e:
        raise RecordingFormatError(describe_error(e, f"{path}", prefix=f"line {n} ({printable(ev)[:40]}): ")) from None
    return data


def _first(p: Path, n: int, data: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The header (it must come first), validated by its schema's model; and its family."""
    from specstate.schema._recording17 import RECORD_MODELS_V17
    from specstate.schema._recording_checks import check_header, family_of_schema

    if data.get("ev") != "header":
        raise RecordingFormatError(f"{p}: line {n}: expected the header record (ev: header) first but got ev "
                                   f"{printable(shorten(data.get('ev'), 40))}")
    family = family_of_schema(p, data.get("schema"))
    header = _record(p, n, data, RECORD_MODELS_V17 if family == "sglang-0.5.17" else RECORD_MODELS)
    return header, check_header(p, header)


def _records(p: Path) -> Recording:
    """Each line validated by the models of its recording's schema: 0.5.12's, or 0.5.17's
    (``_recording17.py``) when the header names ``specstate-sglang17-rec/1``; the header
    checked and the order kept (``_recording_checks.py``)."""
    from specstate.schema._recording17 import model_for_v17
    from specstate.schema._recording_checks import RecordOrder

    out = Recording()
    order: RecordOrder | None = None
    for n, line in read_lines(p, what="recording", error=RecordingFormatError):
        data = _parse(p, n, line)
        if order is None:
            out.header, out.family = _first(p, n, data)
            order, record = RecordOrder(p, out.family), out.header
        elif data.get("ev") == "header":
            raise RecordingFormatError(f"{p}: line {n}: a second header record: expected one recording per file, "
                                       f"its header first")
        else:
            record = _record(p, n, data, model_for_v17(data) if order.v17 else RECORD_MODELS)
        order.see(n, record)
        out.append(record)
    return out


def load_recording(path: Path | str) -> Recording:
    """Every record of ``path`` (``.jsonl`` or ``.jsonl.gz``), validated (module doc)."""
    p = Path(path)
    out = _records(p)
    if not out:
        raise RecordingFormatError(f"{p}: expected a specstate recording with a header record but it has no records")
    return out
