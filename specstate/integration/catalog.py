"""The sglang releases the integration knows: one line per release adapter (``adapter.py``).

A new release adds its folder (``integration/sglang_X_Y_Z/``, with an ``adapter.py`` declaring
its :class:`~specstate.integration.adapter.ReleaseAdapter`) and one line to ``ADAPTERS``. Every
engine-name look-up of ``integration/`` and ``oracle/`` goes through here; nothing else names a
release. Importing this module imports the adapters' declarations only (no recorder, model or sglang).
"""

from __future__ import annotations

from typing import Any

from specstate.integration.adapter import ReleaseAdapter
from specstate.integration.sglang_0_5_12.adapter import ADAPTER as SGLANG_0_5_12
from specstate.integration.sglang_0_5_17.adapter import ADAPTER as SGLANG_0_5_17

__all__ = ["ADAPTERS", "DEFAULT", "ENGINES", "RECORDING_SCHEMAS", "SCHEMAS", "adapter_for", "adapter_of", "adapter_of_schema", "adapter_modelling", "default_variants"]

#: every release adapter, the oldest first
ADAPTERS: tuple[ReleaseAdapter, ...] = (SGLANG_0_5_12, SGLANG_0_5_17)
#: the release a recording without a family, and a driver run without ``--engine``, is
DEFAULT: ReleaseAdapter = SGLANG_0_5_12
#: the ``--engine`` names of the driver and ``replay``: the families
ENGINES: tuple[str, ...] = tuple(a.family for a in ADAPTERS)

#: every recording schema this specstate reads -> the release whose recorder writes it (the
#: loader's table, ``specstate.schema.read_recording``; its models: ``recording.py`` of that folder)
RECORDING_SCHEMAS: dict[str, ReleaseAdapter] = {s: a for a in ADAPTERS for s in a.schemas}
#: every recording schema -> the engine family it records
SCHEMAS: dict[str, str] = {s: a.family for s, a in RECORDING_SCHEMAS.items()}

_BY_FAMILY = {a.family: a for a in ADAPTERS}


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
