"""A pydantic ``ValidationError`` as one line a person can act on.

``describe_error(e, source)`` gives ``SOURCE: PATH: expected WHAT, got VALUE (TYPE)`` for the
first error (and how many more there are): the JSON path as ``actions[3].prompt_len`` (the
tag of a tagged union is left out of the path: ``actions[3]`` already names the action), the
expectation in pydantic's own words with "Input should be" turned into "expected", and the
value that came, shortened.

``printable(text)`` is any text that came from a file as it may be printed: control
characters (C0, DEL, C1: terminal escapes, bells, carriage returns) escaped as ``\\x1b``, so
a crafted file cannot set a window title or clear the screen of whoever reads the report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

if TYPE_CHECKING:  # pydantic's ``ValidationError`` is pydantic-core's: nothing is imported to read one
    from pydantic_core import ValidationError

__all__ = ["describe_error", "json_path", "shorten", "printable"]

_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


def printable(text: object) -> str:
    """``str(text)`` with every control character escaped (module doc)."""
    return str(text).translate(_CONTROLS)


def shorten(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def json_path(loc: Iterable[int | str], tags: frozenset[str] = frozenset()) -> str:
    out = ""
    prev: int | str | None = None
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(prev, int) and part in tags:
            pass  # the union member: the index already says which element
        elif "[" in part or "," in part:  # pydantic's names for a union member, e.g. "function-after[...]"
            pass
        else:
            out += ("." if out else "") + part
        prev = part
    return out or "(top level)"


def _expected(err: Mapping[str, Any]) -> str:
    kind, msg = err["type"], err["msg"]
    if kind == "missing":
        return "missing: this field is required"
    if kind == "extra_forbidden":
        return "unknown field (not part of the schema)"
    if kind == "json_invalid":
        return "expected valid JSON (" + err.get("ctx", {}).get("error", msg) + ")"
    if kind == "union_tag_invalid":
        return f"expected 'op' one of {err.get('ctx', {}).get('expected_tags', '')}"
    if kind == "union_tag_not_found":
        return "expected an object with an 'op' field"
    if kind in ("model_type", "dict_type", "model_attributes_type", "dataclass_type"):
        return "expected an object"
    for lead in ("Input should be ", "Value error, ", "Assertion failed, "):
        if msg.startswith(lead):
            msg = msg[len(lead):]
    return msg if msg.startswith("expected") else "expected " + msg[:1].lower() + msg[1:]


def describe_error(e: ValidationError, source: str, *, tags: frozenset[str] = frozenset(), prefix: str = "") -> str:
    """One line for ``e`` (see the module doc); ``prefix`` goes before the JSON path."""
    errors = e.errors(include_url=False)
    err = errors[0]
    path = json_path(err["loc"], tags)
    line = f"{source}: {prefix}{path}: {_expected(err)}"
    if err["type"] not in ("missing", "json_invalid") and "input" in err:
        value = err["input"]
        line += f", got {shorten(value)} ({type(value).__name__})"
    if len(errors) > 1:
        line += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    return line
