"""A server-flags file (``--config F``): a JSON or TOML object of sglang launch flags.

Keys are flag names (``"speculative-num-steps"``, ``"--speculative-num-steps"``) or ``ServerArgs``
field names (``"speculative_num_steps"``); values are JSON / TOML values of the flag's type,
strictly (``"3"`` is not an integer, ``true`` is not a number): a ``store_true`` flag takes
``true`` / ``false``, an ``nargs="+"`` flag a list, a ``human_readable_int`` flag an integer or
a string such as ``"16k"``. A key that names no flag of the release, or a value of the wrong
type, is one line: file, key, what was expected, what came. The values then go through the
same parsing as flags on the command line (``specstate.server_args``), so a file and a command
line meet the same rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from pydantic import StrictBool, StrictFloat, StrictInt, StrictStr, TypeAdapter, ValidationError

from specstate.errors import FileFormatError, UsageError
from specstate._parsing import parse_json, parse_toml
from specstate.schema._files import read_text
from specstate.schema._messages import describe_error

__all__ = ["load_flags_file", "check_flag_values", "MAX_FLAGS_BYTES"]

MAX_FLAGS_BYTES = 1 << 20  #: a flags file, 1 MiB

_SCALAR: dict[str | None, Any] = {"int": StrictInt, "float": StrictInt | StrictFloat, "str": StrictStr,
                                  "human_readable_int": StrictInt | StrictStr, None: StrictInt | StrictFloat | StrictStr}


def _adapter(arity: Any, kind: str | None) -> TypeAdapter:
    if arity == 0:
        return TypeAdapter(dict[str, StrictBool])
    scalar = _SCALAR.get(kind, _SCALAR[None])
    value = list[scalar] if arity in ("+", "*") else scalar  # type: ignore[valid-type]
    # keyed by the file's key, so an error's path names it; a type built at run time, for pydantic
    return TypeAdapter(dict[str, value])  # type: ignore[valid-type]


def _parse(path: Path | str, text: str) -> Any:
    """JSON, or TOML for a ``.toml`` name; nesting and dotted keys bounded (``_files``)."""
    if str(path).endswith(".toml"):
        return parse_toml(text, str(path))
    return parse_json(text, str(path), what="JSON; a .toml file is read as TOML")


def _flag(key: str, flags: Mapping[str, Any]) -> tuple[str, Any]:
    """The flag a key names: its name, or a unique prefix of one (``tp`` is ``--tp-size``), as
    sglang's argparse reads the ``--key value`` words it makes of a config file (``allow_abbrev``)."""
    name = key if key.startswith("--") else "--" + key.replace("_", "-")
    if name in flags:
        return name, flags[name]
    matches = sorted(n for n in flags if n.startswith(name)) if len(name) > 2 else []
    if len({id(flags[n]) for n in matches}) == 1:
        return matches[0], flags[matches[0]]
    if matches:
        raise UsageError(f"{key}: ambiguous server flag: it could be {', '.join(matches[:6])}")
    return name, None


def check_flag_values(data: Any, source: str, flags: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` checked against ``flags`` (name -> ``FlagSpec``); keys come back as ``--name``."""
    if not isinstance(data, dict):
        raise FileFormatError(f"{source}: expected an object of server flags but got {type(data).__name__}")
    out: dict[str, Any] = {}
    for key, value in data.items():
        name, spec = _flag(key, flags)
        if spec is None:
            raise UsageError(f"{source}: {key}: unknown server flag (not declared by the release's ServerArgs "
                             f"nor the variant's patch)")
        try:
            out[name] = _adapter(spec.arity, spec.type).validate_python({key: value}, strict=True)[key]
        except ValidationError as e:
            raise FileFormatError(describe_error(e, source)) from None
    return out


def load_flags_file(path: Path | str, flags: Mapping[str, Any]) -> dict[str, Any]:
    """A flags file, read safely (``_files``) and checked (``check_flag_values``)."""
    text = read_text(path, what="server flags file", max_bytes=MAX_FLAGS_BYTES)
    return check_flag_values(_parse(path, text), str(path), flags)
