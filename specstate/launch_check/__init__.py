"""``specstate check``: a user's own launch flags, checked before a load test.

General layout: ``_parts.py`` (each part on one launch's config: the family's engine start, the
load sweep, a bounded fuzz, the batch-size proof), ``_verdict.py`` (one ``CheckResult`` over the
parts); the subcommand (arguments, the text report, ``--json``) is ``specstate/cli/check.py``. The launch
itself is read by ``specstate.server_args``; ``specstate.testing.check`` is the same from Python.

The two constants live here, so that ``specstate check``'s parser (``--parts``, ``--budget``) and
every other command's start-up import nothing of the model; ``Part`` and ``check_launch`` are
imported when first asked for (``specstate/_lazy.py``).
"""

from specstate._lazy import lazy_exports

__all__ = ["Part", "check_launch", "PARTS", "DEFAULT_BUDGET_S"]

PARTS = ("start", "sweep", "fuzz", "prove")
DEFAULT_BUDGET_S = 30.0  #: seconds of fuzzing (``--budget``)

__getattr__, __dir__ = lazy_exports(__name__, {"Part": "specstate.launch_check._parts",
                                               "check_launch": "specstate.launch_check._verdict"})
