"""``SpecConfig`` as a strict schema, generated from its dataclass fields.

Every field keeps its name, type and default; numeric fields get the inclusive bounds of
``specstate.model.config.BOUNDS``; no coercion (``"3"``, ``2.7`` and ``true`` are not integers),
no unknown keys, no infinities. The cross-field rules (topk 1 forces ``num_steps + 1`` draft
tokens, the two pools are one allocator, ...) stay in ``SpecConfig._check``, which runs when
the validated values build the dataclass.

The schema is written in ``pydantic_core``'s terms (``core_schema``), the engine under pydantic's
models, so that reading a config or a trace imports pydantic-core alone: pydantic's model layer
and the plugin scan it runs at the first model (``importlib.metadata`` over every installed
distribution) cost a command that only validates a file twice its time (issue 29: a schema error
answers in <= 0.1x the time of ``import torch``). The errors are pydantic's own (``describe_error``).
``STRICT`` is the settings of the schema's other files' pydantic models (recordings, workloads).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any, Mapping, get_type_hints

from specstate.errors import InvalidConfig
from specstate.model.config import BOUNDS, MAX_CAPTURE_SIZES, SpecConfig

if TYPE_CHECKING:
    from pydantic import ConfigDict
    from pydantic_core import CoreConfig, CoreSchema, SchemaValidator

__all__ = ["STRICT", "CORE_STRICT", "config_schema", "config_from_data", "config_from_values", "validator"]

#: the settings of every pydantic model of the schema (a ``pydantic.ConfigDict``, which is a plain dict)
STRICT: ConfigDict = {"strict": True, "extra": "forbid", "allow_inf_nan": False, "frozen": True}
#: the same settings for a ``pydantic_core`` validator
CORE_STRICT: CoreConfig = {"strict": True, "extra_fields_behavior": "forbid", "allow_inf_nan": False}


def validator(schema: CoreSchema) -> SchemaValidator:
    """A validator of ``schema``, whose objects are strict typed dicts (``typed_dict_schema(...,
    config=CORE_STRICT)``: the settings reach a dict's values only through the dict's own config)."""
    from pydantic_core import SchemaValidator

    return SchemaValidator(schema, CORE_STRICT)


def _bounded(name: str, hint: Any) -> CoreSchema:
    from pydantic_core import core_schema as cs

    if name == "cuda_graph_bs_override":
        lo, hi = BOUNDS["cuda_graph_max_bs"]
        return cs.nullable_schema(cs.list_schema(cs.int_schema(ge=int(lo), le=int(hi)), min_length=1, max_length=MAX_CAPTURE_SIZES))
    optional = type(None) in getattr(hint, "__args__", ())
    base = next(t for t in getattr(hint, "__args__", (hint,)) if t is not type(None))
    inner: CoreSchema
    if base is bool:
        inner = cs.bool_schema()
    elif base is str:
        inner = cs.str_schema()
    else:
        lo, hi = BOUNDS[name]
        inner = cs.float_schema(ge=lo, le=hi) if base is float else cs.int_schema(ge=int(lo), le=int(hi))
    return cs.nullable_schema(inner) if optional else inner


@functools.cache
def config_schema() -> CoreSchema:
    """The schema of a config object: every ``SpecConfig`` field, optional, its default filled in."""
    from pydantic_core import core_schema as cs

    hints = get_type_hints(SpecConfig)
    fields = {}
    for f in dataclasses.fields(SpecConfig):
        default = f.default if f.default is not dataclasses.MISSING else None
        fields[f.name] = cs.typed_dict_field(cs.with_default_schema(_bounded(f.name, hints[f.name]), default=default),
                                             required=False)
    return cs.typed_dict_schema(fields, extra_behavior="forbid", config=CORE_STRICT)


@functools.cache
def _config_validator() -> SchemaValidator:
    return validator(config_schema())


def config_from_values(values: Mapping[str, Any]) -> SpecConfig:
    """The dataclass from validated values (``SpecConfig._check`` adds the cross-field rules)."""
    values = dict(values)
    if values.get("cuda_graph_bs_override") is not None:
        values["cuda_graph_bs_override"] = tuple(values["cuda_graph_bs_override"])
    return SpecConfig(**values)


def config_from_data(data: Mapping[str, Any], source: str = "config") -> SpecConfig:
    """A config from JSON data: validate ``data`` (parsed JSON), then build the dataclass (strict
    types, ``BOUNDS``, no unknown keys; ``SpecConfig.from_json`` before)."""
    from pydantic_core import ValidationError

    from specstate.schema._messages import describe_error

    if not isinstance(data, Mapping):
        raise InvalidConfig(f"{source}: expected an object of SpecConfig fields but got {type(data).__name__}")
    values = dict(data)
    if isinstance(values.get("cuda_graph_bs_override"), tuple):
        values["cuda_graph_bs_override"] = list(values["cuda_graph_bs_override"])
    try:
        checked = _config_validator().validate_python(values)
    except ValidationError as e:
        raise InvalidConfig(describe_error(e, source)) from None
    return config_from_values(checked)
