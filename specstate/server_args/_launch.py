"""A launch as the user has it: flags after ``--``, a ``--server-args`` string, a whole
``python -m sglang.launch_server ...`` line as pasted, or a ``--config`` file.

Owns: stripping what precedes the flags of a pasted line (``python`` / ``python3`` / a path to
one, ``-m sglang.launch_server``, or ``sglang serve``) while keeping its ``VAR=value``
environment assignments in front of the flags (``parse_launch`` reads them: the release's own
variables applied, others listed), splitting a ``--server-args`` string or a multi-line paste
(``shlex``, as a shell would, a ``\``-newline continuation joining the lines), and
turning a config file's object into flags (keys are flag names with or without ``--``, or
``ServerArgs`` field names; ``true`` sets a ``store_true`` flag, ``false`` leaves it off; a list is
an ``nargs="+"`` value), validated by ``specstate.schema._server_flags``.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Mapping, Sequence

from specstate.errors import UsageError

__all__ = ["strip_launch_prefix", "split_server_args", "tokens_from_mapping", "flag_name", "split_env", "is_env"]

_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^(.*/)?python[0-9.]*$")
_MODULES = ("sglang.launch_server", "sglang.srt.server", "sglang.launch_server.py")


def is_env(token: str) -> bool:
    """``NAME=value``: an environment assignment, as a shell reads one before a command."""
    return bool(_ENV.match(token))


def split_env(tokens: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the leading ``NAME=value`` assignments, the rest)."""
    n = 0
    while n < len(tokens) and is_env(tokens[n]):  # an index, not pop(0): linear in a long line
        n += 1
    return list(tokens[:n]), list(tokens[n:])


def strip_launch_prefix(tokens: Sequence[str]) -> list[str]:
    """The flags of a launch line, its environment assignments kept in front (``tokens`` that
    start with a flag come back unchanged; a ``\\``-newline word of a paste is dropped, as the
    shell drops it)."""
    env, rest = split_env([t for t in tokens if t not in ("\n", "\\\n")])
    if rest and _PYTHON.match(rest[0]):
        del rest[0]
        if len(rest) < 2 or rest[0] != "-m" or rest[1] not in _MODULES:
            raise UsageError(f"expected 'python -m sglang.launch_server FLAGS' but got "
                             f"{shlex.join(tokens[:4])[:120]!r}")
        return env + rest[2:]
    if rest[:2] == ["sglang", "serve"]:
        return env + rest[2:]
    if rest and not rest[0].startswith("-"):
        raise UsageError(f"expected server flags (--name value ...) or a 'python -m sglang.launch_server ...' line "
                         f"but got {rest[0][:80]!r} first")
    return env + rest


def split_server_args(text: str) -> list[str]:
    """``--server-args "..."`` as a POSIX shell splits it (a ``\\``-newline joins two lines)."""
    try:
        return shlex.split(_joined(text))
    except ValueError as e:
        raise UsageError(f"argument --server-args: expected shell words but got {text[:80]!r} ({e})") from None


def flag_name(key: str) -> str:
    """``--flag-name`` of a flag or a ``ServerArgs`` field name."""
    return key if key.startswith("--") else "--" + key.replace("_", "-")


def tokens_from_mapping(values: Mapping[str, Any]) -> list[str]:
    """A config file's validated object as command-line tokens."""
    out: list[str] = []
    for key, value in values.items():
        flag = flag_name(key)
        if value is True:
            out.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            out += [flag, *(str(v) for v in value)]
        else:
            out += [flag, str(value)]
    return out


def _joined(text: str) -> str:
    """A multi-line paste as the shell reads it: ``\\``-newline (outside single quotes) is removed."""
    out, quote, i = [], None, 0
    while i < len(text):
        c = text[i]
        if c == "\\" and quote != "'" and text[i + 1:i + 2] == "\n":
            i += 2
            continue
        if c == "\\" and quote != "'":
            out.append(text[i:i + 2])
            i += 2
            continue
        if c in "'\"" and quote in (None, c):
            quote = None if quote == c else c
        out.append(c)
        i += 1
    return "".join(out)
