"""Old names that keep working: a renamed module, package, name or record field still
resolves to the very same object, with a :class:`~specstate.errors.SpecstateDeprecationWarning`
naming the replacement, instead of an ``ImportError``, ``AttributeError`` or bare ``TypeError``.

- :func:`alias_package`: an old package path (``specstate.model.v2``) whose every submodule is
  the new package's module itself (a meta-path finder hands out the module already imported
  under the new name, so no file runs twice: one registry, one class per type).
- :func:`moved_module`: an old module path, called from the shim file left in its place.
- :func:`renamed_names`: a module ``__getattr__`` for names renamed inside a module.
- :func:`moved_function`: a stand-in left where a function was, calling the one that replaced it
  (found by name when called, so the old module does not import the new one's package).
- :func:`renamed_fields`: a class decorator for a frozen record type whose field was renamed or
  removed: the old keyword and the old attribute still work, with the warning.

It imports nothing of specstate's but the errors, so any module may use it (the public surface
``specstate.variant`` re-exports it for variant authors). Warnings point at the importer's line
(``importlib``'s own frames are skipped).
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any, Callable, Mapping, Sequence, TypeVar

from specstate.errors import SpecstateDeprecationWarning

__all__ = ["warn_renamed", "alias_package", "moved_module", "renamed_names", "moved_function", "renamed_fields"]

T = TypeVar("T", bound=type)


def warn_renamed(old: str, new: str, *, stacklevel: int = 2) -> None:
    """``OLD is deprecated: use NEW`` (``stacklevel`` counts from the caller, as ``warnings.warn``)."""
    warnings.warn(f"{old} is deprecated: use {new}", SpecstateDeprecationWarning, stacklevel=stacklevel + 1)


class _PackageAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``old.X`` imports as ``new.X`` itself (one object under both names in ``sys.modules``)."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new
        self._specs: dict[str, Any] = {}

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None,
                  ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(self.old + "."):
            return None
        target_name = self.new + fullname[len(self.old):]
        if importlib.util.find_spec(target_name) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        target_name = self.new + spec.name[len(self.old):]
        warn_renamed(spec.name, target_name, stacklevel=2)
        module = importlib.import_module(target_name)
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import machinery set the old spec on the shared module: give it its own back
        spec = module.__spec__
        assert spec is not None, "the import machinery sets a module's spec before exec_module"
        module.__spec__ = self._specs.pop(spec.name, spec)


def alias_package(old: str, new: str) -> Callable[[str], Any]:
    """Call from ``old/__init__.py`` as ``__getattr__ = alias_package(__name__, "new.pkg")``:
    warns once for the package, makes ``import old.X`` / ``from old import X`` give ``new.X``
    itself (warning once per submodule), and returns the package's ``__getattr__``."""
    warn_renamed(old, new, stacklevel=3)
    if not any(isinstance(f, _PackageAlias) and f.old == old for f in sys.meta_path):
        sys.meta_path.insert(0, _PackageAlias(old, new))

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if importlib.util.find_spec(f"{new}.{name}") is not None:
            return importlib.import_module(f"{old}.{name}")
        try:
            value = getattr(importlib.import_module(new), name)
        except AttributeError:
            raise AttributeError(f"module {old!r} (now {new!r}) has no attribute {name!r}") from None
        warn_renamed(f"{old}.{name}", f"{new}.{name}")
        return value

    return __getattr__


def moved_module(old: str, new: str) -> None:
    """Call from the shim file left at ``old``'s path as ``moved_module(__name__, "new.mod")``:
    ``old`` becomes ``new`` itself (the import returns what ``sys.modules`` holds at its end)."""
    warn_renamed(old, new, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)


def renamed_names(module: str, renames: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__``: ``renames`` maps an old name to ``"package.module:new_name"``."""

    def __getattr__(name: str) -> Any:
        if name not in renames:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        mod_name, _, attr = renames[name].partition(":")
        warn_renamed(f"{module}.{name}", f"{mod_name}.{attr}")
        return getattr(importlib.import_module(mod_name), attr)

    return __getattr__


def moved_function(old: str, new: str) -> Callable[..., Any]:
    """A stand-in for the function ``old`` that moved to ``new`` (``"package.module:name"``):
    calling it warns, naming the replacement, and returns what the new function returns."""
    mod_name, _, attr = new.partition(":")

    def moved(*args: Any, **kwargs: Any) -> Any:
        warn_renamed(old, f"{mod_name}.{attr}")
        return getattr(importlib.import_module(mod_name), attr)(*args, **kwargs)

    moved.__name__ = moved.__qualname__ = old.rpartition(".")[2]
    moved.__doc__ = f"Deprecated: use ``{mod_name}.{attr}``."
    return moved


def renamed_fields(renames: Mapping[str, str | None]) -> Callable[[T], T]:
    """A class decorator for a record type: ``renames`` maps an old field name to its new name
    (or to ``None``: removed, the keyword is dropped). ``Cls(old=v)`` builds ``Cls(new=v)`` and
    ``obj.old`` reads ``obj.new``, both with a warning naming the replacement."""

    def decorate(cls: T) -> T:
        init = cls.__init__  # type: ignore[misc]  # the class's own initializer, wrapped (not an instance's)

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            for old in set(kwargs) & set(renames):
                new = renames[old]
                value = kwargs.pop(old)
                warn_renamed(f"{cls.__name__}({old}=...)", f"{cls.__name__}({new}=...)" if new else
                             f"{cls.__name__}() without {old!r} (the field was removed)")
                if new is not None:
                    kwargs.setdefault(new, value)
            init(self, *args, **kwargs)

        def __getattr__(self: Any, name: str) -> Any:
            new = renames.get(name)
            if new is None:
                raise AttributeError(f"{cls.__name__!r} object has no attribute {name!r}")
            warn_renamed(f"{cls.__name__}.{name}", f"{cls.__name__}.{new}")
            return getattr(self, new)

        cls.__init__ = __init__  # type: ignore[misc]
        cls.__getattr__ = __getattr__  # type: ignore[attr-defined]
        return cls

    return decorate
