"""Server flags as a release's argparse parser reads them: ``tokens -> ParsedFlags``.

Owns: splitting a command line into flags and values the way ``prepare_server_args``'s
``argparse.ArgumentParser(prog="sglang serve")`` does for that release (``--flag value`` and
``--flag=value``; ``store_true`` flags take no value; ``nargs="+"`` takes every following value;
a unique prefix of a flag is that flag, ``allow_abbrev``; a repeated flag: the last one wins;
a value of a declared ``type`` / ``choices`` must convert, as argparse checks it). Every flag of
the release is known (``flags-<release>.json``); a variant's patch adds its own
(``model.variants.PatchFlag``). An unknown flag or a bad value is one ``UsageError`` naming the
flag, the value and what the release accepts.
"""

from __future__ import annotations

import collections

import difflib
import functools
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Callable, Sequence

from specstate.errors import UsageError
from specstate.model.variants import PatchFlag
from specstate.server_args._tables import ModelledFlag, table

__all__ = ["FlagSpec", "ParsedFlags", "parse_tokens", "known_flags", "convert", "human_readable_int"]


@dataclass(frozen=True)
class FlagSpec:
    names: tuple[str, ...]
    dest: str
    arity: Any  #: 0, 1, ``"+"``, ``"*"``, ``"?"`` or an int
    type: str | None  #: ``int``, ``float``, ``str``, ``human_readable_int``, ``bool`` or ``None`` (unchecked)
    choices: tuple[Any, ...] | None = None
    modelled: bool = False
    patch: PatchFlag | None = None


@dataclass
class ParsedFlags:
    release: str
    values: dict[str, Any] = field(default_factory=dict)  #: dest -> value, every flag given
    spelled: dict[str, str] = field(default_factory=dict)  #: dest -> the flag as written (its full name)
    not_modelled: list[str] = field(default_factory=list)  #: flags given that the model does not read, in order
    env: dict[str, str] = field(default_factory=dict)  #: ``NAME=value`` assignments before the command

    def flag_of(self, dest: str) -> str:
        return self.spelled.get(dest, "--" + dest.replace("_", "-"))


def declared_flags_file(release: str) -> Path:
    """Where ``release``'s declared flags are listed: ``flags.json`` in its release folder where it
    keeps one (``Release`` (``model/releases.py``)), else ``flags-<release>.json`` beside this module."""
    from specstate.model.releases import get_release

    own = get_release(release).folder / "flags.json"
    return own if own.is_file() else Path(__file__).with_name(f"flags-{release}.json")


@functools.cache
def _release_flags(release: str) -> tuple[FlagSpec, ...]:
    data = json.loads(declared_flags_file(release).read_text())
    return tuple(FlagSpec(tuple(e["names"]), e["dest"], e["arity"], e["type"],
                          tuple(e["choices"]) if e["choices"] is not None else None) for e in data["flags"])


def _modelled(m: ModelledFlag) -> FlagSpec:
    arity = 0 if m.type == "bool" else ("+" if m.type == "int+" else 1)
    return FlagSpec(m.names, m.field, arity, "int" if m.type == "int+" else m.type, m.choices, modelled=True)


def _patch(p: PatchFlag) -> FlagSpec:
    return FlagSpec((p.flag,), p.field, 0 if p.type == "bool" else 1, p.type, None, modelled=True, patch=p)


def known_flags(release: str, patch_flags: Sequence[PatchFlag] = ()) -> dict[str, FlagSpec]:
    """Every flag name of ``release`` (the modelled rows win over the extracted list), plus a patch's."""
    out = {n: s for s in _release_flags(release) for n in s.names}
    out.update((n, s) for m in table(release) for s in [_modelled(m)] for n in s.names)
    out.update((p.flag, _patch(p)) for p in patch_flags)
    return out


def human_readable_int(value: str) -> int:
    """``utils/common.py::human_readable_int`` of sglang 0.5.12 / 0.5.17: an integer, or SI
    (``k M G T``, decimals allowed) / IEC (``Ki Mi Gi Ti``, integers only) suffixes."""
    value = value.strip()
    si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix in iec:
            if "." in number:
                raise ValueError(f"decimals are not allowed with IEC suffixes like {suffix!r}")
            return int(number) * iec[suffix]
        try:
            return int(Decimal(number) * si[suffix])
        except InvalidOperation:
            raise ValueError("not a number") from None
    return int(value)


