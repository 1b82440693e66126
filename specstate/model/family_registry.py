"""Engine families: which sglang version, worker and scheduler loop a variant models (the
registry: the shape ``Family``, ``register_family`` and the look-ups; it imports no family's
module: the catalog ``specstate/model/families.py`` does, and re-exports every name here).

- ``sglang-0.5.12`` (the v1 family): ``EAGLEWorker`` under ``Scheduler.event_loop_normal``
  (``--disable-overlap-schedule``), with the seed's batch-size threshold. v1-specific code:
  ``model/sglang_0_5_12/`` (``family.py`` the family, ``worker.py`` the v1 worker, its functions also the shared table's
  defaults; ``policies.py`` and ``known_bugs.py``, its switching policies and bugs), ``replay.py`` / ``runner.py`` (its graph runners, also used by v2's).
- ``sglang-0.5.17`` (the v2 family): ``EAGLEWorkerV2`` under ``Scheduler.event_loop_overlap``
  with upstream's batch-size-aware adaptive speculation. v2-specific code: ``model/sglang_0_5_17/``.
- ``sglang-0.5.23``: the 0.5.17 family (its ``base``) with only 0.5.18-0.5.23's overrides, in
  ``model/sglang_0_5_23/`` (docs/model-0.5.23.md).

Each family stands for a range of sglang releases (``Family.releases``), checked against their
source by ``specstate/citations.py`` (``tests/test_release_ranges.py``, ``specstate engines``).

Shared by both: ``step``, ``Ops``, ``state`` / ``request`` / ``batch``, admission, the radix
cache, the KV allocator, records, tensors and the invariants. A family is chosen by its
variant (``Variant.family``, inherited from ``base``); ``Family.prepare`` makes a config one
the family runs under (e.g. v2: topk 1, the overlap scheduler on), so scenario, fuzz and trace
configs work for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable

from specstate.errors import UnknownName
from specstate.model.config import SpecConfig

__all__ = ["Family", "ReleaseChange", "register_family", "get_family", "family_names", "family_of_config", "threshold_of"]


@dataclass(frozen=True)
class ReleaseChange:
    """One change a derived family makes to its base, and the first sglang release that ships it:
    what ``--engine`` tells a user whose release lies between two families (``release_gap``)."""

    first_release: str  #: e.g. ``0.5.18``
    operation: str  #: the overridden operation (an ``Ops`` name) or ``Family.prepare`` / ``Family.start``
    summary: str


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
    #: the releases it stands for, each checked against its citations (``specstate/citations.py``;
    #: ``tests/test_release_ranges.py``); empty: the release it cites
    release_range: tuple[str, ...] = ()
    base: str | None = None  #: the family it derives from (it declares only its overrides)
    #: the base's citations its overrides replace though it does not cite them again: ``(file, symbol)``
    overridden_citations: tuple[tuple[str, str], ...] = ()
    #: the base's citations it keeps that changed in its releases, not yet reviewed: ``(file, symbol)``
    unreviewed_citations: tuple[tuple[str, str], ...] = ()
    adaptive: bool = True  #: upstream's adaptive speculation switches (fuzz draws adaptive configs)
    #: server flags every variant of the family takes (``Variant.all_flags``; ``PatchFlag`` values)
    patch_flags: tuple = ()
    #: what it changes over ``base``, each with the first release that ships it (a derived family)
    changes: tuple[ReleaseChange, ...] = ()
    #: the switch rule of a prepared config as a function of the batch size (``prove``'s abstraction,
    #: ``decision_of`` in ``specstate/prove/_abstraction.py``); ``None``: the core's, the seed's threshold
    #: (``SpecConfig.speculation_allowed``)
    batch_decision: Callable[[SpecConfig], Callable[[int], Hashable]] | None = None

    @property
    def source_release(self) -> str:
        """The sglang release it cites (``sglang-0.5.17`` -> ``0.5.17``)."""
        return self.name.removeprefix("sglang-")

    @property
    def releases(self) -> tuple[str, ...]:
        return self.release_range or (self.source_release,)


_FAMILIES: dict[str, Family] = {}


def register_family(family: Family) -> Family:
    _FAMILIES[family.name] = family
    return family


def get_family(name: str) -> Family:
    if name not in _FAMILIES:
        raise UnknownName(f"Expected an engine from {sorted(_FAMILIES)} but got {name!r}")
    return _FAMILIES[name]


def family_names() -> list[str]:
    return sorted(_FAMILIES)


def _family_from_loop(config: SpecConfig) -> Family:
    """The family a config's scheduler loop suggests (the overlap loop: 0.5.17's). Wrong for any
    other release of the same loop (0.5.23 and later): kept only for the deprecated names below
    and a direct ``graph.abstraction.abstract_state(state, last)`` call that names no family.
    Asked of the families themselves: the first registered one of no base whose ``prepare`` keeps
    the config's loop (the catalog registers the oldest release first)."""
    loop = config.disable_overlap_schedule
    for family in _FAMILIES.values():
        if family.base is None and family.prepare(config).disable_overlap_schedule == loop:
            return family
    raise UnknownName(f"Expected a registered family running {'no ' if loop else ''}overlap scheduler but got none "
                      f"of {sorted(_FAMILIES)}")


def _threshold_from_loop(config: SpecConfig) -> int | None:
    return _family_from_loop(config).switch_threshold(config)


def family_of_config(config: SpecConfig) -> Family:
    """Deprecated: a config names its scheduler loop, not its release (a 0.5.23 config gives the
    0.5.17 family). Use the variant's family: ``variant.engine_family``."""
    import warnings

    warnings.warn("family_of_config infers the family from disable_overlap_schedule (wrong for a second release of "
                  "one scheduler loop): use variant.engine_family", DeprecationWarning, stacklevel=2)
    return _family_from_loop(config)


def threshold_of(config: SpecConfig) -> int | None:
    """Deprecated (``family_of_config``'s inference): use ``variant.engine_family.switch_threshold(config)``."""
    import warnings

    warnings.warn("threshold_of infers the family from disable_overlap_schedule: use "
                  "variant.engine_family.switch_threshold(config)", DeprecationWarning, stacklevel=2)
    return _threshold_from_loop(config)
