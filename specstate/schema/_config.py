"""``SpecConfig`` as a strict pydantic model, generated from the dataclass.

Every field keeps its name, type and default; numeric fields get the inclusive bounds of
``specstate.model.config.BOUNDS``; no coercion (``"3"``, ``2.7`` and ``true`` are not integers),
no unknown keys, no infinities. The cross-field rules (topk 1 forces ``num_steps + 1`` draft
tokens, the two pools are one allocator, ...) stay in ``SpecConfig._check``, which runs when
the validated values build the dataclass.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Annotated, Any, Mapping, Optional, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from specstate.errors import InvalidConfig
from specstate.model.config import BOUNDS, MAX_CAPTURE_SIZES, SpecConfig
from specstate.schema._messages import describe_error

__all__ = ["STRICT", "config_model", "config_from_data", "config_from_model"]

#: the settings of every model of the schema
STRICT = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)


def _bounded(name: str, hint: Any) -> Any:
    if name == "cuda_graph_bs_override":
        lo, hi = BOUNDS["cuda_graph_max_bs"]
        size = Annotated[int, Field(ge=lo, le=hi)]
        return Optional[Annotated[list[size], Field(min_length=1, max_length=MAX_CAPTURE_SIZES)]]  # type: ignore[valid-type]
    if name not in BOUNDS:
        return hint
    lo, hi = BOUNDS[name]
    base = float if hint is float else int
    bounded = Annotated[base, Field(ge=lo, le=hi)]  # type: ignore[valid-type]
    return Optional[bounded] if type(None) in getattr(hint, "__args__", ()) else bounded


@functools.cache
def config_model() -> type[BaseModel]:
    """The pydantic model of a config object (cached: built once per process)."""
    hints = get_type_hints(SpecConfig)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(SpecConfig):
        default = f.default if f.default is not dataclasses.MISSING else None
        fields[f.name] = (_bounded(f.name, hints[f.name]), default)
    return create_model("Config", __config__=STRICT, **fields)


def config_from_model(m: BaseModel) -> SpecConfig:
    """The dataclass from validated values (``SpecConfig._check`` adds the cross-field rules)."""
    values = dict(m)
    if values.get("cuda_graph_bs_override") is not None:
        values["cuda_graph_bs_override"] = tuple(values["cuda_graph_bs_override"])
    return SpecConfig(**values)


def config_from_data(data: Mapping[str, Any], source: str = "config") -> SpecConfig:
    """A config from JSON data: validate ``data`` (parsed JSON), then build the dataclass (strict
    types, ``BOUNDS``, no unknown keys; ``SpecConfig.from_json`` before)."""
    if not isinstance(data, Mapping):
        raise InvalidConfig(f"{source}: expected an object of SpecConfig fields but got {type(data).__name__}")
    values = dict(data)
    if isinstance(values.get("cuda_graph_bs_override"), tuple):
        values["cuda_graph_bs_override"] = list(values["cuda_graph_bs_override"])
    try:
        m = config_model().model_validate(values)
    except ValidationError as e:
        raise InvalidConfig(describe_error(e, source)) from None
    return config_from_model(m)
