"""The v2 families' ``req_to_token`` row at page size 1 (docs/model-v2.md "The ``req_to_token`` row at
page size 1"): a Hypothesis search over one request run to its context cap finds the smallest config
whose decode over-allocation outgrows the row, on sglang 0.5.17 as shipped (``upstream-adaptive``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st

from specstate.model import Arrive, SpecConfig, Step

ROW = "req_to_token_pool.req_to_token[row]"


def _run(steps: int, context: int, prompt: int, accept: int) -> list:  # type: ignore[type-arg]
    from specstate.integration.catalog import adapter_modelling

    cfg = SpecConfig(speculative_num_steps=steps, speculative_eagle_topk=1, speculative_num_draft_tokens=steps + 1,
                     disable_batch_threshold=None, max_running_requests=2, target_kv_pool_size=4096,
                     draft_kv_pool_size=4096, chunked_prefill_size=8192, cuda_graph_max_bs=8,
                     disable_overlap_schedule=False, context_len=context,
                     speculative_adaptive_config='{"1": {"candidate_steps": [%d]}}' % steps)
    actions = [Arrive(prompt, 100_000)] + [Step(accept=(accept,))] * (context // accept + 4)
    return list(adapter_modelling("upstream-adaptive").observe(cfg, actions, "upstream-adaptive")[1])


def _outgrows(case: tuple[int, int, int, int]) -> bool:
    steps, context, prompt, accept = case
    return any(v.field == ROW for v in _run(steps, context, prompt, min(accept, steps + 1)))


@pytest.mark.fuzz
def test_the_search_finds_the_smallest_config_that_outgrows_the_row() -> None:
    cases = st.tuples(st.integers(1, 12), st.integers(24, 96), st.integers(1, 16), st.integers(1, 13))
    smallest = find(cases, _outgrows, settings=settings(max_examples=400, derandomize=True, database=None,
                                                         phases=[Phase.generate, Phase.shrink], deadline=None,
                                                         suppress_health_check=list(HealthCheck)))
    steps, context, prompt, accept = smallest
    # the least step count (8 never outgrows it: below), the shortest prompt and context, one token a step
    assert (steps, context, prompt, accept) == (9, 24, 1, 1), smallest
    first = next(v for v in _run(*smallest) if v.field == ROW)
    assert first.invariant == "kv-accounting" and first.actual > int(str(first.expected).split()[1])


@pytest.mark.parametrize("steps", [3, 8])
@pytest.mark.parametrize("context", [24, 64, 96])
def test_up_to_eight_steps_never_outgrow_the_row(steps: int, context: int) -> None:
    """At 8 steps ``2 * (steps + 1) = 18`` reaches ``4 + (steps + 1) = 13`` plus the 5 positions between
    the last decode's commit and the context length, and no further: the control, for short and long
    prompts and every accept length."""
    for prompt in (1, 10):
        for accept in (1, 3, steps + 1):
            assert not any(v.field == ROW for v in _run(steps, context, prompt, accept)), (context, prompt, accept)
