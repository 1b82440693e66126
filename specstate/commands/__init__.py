"""Deprecated: the command modules live in ``specstate.cli`` (``specstate.cli.check``,
``specstate.cli.fuzz``, ``specstate.cli.graph``, ...). ``specstate.commands`` and
``specstate.commands.<module>`` still import, as the very same modules, with a
``SpecstateDeprecationWarning`` naming the new path (``specstate/_deprecation.py``). Nothing in
specstate imports this package."""

from specstate._deprecation import alias_package

__getattr__ = alias_package(__name__, "specstate.cli")
