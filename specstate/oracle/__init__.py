"""The real scheduler as an oracle on CPU (docs/oracle.md).

General layout: ``catalog`` (the releases, one line each), ``wheels`` (the release's wheel, cached
and unpacked), ``stubs`` (the import stubs, each with why it is safe), ``tokens`` (token ids for
symbolic prompts), ``driver`` (the harness around upstream's loop), one adapter per release
(``sglang_0_5_12``, ...), ``child`` (the oracle's own process: one release per process),
``differential`` (oracle vs model through the conformance comparison), ``strategies`` (Hypothesis
workloads); ``specstate oracle`` is ``specstate/cli/oracle.py``. Nothing here imports sglang outside
the child process.
"""

from __future__ import annotations

from specstate._deprecation import renamed_names

__all__: list[str] = []

#: the release -> variant table lived here until the catalog could list the releases without importing them
__getattr__ = renamed_names(__name__, {"FAMILY": "specstate.oracle.catalog:VARIANTS"})
