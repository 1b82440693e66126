"""The real scheduler as an oracle on CPU (docs/oracle.md).

General layout: ``wheels`` (the release's wheel, cached and unpacked), ``stubs`` (the import
stubs, each with why it is safe), ``tokens`` (token ids for symbolic prompts), ``driver`` (the
harness around upstream's loop), one adapter per release (``sglang_0_5_12``, ...), ``child``
(the oracle's own process: one release per process), ``differential`` (oracle vs model through
the conformance comparison), ``strategies`` (Hypothesis workloads); ``specstate oracle`` is
``specstate/cli/oracle.py``. Nothing here imports sglang outside the child process.
"""

from __future__ import annotations

__all__ = ["FAMILY"]

#: the model variant each release is compared with (here, not in ``differential``: ``specstate
#: oracle``'s parser lists the releases without importing the release modules); the same as
#: ``catalog.VARIANTS``, which ``tests/test_integration_catalog.py`` checks
FAMILY = {"0.5.12": "always-spec", "0.5.17": "upstream-adaptive", "0.5.23": "upstream-v23"}
