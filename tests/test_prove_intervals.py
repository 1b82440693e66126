"""``specstate prove`` by batch-size intervals: the checked bounds, the proof against the
enumeration of every bound (``exhaustive=True``) on random configurations, and the constants a
variant compares with that the intervals did not derive."""

from __future__ import annotations

import random

import pytest

from specstate.errors import InvalidConfig
from specstate.model import SpecConfig, get_variant, variant_names
from specstate.model.bs_compare import at_most
from specstate.prove import Lengths, prove, prove_config
from specstate.prove._intervals import checked_bounds, derive
from specstate.scenarios import SEED_CONFIG

SHORT = Lengths(prompt_len=4)
BASE = SEED_CONFIG.with_(target_kv_pool_size=16384, draft_kv_pool_size=16384, context_len=1024,
                         chunked_prefill_size=512, target_hidden_size=4, draft_hidden_size=4)
V1 = sorted({get_variant(n).name for n in variant_names() if get_variant(n).family_name == "sglang-0.5.12"})
V2 = sorted({get_variant(n).name for n in variant_names() if get_variant(n).family_name != "sglang-0.5.12"})


class DecidesAtThree:
    """A user's variant with its own threshold, compared through ``bs_compare``: a constant the
    config does not have."""

    base = "fixed-threshold"

    def decide_speculation(ops, tx, batch):  # noqa: N805, ANN001, ANN201
        return at_most(batch.batch_size, 3)


class ComparesWithThreeAboveEight:
    """A constant below the bound where it is first met (3, first compared with at bs 9): the
    intervals below 9 were cut without it."""

    base = "fixed-threshold"

    def decide_speculation(ops, tx, batch):  # noqa: N805, ANN001, ANN201
        if at_most(batch.batch_size, 8):
            return at_most(batch.batch_size, 5)
        return at_most(batch.batch_size, 3)


def random_config(rng: random.Random) -> SpecConfig:
    """A random valid shape config (the fields a batch size is compared with, and the shapes)."""
    while True:
        steps, topk = rng.randint(1, 3), rng.choice((1, 1, 2, 4))
        try:
            return BASE.with_(speculative_num_steps=steps, speculative_eagle_topk=topk,
                              speculative_num_draft_tokens=rng.randint(steps + 1, steps * topk + 1) if topk > 1 else steps + 1,
                              disable_batch_threshold=rng.choice((None, 1, 2, 3, 5, 7, 12)),
                              cuda_graph_max_bs=rng.choice((1, 2, 4, 8, 16, 24, 40)))
        except InvalidConfig:
            continue


def assert_interval_proof_equals_enumeration(config: SpecConfig, variant: str, max_bs: int, lists: tuple[str, ...]) -> None:
    fast = prove(config, variant, max_bs, lists=lists, lengths=SHORT)
    full = prove(config, variant, max_bs, lists=lists, lengths=SHORT, exhaustive=True)
    assert fast.verdict() == full.verdict(), (variant, config)
    if full.failure is not None:
        assert fast.failure is not None
        assert (fast.failure.bound, len(fast.failure.actions), fast.failure.violations[0].invariant) == \
            (full.failure.bound, len(full.failure.actions), full.failure.violations[0].invariant)
    assert sum(v.bounds_run for v in fast.lists) <= sum(v.bounds_run for v in full.lists)


def test_the_seed_config_checks_the_first_two_bounds_of_each_signature() -> None:
    cfg = prove_config(SEED_CONFIG, 256, None)  # threshold 5, captures 1..8, 10, 12, 14, 16
    points = derive(cfg, 256)
    assert points.constants == {5, 16, 255} and cfg.cuda_graph_bs in points.captures
    got = checked_bounds(cfg, points, 256)
    # above the switch (6, 7), padded (9, 11), the first eager bounds (17, 18), the bound itself
    assert {1, 6, 7, 9, 11, 17, 18, 256} <= got
    assert 5 not in got  # 4 and 5 have one signature: speculating, 2 and 1 rows fewer speculating too
    assert 100 not in got and 255 not in got and len(got) < 25


