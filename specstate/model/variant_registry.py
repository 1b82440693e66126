"""Variants: named sets of overrides of the model's operations (the registry, no entry).

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

A patch that adds server flags declares them (``PatchFlag``: the flag as the patched server
spells it and the ``SpecConfig`` field it sets), so ``specstate check -- <launch flags>`` and
``--server-args`` accept them beside the release's own (``specstate.server_args``). Every
variant of the v1 family runs the seed's patch and so takes its
``--speculative-disable-batch-threshold`` (its family's ``Family.patch_flags``); a class variant lists its own
in a ``flags`` attribute.

This module defines the shape (``Variant``, ``PatchFlag``), ``register`` and the look-ups over
what is registered; it imports no variant. The catalog ``specstate/model/variants.py`` imports
the modules that register the built-in ones and re-exports every name here: import from there
(or from ``specstate.model``), so the registry is full.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from specstate.errors import InvalidConfig, UnknownName, VariantLoadError
from specstate.model.config import SpecConfig, check_changes
from specstate.model.ops_table import OP_NAMES, Ops
from specstate.model.releases import core_family

__all__ = ["Variant", "PatchFlag", "SEED_THRESHOLD_FLAG", "register", "get_variant", "as_variant", "variant_names",
           "load_variant", "import_object", "is_builtin", "ALLOW_IMPORT_ENV", "variant_import_allowed", "require_variant_import"]


@dataclass(frozen=True)
class PatchFlag:
    """A server flag a patch adds to sglang's ``ServerArgs`` (parsed as argparse would)."""

    flag: str  #: as on the command line, ``--speculative-disable-batch-threshold``
    field: str  #: the ``SpecConfig`` field it sets
    type: str  #: ``int``, ``float`` or ``bool`` (``store_true``)
    default: Any  #: the value when the flag is absent (``None``: the patch is off)
    help: str = ""
    #: the least value the patch accepts (``int`` / ``float``), or ``None``
    minimum: float | None = None


#: the seed's patch: ``ServerArgs.speculative_disable_batch_threshold`` (``None``: never switch
#: off, as upstream; ``integration/sglang_patch.py`` is the same patch on the real worker)
SEED_THRESHOLD_FLAG = PatchFlag("--speculative-disable-batch-threshold", "disable_batch_threshold", "int", None,
                                "speculate only while the decode batch has at most this many requests", minimum=0)


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
    #: server flags this variant's patch adds (beyond its family's and its base's)
    flags: tuple[PatchFlag, ...] = ()
    #: the built-in scenario ``specstate run`` plays for it when none is named (``None``: the
    #: base's, else ``seed-sweep``)
    scenario: str | None = None

    def default_scenario(self) -> str | None:
        """``scenario``, else the base's."""
        if self.scenario is not None or self.base is None:
            return self.scenario
        return get_variant(self.base).default_scenario()

    def all_flags(self) -> tuple[PatchFlag, ...]:
        """The family's flags, the base's, then this variant's own (a later one of a name wins)."""
        from specstate.model.family_registry import _FAMILIES

        family = _FAMILIES.get(self.family_name)
        merged = {f.flag: f for f in (family.patch_flags if family is not None else ())}
        if self.base is not None:
            merged.update((f.flag, f) for f in get_variant(self.base).all_flags())
        merged.update((f.flag, f) for f in self.flags)
        return tuple(merged.values())

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
        """The table it runs: the catalog's ``DEFAULT_OPS`` with its overrides (and its bases')."""
        from specstate.model.ops import DEFAULT_OPS  # the catalog imports the operations; none imports this registry

        return DEFAULT_OPS.replace(**self.all_overrides())

    @property
    def family_name(self) -> str:
        """The engine family (``specstate.model.families``): own, else the base's, else the shared
        core's (the oldest release, whose operations are the ``Ops`` table's defaults)."""
        if self.family is not None:
            return self.family
        return get_variant(self.base).family_name if self.base is not None else core_family()

    @property
    def engine_family(self) -> Any:
        """The :class:`~specstate.model.family_registry.Family` this variant models (``family_name``'s):
        the one place a variant's family is found; nothing infers it from a config field."""
        from specstate.model.family_registry import get_family

        return get_family(self.family_name)

    def configure(self, config: SpecConfig) -> SpecConfig:
        """The family's config (``Family.prepare``), then this variant's changes."""
        from specstate.model.family_registry import get_family

        family = get_family(self.family_name)
        config = family.prepare(config)
        changes = self.all_config_changes()
        try:
            config = config.with_(**changes) if changes else config
        except InvalidConfig as e:
            raise InvalidConfig(f"variant {self.name!r}: config_changes {changes!r}: {e}") from None
        if family.start is not None:
            family.start(self.ops(), config)  # the engine's start: refuses what the engine refuses
        return config


