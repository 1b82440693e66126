"""Variants: named sets of overrides of the model's operations.

A variant is a user's switching patch or a known bug, expressed as replacements for named
operations of :class:`~specstate.model.ops.Ops`, plus optional config changes. Built-in
variants live in ``policies.py`` (decode policies) and ``known_bugs.py`` (one per row of
``known-bugs.md``). A user's own variant loads from ``package.module:Object`` where
``Object`` is a :class:`Variant`, or a class whose attributes named like operations are the
overrides (``name``, ``summary``, ``base`` and ``config_changes`` are optional class
attributes)::

    class MyVariant:
        base = "fixed-threshold"
        def decide_speculation(ops, tx, batch):
            return batch.batch_size <= 3
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from specstate.errors import UnknownName, VariantLoadError
from specstate.model.config import SpecConfig
from specstate.model.ops import DEFAULT_OPS, OP_NAMES, Ops

__all__ = ["Variant", "register", "get_variant", "variant_names", "load_variant"]


@dataclass(frozen=True)
class Variant:
    name: str
    summary: str
    overrides: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    config_changes: Mapping[str, Any] = field(default_factory=dict)
    base: str | None = None  #: another variant whose overrides this one starts from
    #: for planted bugs: the invariant that must catch it
    expected_invariant: str | None = None
    #: for planted bugs: the report it mirrors (``sglang#9252``) or ``None``
    reference: str | None = None
    #: True for a variant that should pass every invariant (a correct policy)
    correct: bool = False
    #: the engine family it models (``specstate.model.families``); ``None``: the base's, else v1
    family: str | None = None

    def all_overrides(self) -> dict[str, Callable[..., Any]]:
        merged: dict[str, Callable[..., Any]] = {}
        if self.base is not None:
            merged.update(get_variant(self.base).all_overrides())
        merged.update(self.overrides)
        return merged

    def all_config_changes(self) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        if self.base is not None:
            merged.update(get_variant(self.base).all_config_changes())
        merged.update(self.config_changes)
        return merged

    def ops(self) -> Ops:
        return DEFAULT_OPS.replace(**self.all_overrides())

    @property
    def family_name(self) -> str:
        """The engine family (``specstate.model.families``): own, else the base's, else v1."""
        if self.family is not None:
            return self.family
        return get_variant(self.base).family_name if self.base is not None else "sglang-0.5.12"

    def configure(self, config: SpecConfig) -> SpecConfig:
        """The family's config (``Family.prepare``), then this variant's changes."""
        from specstate.model.families import get_family

        config = get_family(self.family_name).prepare(config)
        changes = self.all_config_changes()
        return config.with_(**changes) if changes else config


_REGISTRY: dict[str, Variant] = {}


def register(variant: Variant, *aliases: str) -> Variant:
    unknown = set(variant.overrides) - set(OP_NAMES)
    if unknown:
        raise UnknownName(f"Variant {variant.name!r}: expected operation names from {sorted(OP_NAMES)} but got {sorted(unknown)}")
    for name in (variant.name, *aliases):
        _REGISTRY[name] = variant
    return variant


def _ensure_builtins() -> None:
    from specstate.model import known_bugs, policies  # noqa: F401  (registers on import)
    from specstate.model.v2 import variants  # noqa: F401


def variant_names() -> list[str]:
    _ensure_builtins()
    return sorted(_REGISTRY)


def get_variant(name: str) -> Variant:
    """A registered variant by name, or a user's ``package.module:Object``."""
    _ensure_builtins()
    if name in _REGISTRY:
        return _REGISTRY[name]
    if ":" in name:
        return load_variant(name)
    raise UnknownName(f"Expected a variant from {sorted(_REGISTRY)} or 'package.module:Object' but got {name!r}")


def _import_user_module(name: str) -> Any:
    """Import ``name``; a module not found on ``sys.path`` is looked for in the current
    directory too (appended last, as ``python -m`` would find it), so ``specstate`` and
    ``pytest`` find ``mypatch.py`` in the directory they run in."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        cwd = os.getcwd()
        if e.name != name.split(".")[0] or cwd in sys.path:
            raise
        sys.path.append(cwd)
        return importlib.import_module(name)


def load_variant(spec: str) -> Variant:
    """Load ``package.module:Object`` (a :class:`Variant`, or a class of overrides)."""
    mod_name, _, attr = spec.partition(":")
    try:
        module = _import_user_module(mod_name)
    except ImportError as e:
        raise VariantLoadError(f"Expected an importable module for --variant {spec!r} but import failed: {e}") from e
    try:
        obj = getattr(module, attr)
    except AttributeError as e:
        raise VariantLoadError(f"Expected {mod_name!r} to define {attr!r} for --variant {spec!r}") from e
    if isinstance(obj, Variant):
        return obj
    if inspect.isclass(obj):
        return _from_class(obj, spec)
    raise VariantLoadError(f"Expected a Variant or a class of overrides at {spec!r} but got {type(obj).__name__}")


def _from_class(cls: type, spec: str) -> Variant:
    overrides = {n: getattr(cls, n) for n in OP_NAMES if n in vars(cls)}
    if not overrides and not getattr(cls, "config_changes", None):
        raise VariantLoadError(f"Expected class {spec!r} to override at least one operation of {sorted(OP_NAMES)}")
    variant = Variant(
        name=getattr(cls, "name", spec), summary=(cls.__doc__ or "user variant").strip().splitlines()[0],
        overrides=overrides, config_changes=dict(getattr(cls, "config_changes", {}) or {}),
        base=getattr(cls, "base", None), family=getattr(cls, "family", None),
    )
    if variant.base is not None:
        get_variant(variant.base)  # fail early on an unknown base
    return variant
