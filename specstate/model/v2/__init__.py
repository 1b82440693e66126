"""Deprecated: the sglang 0.5.17 family lives in ``specstate.model.sglang_0_5_17`` (one folder
per engine release). ``specstate.model.v2`` and ``specstate.model.v2.<module>`` still import, as
the very same modules, with a ``SpecstateDeprecationWarning`` naming the new path
(``specstate/_deprecation.py``). Nothing in specstate imports this package."""

from specstate._deprecation import alias_package

__getattr__ = alias_package(__name__, "specstate.model.sglang_0_5_17")