_REGISTRY: dict[str, Variant] = {}


def register(variant: Variant, *aliases: str) -> Variant:
    unknown = set(variant.overrides) - set(OP_NAMES)
    if unknown:
        raise UnknownName(f"Variant {variant.name!r}: expected operation names from {sorted(OP_NAMES)} but got {sorted(unknown)}")
    for name in (variant.name, *aliases):
        _REGISTRY[name] = variant
    return variant


def is_builtin(variant: Variant) -> bool:
    """A registered variant (``policies``, ``known_bugs``, ``register``), not one loaded from
    ``package.module:Object``: an exception from its operations is specstate's bug."""
    return any(variant is v for v in _REGISTRY.values())


def variant_names() -> list[str]:
    return sorted(_REGISTRY)


def get_variant(name: str) -> Variant:
    """A registered variant by name, or a user's ``package.module:Object``."""
    if not isinstance(name, str):
        raise UnknownName(f"Expected a variant name (a string) but got {type(name).__name__}={name!r}")
    if name in _REGISTRY:
        return _REGISTRY[name]
    if ":" in name:
        return load_variant(name)
    raise UnknownName(f"Expected a variant from {sorted(_REGISTRY)} or 'package.module:Object' but got {name!r}")


def as_variant(variant: Variant | str) -> Variant:
    """The variant itself, or the one a name stands for (``get_variant``, looked up once). The
    entry of a command or API call resolves with it and passes the object down; a function below
    that takes ``Variant | str`` calls it once at its top, so nothing below looks a name up again
    (an unregistered ``Variant`` built in code runs everywhere a registered one does)."""
    return variant if isinstance(variant, Variant) else get_variant(variant)


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


#: the standing permission to import a variant's module that a file names, as ``--allow-variant-import``
ALLOW_IMPORT_ENV = "SPECSTATE_ALLOW_VARIANT_IMPORT"
#: how a caller of the Python API gives that permission (``require_variant_import``'s default hint)
API_HINT = "pass allow_variant_import=True (on the command line: --allow-variant-import)"


def variant_import_allowed(variant: str, allowed: bool = False) -> bool:
    """The one rule for loading a variant a file names (a trace, a recording's header): a
    built-in name; ``package.module:Object`` only with permission (``allowed``: the caller's
    ``--allow-variant-import`` / ``allow_variant_import=True``, or ``SPECSTATE_ALLOW_VARIANT_IMPORT=1``)
    or when the process has already imported that module (loading it runs no new code). A
    variant named on the command line (``--variant``) is the user's own choice and needs none."""
    if ":" not in variant or allowed or os.environ.get(ALLOW_IMPORT_ENV) == "1":
        return True
    return variant.partition(":")[0] in sys.modules


def require_variant_import(variant: str, source: object, allowed: bool = False, *, hint: str = API_HINT) -> None:
    """``variant_import_allowed``, else one ``UsageError`` naming ``source`` (the file), the module
    that loading would import, and ``hint``: how the caller's interface gives permission (the
    CLI: ``add --allow-variant-import``; the Python API: ``API_HINT``)."""
    if not variant_import_allowed(variant, allowed):
        from specstate.errors import UsageError

        raise UsageError(f"{source} names the variant {variant!r}: replaying it imports module "
                         f"{variant.partition(':')[0]!r} and runs its code. If you trust this trace, {hint}")


#: ``package.module:Object``: absolute, dotted identifiers (no relative ``.mod``, no paths)
_SPEC = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")


