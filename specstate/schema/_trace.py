"""The trace file: what ``specstate run``, ``fuzz``, ``explore`` and ``minimize`` write and
``reproduce``, ``minimize``, ``graph --trace`` and ``replay --engine model`` read.

::

    {"format": 1, "specstate_version": "0.1.0", "variant": "naive-threshold" | "pkg.mod:Obj",
     "seed": 7 | null, "scenario": "seed-sweep" | null, "config": {SpecConfig fields},
     "violation": {"invariant", "step", "rid", "field", "expected", "actual", "detail", "shapes"} | null,
     "notes": {...}, "actions": [{"op": "arrive", "prompt_len", "max_new_tokens"[, "prefix_of", "shared_len"]}
                                 | {"op": "abort", "rid"} | {"op": "step", "accept": [...], "eos": [...]}]}

Bounds (``ACTION_BOUNDS``, ``MAX_ACTIONS``) keep the cost of a replay proportional to a file
of at most ``MAX_TRACE_BYTES``. What depends on the state (an ``abort`` of a request that has
not arrived, an EOS for one that does not exist) is checked when the action is applied
(``InvalidAction``, naming the action's index).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Mapping, Optional, Sequence, Union

from pydantic import AfterValidator, BaseModel, Field, TypeAdapter, ValidationError

from specstate.errors import InvalidConfig, TraceFormatError
from specstate.model.actions import ACTION_BOUNDS, Abort, Action, Arrive, Step
from specstate.model.config import SpecConfig
from specstate.schema._config import STRICT, config_from_model, config_model
from specstate.schema._messages import describe_error

__all__ = ["MAX_ACTIONS", "VARIANT_PATTERN", "VariantName", "TraceFile", "TraceData", "parse_trace",
           "trace_from_data", "actions_from_data", "action_from_data"]

MAX_ACTIONS = 200_000  #: actions in one trace
#: a built-in variant name, or ``package.module:Object`` (absolute, dotted identifiers)
VARIANT_PATTERN = r"^([A-Za-z0-9][A-Za-z0-9_-]*|[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*)$"
TAGS = frozenset({"arrive", "abort", "step"})


def _variant_name(v: str) -> str:
    if not re.match(VARIANT_PATTERN, v):
        raise ValueError("a variant: a built-in name or an absolute package.module:Object")
    return v


VariantName = Annotated[str, Field(max_length=200), AfterValidator(_variant_name)]


def _int(name: str) -> Any:
    lo, hi = ACTION_BOUNDS[name]
    return Annotated[int, Field(ge=lo, le=hi)]


PromptLen, MaxNew, SharedLen, Rid, Accept = (_int(n) for n in ("prompt_len", "max_new_tokens", "shared_len", "rid", "accept"))
Rows = ACTION_BOUNDS["rows"][1]


class _Arrive(BaseModel):
    model_config = STRICT
    op: Literal["arrive"]
    prompt_len: PromptLen  # type: ignore[valid-type]
    max_new_tokens: MaxNew  # type: ignore[valid-type]
    prefix_of: Optional[Rid] = None  # type: ignore[valid-type]
    shared_len: SharedLen = 0  # type: ignore[valid-type]


class _Abort(BaseModel):
    model_config = STRICT
    op: Literal["abort"]
    rid: Rid  # type: ignore[valid-type]


class _Step(BaseModel):
    model_config = STRICT
    op: Literal["step"]
    accept: Annotated[list[Accept], Field(max_length=Rows)] = []  # type: ignore[valid-type]
    eos: Annotated[list[Rid], Field(max_length=Rows)] = []  # type: ignore[valid-type]


_Action = Annotated[Union[_Arrive, _Abort, _Step], Field(discriminator="op")]
_Config = config_model()
_Text = Annotated[str, Field(max_length=200)]


class _Violation(BaseModel):
    model_config = STRICT
    invariant: Annotated[str, Field(min_length=1, max_length=64)]
    step: Annotated[int, Field(ge=0, le=MAX_ACTIONS)]
    rid: Optional[Rid] = None  # type: ignore[valid-type]
    field: Annotated[str, Field(max_length=400)] = ""
    expected: Any = None
    actual: Any = None
    detail: Annotated[str, Field(max_length=4000)] = ""
    shapes: dict[str, Any] = {}


class TraceFile(BaseModel):
    """A trace file as pydantic validates it (see the module doc)."""

    model_config = STRICT
    format: Annotated[int, Field(ge=1, le=1)]  # strict: 1.0 and true are not format 1
    specstate_version: _Text = "?"
    variant: VariantName
    seed: Optional[Annotated[int, Field(ge=0, le=(1 << 64) - 1)]] = None
    scenario: Optional[Annotated[str, Field(max_length=100, pattern=r"^[A-Za-z0-9][\w:.-]*$")]] = None
    config: _Config  # type: ignore[valid-type]
    violation: Optional[_Violation] = None
    notes: dict[str, Any] = {}
    actions: Annotated[list[_Action], Field(max_length=MAX_ACTIONS)]


@dataclass(frozen=True)
class TraceData:
    """A validated trace in the model's own types (``fuzz.trace.Trace`` is built from it)."""

    config: SpecConfig
    variant: str
    actions: list[Action]
    violation: dict[str, Any] | None
    seed: int | None
    scenario: str | None
    specstate_version: str
    notes: dict[str, Any]


