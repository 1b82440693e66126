"""The oracle for sglang 0.5.17: upstream's ``Scheduler`` under ``event_loop_overlap`` with a fake
``EAGLEWorkerV2`` on CPU, against the v2 model (``upstream-adaptive``), through the 0.5.17
conformance backend (docs/oracle.md). Needs the 0.5.17 wheel (skips with one line without it)."""

from __future__ import annotations

import pytest

from specstate.model import Abort, Arrive, SpecConfig, Step

RELEASE = "0.5.17"
#: steps 3 for one request, steps 0 (the trivial verify) from two: both paths and the switch
ADAPTIVE = '{"1": {"candidate_steps": [3]}, "2": {"candidate_steps": [0]}}'


@pytest.fixture
def oracle(oracle_of):  # noqa: ANN001, ANN201
    return oracle_of(RELEASE)  # the session's 0.5.17 oracle process (tests/conftest.py)


def config17(**kw: object) -> SpecConfig:
    base = dict(speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4,
                disable_batch_threshold=None, target_kv_pool_size=4096, draft_kv_pool_size=4096,
                chunked_prefill_size=16, max_running_requests=4, cuda_graph_max_bs=8, disable_overlap_schedule=False,
                speculative_adaptive_config=ADAPTIVE)
    base.update(kw)
    return SpecConfig(**base)  # type: ignore[arg-type]


#: hand workloads: (name, config overrides, actions)
HAND = [
    ("two-requests-switch", {}, [Arrive(10, 6), Arrive(12, 5, 0, 6), Step(), Step(accept=(2,)), Step(accept=(3, 1)),
                                 Step(accept=(4, 4)), Step(), Step(), Step(), Step()]),
    ("one-request-spec-eos", {}, [Arrive(9, 30), Step(), Step(accept=(4,)), Step(accept=(2,)), Step(accept=(3,), eos=(0,)),
                                  Step(), Step(), Step()]),
    ("chunked-aborts-prefix", {}, [Arrive(40, 6), Step(), Abort(0), Arrive(10, 8, prefix_of=0, shared_len=8),
                                   Arrive(30, 4), Arrive(12, 9), Step(), Abort(3), Step(), Step(accept=(2, 3), eos=(2,)),
                                   Abort(1)] + [Step()] * 8),
    ("prefix-hit-after-finish", {}, [Arrive(20, 3), Step(), Step(accept=(4,)), Step(), Step(), Step(),
                                     Arrive(24, 3, 0, 18), Step(), Step(), Step(), Step()]),
    ("tight-pool-retract", {"target_kv_pool_size": 60, "draft_kv_pool_size": 60, "chunked_prefill_size": 64},
     [Arrive(4, 60), Arrive(5, 60), Arrive(3, 60), Step()] + [Step()] * 60),
]


@pytest.mark.parametrize("name,over,actions", HAND, ids=[h[0] for h in HAND])
def test_hand_workloads_conform(oracle, name: str, over: dict, actions: list) -> None:  # noqa: ANN001
    from specstate.integration.oracle_differential import differential

    d = differential(RELEASE, config17(**over), actions, oracle=oracle)
    assert d.oracle.error is None, d.oracle.error
    assert len(d.oracle.observations) == sum(isinstance(a, Step) for a in actions)
    assert d.ok, d.describe() + "".join(f"\n  {m.describe()}" for m in d.mismatches[1:6])


def test_the_overlap_loop_lags_one_result(oracle) -> None:  # noqa: ANN001
    """Upstream's overlap loop processes a batch's result one iteration after launching it: the
    first decode iteration processes the prefill (one token each), not its own accepted run."""
    from specstate.integration.oracle_differential import run_oracle  # noqa: F401  (the process fixture is reused)

    run = oracle.run(config17(), [Arrive(10, 6), Step(), Step(accept=(4,)), Step()])
    assert run.error is None, run.error
    first, second, third = run.observations
    assert (first.kind, first.processed) == ("prefill", ())
    assert (second.kind, second.path, second.steps, second.processed, second.out_lens_after) == \
        ("decode", "spec", 3, (0,), (1,))
    assert third.out_lens_after == (5,)  # the 4 accepted in the second iteration, seen in the third


def test_the_oracle_judges_v2_scheduler_mutations(oracle) -> None:  # noqa: ANN001
    """Upstream's scheduler disagrees with each scheduler-side v2 mutation on the hand workloads
    (a mismatch or a model invariant violation) and agrees with the unmutated family."""
    from specstate.integration.oracle_differential import judge

    runs = [(config17(**over), acts, oracle.run(config17(**over), acts)) for _, over, acts in HAND]

    def caught(variant: str) -> bool:
        return any(m or v for m, v in (judge(r, c, a, variant) for c, a, r in runs))

    assert not caught("upstream-adaptive")
    for mutant in ("v2-alloc-follows-active-steps", "v2-single-reserve", "v2-downswitch-unclamped",
                   "v2-commit-after-finish", "v2-skip-zero-step-draft-extend"):
        assert caught(mutant), mutant
    # the mutation study's scheduler-side v2 mutations (tests/mutations.py; the start one is not the
    # oracle's to judge: it starts no engine)
    from tests.mutations import _v2_mutations

    study = [m for m in _v2_mutations() if not m.summary.startswith("[start]")]
    assert len(study) == 3
    missed = [m.name for m in study if not caught(m)]
    assert not missed, missed
