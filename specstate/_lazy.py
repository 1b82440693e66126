"""A heavy module imported where it is first used, not where it is named.

Owns :func:`lazy_module`: ``torch = lazy_module("torch", globals())`` binds ``torch`` to a
stand-in whose first attribute access imports the real module and puts it in the caller's
globals in the stand-in's place, so every later use is the module itself (no cost per call).
Why: importing torch takes seconds and about 180 MiB, and most of specstate's work never
touches a tensor: ``--version``, ``--help``, listings, argument and input errors
(``tests/test_startup.py`` checks they do not import it), and the model itself, whose shape
ops run pure-Python shape rules and import torch only where one predicts a crash
(``specstate/model/tensors.py``; ``tests/test_shape_rules.py`` checks that explore, prove,
fuzz, run and check on a correct variant do not import it). A module naming torch only in
annotations needs ``from __future__ import annotations``, and none may use a torch attribute
at import time (a default argument ``dtype=torch.int64`` would import it there).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__all__ = ["lazy_module"]


class _Lazy:
    __slots__ = ("_name", "_namespace", "_bound")

    def __init__(self, name: str, namespace: dict[str, Any], bound: str) -> None:
        self._name, self._namespace, self._bound = name, namespace, bound

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self._name)
        if self._namespace.get(self._bound) is self:
            self._namespace[self._bound] = module
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<{self._name}, imported on first use>"


def lazy_module(name: str, namespace: dict[str, Any], bound: str | None = None) -> Any:
    """A stand-in for module ``name`` bound in ``namespace`` (a module's ``globals()``) under
    ``bound`` (default: ``name``'s last part); the module itself if it is already imported."""
    module = importlib.sys.modules.get(name)  # type: ignore[attr-defined]
    return module if module is not None else _Lazy(name, namespace, bound or name.rpartition(".")[2])


def lazy_exports(package: str, names: dict[str, str]) -> tuple[Any, Any]:
    """``__getattr__`` and ``__dir__`` for a package ``__init__`` that re-exports ``names``
    (public name -> the module defining it) without importing those modules until one is
    asked for (PEP 562): ``from specstate.graph import AbstractGraph`` still works, and
    importing ``specstate.graph.output`` no longer imports all of ``specstate.graph``."""

    def __getattr__(name: str) -> Any:  # noqa: N807
        try:
            module = names[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), name)
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted(set(names) | set(vars(importlib.import_module(package))))

    module = sys.modules[package]
    module.__class__ = _Package
    module.__dict__["_lazy_names"] = names
    return __getattr__, __dir__


class _Package(types.ModuleType):
    """A package whose export shares its name with a submodule (``specstate.model.step``, the
    function in the module of that name): importing the submodule binds it on the package, which
    would hide the export; the export is bound instead, as the eager ``from .step import step``
    did."""

    def __setattr__(self, name: str, value: Any) -> None:
        names = self.__dict__.get("_lazy_names", {})
        if isinstance(value, types.ModuleType) and value.__name__ == names.get(name) == f"{self.__name__}.{name}":
            value = getattr(value, name)
        super().__setattr__(name, value)
