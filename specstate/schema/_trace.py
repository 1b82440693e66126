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

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from specstate.errors import InvalidConfig, TraceFormatError
from specstate.model.actions import ACTION_BOUNDS, Abort, Action, Arrive, Step
from specstate.model.config import SpecConfig
from specstate.schema._config import CORE_STRICT, config_from_values, config_schema, validator
from specstate.schema._messages import describe_error

if TYPE_CHECKING:
    from pydantic_core import CoreSchema, SchemaValidator

__all__ = ["MAX_ACTIONS", "VARIANT_PATTERN", "TraceData", "read_trace", "parse_trace", "trace_from_data", "actions_from_data",
           "action_from_data", "check_references"]

MAX_ACTIONS = 200_000  #: actions in one trace
#: a built-in variant name (a derived release's own version of its base's: ``NAME@sglang-X.Y.Z``), or
#: ``package.module:Object`` (absolute, dotted identifiers)
VARIANT_PATTERN = r"^([A-Za-z0-9][A-Za-z0-9_-]*(@[A-Za-z0-9][A-Za-z0-9_.-]*)?|[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*)$"
TAGS = frozenset({"arrive", "abort", "step"})


def _variant_name(v: str) -> str:
    if not re.match(VARIANT_PATTERN, v):
        raise ValueError("a variant: a built-in name or an absolute package.module:Object")
    return v


# The schema in pydantic-core's terms (``_config.py`` says why): objects are typed dicts with no
# unknown keys, every value strict; a key that may be left out has ``_optional``'s default (or, in
# a violation, none: the validated dict holds only the keys the file has, as it wrote them).


def _field(schema: CoreSchema) -> Any:
    from pydantic_core import core_schema as cs

    return cs.typed_dict_field(schema)


def _optional(schema: CoreSchema, default: Any = None, *, fill: bool = True) -> Any:
    from pydantic_core import core_schema as cs

    return cs.typed_dict_field(cs.with_default_schema(schema, default=default) if fill else schema, required=False)


def _object(**fields: Any) -> CoreSchema:
    from pydantic_core import core_schema as cs

    return cs.typed_dict_schema(fields, extra_behavior="forbid", config=CORE_STRICT)


def _int(name: str) -> CoreSchema:
    from pydantic_core import core_schema as cs

    lo, hi = ACTION_BOUNDS[name]
    return cs.int_schema(ge=lo, le=hi)


def _action() -> CoreSchema:
    """One action: an object tagged by ``op``."""
    from pydantic_core import core_schema as cs

    rows = ACTION_BOUNDS["rows"][1]
    op = lambda tag: _field(cs.literal_schema([tag]))  # noqa: E731
    arrive = _object(op=op("arrive"), prompt_len=_field(_int("prompt_len")), max_new_tokens=_field(_int("max_new_tokens")),
                     prefix_of=_optional(cs.nullable_schema(_int("rid"))), shared_len=_optional(_int("shared_len"), 0))
    abort = _object(op=op("abort"), rid=_field(_int("rid")))
    step = _object(op=op("step"), accept=_optional(cs.list_schema(_int("accept"), max_length=rows), []),
                   eos=_optional(cs.list_schema(_int("rid"), max_length=rows), []))
    return cs.tagged_union_schema({"arrive": arrive, "abort": abort, "step": step}, discriminator="op")


def _actions() -> CoreSchema:
    from pydantic_core import core_schema as cs

    return cs.list_schema(_action(), max_length=MAX_ACTIONS)


def _violation() -> CoreSchema:
    from pydantic_core import core_schema as cs

    def text(n: int, min_length: int = 0) -> Any:
        return _optional(cs.str_schema(min_length=min_length, max_length=n), fill=False)

    return _object(invariant=_field(cs.str_schema(min_length=1, max_length=64)),
                   step=_field(cs.int_schema(ge=0, le=MAX_ACTIONS)), rid=_optional(cs.nullable_schema(_int("rid")), fill=False),
                   field=text(400), expected=_optional(cs.any_schema(), fill=False),
                   actual=_optional(cs.any_schema(), fill=False), detail=text(4000),
                   shapes=_optional(cs.dict_schema(cs.str_schema(), cs.any_schema()), fill=False))


