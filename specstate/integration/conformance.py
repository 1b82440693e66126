"""Deprecated path: sglang 0.5.12's conformance is ``specstate.integration.sglang_0_5_12.conformance``;
the engine-neutral way of a recording (``check_recording``, ``check_pairing``, ``DEFAULT_VARIANTS``,
``default_variant_of``) is ``specstate.integration.conform``. Every old name still resolves, with a
``SpecstateDeprecationWarning`` naming its replacement."""

from __future__ import annotations

import importlib
from typing import Any

from specstate._deprecation import warn_renamed

_CORE = "specstate.integration.conform"
_V1 = "specstate.integration.sglang_0_5_12.conformance"
_FROM_CORE = frozenset({"check_recording", "check_pairing", "DEFAULT_VARIANTS", "default_variant_of", "_models_release"})


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    new = _CORE if name in _FROM_CORE else _V1
    try:
        value = getattr(importlib.import_module(new), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} (now {_CORE!r} and {_V1!r}) has no attribute {name!r}") from None
    warn_renamed(f"{__name__}.{name}", f"{new}.{name}")
    return value