def test_naive_threshold_still_fails_at_6_with_the_minimal_trace() -> None:
    """At ``--max-bs 256`` the intervals give the enumeration's smallest failing bs and trace (the
    enumeration stops there too: every list runs only through the smallest failing bound). The
    trace is the shortest one can be: the crash needs a speculative decode (one arrival, its
    prefill, the decode) before the first decode above the threshold (``threshold + 1 - 1`` more
    arrivals, their prefill, the decode): ``threshold + 1`` arrivals and 4 steps."""
    fast = prove(SEED_CONFIG, "naive-threshold", 256)
    full = prove(SEED_CONFIG, "naive-threshold", 256, exhaustive=True)
    threshold = SEED_CONFIG.disable_batch_threshold
    assert fast.failure is not None and full.failure is not None
    assert fast.failure.bound == full.failure.bound == threshold + 1 == 6
    assert len(fast.failure.actions) == len(full.failure.actions) == threshold + 1 + 4
    assert fast.failure.violations[0].invariant == full.failure.violations[0].invariant == "worker-crash"
    assert fast.verdict() == full.verdict()


@pytest.mark.parametrize("name, restarts", [("DecidesAtThree", 0), ("ComparesWithThreeAboveEight", 1)])
def test_a_constant_the_config_lacks_cuts_the_intervals(name: str, restarts: int) -> None:
    """Met at bound 1, a constant cuts the intervals before any is skipped; met later, below a
    bound already passed, it restarts the capture list. Either way: the enumeration's verdict."""
    spec = f"tests.test_prove_intervals:{name}"
    fast = prove(BASE, spec, 20, lists=("config",), lengths=SHORT)
    assert fast.lists[0].restarts == restarts and 3 in fast.lists[0].points
    assert fast.lists[0].bounds_run < 20
    full = prove(BASE, spec, 20, lists=("config",), lengths=SHORT, exhaustive=True)
    assert fast.verdict() == full.verdict()


@pytest.mark.parametrize("seed", range(3))
def test_interval_proof_equals_the_enumeration_on_random_configs(seed: int) -> None:
    """Fast: 3 random configs, one random capture list, bs <= 24, a v1 and a v2 variant each
    (``tests/fuzz/test_prove_intervals_fuzz.py``: more of them, bs <= 64)."""
    rng = random.Random(seed)
    cfg = random_config(rng)
    lists = (rng.choice(("config", "sglang", "every", "single", "one")),)
    for variant in (rng.choice(V1), rng.choice(V2)):
        assert_interval_proof_equals_enumeration(cfg, variant, rng.randint(8, 24), lists)


def test_a_family_brings_its_own_switch_rule_to_the_intervals() -> None:
    """The switch rule the intervals read is the variant's family's (``Family.batch_decision``): the
    adaptive family's slot keys are points, and its decisions are step counts; without a family,
    the core's threshold rule (a bool per batch size)."""
    from specstate.model.families import get_family
    from specstate.model.sglang_0_5_17.variants import H200_CONFIG
    from specstate.prove._abstraction import decision_of

    v17 = get_family("sglang-0.5.17")
    cfg = prove_config(v17.prepare(H200_CONFIG), 64, None)
    slots = [int(k) for k in __import__("json").loads(cfg.speculative_adaptive_config)]
    decide = decision_of(cfg, v17)
    assert all(isinstance(decide(b), int) and not isinstance(decide(b), bool) for b in range(1, 65))
    assert {decide(b) for b in range(1, 65)} > {0}  # it drafts at some sizes and stops at others
    assert {s - 1 for s in slots if 1 < s <= 64} <= derive(cfg, 64, v17).constants  # a slot key cuts an interval
    assert all(isinstance(decision_of(cfg)(b), bool) for b in range(1, 65))
    assert get_family("sglang-0.5.23").batch_decision is v17.batch_decision
