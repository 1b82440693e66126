"""Import stubs: the packages the oracle's process must not (or cannot) import.

Every entry is a package on sglang's *import* path that the scheduler's loop never *calls*
on the oracle's path; each is replaced by a permissive module (every attribute another stub,
callable, subclassable), so a call that does reach one of them returns a stub rather than
doing the work: safe only because nothing the comparison reads comes from them (the reason
per package below). ``triton`` is upstream's own stub (``sglang/_triton_stub.py``, the one
sglang installs on macOS): a Triton kernel launch (``kernel[grid](...)``) on it raises
``TypeError``, so a path that reaches a kernel fails loudly instead of silently doing nothing.
``sglang/__init__.py`` is not run (it imports the HTTP server and the engine).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

__all__ = ["STUBBED", "install"]

#: package -> why stubbing it cannot change what the scheduler does on the oracle's path
STUBBED: dict[str, str] = {
    "sgl_kernel": "CUDA kernels (sampling, tree verify, KV copies); the oracle's worker replaces every caller "
                  "on its path (each release's oracle.py names them)",
    "flashinfer": "GPU attention/sampling kernels; attention_backend=torch_native and sampling_backend=pytorch "
                  "keep the scheduler off them, and no forward runs",
    "torchvision": "image processing for multimodal models; no multimodal request is sent",
    "transformers": "model and tokenizer classes; skip_tokenizer_init=True, and the model config is read from "
                    "config.json by the oracle (_hf.py::patch_get_config)",
    "huggingface_hub": "downloads; the model path is a local folder with a config.json only",
    "safetensors": "weight loading; no model is loaded (the worker is fake)",
    "openai": "types of the OpenAI-compatible HTTP API; the scheduler never builds them",
    "sentencepiece": "tokenizers; skip_tokenizer_init=True",
    "compressed_tensors": "quantisation configs; no quantisation",
    "gguf": "GGUF weight files; no weights",
    "aiohttp": "HTTP clients of the server; no server runs",
    "xgrammar": "grammar backends; no constrained request is sent",
    "uvicorn": "the HTTP server; no server runs",
    "tvm_ffi": "JIT kernel loader (the releases that import it); no kernel runs",
}


class _StubMeta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _module(f"{cls.__name__}.{name}")


class _StubClass(metaclass=_StubMeta):
    """A class from a stubbed package: subclassable, callable, every attribute a stub."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        pass

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _module(name)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """openai's types appear in pydantic models of the HTTP API: accept anything there."""
        from pydantic_core import core_schema

        return core_schema.any_schema()


def _upstream_stubs() -> Any:
    """Upstream's stub module: ``sglang/_triton_stub.py`` (0.5.12, 0.5.17), folded into
    ``sglang/_platform_stubs.py`` by 0.5.23 (the same ``_MockModule``, the Triton part of
    ``install_platform_stubs``); a release that ships neither (the older wheels) gets specstate's copy
    of the same contract (``_triton_stub.py``)."""
    for name in ("sglang._triton_stub", "sglang._platform_stubs"):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            pass
    return importlib.import_module("specstate.oracle._triton_stub")  # a release that ships neither


def _install_triton() -> None:
    """Upstream's Triton stub. 0.5.23 installs it only on Apple Silicon with MPS
    (``_platform_stubs.py::install_platform_stubs``): that platform is reported to the call, which
    then also fills the missing ``torch.mps`` attributes and makes copies *to MPS* blocking
    (``_patch_non_blocking``): nothing here is on MPS, so neither changes a CPU run."""
    mod = _upstream_stubs()
    if hasattr(mod, "install"):
        mod.install()
        return
    import platform

    import torch

    saved = sys.platform, platform.machine, torch.backends.mps.is_available
    sys.platform, platform.machine = "darwin", lambda: "arm64"
    torch.backends.mps.is_available = lambda: True  # type: ignore[assignment]
    try:
        mod.install_platform_stubs()
    finally:
        sys.platform, platform.machine, torch.backends.mps.is_available = saved


def _module(name: str) -> Any:
    _MockModule: Any = _upstream_stubs()._MockModule  # upstream's permissive module

    class Stub(_MockModule):
        def __getattr__(self, attr: str) -> Any:
            if attr.startswith("__") and attr.endswith("__"):
                raise AttributeError(attr)
            value: Any
            if attr[:1].isupper():
                value = _StubMeta(attr, (_StubClass,), {"__module__": self.__name__})
            else:
                value = _module(f"{self.__name__}.{attr}")
            object.__setattr__(self, attr, value)
            return value

        def __getitem__(self, key: Any) -> Any:
            return _module(f"{self.__name__}[]")

        def __setitem__(self, key: Any, value: Any) -> None:
            pass

    return Stub(name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.split(".")[0] in STUBBED:
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> Any:
        return _module(spec.name)

    def exec_module(self, module: Any) -> None:
        pass


def install(root: str) -> None:
    """Put the unpacked release at ``root`` on ``sys.path`` as package ``sglang`` (without
    running its ``__init__``), install upstream's Triton stub and the stubs above, and make
    ``torch.compile`` the identity (nothing is compiled: no forward runs)."""
    sys.path.insert(0, root)
    pkg = types.ModuleType("sglang")
    pkg.__path__ = [f"{root}/sglang"]
    pkg.__spec__ = importlib.machinery.ModuleSpec("sglang", None, is_package=True)
    sys.modules["sglang"] = pkg
    _install_triton()
    sys.meta_path.insert(0, _Finder())
    import torch

    def identity(fn: Any = None, *args: Any, **kwargs: Any) -> Any:
        return fn if fn is not None else (lambda f: f)

    torch.compile = identity  # type: ignore[assignment]
