"""State machines as Hypothesis test classes, for HypoFuzz (not collected by a plain
``pytest`` run: the file name does not start with ``test_``)::

    SPECSTATE_HYPOTHESIS_DB=.hypothesis/specstate \\
        hypothesis fuzz -n 2 --no-dashboard -- tests/fuzz/hypofuzz_targets.py -k FixedThreshold

specstate's pytest plugin loads the profile (``HYPOTHESIS_PROFILE=specstate-dev`` shares the
example database with pytest and pytest-xdist).
"""

from __future__ import annotations

from specstate.fuzz.machine import machine_for

TestFixedThreshold = machine_for("fixed-threshold").TestCase
TestSteps0Verify = machine_for("steps0-verify").TestCase
TestAlwaysSpec = machine_for("always-spec").TestCase
TestNaiveThreshold = machine_for("naive-threshold").TestCase
