"""The oracle as a judge in the mutation study (``tests/mutations.py``): every scheduler-side
mutation of the model disagrees with upstream's real scheduler on some fuzzed workload.

The oracle runs each workload once (its answer does not depend on the model); each mutation's
model is then compared with it. The forward-half mutations (graphs, padding, the fallback's
token counts and forward lengths, the draft KV) are not the oracle's to judge: it has no
forward (docs/oracle.md); the GPU recordings judge those.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.fuzz

RELEASE = "0.5.12"
WORKLOADS = 80
#: the mutations of tests/mutations.py that change what the scheduler half does
SCHEDULER_SIDE = ("kv-leak", "finished-kv-kept", "one-token-longer", "merge-order", "max-running-ignored",
                  "ratio-no-decay", "admit-unlocked", "retract-front", "requeue-front", "retract-keeps-ratio",
                  "retract-inserts", "chunk-budget", "no-prefix-match", "unfinished-not-cached", "idle-keeps-ratio")


def _hand_cases() -> list[tuple[Any, list[Any]]]:
    """Hand-written beside the fuzzed ones: six requests sharing a 3-token prefix, four running,
    a pool of 90 / 100 with a decode reserve of 9 per row (steps 3, topk 3): one retraction
    with two survivors and a waiting queue (which row goes, where it is queued, what the tree
    keeps); and a request admitted on the prefix a finished one left in the tree (is it locked)."""
    from specstate.model import Arrive, SpecConfig, Step

    roomy = SpecConfig(speculative_num_steps=1, speculative_eagle_topk=1, speculative_num_draft_tokens=2,
                       disable_batch_threshold=None, max_running_requests=2)
    out = [(roomy, [Arrive(10, 2), Step(), Step(), Step(), Arrive(12, 4, prefix_of=0, shared_len=8), Step(), Step()])]
    for pool in (90, 100):
        cfg = SpecConfig(speculative_num_steps=3, speculative_eagle_topk=3, speculative_num_draft_tokens=8,
                         disable_batch_threshold=None, target_kv_pool_size=pool, draft_kv_pool_size=pool,
                         max_running_requests=4)
        out.append((cfg, [Arrive(5, 30, 0 if i else None, 3 if i else 0) for i in range(6)] + [Step()] * 50))
    return out


@pytest.fixture(scope="module")
def judged() -> list[tuple[Any, list[Any], Any]]:
    """(config, actions, oracle run) for ``WORKLOADS`` derandomized fuzzed workloads and the
    hand-written retraction cases."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from specstate.integration.oracle_differential import OracleProcess
    from specstate.oracle.strategies import oracle_configs, oracle_workloads
    from specstate.oracle.wheels import OracleOffline, cache_dir, unpacked

    try:
        unpacked(RELEASE)
    except OracleOffline:  # a cache that fails a check fails the test
        pytest.skip(f"sglang {RELEASE}: no wheel in {cache_dir() / 'wheels'} and no package registry to fetch it")
    cases: list[tuple[Any, list[Any]]] = []

    @settings(max_examples=WORKLOADS, derandomize=True, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draw(data: Any) -> None:
        cfg = data.draw(oracle_configs())
        cases.append((cfg, data.draw(oracle_workloads(cfg))))

    from specstate.fuzz.stream import import_independent_draws

    with import_independent_draws():  # the same workloads whatever the run imported (fuzz/stream.py)
        draw()
    cases = _hand_cases() + cases
    with OracleProcess(RELEASE) as oracle:
        return [(cfg, acts, oracle.run(cfg, acts)) for cfg, acts in cases]


def test_the_unmutated_model_agrees(judged: list[tuple[Any, list[Any], Any]]) -> None:
    from specstate.integration.oracle_differential import judge

    for cfg, acts, run in judged:
        assert run.error is None, run.error
        mism, violations = judge(run, cfg, acts, "fixed-threshold")
        assert not mism and not violations, (mism[:1], violations[:1])


@pytest.mark.parametrize("name", SCHEDULER_SIDE)
def test_every_scheduler_side_mutation_is_caught(name: str, judged: list[tuple[Any, list[Any], Any]]) -> None:
    from specstate.errors import VariantFailure
    from specstate.integration.oracle_differential import judge
    from tests.mutations import MUTATIONS, _configured

    mutant = next(m for m in MUTATIONS if m.name == f"mutant-{name}")
    for cfg, acts, run in judged:
        try:
            mism, violations = judge(run, cfg, acts, _configured(mutant, cfg))
        except VariantFailure:  # the mutated model raised where upstream's scheduler ran on
            return
        if mism or violations:
            return
    pytest.fail(f"mutant-{name} agrees with upstream's scheduler on all {len(judged)} workloads")
