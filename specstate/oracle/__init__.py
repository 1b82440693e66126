"""The real scheduler as an oracle on CPU (docs/oracle.md).

General layout: ``catalog`` (the releases, found by folder), ``wheels`` (the release's wheel, cached
and unpacked), ``stubs`` (the import stubs, each with why it is safe), ``tokens`` (token ids for
symbolic prompts), ``driver`` (the harness around upstream's loop), ``_core`` (what every release's
oracle builds alike, and its declaration ``OracleRelease``), ``child`` (the oracle's own process: one
release per process), ``strategies`` (Hypothesis workloads). The harness names no release: each
release's adapter is its folder's ``oracle.py`` (``specstate/integration/sglang_X_Y_Z/oracle.py``),
and the differential run and its fuzzer, which compare the oracle with the model through the
release adapters, sit above both (``specstate/integration/oracle_differential.py``,
``oracle_fuzz.py``), so nothing here imports ``integration/``. ``specstate oracle`` is
``specstate/cli/oracle.py``. Nothing here imports sglang outside the child process.
"""

from __future__ import annotations

from specstate._deprecation import renamed_names

__all__: list[str] = []

#: the release -> variant table lived here until the catalog could list the releases without importing them
__getattr__ = renamed_names(__name__, {"FAMILY": "specstate.oracle.catalog:VARIANTS"})
