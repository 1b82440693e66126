"""The catalog of variants: importing it registers every built-in variant and family.

The registry itself (``Variant``, ``PatchFlag``, ``register``, ``get_variant``, ``load_variant``,
...) is ``specstate/model/variant_registry.py``, which imports no variant; this module loads every
release found by folder name (``releases.load_releases``, the oldest first: each release's package
and the modules its ``REGISTERS`` names register its family and variants), and re-exports every name
of the registry, so ``from specstate.model.variants import get_variant`` (and ``specstate.model``'s
names) see them all. A new release adds no line here.
"""

from __future__ import annotations

from specstate.model import ops as _ops  # noqa: F401  (the default table every variant starts from)
from specstate.model.variant_registry import (  # noqa: F401  (re-exported: the registry's names)
    _REGISTRY, _SPEC, SEED_THRESHOLD_FLAG, PatchFlag, Variant, _checked, _from_class,
    _import_user_module, as_variant, get_variant, is_builtin, load_variant, register, variant_names)
from specstate.model.releases import load_releases

load_releases()

__all__ = ["Variant", "PatchFlag", "SEED_THRESHOLD_FLAG", "register", "get_variant", "as_variant", "variant_names",
           "load_variant", "is_builtin"]
