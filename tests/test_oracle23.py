"""The oracle for sglang 0.5.23: upstream's ``Scheduler`` under ``event_loop_overlap`` with a fake
``EAGLEWorkerV2`` on CPU, against the 0.5.23 family (``upstream-v23``), through the v2 conformance
backend (docs/oracle.md). Needs the 0.5.23 wheel (skips with one line without it).

The 0.5.17 hand workloads (decode with speculation and the adaptive switch, EOS, chunked prefill
with aborts of waiting / running / chunked requests, a prefix hit after a finish, the out-of-memory
abort) run here too, beside the stories of ``tests/test_v23_model.py`` where 0.5.18-0.5.23 changed
the scheduler's state (the finish order, the tokens a finished request leaves in the tree, the
decode 0.5.22 no longer runs, finished rows out at every step), a retraction, and a retracted
request's re-prefill whose tree node 0.5.23 splits at the prompt boundary: upstream 0.5.23
agrees with the 0.5.23 family on every one, and disagrees with the 0.5.17 family (the same
actions) and with mutations of the 0.5.23 family that put a 0.5.17 operation back."""

from __future__ import annotations

from pathlib import Path

import pytest

from specstate.model import Arrive, SpecConfig, Step, Variant
from specstate.fuzz.trace import load_trace
from specstate.scenarios_v2 import SMALL_V2
from tests.test_oracle17 import HAND, config17
from tests.test_v23_model import RETRACT_SPLIT, RETRACT_SPLIT_CONFIG

RELEASE = "0.5.23"

#: the stories of tests/test_v23_model.py (SMALL_V2: 3 steps up to batch size 2, a 512-slot pool), and a retraction
STORIES = [
    ("cap-with-eos", {}, [Arrive(8, 5), Step(), Step(accept=(4,), eos=(0,)), Step(), Step()]),
    ("tree-through-the-cap", {}, [Arrive(8, 2), Step(), Step(accept=(4,)), Step(), Step()]),
    ("queued-result-finishes", {}, [Arrive(8, 4), Step(), Step(accept=(2,)), Step(accept=(2,)), Step(accept=(2,)),
                                    Step()]),
    ("finished-row-then-prefill", {}, [Arrive(8, 3), Arrive(8, 30), Step(), Step(accept=(4, 1)), Step(accept=(1, 1)),
                                       Arrive(20, 6), Step(), Step(), Step(accept=(3,)), Step(), Step()]),
    ("retract", {"target_kv_pool_size": 100, "draft_kv_pool_size": 100},  # 3 rows decode, then a retraction
     [Arrive(3 + i, 30) for i in range(5)] + [Step()] * 70),
    # the fuzzer's two minimal workloads (0.5.23's admission: docs/oracle.md, tests/test_v23_model.py)
    ("chunk-row-held", {"max_running_requests": 4, "chunked_prefill_size": 7},
     [Arrive(1, 1), Arrive(1, 20), Arrive(6, 20), Arrive(1, 20), Step(), Step(), Step(), Step()]),
    ("chunk-spends-budget", {"max_running_requests": 1, "chunked_prefill_size": 7},
     [Arrive(25, 1), Step(), Arrive(1, 1), Step(), Step(), Step(), Step(), Step()]),
]


@pytest.fixture
def oracle(oracle_of):  # noqa: ANN001, ANN201
    return oracle_of(RELEASE)  # the session's 0.5.23 oracle process (tests/conftest.py)


def _story_config(over: dict) -> SpecConfig:  # type: ignore[type-arg]
    return SMALL_V2.with_(**over)


_EVICT = load_trace(Path(__file__).resolve().parents[1] / "docs" / "results" / "oracle-0_5_23-evict-8-vs-6.json")

WORKLOADS = ([(n, config17(**o), a) for n, o, a in HAND] + [(n, _story_config(o), a) for n, o, a in STORIES]
             # the fuzzer's minimal workload for the split at the prompt boundary (tests/test_v23_model.py)
             + [("retract-then-split", RETRACT_SPLIT_CONFIG, RETRACT_SPLIT)]
             # the fuzzer's workload for the waiting requests' refreshed tree paths (docs/oracle.md, fix 4)
             + [("waiting-prefix-refresh", _EVICT.config, _EVICT.actions)])


