"""The catalog of engine families: importing it registers every built-in family.

The registry (``Family``, ``register_family``, ``get_family``; ``family_of_config`` and
``threshold_of`` are deprecated: a variant's family is ``Variant.engine_family``) is ``specstate/model/family_registry.py``, which imports no family's module;
this module imports those that register one, one line per release (0.5.12: ``sglang_0_5_12/family.py``,
re-exported as ``V1_FAMILY``; 0.5.17: ``sglang_0_5_17/variants.py``; 0.5.23: ``sglang_0_5_23/``)
and re-exports every name of the registry, so ``from specstate.model.families import
get_family`` sees them all. The families and their layout: ``family_registry``'s docstring.
"""

from __future__ import annotations

from specstate.model.family_registry import (  # noqa: F401  (re-exported: the registry's names)
    _FAMILIES, Family, family_names, family_of_config, get_family, register_family, threshold_of)
from specstate.model.sglang_0_5_12.family import FAMILY as V1_FAMILY  # (registers the v1 family)
from specstate.model.sglang_0_5_17 import variants as _v2  # noqa: F401  (registers the v2 family)
from specstate.model import sglang_0_5_23  # noqa: F401  (registers the 0.5.23 family)
from specstate.model import sglang_0_5_9  # noqa: F401  (registers the 0.5.9 family, over 0.5.12)

__all__ = ["Family", "register_family", "get_family", "family_names", "family_of_config", "threshold_of",
           "V1_FAMILY"]
