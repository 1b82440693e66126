"""The vLLM CPU oracle: vLLM 0.34.0's real scheduler and the model agree step by step on random
workloads, and the oracle catches a model mutation (``specstate/oracle/vllm_0_34_0.py``).

Needs the unpacked ``vllm==0.34.0`` wheel and its pure-Python dependencies (docs/vllm.md, "The CPU
oracle"); skipped, saying so, where they are not there. One vLLM child process per test (its start
is most of the time)."""

from __future__ import annotations

import random

import pytest

from specstate.launch_check.vllm import random_workload
from specstate.model.vllm_0_34_0.engine import UPSTREAM_OPS
from specstate.oracle import vllm_0_34_0 as oracle

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not oracle.available(), reason="vllm 0.34.0 and its dependencies are not unpacked "
                                 "(docs/vllm.md, 'The CPU oracle')")]


@pytest.mark.parametrize("name", sorted(oracle.ORACLE_CONFIGS))
def test_the_model_matches_vllms_scheduler_and_a_mutant_does_not(name: str) -> None:
    config = oracle.ORACLE_CONFIGS[name]
    rng = random.Random(7)
    workloads = [random_workload(rng, config, 24) for _ in range(30)]
    real = oracle.run_oracle(config, workloads)
    assert oracle.differential(config, UPSTREAM_OPS, workloads, real) == []
    caught = {m: len(oracle.differential(config, ops, workloads, real)) for m, ops in oracle._mutants().items()}
    assert all(n > 0 for n in caught.values()), caught
