"""Engine families: which sglang version, worker and scheduler loop a variant models.

- ``sglang-0.5.12`` (the v1 family): ``EAGLEWorker`` under ``Scheduler.event_loop_normal``
  (``--disable-overlap-schedule``), with the seed's batch-size threshold. v1-specific code:
  ``worker.py`` (the v1 worker), ``policies.py`` and ``known_bugs.py`` (its switching policies
  and bugs), ``replay.py`` / ``runner.py`` (its graph runners, also used by v2's).
- ``sglang-0.5.17`` (the v2 family): ``EAGLEWorkerV2`` under ``Scheduler.event_loop_overlap``
  with upstream's batch-size-aware adaptive speculation. v2-specific code: ``model/v2/``.

Shared by both: ``step``, ``Ops``, ``state`` / ``request`` / ``batch``, admission, the radix
cache, the KV allocator, records, tensors and the invariants. A family is chosen by its
variant (``Variant.family``, inherited from ``base``); ``Family.prepare`` makes a config one
the family runs under (e.g. v2: topk 1, the overlap scheduler on), so scenario, fuzz and trace
configs work for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from specstate.errors import UnknownName
from specstate.model.config import SpecConfig

__all__ = ["Family", "register_family", "get_family", "family_names", "family_of_config", "threshold_of",
           "V1_FAMILY"]


@dataclass(frozen=True)
class Family:
    name: str  #: ``--engine`` name, e.g. ``sglang-0.5.17``
    summary: str
    default_variant: str  #: what ``--engine NAME`` runs without ``--variant``
    prepare: Callable[[SpecConfig], SpecConfig]  #: the config this family runs under
    #: the decode batch size above which speculation is off (fuzz steering, graphs), or ``None``
    switch_threshold: Callable[[SpecConfig], int | None]
    #: ``specstate explore`` / ``graph`` default configs (``None``: the v1 defaults)
    explore_config: SpecConfig | None = None
    graph_config: SpecConfig | None = None
    #: the engine's start on a prepared config (``(ops, config) -> outcome``), run by
    #: ``Variant.configure``; raises where the engine refuses to start (``None``: not modelled)
    start: Callable[..., object] | None = None


_FAMILIES: dict[str, Family] = {}


def register_family(family: Family) -> Family:
    _FAMILIES[family.name] = family
    return family


def _ensure_builtins() -> None:
    from specstate.model.v2 import variants  # noqa: F401  (registers the v2 family)


def get_family(name: str) -> Family:
    _ensure_builtins()
    if name not in _FAMILIES:
        raise UnknownName(f"Expected an engine from {sorted(_FAMILIES)} but got {name!r}")
    return _FAMILIES[name]


def family_names() -> list[str]:
    _ensure_builtins()
    return sorted(_FAMILIES)


def family_of_config(config: SpecConfig) -> Family:
    """The family a prepared config belongs to (the overlap scheduler marks the v2 family)."""
    return get_family("sglang-0.5.12" if config.disable_overlap_schedule else "sglang-0.5.17")


def threshold_of(config: SpecConfig) -> int | None:
    """The switch threshold of a prepared config (``Family.switch_threshold``)."""
    return family_of_config(config).switch_threshold(config)


def _v1_prepare(config: SpecConfig) -> SpecConfig:
    """The v1 worker runs without the overlap scheduler (``disable_overlap_schedule=True``)."""
    return config if config.disable_overlap_schedule else config.with_(disable_overlap_schedule=True)


V1_FAMILY = register_family(Family(
    "sglang-0.5.12", "sglang 0.5.12: the v1 EAGLEWorker, event_loop_normal, the seed's threshold switch",
    "fixed-threshold", _v1_prepare, lambda c: c.disable_batch_threshold))
