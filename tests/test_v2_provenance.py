"""Result provenance under the overlap scheduler (``specstate/invariants/_provenance.py``): every
consumer of a result reads its own launch's values, a consumer that reads the newest launch's
fails ``result-provenance`` with a short trace, and upstream's own read of another launch (the EMA
gate of ``AdaptiveStepSlot.update``) is a finding, not a false alarm of the correct variant."""

from __future__ import annotations

from typing import Any

from specstate.invariants import check_outcome, get_invariant
from specstate.invariants._provenance import ema_gate_reads_another_launch
from specstate.model import Arrive, Step, get_variant, initial_state, step
from specstate.model.sglang_0_5_17.variants import H200_CONFIG
from specstate.model.variants import Variant
from tests.mutations import _v2_ema_newest_batch

#: one slot, candidates 0 and 3, the EMA at alpha 1 and a recompute after every batch
FLIP = H200_CONFIG.with_(speculative_adaptive_config='{"1": {"candidate_steps": [0, 3], "warmup_batches": 0, '
                                                     '"update_interval": 1, "ema_alpha": 1.0}}')


def _run(config: Any, variant: str | Variant, actions: list[Any]) -> list[Any]:
    v = get_variant(variant) if isinstance(variant, str) else variant
    ops, s, out = v.ops(), initial_state(v.configure(config)), []
    for a in actions:
        o = step(s, a, ops)
        s = o.state
        out.append(o)
    return out


def test_the_invariant_is_registered_and_cites_upstream() -> None:
    inv = get_invariant("result-provenance")
    assert "_resolve_spec_v2_tokens" in inv.mirrors and "AdaptiveStepSlot.update" in inv.mirrors


def test_the_result_carries_its_launch() -> None:
    out = _run(H200_CONFIG, "upstream-adaptive", [Arrive(8, 20), Step(), Step(accept=(2,)), Step(accept=(3,))])
    p = out[2].state.v2.pending
    assert (p.kind, p.batch.rids, p.accept, p.steps, p.draft_tokens, p.launch_step) == ("decode", (0,), (2,), 3, 4, 3)


def test_upstreams_ema_gate_reads_the_slot_a_later_result_switched() -> None:
    """A minimal trace (upstream's behaviour): step 2 launches at 3 steps; step 3 launches at 3
    steps and processes step 2's result (0 correct drafts: the slot flips to 0); step 4 processes
    step 3's result, launched at 3 steps, but the slot now says 0: ``update`` skips the EMA for it.
    Step 5 processes a steps-0 launch (a trivial verify's zeros) with the slot probing 3 again:
    those zeros feed the drafting slot's EMA. No invariant fails."""
    out = _run(FLIP, "upstream-adaptive", [Arrive(8, 40), Step()] + [Step(accept=(1,))] * 4)
    assert [ema_gate_reads_another_launch(o) for o in out] == [None, None, None, None, (3, 0), (0, 3)]
    assert [v for o in out for v in check_outcome(o)] == []


def test_an_ema_fed_the_newest_launch_fails_with_a_short_trace() -> None:
    """Six requests decode with drafting off (slot 6); request 0 finishes after 3 tokens, so the
    batch launched at step 11 has 5 rows (slot 1) while the 6-row result is processed: fed the
    newest size, slot 1's EMA moves instead of slot 6's count."""
    v = get_variant("upstream-adaptive")
    bad = Variant("ema-newest", "", overrides={**v.overrides, "resolve_spec_v2_tokens": _v2_ema_newest_batch},
                  family="sglang-0.5.17")
    actions = [Arrive(8, 3)] + [Arrive(8, 30)] * 5 + [Step()] + [Step(accept=(1,) * 6)] * 5
    assert [v for o in _run(H200_CONFIG, "upstream-adaptive", actions) for v in check_outcome(o)] == []
    found = [x for o in _run(H200_CONFIG, bad, actions) for x in check_outcome(o) if x.invariant == "result-provenance"]
    assert [(x.step, x.field) for x in found] == [(11, "adaptive.slots")]
