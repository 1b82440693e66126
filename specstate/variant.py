"""The public surface for variant authors: every name a variant (a user's patch, a known bug, a
release family derived from another) may use, kept stable. Import from here, not from the
model's modules, whose layout may change (``specstate.model.v2`` became
``specstate.model.sglang_0_5_17``): a name that moves or is renamed keeps working here, or warns
with a :class:`SpecstateDeprecationWarning` naming its replacement (the helpers below).

Documented, with what each is for, in ``docs/variants.md``; ``tests/test_variant_surface.py``
checks that the list there is ``__all__`` and that every name resolves.

Groups (``__all__``'s order):

- declaring a variant: ``Variant``, ``PatchFlag``, ``register`` and the look-ups;
- the operations: ``Ops`` (one field per operation, ``OP_NAMES``), ``default_ops``;
- the families: ``Family``, ``register_family``, the look-ups, one object per built-in release
  (``FAMILY_0_5_12``, ...) and the operations a derived release starts from (``OVERRIDES_0_5_17``,
  ...; the 0.5.12 family's are the defaults);
- the state and record types an operation receives and returns, the actions, ``step``;
- helpers an operation uses (``evolve``: a frozen value with some fields changed, the KV
  allocator, the default draft input, the built-in v1 policies);
- raising a modelled crash where the real worker raises (``guarded``, ``sglang_assert``,
  ``ModelledCrash``): reported by ``worker-crash`` as the model's own operations' crashes are,
  not as the variant's code failing;
- deprecation helpers for a variant module's own renamed names (``specstate/_deprecation.py``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from specstate._deprecation import alias_package, moved_module, renamed_fields, renamed_names, warn_renamed
from specstate.errors import SpecstateDeprecationWarning

if TYPE_CHECKING:  # the checker reads the names; at run time each is imported at its first use (below)
    from specstate.model.actions import Abort, Action, Arrive, Step
    from specstate.model.batch import ScheduleBatch
    from specstate.model.config import SpecConfig
    from specstate.model.families import Family, family_names, get_family, register_family
    from specstate.model.kv import alloc_slots, free_slots
    from specstate.model.modes import CaptureHiddenMode, ForwardMode, Worker
    from specstate.model.ops import DEFAULT_OPS, OP_NAMES, Ops
    from specstate.model.ops_table import default_ops
    from specstate.model.records import Crash, Event, ForwardRecord, GraphUse
    from specstate.model.request import FinishReason, Req, ReqStatus
    from specstate.model.runner import ModelledCrash, guarded, sglang_assert
    from specstate.model.sglang_0_5_12.policies import naive_fallback_decode, threshold_decision
    from specstate.model.sglang_0_5_12.worker import new_draft_input
    from specstate.model.spec_info import BatchShape, EagleDraftExtendInput, EagleDraftInput, EagleVerifyInput, SpecInfo
    from specstate.model.state import ModelState, initial_state
    from specstate.model.step import StepOutcome, step
    from specstate.model.tx import Tx
    from specstate.model.values import evolve
    from specstate.model.variants import PatchFlag, Variant, as_variant, get_variant, load_variant, register, variant_names

    #: the built-in release families (``Family``; ``--engine`` names them by ``Family.name``)
    FAMILY_0_5_12: Family
    FAMILY_0_5_17: Family
    FAMILY_0_5_23: Family
    #: the operations of a release family, over ``DEFAULT_OPS`` (0.5.12's): a family derived from one
    #: starts from these and replaces only its own (``{**OVERRIDES_0_5_17, "op": mine}``)
    OVERRIDES_0_5_17: dict
    OVERRIDES_0_5_23: dict

#: where each name lives: ``name -> (module, attribute there)``. Imported at the name's first use
#: (PEP 562), not with this module: a release folder written against ``specstate.variant`` is
#: imported by the catalogs that this surface reads, so an eager surface made a circle whenever a
#: script imported ``specstate.variant`` first (issue 38; ``tests/test_variant_surface.py`` runs
#: that in a fresh interpreter). Each name comes from the module it came from before.
_M = "specstate.model."
_FROM: dict[str, tuple[str, str]] = {
    **{n: (_M + "actions", n) for n in ("Abort", "Action", "Arrive", "Step")},
    "ScheduleBatch": (_M + "batch", "ScheduleBatch"), "SpecConfig": (_M + "config", "SpecConfig"),
    **{n: (_M + "families", n) for n in ("Family", "family_names", "get_family", "register_family")},
    **{n: (_M + "kv", n) for n in ("alloc_slots", "free_slots")},
    **{n: (_M + "modes", n) for n in ("CaptureHiddenMode", "ForwardMode", "Worker")},
    **{n: (_M + "ops", n) for n in ("DEFAULT_OPS", "OP_NAMES", "Ops")},
    "default_ops": (_M + "ops_table", "default_ops"),
    **{n: (_M + "sglang_0_5_12.policies", n) for n in ("naive_fallback_decode", "threshold_decision")},
    **{n: (_M + "records", n) for n in ("Crash", "Event", "ForwardRecord", "GraphUse")},
    **{n: (_M + "runner", n) for n in ("ModelledCrash", "guarded", "sglang_assert")},
    **{n: (_M + "request", n) for n in ("FinishReason", "Req", "ReqStatus")},
    **{n: (_M + "spec_info", n) for n in ("BatchShape", "EagleDraftExtendInput", "EagleDraftInput", "EagleVerifyInput",
                                           "SpecInfo")},
    **{n: (_M + "state", n) for n in ("ModelState", "initial_state")},
    **{n: (_M + "step", n) for n in ("StepOutcome", "step")},
    "Tx": (_M + "tx", "Tx"), "evolve": (_M + "values", "evolve"),
    **{n: (_M + "variants", n) for n in ("PatchFlag", "Variant", "as_variant", "get_variant", "load_variant",
                                          "register", "variant_names")},
    "new_draft_input": (_M + "sglang_0_5_12.worker", "new_draft_input"),
    # the built-in releases' objects, as each release's folder names them
    "FAMILY_0_5_12": (_M + "families", "V1_FAMILY"),
    "FAMILY_0_5_17": (_M + "sglang_0_5_17.variants", "V2_FAMILY"),
    "FAMILY_0_5_23": (_M + "sglang_0_5_23.family", "FAMILY"),
    "OVERRIDES_0_5_17": (_M + "sglang_0_5_17.variants", "V2_OVERRIDES"),
    "OVERRIDES_0_5_23": (_M + "sglang_0_5_23.family", "OVERRIDES"),
}
#: handed out as a copy (a variant author's ``{**OVERRIDES_0_5_17, ...}`` never edits the release's table)
_COPIED = frozenset({"OVERRIDES_0_5_17", "OVERRIDES_0_5_23"})


def __getattr__(name: str) -> Any:
    try:
        module, attr = _FROM[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    if name in _COPIED:
        value = dict(value)
    globals()[name] = value  # later uses read it directly
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FROM))


__all__ = [
    # declaring a variant
    "Variant", "PatchFlag", "register", "get_variant", "as_variant", "variant_names", "load_variant",
    # the operations
    "Ops", "OP_NAMES", "DEFAULT_OPS", "default_ops",
    # the families
    "Family", "register_family", "get_family", "family_names",
    "FAMILY_0_5_12", "FAMILY_0_5_17", "FAMILY_0_5_23", "OVERRIDES_0_5_17", "OVERRIDES_0_5_23",
    # state, records, actions
    "SpecConfig", "ModelState", "initial_state", "Tx", "ScheduleBatch", "Req", "ReqStatus", "FinishReason",
    "SpecInfo", "EagleDraftInput", "EagleVerifyInput", "EagleDraftExtendInput", "BatchShape",
    "ForwardMode", "CaptureHiddenMode", "Worker", "ForwardRecord", "Crash", "Event", "GraphUse",
    "Action", "Arrive", "Abort", "Step", "StepOutcome", "step",
    # helpers
    "evolve", "alloc_slots", "free_slots", "new_draft_input", "threshold_decision", "naive_fallback_decode",
    # modelled crashes
    "guarded", "sglang_assert", "ModelledCrash",
    # deprecations
    "SpecstateDeprecationWarning", "warn_renamed", "renamed_names", "renamed_fields", "alias_package",
    "moved_module",
]