def _to_action(m: BaseModel) -> Action:
    if isinstance(m, _Arrive):
        return Arrive(m.prompt_len, m.max_new_tokens, m.prefix_of, m.shared_len)
    if isinstance(m, _Abort):
        return Abort(m.rid)
    assert isinstance(m, _Step)
    return Step(tuple(m.accept), tuple(m.eos))


def _format_first(text: str) -> None:
    """A clearer line than pydantic's when the file is JSON but not a trace at all."""
    import json

    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return
    if not isinstance(data, dict):
        raise TraceFormatError(f"expected a JSON object (a specstate trace) but got {type(data).__name__}")
    if type(data.get("format")) is not int or data.get("format") != 1:
        raise TraceFormatError(f"expected a specstate trace with format 1 but got format={data.get('format')!r}")


def parse_trace(text: str | bytes, source: str = "trace") -> TraceData:
    """Validate a trace file's text; every error is one ``TraceFormatError`` line naming
    ``source`` and the JSON path (``actions[3].prompt_len``)."""
    try:
        m = TraceFile.model_validate_json(text)
    except ValidationError as e:
        try:
            _format_first(text if isinstance(text, str) else text.decode("utf-8", "replace"))
        except TraceFormatError as first:
            raise TraceFormatError(f"{source}: {first}") from None
        raise TraceFormatError(describe_error(e, source, tags=TAGS)) from None
    return _data(m, source)


def trace_from_data(data: Any, source: str = "trace") -> TraceData:
    """``parse_trace`` for JSON already parsed (``Trace.from_json``)."""
    if not isinstance(data, Mapping) or type(data.get("format")) is not int or data.get("format") != 1:
        got = data.get("format") if isinstance(data, Mapping) else type(data).__name__
        raise TraceFormatError(f"{source}: expected a specstate trace with format 1 but got format={got!r}")
    try:
        m = TraceFile.model_validate(dict(data))
    except ValidationError as e:
        raise TraceFormatError(describe_error(e, source, tags=TAGS)) from None
    return _data(m, source)


def check_references(actions: Sequence[Action], source: str) -> None:
    """Request ids refer to requests that have arrived (request ``i`` is the ``i``-th
    ``arrive``), and a shared prefix fits its prompt: the one rule of the actions that
    depends on what came before, checked before a replay so the error names the action."""
    arrived = 0
    for i, a in enumerate(actions):
        if isinstance(a, Arrive):
            if a.prefix_of is not None and not (a.prefix_of < arrived and 0 < a.shared_len <= a.prompt_len):
                raise TraceFormatError(f"{source}: actions[{i}]: expected prefix_of an earlier request (< {arrived}) "
                                       f"and 0 < shared_len <= prompt_len, got prefix_of={a.prefix_of}, "
                                       f"shared_len={a.shared_len}, prompt_len={a.prompt_len}")
            arrived += 1
            continue
        rids = (a.rid,) if isinstance(a, Abort) else a.eos  # type: ignore[union-attr]
        late = [r for r in rids if r >= arrived]
        if late:
            field = "rid" if isinstance(a, Abort) else "eos"
            raise TraceFormatError(f"{source}: actions[{i}].{field}: expected requests that have arrived "
                                   f"(rid < {arrived}), got {late[0]}")


def _data(m: TraceFile, source: str) -> TraceData:
    try:
        config = config_from_model(m.config)
    except InvalidConfig as e:
        raise TraceFormatError(f"{source}: config: {e}") from None
    actions = [_to_action(a) for a in m.actions]
    check_references(actions, source)
    return TraceData(config, m.variant, actions,
                     m.violation.model_dump(exclude_unset=True) if m.violation else None, m.seed, m.scenario,
                     m.specstate_version, dict(m.notes))


_ACTIONS: TypeAdapter[list[Any]] = TypeAdapter(Annotated[list[_Action], Field(max_length=MAX_ACTIONS)])
_ACTION: TypeAdapter[Any] = TypeAdapter(_Action)


def action_from_data(d: Mapping[str, Any], source: str = "action") -> Action:
    """One action from parsed JSON, strictly (``specstate.model.action_from_json`` before)."""
    try:
        return _to_action(_ACTION.validate_python(d))
    except ValidationError as e:
        raise TraceFormatError(describe_error(e, source, tags=TAGS)) from None


def actions_from_data(data: Sequence[Mapping[str, Any]], source: str = "actions") -> list[Action]:
    """A list of actions from parsed JSON, strictly; errors name the index (``[3].rid``)."""
    try:
        return [_to_action(a) for a in _ACTIONS.validate_python(list(data) if isinstance(data, tuple) else data)]
    except ValidationError as e:
        raise TraceFormatError(describe_error(e, source, tags=TAGS)) from None
