"""The arguments of specstate's Python entry points, checked as the CLI checks its options.

``specstate.testing`` (``fuzz``, ``run_scenario``, ``explore``, ``check_recording``) and the
pytest plugin's options and fixtures call these before any work starts, so a wrong argument
is one :class:`~specstate.errors.InvalidArgument` naming it, what was expected and what came,
in Hypothesis's words (``hypothesis/internal/validation.py``)::

    Expected int in [1, 10000000] but got max_examples=0
    Expected bool but got reduce='yes' (str)

The bounds are the CLI's (``specstate fuzz --max-examples``, ``explore --max-bs``, ...): one
table, ``LIMITS``, for both, so the API accepts exactly what the command line does. ``bool``
is not an ``int`` here (``max_examples=True`` is refused), nor is ``2.5`` or ``"5"``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from specstate.errors import InvalidArgument

__all__ = ["LIMITS", "integer", "optional_integer", "boolean", "choice", "text", "folder", "file_path",
           "variant_name", "known_options", "seconds", "launch_words", "names"]

#: name -> inclusive bounds, the CLI's (``cli/fuzz.py``, ``cli/__init__.py``, ``cli/replay.py``)
LIMITS: dict[str, tuple[int, int]] = {
    "seed": (0, (1 << 64) - 1),
    "max_examples": (1, 10_000_000),
    "max_live": (1, 8),
    "max_arrivals": (1, 16),
    "depth": (1, 40),
    "max_states": (1, 10_000_000),
    "jobs": (1, 64),
    "threshold": (0, 4096),
    "check_seed": (0, (1 << 63) - 1),  #: ``specstate check --seed``
}

#: ``specstate check --budget``: seconds, inclusive
BUDGET_S: tuple[float, float] = (1.0, 86400.0)


def _got(name: str, value: Any) -> str:
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    kind = "" if isinstance(value, (int, float)) and not isinstance(value, bool) else f" ({type(value).__name__})"
    return f"{name}={shown}{kind}"


def integer(name: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` if it is an ``int`` (not a ``bool``) in ``[lo, hi]`` (default: ``LIMITS[name]``)."""
    if lo is None or hi is None:
        lo, hi = LIMITS[name]
    if type(value) is not int or not lo <= value <= hi:
        raise InvalidArgument(f"Expected int in [{lo}, {hi}] but got {_got(name, value)}")
    return value


def optional_integer(name: str, value: Any, lo: int | None = None, hi: int | None = None) -> int | None:
    """``None``, or ``integer(name, value, lo, hi)``."""
    if value is None:
        return None
    if lo is None or hi is None:
        lo, hi = LIMITS[name]
    if type(value) is not int or not lo <= value <= hi:
        raise InvalidArgument(f"Expected None or int in [{lo}, {hi}] but got {_got(name, value)}")
    return value


def boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(f"Expected bool but got {_got(name, value)}")
    return value


def choice(name: str, value: Any, choices: Iterable[str]) -> str:
    options = tuple(choices)
    if not isinstance(value, str) or value not in options:
        raise InvalidArgument(f"Expected {name} one of {', '.join(options)} but got {_got(name, value)}")
    return value


def text(name: str, value: Any) -> str:
    """A non-empty ``str``."""
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"Expected a non-empty str but got {_got(name, value)}")
    return value


def _pathlike(name: str, value: Any, what: str) -> Path:
    if not isinstance(value, (str, os.PathLike)) or isinstance(value, bytes):
        raise InvalidArgument(f"Expected {what} (str or pathlib.Path) but got {_got(name, value)}")
    raw = os.fspath(value)
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidArgument(f"Expected {what} (a non-empty path) but got {_got(name, value)}")
    return Path(raw)


def folder(name: str, value: Any) -> Path | None:
    """``None`` (the default folder) or a non-empty path; ``''`` is refused (it would mean ``.``)."""
    return None if value is None else _pathlike(name, value, "None or a folder")


def file_path(name: str, value: Any) -> Path:
    return _pathlike(name, value, "a file")


def variant_name(name: str, value: Any) -> str:
    """A registered variant's name or ``package.module:Object``, loaded (a ``VariantLoadError``
    or ``UnknownName`` from the loader names what is wrong with it)."""
    from specstate.model import get_variant

    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"Expected a variant name (a built-in name or 'package.module:Object') but got "
                              f"{_got(name, value)}")
    get_variant(value)
    return value


def variant(name: str, value: Any) -> Any:
    """The ``Variant`` an API call runs: a ``Variant`` object as it is, a name resolved once
    (``variant_name``'s checks, then ``specstate.model.as_variant``); the caller passes the object down."""
    from specstate.model import Variant, as_variant

    if isinstance(value, Variant):
        return value
    return as_variant(variant_name(name, value))


def known_options(where: str, given: Iterable[str], allowed: Iterable[str]) -> None:
    """Every keyword in ``given`` is one of ``allowed`` (a fixture's ``**options``)."""
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise InvalidArgument(f"Expected options of {where} from {', '.join(sorted(allowed))} but got "
                              f"{', '.join(f'{u}=...' for u in unknown)}")


def seconds(name: str, value: Any, lo: float, hi: float) -> float:
    """A finite ``int`` or ``float`` (not a ``bool``, ``nan`` or ``inf``) in ``[lo, hi]``."""
    import math

    ok = type(value) in (int, float) and math.isfinite(value) and lo <= value <= hi
    if not ok:
        raise InvalidArgument(f"Expected seconds (int or float) in [{lo:g}, {hi:g}] but got {_got(name, value)}")
    return float(value)


def launch_words(name: str, value: Any) -> str | tuple[str, ...] | None:
    """``None``, a ``str`` (split as a shell would), or a list / tuple of ``str`` words."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(w, str) for w in value):
        return tuple(value)
    raise InvalidArgument(f"Expected None, a str or a list of str but got {_got(name, value)}")


def names(name: str, value: Any, choices: Iterable[str]) -> tuple[str, ...]:
    """A non-empty list / tuple of names from ``choices`` (repeats dropped, order kept)."""
    options = tuple(choices)
    if (not isinstance(value, (list, tuple)) or not value
            or not all(isinstance(v, str) and v in options for v in value)):
        raise InvalidArgument(f"Expected {name} a non-empty list from {', '.join(options)} but got {_got(name, value)}")
    return tuple(dict.fromkeys(value))
