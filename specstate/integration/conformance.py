"""Deprecated path: sglang 0.5.12's conformance is ``specstate.integration.sglang_0_5_12.conformance``;
the engine-neutral way of a recording (``check_recording``, ``check_pairing``, ``DEFAULT_VARIANTS``,
``default_variant_of``) is ``specstate.integration.conform``. Every old name still resolves, with a
``SpecstateDeprecationWarning`` naming its replacement."""

from __future__ import annotations

from specstate._deprecation import renamed_names
from specstate.integration import conform
from specstate.integration.sglang_0_5_12 import conformance as _v1

_FROM_CORE = ("check_recording", "check_pairing", "DEFAULT_VARIANTS", "default_variant_of", "_models_release")

__getattr__ = renamed_names(__name__, {**{n: f"{_v1.__name__}:{n}" for n in vars(_v1) if not n.startswith("__")},
                                       **{n: f"{conform.__name__}:{n}" for n in _FROM_CORE}})
