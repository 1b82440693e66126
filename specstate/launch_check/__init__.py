"""``specstate check``: a user's own launch flags, checked before a load test.

General layout: ``_parts.py`` (each part on one launch's config: the family's engine start, the
load sweep, a bounded fuzz, the batch-size proof), ``_verdict.py`` (one ``CheckResult`` over the
parts); the subcommand (arguments, the text report, ``--json``) is ``specstate/cli/check.py``. The launch
itself is read by ``specstate.server_args``; ``specstate.testing.check`` is the same from Python.
"""

from specstate.launch_check._parts import Part
from specstate.launch_check._verdict import DEFAULT_BUDGET_S, PARTS, check_launch

__all__ = ["Part", "check_launch", "PARTS", "DEFAULT_BUDGET_S"]
