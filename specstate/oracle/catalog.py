"""The releases the oracle runs: every release (``Release`` (``model/releases.py``)) with an oracle module
(``oracle.py`` in its own folder, or in its folder of ``specstate/integration/``), each declaring its
``ORACLE`` (``_core.OracleRelease``: the release, read from the module's folder, the variant it is
compared with, whether its loop is the overlap one), found by folder name: a new release adds its
module and no line here; ``wheels.py``, ``integration/oracle_differential.py``, ``strategies.py``
and ``specstate oracle``'s parser read the releases from here.

``RELEASES`` is read from the release folders and the files beside them, so the parser lists the
releases without importing a release module; ``MODULES``, ``VARIANTS`` and :func:`is_overlap` import them (no sglang either: the
release modules import it inside their functions). ``tests/test_integration_catalog.py`` checks that
each module's ``ORACLE.release`` is the release its folder says.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType
from typing import Any

__all__ = ["MODULES", "RELEASES", "VARIANTS", "is_overlap", "core_release", "module_of"]

def _found() -> dict[str, str]:
    """Release (``0.5.12``) -> its oracle module's dotted path, the oldest first."""
    from specstate.model.releases import releases

    return {r.version: m for r in releases() for m in [r.module("oracle", room="integration")] if m is not None}


#: every release with an oracle, the oldest first
RELEASES: tuple[str, ...] = tuple(_found())


def core_release() -> str:
    """The shared core's release (``0.5.12``): the one the multi-rank oracle runs (the multi-rank
    model composes the core family's ranks)."""
    from specstate.model.releases import core_family, get_release

    return get_release(core_family()).version


def module_of(release: str) -> str:
    """The dotted path of ``release``'s oracle module (``KeyError``: it has none)."""
    return _found()[release]


@cache
def _modules() -> tuple[ModuleType, ...]:
    return tuple(importlib.import_module(m) for m in _found().values())


def is_overlap(release: str) -> bool:
    """Does ``release``'s oracle run the overlap loop (the v2 worker)?"""
    return any(m.ORACLE.release == release and m.ORACLE.overlap for m in _modules())


def __getattr__(name: str) -> Any:
    if name == "MODULES":
        return _modules()
    if name == "VARIANTS":  # the model variant each release is compared with
        return {m.ORACLE.release: m.ORACLE.variant for m in _modules()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
