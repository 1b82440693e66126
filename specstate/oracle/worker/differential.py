"""Model runs against upstream's worker-side functions: which variants, and one comparison.

Every registered variant of the release's model family (``catalog.WorkerRelease.family``) is
compared, in name order (aliases once): a variant registered later in that family (a new patch, a
new known bug) is judged without a line here; a family registered for the release later is the
release module's ``family`` line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from specstate.oracle.worker.batches import model_batches
from specstate.oracle.worker.catalog import release as worker_release
from specstate.oracle.worker.compare import Mismatch, WorkerProcess, compare_batch

__all__ = ["WorkerDifferential", "variants_for", "worker_differential"]


def variants_for(release: str) -> tuple[str, ...]:
    """The names of every registered variant of ``release``'s model family (sorted, aliases once)."""
    import specstate.model.variants  # noqa: F401  (the catalog registers every built-in variant)
    from specstate.model.variant_registry import _REGISTRY

    family = worker_release(release).family
    seen: dict[int, str] = {}
    for name in sorted(_REGISTRY):
        v = _REGISTRY[name]
        if v.family_name == family and id(v) not in seen:
            seen[id(v)] = v.name
    return tuple(sorted(seen.values()))


@dataclass
class WorkerDifferential:
    """One model run's worker batches, upstream's answers, the first mismatch."""

    variant: str
    batches: list[tuple[dict[str, Any], dict[str, Any]]]
    answers: list[dict[str, Any]]
    mismatch: Mismatch | None = None
    reached: set[str] = field(default_factory=set)  #: what upstream did: graph, eager, replay error classes

    @property
    def ok(self) -> bool:
        return self.mismatch is None


def _reached(answers: Sequence[dict[str, Any]]) -> set[str]:
    out = set()
    for a in answers:
        out.add("graph" if a["graph"] else "eager")
        if a["error"] is not None:
            out.add(f"{a['error']['class']}@{a['error']['stage']}")
    return out


def worker_differential(process: WorkerProcess, config: Any, variant: Any,
                        play: Callable[[Any], None] | Sequence[Any]) -> WorkerDifferential:
    """Run ``variant`` (a name or a ``Variant``; ``play``: actions, or a function of the ``Run``), feed its worker batches to
    ``process``, compare them in order."""
    batches, _ = model_batches(config, variant, play)
    answers = process.run([b for b, _ in batches]) if batches else []
    d = WorkerDifferential(getattr(variant, "name", variant), batches, answers, reached=_reached(answers))
    for (batch, expected), answer in zip(batches, answers):
        d.mismatch = compare_batch(batch, expected, answer)
        if d.mismatch is not None:
            break
    return d
