"""The catalog of engine families: importing it registers every built-in family.

The registry (``Family``, ``register_family``, ``get_family``; ``family_of_config`` and
``threshold_of`` are deprecated: a variant's family is ``Variant.engine_family``) is ``specstate/model/family_registry.py``, which imports no family's module;
this module loads every release found by folder name (``releases.load_releases``: each release's
package and the modules its ``REGISTERS`` names register its family; the shared core's is re-exported
as ``V1_FAMILY``), with no line per release, and re-exports every name of the registry, so ``from specstate.model.families import
get_family`` sees them all. The families and their layout: ``family_registry``'s docstring.
"""

from __future__ import annotations

from specstate.model.family_registry import (  # noqa: F401  (re-exported: the registry's names)
    _FAMILIES, Family, family_names, family_of_config, get_family, register_family, threshold_of)
from specstate.model.releases import core_family, load_releases

load_releases()
V1_FAMILY: Family = get_family(core_family())  #: the shared core's family (the oldest that derives from none)

__all__ = ["Family", "register_family", "get_family", "family_names", "family_of_config", "threshold_of",
           "V1_FAMILY"]
