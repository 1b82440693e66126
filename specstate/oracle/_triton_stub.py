"""A Triton stub for releases that ship none of their own (upstream's ``sglang/_triton_stub.py``
appeared after 0.5.9): the same contract, written for specstate. ``triton`` and every
``triton.*`` module are permissive modules (every attribute a module, CamelCase ones a
subclassable class), ``@triton.jit`` / ``@triton.autotune(...)`` return the function unchanged,
so a kernel *definition* imports, and a kernel *launch* (``kernel[grid](...)`` on a plain
function) raises ``TypeError``: a path that reaches a kernel fails loudly. ``stubs.py`` uses it
only where the unpacked wheel has neither ``sglang._triton_stub`` nor ``sglang._platform_stubs``.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types
from typing import Any

__all__ = ["install", "_MockModule"]


class _StubBase:
    """A CamelCase attribute (``triton.Config``, ``triton.runtime.KernelInterface``): constructible
    with anything, subclassable."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)


class _MockModule(types.ModuleType):
    """A module whose every attribute is another stub (upstream's ``_MockModule``'s contract)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        self.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value: Any = (type(name, (_StubBase,), {"__module__": self.__name__}) if name[:1].isupper()
                      else _registered(f"{self.__name__}.{name}"))
        object.__setattr__(self, name, value)
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # @triton.jit
        return lambda fn: fn  # @triton.jit(...), @triton.autotune(...)

    def __instancecheck__(self, instance: Any) -> bool:
        return False

    def __bool__(self) -> bool:
        return False


def _registered(name: str) -> _MockModule:
    mod = sys.modules.get(name)
    if not isinstance(mod, _MockModule):
        mod = sys.modules[name] = _MockModule(name)
    return mod


class _Finder:
    """``import triton.x.y``: each module a stub."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname == "triton" or fullname.startswith("triton."):
            return _registered(fullname).__spec__
        return None

    def create_module(self, spec: Any) -> Any:
        return sys.modules[spec.name]

    def exec_module(self, module: Any) -> None:
        pass


def install() -> None:
    """Register the stub ``triton`` (a no-op where one, real or stub, is imported already or a real
    one is importable, as upstream's ``install``)."""
    import importlib.util

    if "triton" in sys.modules or importlib.util.find_spec("triton") is not None:
        return
    finder = _Finder()
    sys.meta_path.insert(0, finder)
    triton: Any = _registered("triton")  # Any: the attributes below are set on a module object
    triton.__version__ = "3.0.0"
    triton.cdiv = lambda a, b: -(a // -b)
    triton.next_power_of_2 = lambda n: 1 << (n - 1).bit_length() if n > 0 else 1

    class constexpr:
        def __init__(self, value: Any = None) -> None:
            self.value = value

    language: Any = _registered("triton.language")
    language.constexpr = constexpr
