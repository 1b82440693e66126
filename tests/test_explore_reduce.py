"""``explore(..., reduce=True)``: states that differ only in finished requests' spent fields
(``explore.settled``) are one node. Sound only if nothing after a request finished reads those
fields, so that is checked here, as a bisimulation over the concrete search: any two explored
states that the reduction merges take every action of the alphabet to states it merges too, with
the same violations, crash and witnesses. Every built-in variant (its family's explore config)."""

from __future__ import annotations

import pytest

from specstate.check import checked_step
from specstate.fuzz.explore import canonical, default_alphabet, explore, settled
from specstate.invariants import check_outcome, outcome_witnesses
from specstate.model import Arrive, Step, get_variant, initial_state, variant_names
from specstate.model.request import FinishReason, Req, ReqStatus
from specstate.testing._api import explore_config


def _merged_pairs(variant: str, depth: int, limit: int) -> list:
    """Pairs of distinct concrete canonical states of the search to ``depth`` that the reduction
    merges (one pair per merged class, the first state of the class with each other one)."""
    import specstate.fuzz.explore as E

    searches = []
    init = E._Search.__init__

    def keep(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        init(self, *a, **k)
        searches.append(self)

    E._Search.__init__ = keep  # type: ignore[method-assign]
    try:
        explore(explore_config(variant), variant, max_depth=depth, keep_graph=False, max_states=limit)
    finally:
        E._Search.__init__ = init  # type: ignore[method-assign]
    first: dict = {}
    pairs = []
    for s in searches[0].ids:
        k = canonical(s, reduce=True)
        if k in first:
            pairs.append((first[k], s))
        else:
            first[k] = s
    return pairs


def _observe(o) -> tuple:  # noqa: ANN001
    crash = (o.crash.error_class, o.crash.where, str(o.crash.shapes)) if o.crash is not None else None
    return (canonical(o.state, reduce=True), [v.describe() for v in check_outcome(o)], crash,
            frozenset(outcome_witnesses(o)), o.batch_kind)


@pytest.mark.parametrize("variant", variant_names())
def test_the_reduction_merges_only_states_that_behave_alike(variant: str) -> None:
    v = get_variant(variant)
    ops = v.ops()
    alphabet = default_alphabet()
    pairs = _merged_pairs(variant, 6, 6000)
    assert len(pairs) >= 20, "the bounds should reach finished requests"
    for a_state, b_state in pairs[:150]:
        acts = alphabet(a_state)
        assert acts == alphabet(b_state)
        for act in acts:
            got_a = _observe(checked_step(a_state, act, ops, v, 0))
            got_b = _observe(checked_step(b_state, act, ops, v, 0))
            assert got_a == got_b, f"{variant}: {act} from two merged states"


@pytest.mark.parametrize("variant,depth", [("naive-threshold", 9), ("fixed-threshold", 8), ("stale-graph-padding", 8),
                                           ("upstream-adaptive", 7), ("v2-single-reserve", 7)])
def test_the_reduced_search_finds_what_the_concrete_one_finds_in_fewer_states(variant: str, depth: int) -> None:
    cfg = explore_config(variant)
    full = explore(cfg, variant, max_depth=depth, keep_graph=False)
    red = explore(cfg, variant, max_depth=depth, keep_graph=False, reduce=True)
    par = explore(cfg, variant, max_depth=depth, keep_graph=False, reduce=True, jobs=2)
    assert full.complete and red.complete
    assert red.states < full.states
    assert red.witnesses == full.witnesses
    assert (full.counterexample is None) == (red.counterexample is None)
    if full.counterexample is not None:
        assert len(red.counterexample) == len(full.counterexample)  # type: ignore[arg-type]
        assert red.violations
    assert (par.states, par.transitions, par.counterexample) == (red.states, red.transitions, red.counterexample)


def test_settled_keeps_identity_prompt_and_tokens_only() -> None:
    r = Req(rid=3, prompt_len=5, max_new_tokens=9, output_len=4, status=ReqStatus.FINISHED, kv_committed_len=8,
            finish_reason=FinishReason.EOS, segments=((5, 1), (9, 3)), last_node=2, retractions=1)
    s = settled(r)
    assert (s.rid, s.prompt_len, s.status, s.segments) == (3, 5, ReqStatus.FINISHED, ((5, 1), (9, 3)))
    assert (s.output_len, s.kv_committed_len, s.finish_reason, s.last_node, s.retractions) == (0, 0, None, 0, 0)
    # a live request is never reduced
    live = initial_state(explore_config("fixed-threshold"))
    assert canonical(live, reduce=True) == canonical(live)
    assert Step() in default_alphabet()(live) and Arrive(4, 3) in default_alphabet()(live)
