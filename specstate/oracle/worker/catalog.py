"""The releases the worker oracle runs: one line per release module (``sglang_0_5_9.py``, ...), each
declaring its ``WORKER`` (:class:`WorkerRelease`: the release, the model family its batches come
from, where its graph input buffers live). A new release adds its module and one line here.

``RELEASES`` is read from the module names (no import of a release module, no sglang); ``release``
imports the module (still no sglang: the modules name upstream's symbols as strings).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

__all__ = ["RELEASES", "WorkerRelease", "release"]

#: every release module, the oldest first (the catalog lines)
_MODULE_NAMES: tuple[str, ...] = ("sglang_0_5_9", "sglang_0_5_12")


def _release_of(module_name: str) -> str:
    """``"sglang_0_5_9"`` -> ``"0.5.9"``."""
    return module_name.removeprefix("sglang_").replace("_", ".")


RELEASES: tuple[str, ...] = tuple(_release_of(n) for n in _MODULE_NAMES)


@dataclass(frozen=True)
class WorkerRelease:
    """What one release's worker oracle needs to know of it."""

    release: str  #: e.g. ``0.5.12``
    #: the model family whose variants' batches are fed to it (``specstate engines``)
    family: str
    #: ``module:Class`` of the CUDA-graph runner's static input buffers (built by its own ``create``)
    buffers: str


def release(name: str) -> WorkerRelease:
    """``name``'s :class:`WorkerRelease` (``KeyError`` for a release without a worker oracle)."""
    if name not in RELEASES:
        raise KeyError(name)
    module = importlib.import_module(f"specstate.oracle.worker.sglang_{name.replace('.', '_')}")
    worker: WorkerRelease = module.WORKER
    return worker
