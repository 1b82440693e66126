"""The releases the worker oracle runs: every release (``Release`` (``model/releases.py``)) with a worker
oracle module (``worker_oracle.py`` in its own folder, or in its folder of ``specstate/integration/``), each
declaring its ``WORKER`` (:class:`WorkerRelease`: the release, the model family its batches come
from, where its graph input buffers live), found by folder name: a new release adds its module and
no line here.

``RELEASES`` is read from the files (no import of a release module, no sglang); ``release``
imports the module (still no sglang: the modules name upstream's symbols as strings).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

__all__ = ["RELEASES", "WorkerRelease", "release"]



def _found() -> dict[str, str]:
    """Release (``0.5.9``) -> its worker oracle module's dotted path, the oldest first."""
    from specstate.model.releases import releases

    return {r.version: m for r in releases() for m in [r.module("worker_oracle", room="integration")] if m}


#: every release with a worker oracle, the oldest first
RELEASES: tuple[str, ...] = tuple(_found())


@dataclass(frozen=True)
class WorkerRelease:
    """What one release's worker oracle needs to know of it."""

    release: str  #: e.g. ``0.5.12``
    #: the model family whose variants' batches are fed to it (``specstate engines``)
    family: str
    #: ``module:Class`` of the CUDA-graph runner's static input buffers (built by its own ``create``)
    buffers: str

    @classmethod
    def of(cls, package: str | None, *, buffers: str) -> "WorkerRelease":
        """The declaration of the release whose folder is ``package`` (the module's ``__package__``),
        its batches its own family's."""
        from specstate.oracle._core import release_family

        family = release_family(package)
        return cls(family.partition("-")[2], family, buffers)


def release(name: str) -> WorkerRelease:
    """``name``'s :class:`WorkerRelease` (``KeyError`` for a release without a worker oracle)."""
    if name not in RELEASES:
        raise KeyError(name)
    module = importlib.import_module(_found()[name])
    worker: WorkerRelease = module.WORKER
    return worker
