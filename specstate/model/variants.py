"""The catalog of variants: importing it registers every built-in variant and family.

The registry itself (``Variant``, ``PatchFlag``, ``register``, ``get_variant``, ``load_variant``,
...) is ``specstate/model/variant_registry.py``, which imports no variant; this module imports the
modules that fill it, in this order: ``sglang_0_5_12/family``, ``known_bugs`` and ``policies`` (the v1 family's), the v2
family (``sglang_0_5_17/variants.py``), the 0.5.23 family (``sglang_0_5_23/``), and re-exports every name of
the registry, so ``from specstate.model.variants import get_variant`` (and ``specstate.model``'s
names) see them all. A new release adds one line here and one in ``families.py``.
"""

from __future__ import annotations

from specstate.model import ops as _ops  # noqa: F401  (the default table every variant starts from)
from specstate.model.variant_registry import (  # noqa: F401  (re-exported: the registry's names)
    _REGISTRY, _SPEC, SEED_THRESHOLD_FLAG, PatchFlag, Variant, _checked, _from_class,
    _import_user_module, as_variant, get_variant, is_builtin, load_variant, register, variant_names)
from specstate.model.sglang_0_5_12 import family as _v1, known_bugs, policies  # noqa: F401,E402  (register on import)
from specstate.model.sglang_0_5_17 import variants as _v2  # noqa: F401  (the v2 family and its variants)
from specstate.model import sglang_0_5_23  # noqa: F401  (the 0.5.23 family and its variants)
from specstate.model import sglang_0_5_9  # noqa: F401  (the 0.5.9 family and its variants, over 0.5.12)

__all__ = ["Variant", "PatchFlag", "SEED_THRESHOLD_FLAG", "register", "get_variant", "as_variant", "variant_names",
           "load_variant", "is_builtin"]
