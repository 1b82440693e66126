"""The vLLM CPU oracle: vLLM 0.34.0's real scheduler and the model agree step by step on random
workloads, and the oracle catches a model mutation (``specstate/integration/vllm_0_34_0/oracle.py``).

The first run fetches the pinned ``vllm==0.34.0`` wheel and its pinned pure-Python dependencies
(``specstate/upstream.py::vllm_tree`` / ``vllm_deps``; docs/vllm.md, "The CPU oracle"); skipped,
with pip's reason, only where no package registry answers. A cache that fails its check fails the
test. One vLLM child process per test (its start is most of the time)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from specstate.integration.vllm_0_34_0.check import random_workload
from specstate.model.vllm_0_34_0.engine import UPSTREAM_OPS
from specstate.integration.vllm_0_34_0 import oracle
from specstate.upstream import UpstreamOffline

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def fetched() -> list[Path]:
    """vLLM and its dependencies, fetched on first use (skipped only when offline)."""
    try:
        return oracle.oracle_paths()
    except UpstreamOffline as e:
        pytest.skip(f"vllm 0.34.0 is not cached and cannot be downloaded: {e}")


@pytest.mark.parametrize("name", sorted(oracle.ORACLE_CONFIGS))
def test_the_model_matches_vllms_scheduler_and_a_mutant_does_not(name: str, fetched: list[Path]) -> None:
    assert oracle.available(), fetched
    config = oracle.ORACLE_CONFIGS[name]
    rng = random.Random(7)
    workloads = [random_workload(rng, config, 24) for _ in range(30)]
    real = oracle.run_oracle(config, workloads)
    assert oracle.differential(config, UPSTREAM_OPS, workloads, real) == []
    caught = {m: len(oracle.differential(config, ops, workloads, real)) for m, ops in oracle._mutants().items()}
    assert all(n > 0 for n in caught.values()), caught