def _schedule_prefill_unrefreshed(ops: object, tx: object) -> object:
    """0.5.23's ``schedule_prefill`` without ``calc_priority``'s refresh of the waiting requests' paths."""
    from specstate.model.sglang_0_5_23 import admission

    refresh = admission.touch_waiting_prefixes
    admission.touch_waiting_prefixes = lambda s: s  # type: ignore[assignment]
    try:
        return admission.schedule_prefill_v23(ops, tx)  # type: ignore[arg-type]
    finally:
        admission.touch_waiting_prefixes = refresh  # type: ignore[assignment]


@pytest.mark.parametrize("name,config,actions", WORKLOADS, ids=[w[0] for w in WORKLOADS])
def test_hand_workloads_conform(oracle, name: str, config: SpecConfig, actions: list) -> None:  # noqa: ANN001
    from specstate.integration.oracle_differential import differential

    d = differential(RELEASE, config, actions, oracle=oracle)
    assert d.oracle.error is None, d.oracle.error
    assert len(d.oracle.observations) == sum(isinstance(a, Step) for a in actions)
    assert d.ok, d.describe() + "".join(f"\n  {m.describe()}" for m in d.mismatches[1:6])


def test_the_hand_workloads_reach_what_the_issue_names(oracle) -> None:  # noqa: ANN001
    """Speculative and trivial decodes (the switch), chunked prefill, an abort of the chunked
    request, a retraction, the out-of-memory abort: read from upstream's own objects."""
    reached: set[str] = set()
    paths: set[str] = set()
    for _, config, actions in WORKLOADS:
        run = oracle.run(config, actions)
        assert run.error is None, run.error
        reached |= set(run.reached)
        paths |= {o.path for o in run.observations}
    assert {"chunked-prefill", "abort-chunked", "abort-running", "abort-waiting", "retraction", "oom-abort",
            "prefix-hit", "eviction"} <= reached, reached
    assert {"spec", "trivial", "extend"} <= paths


def _mutants() -> list[Variant]:
    """The 0.5.23 family with one 0.5.17 operation put back, and the scheduler-side v2 bugs
    rebased onto it (``model/sglang_0_5_17/variants.py``). Not here: 0.5.17's ``update_finish_state`` order
    (length before EOS) changes only the finish *reason*, which no observation holds (the output
    and the tokens kept are the same either way: ``cap-with-eos`` agrees with both)."""
    from specstate.model import get_variant
    from specstate.model.ops import DEFAULT_OPS
    from specstate.model.sglang_0_5_17.variants import V2_OVERRIDES

    def back(name: str, *ops: str) -> Variant:
        return Variant(name, f"0.5.23 with 0.5.17's {', '.join(ops)}",
                       overrides={op: V2_OVERRIDES.get(op, getattr(DEFAULT_OPS, op)) for op in ops}, base="upstream-v23")

    rebased = [Variant(f"{b}-on-v23", get_variant(b).summary, overrides=dict(get_variant(b).overrides),
                       base="upstream-v23")
               for b in ("v2-alloc-follows-active-steps", "v2-single-reserve", "v2-downswitch-unclamped",
                         "v2-commit-after-finish")]
    from specstate.model.sglang_0_5_23.finish import release_kv_cache_owned

    unsplit = Variant("v23-tree-unsplit", "0.5.23 without the split at the prompt boundary",
                      overrides={"cache_unfinished_req": DEFAULT_OPS.cache_unfinished_req,
                                 "release_kv_cache": release_kv_cache_owned}, base="upstream-v23")
    unrefreshed = Variant("v23-no-waiting-refresh", "0.5.23 without calc_priority's refresh of the waiting requests' "
                          "tree paths", overrides={"schedule_prefill": _schedule_prefill_unrefreshed}, base="upstream-v23")
    return [back("v23-scheduling-of-0.5.17", "get_next_batch_to_run"), back("v23-admission-of-0.5.17", "schedule_prefill"),
            back("v23-release-of-0.5.17", "release_kv_cache"), unsplit, unrefreshed, *rebased]


def test_the_oracle_judges_the_family_and_its_mutations(oracle) -> None:  # noqa: ANN001
    """Upstream 0.5.23 agrees with ``upstream-v23`` on every workload, and disagrees (a mismatch or
    a model invariant violation) with the 0.5.17 family and with every mutation above."""
    from specstate.integration.oracle_differential import judge

    runs = [(c, a, oracle.run(c, a)) for _, c, a in WORKLOADS]

    def caught(variant: object) -> bool:
        return any(m or v for m, v in (judge(r, c, a, variant) for c, a, r in runs))

    assert not caught("upstream-v23")
    assert caught("upstream-adaptive")
    missed = [m.name for m in _mutants() if not caught(m)]
    assert not missed, missed
