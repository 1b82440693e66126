"""Deprecated: an old package path. A release folder that was once here declares it in its package
``__init__`` (``FORMERLY``, read as text by ``formerly_at`` of ``specstate/model/releases.py``);
``specstate.model.v2`` and ``specstate.model.v2.<module>`` still import, as the very same modules
of that folder, with a ``SpecstateDeprecationWarning`` naming the new path
(``specstate/_deprecation.py``). Nothing in specstate imports this package, and it names no release."""

from specstate._deprecation import alias_package
from specstate.model.releases import formerly_at

__getattr__ = alias_package(__name__, formerly_at(__name__))
