"""JSON and TOML text parsed with its nesting bounded, before the parser recurses.

``json.loads`` and ``tomllib.loads`` recurse once per ``[`` / ``{`` (and ``tomllib`` builds one
table per dot of a dotted key), so a 4 KB file of brackets is a ``RecursionError`` whose depth
depends on the caller's stack, and a deep dotted key eats memory. Here the text is measured first
(strings left out) and anything deeper than ``MAX_NESTING`` is one error line naming its source.
The file reading around it is ``specstate/schema/_files.py`` (the one reader, ``docs/trust.md``);
this module sits low (it imports only ``errors``) so the model can parse the JSON it is handed
(the adaptive config's text) the same way.
"""

from __future__ import annotations

import json
import re
from typing import Any

from specstate.errors import FileFormatError, SpecStateError

__all__ = ["MAX_NESTING", "nesting_depth", "parse_json", "parse_toml"]

MAX_NESTING = 64  #: the deepest ``[`` / ``{`` nesting (or TOML dotted key) a JSON / TOML text may have

Error = type[SpecStateError]

#: a JSON string (escapes allowed, no raw newline) or a TOML literal string (the unrolled form: one
#: tight character class per run instead of an alternation per character)
_STRING = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"|\'[^\'\n]*\'')
_RUN = re.compile(r"([\[{]+)|[\]}]+")  #: a run of openers (group 1) or of closers


def nesting_depth(text: str) -> int:
    """The deepest nesting of ``[`` / ``{`` in JSON or TOML text, strings left out (an unbalanced
    text is measured as far as it goes; the parser then says what is wrong with it): the highest
    running count of openers less closers, 0 for a text without brackets. Counted per run of
    brackets, not per character (a recording's line holds thousands)."""
    depth, deepest = 0, None
    for run in _RUN.finditer(_STRING.sub("", text)):
        n = run.end() - run.start()
        if run.group(1) is not None:
            depth += n
            top = depth
        else:
            top = depth - 1
            depth -= n
        if deepest is None or top > deepest:
            deepest = top
    return 0 if deepest is None else deepest


def _too_deep(text: str, toml: bool) -> bool:
    if text.count("[") + text.count("{") + (text.count(".") if toml else 0) <= MAX_NESTING:
        return False  # the common case, in one pass
    if nesting_depth(text) > MAX_NESTING:
        return True
    if toml:  # a dotted key (``a.b.c = 1``, ``[a.b.c]``): one table per dot
        for line in _STRING.sub('""', text).splitlines():
            key = line.split("=", 1)[0] if "=" in line else line
            if key.count(".") > MAX_NESTING:
                return True
    return False


def parse_json(text: str, source: str, *, what: str = "JSON", error: Error = FileFormatError) -> Any:
    """``json.loads`` with nesting bounded; every problem one ``error`` line naming ``source``."""
    try:
        if _too_deep(text, toml=False):
            raise RecursionError
        return json.loads(text)
    except RecursionError:
        raise error(f"{source}: expected {what} nested at most {MAX_NESTING} deep but it nests deeper") from None
    except ValueError as e:
        raise error(f"{source}: expected {what} ({e})") from None


def parse_toml(text: str, source: str, *, what: str = "TOML", error: Error = FileFormatError) -> Any:
    """``tomllib.loads`` with nesting and dotted keys bounded; problems as ``parse_json``'s."""
    import tomllib

    try:
        if _too_deep(text, toml=True):
            raise RecursionError
        return tomllib.loads(text)
    except RecursionError:
        raise error(f"{source}: expected {what} nested at most {MAX_NESTING} deep (tables, arrays, dotted keys) "
                    f"but it nests deeper") from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"{source}: expected {what} ({e})") from None
