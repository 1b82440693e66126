"""Optional and third-party packages: a missing one is named with its install command.

``require(module, purpose)`` imports ``module`` or raises :class:`MissingDependency`; the CLI
also turns a ``ModuleNotFoundError`` for any package of ``INSTALL`` into the same one line
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
    "sglang": ("sglang 0.5.12", "pip install 'specstate[gpu]' (sglang==0.5.12, on a host with CUDA)"),
}


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
    if top not in INSTALL:
        return None
    package, command = INSTALL[top]
    return MissingDependency(package, command, purpose)