def _trace() -> CoreSchema:
    """A trace file (the module doc)."""
    from pydantic_core import core_schema as cs

    name = cs.no_info_after_validator_function(_variant_name, cs.str_schema(max_length=200))
    scenario = cs.str_schema(max_length=100, pattern=r"^[A-Za-z0-9][\w:.-]*$")
    return _object(format=_field(cs.int_schema(ge=1, le=1)),  # strict: 1.0 and true are not format 1
                   specstate_version=_optional(cs.str_schema(max_length=200), "?"), variant=_field(name),
                   seed=_optional(cs.nullable_schema(cs.int_schema(ge=0, le=(1 << 64) - 1))),
                   scenario=_optional(cs.nullable_schema(scenario)), config=_field(config_schema()),
                   violation=_optional(cs.nullable_schema(_violation())),
                   notes=_optional(cs.dict_schema(cs.str_schema(), cs.any_schema()), {}), actions=_field(_actions()))


@functools.cache
def _validator(which: str) -> SchemaValidator:
    """The validator of a trace (``trace``), an action list (``actions``) or one action
    (``action``), built on first use (a few milliseconds each)."""
    return validator({"trace": _trace, "actions": _actions, "action": _action}[which]())


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


def _to_action(m: Mapping[str, Any]) -> Action:
    op = m["op"]
    if op == "arrive":
        return Arrive(m["prompt_len"], m["max_new_tokens"], m["prefix_of"], m["shared_len"])
    if op == "abort":
        return Abort(m["rid"])
    assert op == "step", op
    return Step(tuple(m["accept"]), tuple(m["eos"]))


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
    from pydantic_core import ValidationError

    try:
        m = _validator("trace").validate_json(text)
    except ValidationError as e:
        try:
            _format_first(text if isinstance(text, str) else text.decode("utf-8", "replace"))
        except TraceFormatError as first:
            raise TraceFormatError(f"{source}: {first}") from None
        raise TraceFormatError(describe_error(e, source, tags=TAGS)) from None
    return _data(m, source)


def read_trace(path: Any) -> TraceData:
    """Read and validate the trace file at ``path`` (``_files.read_text``, then ``parse_trace``):
    one ``TraceFormatError`` line naming the file and the JSON path for anything wrong."""
    from specstate.schema import read_text  # through the package: the one reader (tests count its reads)

    return parse_trace(read_text(path, what="trace file", error=TraceFormatError), str(path))


def trace_from_data(data: Any, source: str = "trace") -> TraceData:
    """``parse_trace`` for JSON already parsed (``Trace.from_json``)."""
    if not isinstance(data, Mapping) or type(data.get("format")) is not int or data.get("format") != 1:
        got = data.get("format") if isinstance(data, Mapping) else type(data).__name__
        raise TraceFormatError(f"{source}: expected a specstate trace with format 1 but got format={got!r}")
    from pydantic_core import ValidationError

    try:
        m = _validator("trace").validate_python(dict(data))
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
        rids = (a.rid,) if isinstance(a, Abort) else a.eos
        late = [r for r in rids if r >= arrived]
        if late:
            field = "rid" if isinstance(a, Abort) else "eos"
            raise TraceFormatError(f"{source}: actions[{i}].{field}: expected requests that have arrived "
                                   f"(rid < {arrived}), got {late[0]}")


def _data(m: Mapping[str, Any], source: str) -> TraceData:
    try:
        config = config_from_values(m["config"])
    except InvalidConfig as e:
        raise TraceFormatError(f"{source}: config: {e}") from None
    actions = [_to_action(a) for a in m["actions"]]
    check_references(actions, source)
    return TraceData(config, m["variant"], actions, m["violation"], m["seed"], m["scenario"], m["specstate_version"],
                     dict(m["notes"]))


def action_from_data(d: Mapping[str, Any], source: str = "action") -> Action:
    """One action from parsed JSON, strictly (``specstate.model.action_from_json`` before)."""
    from pydantic_core import ValidationError

    try:
        return _to_action(_validator("action").validate_python(d))
    except ValidationError as e:
        raise TraceFormatError(describe_error(e, source, tags=TAGS)) from None


def actions_from_data(data: Sequence[Mapping[str, Any]], source: str = "actions") -> list[Action]:
    """A list of actions from parsed JSON, strictly; errors name the index (``[3].rid``)."""
    from pydantic_core import ValidationError

    try:
        return [_to_action(a) for a in _validator("actions").validate_python(list(data) if isinstance(data, tuple) else data)]
    except ValidationError as e:
        raise TraceFormatError(describe_error(e, source, tags=TAGS)) from None