_CONVERT: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "str": str,
                                             "human_readable_int": human_readable_int}
_EXPECTED = {"int": "an integer", "float": "a number", "str": "a string",
             "human_readable_int": "an integer, or one with an SI / IEC suffix (16k, 1Mi)"}


def convert(spec: FlagSpec, flag: str, text: str, release: str) -> Any:
    """One value as argparse's ``type=`` and ``choices`` check it."""
    kind = spec.type
    try:
        value = _CONVERT[kind](text) if kind in _CONVERT else text
    except (ValueError, OverflowError):
        raise UsageError(f"argument {flag}: expected {_EXPECTED[kind or 'str']} (sglang {release}) but got {text!r}") from None
    if spec.choices is not None and value not in spec.choices:
        raise UsageError(f"argument {flag}: expected one of {list(spec.choices)} (sglang {release}) but got {text!r}")
    return value


def _is_value(token: str) -> bool:
    """argparse takes ``-1`` (a negative number) as a value, ``-x`` / ``--x`` as a flag."""
    return not token.startswith("-") or re.fullmatch(r"-\d+$|-\d*\.\d+$", token) is not None


def _resolve(name: str, flags: dict[str, FlagSpec], release: str) -> tuple[str, FlagSpec]:
    if name in flags:
        return name, flags[name]
    matches = sorted({n for n in flags if n.startswith(name) and n.startswith("--")}) if len(name) > 2 else []
    specs = {id(flags[n]): n for n in matches}
    if len(specs) == 1:
        full = matches[0]
        return full, flags[full]
    if matches:
        raise UsageError(f"ambiguous option: {name} could match {', '.join(matches[:6])} (sglang {release})")
    close = difflib.get_close_matches(name, [n for n in flags if n.startswith("--")], n=2)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise UsageError(f"unrecognized argument {name}: sglang {release}'s ServerArgs declares no such flag "
                     f"(nor does the variant's patch){hint}")


def _values(spec: FlagSpec, flag: str, inline: str | None, rest: "collections.deque[str]") -> list[str]:
    """The value tokens of one flag (``rest`` is consumed from the front: a deque, so a list of
    100,000 batch sizes is read in linear time, not quadratic)."""
    if spec.arity == 0:
        if inline is not None:
            raise UsageError(f"argument {flag}: takes no value but got {inline!r}")
        return []
    if inline is not None:
        return [inline]
    if spec.arity in (1, "?") or isinstance(spec.arity, int):
        want = 1 if spec.arity == "?" else int(spec.arity) if isinstance(spec.arity, int) else 1
        taken: list[str] = []
        while rest and len(taken) < want and _is_value(rest[0]):
            taken.append(rest.popleft())
        if len(taken) < want and spec.arity != "?":
            raise UsageError(f"argument {flag}: expected {want} value{'s' if want > 1 else ''}")
        return taken
    taken = []
    while rest and _is_value(rest[0]):
        taken.append(rest.popleft())
    if not taken and spec.arity == "+":
        raise UsageError(f"argument {flag}: expected at least one value")
    return taken


def _value_of(spec: FlagSpec, flag: str, texts: list[str], release: str) -> Any:
    if spec.arity == 0:
        return True
    values = [convert(spec, flag, t, release) for t in texts]
    if spec.arity in ("+", "*") or (isinstance(spec.arity, int) and spec.arity > 1):
        return values
    return values[0] if values else None


def parse_tokens(tokens: Sequence[str], release: str, patch_flags: Sequence[PatchFlag] = ()) -> ParsedFlags:
    """``tokens`` (flags only, no program name) as sglang ``release`` plus the patch parse them."""
    flags = known_flags(release, patch_flags)
    out = ParsedFlags(release)
    rest = collections.deque(tokens)
    while rest:
        token = rest.popleft()
        if not token.startswith("--") or token == "--":
            what = "a positional argument" if not token.startswith("-") else "a short option"
            raise UsageError(f"unrecognized argument {token!r}: sglang {release}'s launch takes only --flags "
                             f"(this is {what})")
        name, eq, inline = token.partition("=")
        flag, spec = _resolve(name, flags, release)
        out.values[spec.dest] = _value_of(spec, flag, _values(spec, flag, inline if eq else None, rest), release)
        out.spelled[spec.dest] = flag
        if not spec.modelled and flag not in out.not_modelled:
            out.not_modelled.append(flag)
    return out
