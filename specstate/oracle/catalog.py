"""The releases the oracle runs: one line per release module (``sglang_0_5_12.py``, ...), each
declaring its ``ORACLE`` (``_core.OracleRelease``: the release, the variant it is compared with,
whether its loop is the overlap one). A new release adds its module and one line here; ``wheels.py``,
``differential.py``, ``strategies.py`` and ``specstate oracle``'s parser read the releases from here.

``RELEASES`` is read from the module names, so the parser lists the releases without importing a
release module; ``MODULES``, ``VARIANTS`` and :func:`is_overlap` import them (no sglang either: the
release modules import it inside their functions). ``tests/test_integration_catalog.py`` checks that
each module's ``ORACLE.release`` is the release its name says.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType
from typing import Any

__all__ = ["MODULES", "RELEASES", "VARIANTS", "is_overlap"]

#: every release module, the oldest first (the catalog lines)
_MODULE_NAMES: tuple[str, ...] = ("sglang_0_5_9", "sglang_0_5_12", "sglang_0_5_17", "sglang_0_5_23")


def _release_of(module_name: str) -> str:
    """``"sglang_0_5_12"`` -> ``"0.5.12"``."""
    return module_name.removeprefix("sglang_").replace("_", ".")


RELEASES: tuple[str, ...] = tuple(_release_of(n) for n in _MODULE_NAMES)


@cache
def _modules() -> tuple[ModuleType, ...]:
    return tuple(importlib.import_module(f"specstate.oracle.{n}") for n in _MODULE_NAMES)


def is_overlap(release: str) -> bool:
    """Does ``release``'s oracle run the overlap loop (the v2 worker)?"""
    return any(m.ORACLE.release == release and m.ORACLE.overlap for m in _modules())


def __getattr__(name: str) -> Any:
    if name == "MODULES":
        return _modules()
    if name == "VARIANTS":  # the model variant each release is compared with
        return {m.ORACLE.release: m.ORACLE.variant for m in _modules()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
