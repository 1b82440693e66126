"""Check your own variant from your own code or test suite.

Four checks, each returning a :class:`CheckResult` (``ok``, the first ``violation``, one line
per problem, the ``trace_path`` that replays the failure, the ``repro_command`` that does so,
``report`` for a terminal or a test failure, ``to_json()`` for CI)::

    from specstate.testing import fuzz, run_scenario, explore, check_recording

    result = fuzz("mypatch:Variant", profile="ci")       # the Hypothesis state machine
    assert result.ok, result.report
    run_scenario("mypatch:Variant", "seed-sweep")          # a built-in scripted workload
    explore("mypatch:Variant", max_live=3, depth=8)        # BFS: a shortest counterexample
    check_recording("run.jsonl.gz", "mypatch:Variant", threshold=5)  # a real GPU recording
    check_recording("run17.jsonl.gz")                      # the recording's family's default variant
    check_engine_start(my_v2_config)   # sglang 0.5.17's engine start alone (raises where it refuses)

A wrong argument raises :class:`specstate.errors.InvalidArgument` (``Expected int in [1, 8]
but got max_live=0``) before any work; a variant of another family than a recording's is a
``UsageError``; a variant whose own code fails raises ``VariantFailure`` at its first occurrence.

With pytest, the plugin shipped with specstate (``specstate._pytest_plugin``, loaded
automatically) gives the same checks as fixtures: ``pytest -m fuzz --specstate-variant
mypatch:Variant`` (docs/tutorial.md).
"""

from specstate.testing._api import check_recording, explore, fuzz, run_scenario
from specstate.testing._check import check  # your launch flags: specstate check from Python
from specstate.check_result import CheckResult
from specstate.testing._start import check_engine_start

__all__ = ["CheckResult", "run_scenario", "fuzz", "explore", "check_recording", "check", "check_engine_start"]
