"""The differential fuzzer per release (``-m fuzz``): Hypothesis workloads on upstream's real
scheduler (the oracle) and on the model, 0 mismatches, and every scheduler path the issue names
reached at least once (a sometimes-property: the workloads must keep reaching them)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.fuzz

#: workloads per profile (ci: the figure in docs/oracle.md)
EXAMPLES = {"dev": 60, "ci": 200, "deep": 2000}
#: every release's stream reaches every one (docs/oracle.md, the figures per release): the fuzzer's
#: ``_pressure`` and ``cut`` blocks (``specstate/oracle/strategies.py``) target retraction, the
#: out-of-memory abort and the abort of a chunk-prefilled request, which the earlier stream reached
#: 0-2 times in 200 workloads on some releases
MUST_REACH = {"retraction", "oom-abort", "eviction", "chunked-prefill", "prefix-hit", "abort-waiting",
              "abort-running", "abort-chunked"}
#: a release whose own paths differ: 0.5.9's retraction raises where later ones abort (``oom-crash``:
#: upstream's ``ValueError``, which the model predicts)
MUST_REACH_OF = {"0.5.9": (MUST_REACH - {"oom-abort"}) | {"oom-crash"}}


@pytest.mark.parametrize("release", ["0.5.9", "0.5.12", "0.5.17", "0.5.23"])
def test_oracle_and_model_agree(release: str, specstate_profile: str, oracle_of) -> None:  # noqa: ANN001
    """On the session's oracle process of the release (``oracle_of``: its imports paid once for
    every oracle test of the release, which run on one xdist worker: tests/conftest.py)."""
    from specstate.integration.oracle_fuzz import fuzz, replay_commands
    from specstate.oracle.wheels import OracleOffline, cache_dir, unpacked

    try:
        unpacked(release)
    except OracleOffline:  # a cache that fails a check fails the test
        pytest.skip(f"sglang {release}: no wheel in {cache_dir() / 'wheels'} and no package registry to fetch it")
    res = fuzz(release, examples=EXAMPLES[specstate_profile], process=oracle_of(release))
    if res.failure is not None:
        pytest.fail(f"{res.failure.describe()}\nminimal workload: {res.trace_path}\n"
                    + "\n".join(f"replay: {c}" for c in replay_commands(release, res.trace_path or "")))
    assert res.examples == EXAMPLES[specstate_profile]
    must = MUST_REACH_OF.get(release, MUST_REACH)
    assert must <= set(res.reached), f"not reached: {sorted(must - set(res.reached))}"
