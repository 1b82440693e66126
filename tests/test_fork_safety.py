"""The forked searches (``explore --jobs``, the graph's sweep, ``prove --jobs``) finish after the
parent ran torch on its OpenMP threads.

GNU OpenMP is not fork-safe: a process forked after its parent ran a parallel op waits forever
at its own first one (seen here: ``tests/test_graph.py``'s recording graph hung in the sweep's
workers, allocating H200-sized static buffers, after ``tests/test_v2_integration.py`` ran in the
same process). Each search's workers start with ``tensors.after_fork`` (torch on one thread).
Each case runs in a fresh interpreter whose parent first runs a parallel op, and whose model
steps each run one too (so every worker reaches OpenMP at once), under a timeout: a hang fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

_PRELUDE = textwrap.dedent("""
    import torch
    torch.set_num_threads(2)  # an OpenMP team to inherit, on any core count (a test worker keeps to one core)
    assert torch.get_num_threads() == 2, torch.get_num_threads()
    from specstate import check

    BIG = 1 << 20  # elements: well above ATen's grain size, so the op runs on the OpenMP team
    real = check.step

    def step_with_a_parallel_op(*args, **kwargs):
        torch.zeros(BIG).fill_(1.0)
        return real(*args, **kwargs)

    check.step = step_with_a_parallel_op  # the forked workers inherit it
    torch.zeros(BIG).fill_(1.0)  # the parent's thread team exists before the fork
""")

_CASES = {
    "explore": """
        from specstate.fuzz.explore import DEFAULT_EXPLORE_CONFIG, explore
        r = explore(DEFAULT_EXPLORE_CONFIG, "fixed-threshold", max_depth=3, keep_graph=False, jobs=2)
        assert r.states > 1
    """,
    "graph": """
        from specstate.graph.transitions import ExploreStats, SweepBounds, explored_transitions
        from specstate.scenarios import SEED_CONFIG
        stats = ExploreStats()
        got = list(explored_transitions(SEED_CONFIG, "fixed-threshold", SweepBounds(levels=(1, 2), max_depth=3, jobs=2),
                                        stats=stats))
        assert stats.parallel == "2 processes", stats.parallel
        assert got
    """,
    "prove": """
        from specstate.prove import prove
        from specstate.scenarios import SEED_CONFIG
        r = prove(SEED_CONFIG, "fixed-threshold", 3, jobs=2)
        assert len(r.lists) > 1
    """,
}


@pytest.mark.parametrize("search", sorted(_CASES))
def test_a_forked_search_finishes_after_the_parent_used_torch_threads(search: str) -> None:
    code = _PRELUDE + textwrap.dedent(_CASES[search]) + "print('finished')\n"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own process group: a hang's workers go with it
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"the {search} search's forked workers hung (torch's OpenMP team after fork)")
    assert proc.returncode == 0 and out.strip().endswith("finished"), err[-2000:]
