"""Optional and third-party packages: a missing one is named with its install command.

``require(module, purpose)`` imports ``module`` or raises :class:`MissingDependency`; the CLI
also turns a ``ModuleNotFoundError`` for any package of ``INSTALL`` (and sglang, whose release is
the shared core's: ``_sglang``) into the same one line
(``missing_dependency``), wherever the import happened.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from specstate.errors import MissingDependency

__all__ = ["INSTALL", "require", "missing_dependency"]

#: top-level module -> (package as pip names it, install command)
INSTALL: dict[str, tuple[str, str]] = {
    "graphviz": ("graphviz (the Python package)", "pip install 'graphviz>=0.20'"),
    "hypothesis": ("hypothesis", "pip install 'hypothesis>=6.100'"),
    "networkx": ("networkx", "pip install 'networkx>=3.0'"),
    "tqdm": ("tqdm", "pip install 'tqdm>=4.60'"),
    "pydantic": ("pydantic v2", "pip install 'pydantic>=2.6'"),
    "torch": ("torch", "pip install torch (the CPU build is enough)"),
    "numpy": ("numpy", "pip install 'numpy>=1.24'"),
}


def _sglang() -> tuple[str, str]:
    """sglang: the shared core's release, which ``specstate replay --engine sglang`` drives and the
    ``gpu`` extra pins (``pyproject.toml``), asked of the release folders (``core_family``)."""
    from specstate.model.releases import core_family, get_release

    release = get_release(core_family()).version
    return f"sglang {release}", f"pip install 'specstate[gpu]' (sglang=={release}, on a host with CUDA)"


#: top-level module -> its ``(package, install command)``, worked out when asked
_ASKED = {"sglang": _sglang}


def require(module: str, purpose: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        found = missing_dependency(e, purpose)
        if found is None:
            raise
        raise found from None


def missing_dependency(e: ModuleNotFoundError, purpose: str = "specstate") -> MissingDependency | None:
    """The ``MissingDependency`` for ``e`` when it is one of ``INSTALL``'s packages."""
    top = (e.name or "").split(".")[0]
    if top in _ASKED:
        package, command = _ASKED[top]()
    elif top in INSTALL:
        package, command = INSTALL[top]
    else:
        return None
    return MissingDependency(package, command, purpose)
