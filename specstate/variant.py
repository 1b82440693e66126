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
import re
from typing import TYPE_CHECKING, Any

from specstate.model import releases as _releases

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
    from specstate.model.ops import default_ops
    from specstate.model.records import Crash, Event, ForwardRecord, GraphUse
    from specstate.model.request import FinishReason, Req, ReqStatus
    from specstate.model.runner import ModelledCrash, guarded, sglang_assert
    from specstate.model.spec_info import BatchShape, EagleDraftExtendInput, EagleDraftInput, EagleVerifyInput, SpecInfo
    from specstate.model.state import ModelState
    from specstate.model.step import StepOutcome, initial_state, step
    from specstate.model.tx import Tx
    from specstate.model.values import evolve
    from specstate.model.variants import PatchFlag, Variant, as_variant, get_variant, load_variant, register, variant_names

#: where each name lives: ``name -> (module, attribute there)``. Imported at the name's first use
#: (PEP 562), not with this module: a release folder written against ``specstate.variant`` is
#: imported by the catalogs that this surface reads, so an eager surface made a circle whenever a
#: script imported ``specstate.variant`` first (issue 38; ``tests/test_variant_surface.py`` runs
#: that in a fresh interpreter). Each name comes from the module it came from before.
_M = "specstate.model."
_CORE = _releases.get_release(_releases.core_family()).package  #: the shared core's release package
_FROM: dict[str, tuple[str, str]] = {
    **{n: (_M + "actions", n) for n in ("Abort", "Action", "Arrive", "Step")},
    "ScheduleBatch": (_M + "batch", "ScheduleBatch"), "SpecConfig": (_M + "config", "SpecConfig"),
    **{n: (_M + "families", n) for n in ("Family", "family_names", "get_family", "register_family")},
    **{n: (_M + "kv", n) for n in ("alloc_slots", "free_slots")},
    **{n: (_M + "modes", n) for n in ("CaptureHiddenMode", "ForwardMode", "Worker")},
    **{n: (_M + "ops", n) for n in ("DEFAULT_OPS", "OP_NAMES", "Ops")},
    "default_ops": (_M + "ops", "default_ops"),
    # the shared core's release's (the oldest that derives from none: its policies and worker)
    **{n: (_CORE + ".policies", n) for n in ("naive_fallback_decode", "threshold_decision")},
    **{n: (_M + "records", n) for n in ("Crash", "Event", "ForwardRecord", "GraphUse")},
    **{n: (_M + "runner", n) for n in ("ModelledCrash", "guarded", "sglang_assert")},
    **{n: (_M + "request", n) for n in ("FinishReason", "Req", "ReqStatus")},
    **{n: (_M + "spec_info", n) for n in ("BatchShape", "EagleDraftExtendInput", "EagleDraftInput", "EagleVerifyInput",
                                           "SpecInfo")},
    "ModelState": (_M + "state", "ModelState"),
    **{n: (_M + "step", n) for n in ("StepOutcome", "step", "initial_state")},
    "Tx": (_M + "tx", "Tx"), "evolve": (_M + "values", "evolve"),
    **{n: (_M + "variants", n) for n in ("PatchFlag", "Variant", "as_variant", "get_variant", "load_variant",
                                          "register", "variant_names")},
    "new_draft_input": (_CORE + ".worker", "new_draft_input"),
}
#: each release's objects, asked of its ``Release`` (``specstate/model/releases.py``), by the
#: release folder's name: ``FAMILY_0_5_17`` its ``Family``, ``OVERRIDES_0_5_17`` its operations over
#: ``DEFAULT_OPS`` (a family derived from it starts from these and replaces only its own:
#: ``{**OVERRIDES_0_5_17, "op": mine}``; handed out as a copy, so an author never edits the release's)
_RELEASE_NAME = re.compile(r"(FAMILY|OVERRIDES)_(\d+(?:_\d+)+)")


def _release_names() -> list[str]:
    """``FAMILY_<X_Y_Z>`` of every SGLang release folder, then ``OVERRIDES_<X_Y_Z>`` of every one but
    the shared core's (whose operations are ``DEFAULT_OPS``), read from the folders' names."""
    releases = [r for r in _releases.releases() if r.name != _releases.core_family()]
    return [f"FAMILY_{r.folder.name.partition('_')[2]}" for r in _releases.releases()] + \
        [f"OVERRIDES_{r.folder.name.partition('_')[2]}" for r in releases]


def _release_object(kind: str, version: str) -> Any:
    """A release's ``Family`` or its operations (a copy); ``AttributeError``: no such release or table."""
    from specstate.errors import UnknownName

    try:
        release = _releases.get_release(version.replace("_", "."))
    except UnknownName:
        raise AttributeError(f"module {__name__!r} has no attribute {kind}_{version!r}") from None
    if kind == "FAMILY":
        return release.family
    if release.name == _releases.core_family():
        raise AttributeError(f"module {__name__!r} has no attribute {kind}_{version!r}")
    from specstate.model.variants import get_variant

    # a release that declares no ``OVERRIDES``: its default variant's operations
    return dict(release.overrides or get_variant(release.family.default_variant).overrides)


def __getattr__(name: str) -> Any:
    release = _RELEASE_NAME.fullmatch(name)
    if release is not None:
        value = _release_object(release.group(1), release.group(2))
        globals()[name] = value  # later uses read it directly
        return value
    try:
        module, attr = _FROM[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # later uses read it directly
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FROM) | set(_release_names()))


__all__ = [
    # declaring a variant
    "Variant", "PatchFlag", "register", "get_variant", "as_variant", "variant_names", "load_variant",
    # the operations
    "Ops", "OP_NAMES", "DEFAULT_OPS", "default_ops",
    # the families
    "Family", "register_family", "get_family", "family_names", *_release_names(),
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
