"""The sglang releases the integration knows: every release (``Release`` (``model/releases.py``)) with an
adapter (``adapter.py`` declaring its :class:`~specstate.integration.adapter.ReleaseAdapter` as
``ADAPTER``, in its own folder or in ``integration/sglang_X_Y_Z/``), found by folder name: a new
release adds its folder and no line here. Every engine-name look-up of ``integration/`` and
``oracle/`` goes through here. Importing this module imports the adapters' declarations only (no
recorder, model or sglang).
"""

from __future__ import annotations

from typing import Any

import importlib

from specstate.integration.adapter import ReleaseAdapter
from specstate.model.releases import Release, core_family, releases

__all__ = ["release_adapter", "ADAPTERS", "DEFAULT", "ENGINES", "RECORDING_SCHEMAS", "SCHEMAS", "adapter_for", "adapter_of", "adapter_of_schema", "adapter_modelling", "default_variants"]



def release_adapter(release: Release) -> ReleaseAdapter | None:
    """The adapter a release declares (``ADAPTER`` of its ``adapter`` module); ``None``: it has none
    (its recordings, if any, are its base's: ``adapter_modelling``)."""
    where = release.module("adapter", room="integration")
    return None if where is None else importlib.import_module(where).ADAPTER


#: every release adapter, the oldest first
ADAPTERS: tuple[ReleaseAdapter, ...] = tuple(a for r in releases() for a in [release_adapter(r)] if a is not None)
_BY_FAMILY = {a.family: a for a in ADAPTERS}
#: the release a recording without a family, and a driver run without ``--engine``, is: the shared core's
DEFAULT: ReleaseAdapter = _BY_FAMILY[core_family()]
#: the ``--engine`` names of the driver and ``replay``: the families
ENGINES: tuple[str, ...] = tuple(a.family for a in ADAPTERS)

#: every recording schema this specstate reads -> the release whose recorder writes it (the
#: loader's table, ``specstate.schema.read_recording``; its models: ``recording.py`` of that folder)
RECORDING_SCHEMAS: dict[str, ReleaseAdapter] = {s: a for a in ADAPTERS for s in a.schemas}
#: every recording schema -> the engine family it records
SCHEMAS: dict[str, str] = {s: a.family for s, a in RECORDING_SCHEMAS.items()}


def adapter_for(family: str | None) -> ReleaseAdapter:
    """The adapter of ``family`` (``None``: the default release); an unknown one is a ``UsageError``."""
    if family is None:
        return DEFAULT
    try:
        return _BY_FAMILY[family]
    except KeyError:
        from specstate.errors import UsageError

        raise UsageError(f"Expected an engine from {', '.join(ENGINES)} but got {family!r}") from None


def adapter_of(records: Any) -> ReleaseAdapter:
    """The adapter of a loaded recording (``specstate.schema.Recording.family``, from its schema)."""
    return adapter_for(getattr(records, "family", None))


def adapter_of_schema(schema: Any) -> ReleaseAdapter:
    """The adapter whose recorder writes ``schema`` (an unknown or missing one: the default release)."""
    return next((a for a in ADAPTERS if schema in a.schemas), DEFAULT)


def adapter_modelling(variant: Any) -> ReleaseAdapter:
    """The adapter whose recordings a variant (a ``Variant`` or its name) is compared in the terms
    of: its family's, or the nearest base family's that has one (0.5.23 derives from 0.5.17)."""
    from specstate.model import get_variant
    from specstate.model.families import get_family

    name: str | None = (get_variant(variant) if isinstance(variant, str) else variant).family_name
    while name is not None and name not in _BY_FAMILY:
        name = get_family(name).base
    return adapter_for(name)


def default_variants() -> dict[str, str]:
    """The variant a recording is compared with when none is named, by family."""
    return {a.family: a.default_variant for a in ADAPTERS}
