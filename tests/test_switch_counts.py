"""The driver's and ``conform``'s switch counts (issue 36 item 6): drafting off / on and the
adaptive step changes, each its own count."""

from __future__ import annotations

import pytest

from specstate.integration.sglang_0_5_17.conformance import recording_counts, step_switches


@pytest.mark.parametrize("steps, want", [
    ([3, 3, 3], (0, 0, 0, 0, 0)),
    ([3, 0, 3], (1, 1, 0, 0, 0)),  # drafting off and on: no step change
    ([3, 1, 3], (0, 0, 2, 1, 1)),  # two step changes, drafting never off
    ([3, 1] * 25 + [3], (0, 0, 50, 25, 25)),  # 50 step changes are not "one down, one up"
    ([7, 3, 0, 1, 3], (1, 1, 2, 1, 1)),  # 7 -> 3 down, 3 -> 0 off, 0 -> 1 on, 1 -> 3 up
    ([None, 3, None, 0], (0, 0, 0, 0, 0)),  # a launch without a logged step count: no pair with it counts
])
def test_step_switches(steps, want) -> None:  # noqa: ANN001
    got = step_switches(steps)
    assert (got["switch_down"], got["switch_up"], got["step_changes"], got["steps_down"], got["steps_up"]) == want


def test_recording_counts_report_step_changes() -> None:
    records = [{"ev": "fbg", "path": "spec", "steps": s} for s in (3, 1, 3, 1)] + [{"ev": "fbg", "path": "trivial", "steps": 0}]
    c = recording_counts(records)
    assert (c["switch_down"], c["switch_up"], c["step_changes"], c["steps_down"], c["steps_up"]) == (1, 0, 3, 2, 1)