def import_object(spec: str) -> Any:
    """The object ``package.module:Object`` names: the one guard every engine's variant loader goes
    through (the spec's form checked, the module imported with the current directory as a last
    resort, anything the import raises, ``SystemExit`` included, a ``VariantLoadError`` naming the
    spec). Importing runs the module's code: a variant a file names needs ``require_variant_import``
    first."""
    if not isinstance(spec, str) or not _SPEC.match(spec):
        raise VariantLoadError(f"Expected --variant to be a built-in name or an absolute package.module:Object "
                               f"(dotted identifiers, no path, no leading dot) but got {str(spec)[:100]!r}")
    mod_name, _, attr = spec.partition(":")
    module = _import_for(spec, mod_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise VariantLoadError(f"Expected {mod_name!r} to define {attr!r} for --variant {spec!r}") from None
    except Exception as e:
        raise VariantLoadError(f"Expected {mod_name}.{attr} to be readable for --variant {spec!r} but it raised "
                               f"{type(e).__name__}: {str(e)[:200]}") from e


def load_variant(spec: str) -> Variant:
    """Load ``package.module:Object`` (a :class:`Variant`, or a class of overrides) through
    ``import_object``. Importing runs the module's code: only name modules you trust (a trace's
    variant needs ``--allow-variant-import``)."""
    obj = import_object(spec)
    if isinstance(obj, Variant):
        return _checked(obj, spec)
    if inspect.isclass(obj):
        return _checked(_from_class(obj, spec), spec)
    raise VariantLoadError(f"Expected a Variant or a class of overrides at {spec!r} but got {type(obj).__name__}")


def _import_for(spec: str, mod_name: str) -> Any:
    try:
        return _import_user_module(mod_name)
    except ImportError as e:
        raise VariantLoadError(f"Expected an importable module for --variant {spec!r} but import failed: {e}") from e
    except (Exception, SystemExit) as e:  # the module's own code failed (or called sys.exit)
        what = f"SystemExit({e.code!r})" if isinstance(e, SystemExit) else f"{type(e).__name__}: {str(e)[:200]}"
        raise VariantLoadError(f"Expected module {mod_name!r} of --variant {spec!r} to import but it raised {what}") from e


def _checked(v: Variant, spec: str) -> Variant:
    """Overrides name operations and are callable; ``config_changes`` name config fields
    with values of the right type and within ``BOUNDS`` (cross-field rules apply later,
    to the config the variant changes)."""
    unknown = sorted(set(v.overrides) - set(OP_NAMES))
    if unknown:
        raise VariantLoadError(f"Expected {spec!r} to override operations from {sorted(OP_NAMES)} but got {unknown}")
    bad = sorted(n for n, f in v.overrides.items() if not callable(f))
    if bad:
        raise VariantLoadError(f"Expected the overrides {bad} of {spec!r} to be functions")
    if v.family is not None and v.base is not None and get_variant(v.base).family_name != v.family:
        raise VariantLoadError(f"Expected the family of {spec!r} to be its base's but got family={v.family!r} over "
                               f"base={v.base!r} (family {get_variant(v.base).family_name}): pick a base of {v.family}")
    if not isinstance(v.config_changes, Mapping):
        raise VariantLoadError(f"Expected config_changes of {spec!r} to be a dict but got {type(v.config_changes).__name__}")
    bad_flags = [f.flag for f in v.flags if f.field not in SpecConfig.__dataclass_fields__
                 or f.type not in ("int", "float", "bool") or not str(f.flag).startswith("--")]
    if bad_flags:
        raise VariantLoadError(f"Expected the flags {bad_flags} of {spec!r} to be '--name' flags of type int, float "
                               f"or bool setting a SpecConfig field from {sorted(SpecConfig.__dataclass_fields__)}")
    try:
        check_changes(v.config_changes)
    except InvalidConfig as e:
        raise VariantLoadError(f"{spec} config_changes: {e}") from None
    return v


def _from_class(cls: type, spec: str) -> Variant:
    overrides = {n: getattr(cls, n) for n in OP_NAMES if n in vars(cls)}
    if not overrides and not getattr(cls, "config_changes", None):
        raise VariantLoadError(f"Expected class {spec!r} to override at least one operation of {sorted(OP_NAMES)}")
    changes, name, base = getattr(cls, "config_changes", None) or {}, getattr(cls, "name", spec), getattr(cls, "base", None)
    family = getattr(cls, "family", None)
    flags = tuple(getattr(cls, "flags", None) or ())
    if not all(isinstance(f, PatchFlag) for f in flags):
        raise VariantLoadError(f"Expected the flags of {spec!r} to be specstate.model.variants.PatchFlag values "
                               f"but got {[type(f).__name__ for f in flags]}")
    if not isinstance(changes, Mapping):
        raise VariantLoadError(f"Expected config_changes of {spec!r} to be a dict but got {type(changes).__name__}")
    if not all(x is None or isinstance(x, str) for x in (base, family)) or not isinstance(name, str):
        raise VariantLoadError(f"Expected the name, base and family of {spec!r} to be strings but got name={name!r}, "
                               f"base={base!r}, family={family!r}")
    doc = (cls.__doc__ or "").strip() or "user variant"
    variant = Variant(name=name, summary=doc.splitlines()[0], overrides=overrides, config_changes=dict(changes), base=base,
                      family=family, flags=flags)
    if variant.base is not None:
        get_variant(variant.base)  # fail early on an unknown base
    return variant
