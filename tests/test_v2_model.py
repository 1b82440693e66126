"""The v2 family (sglang 0.5.17) on hand-sized stories: results one iteration late, the
over-allocation, the adaptive switch and its runtime states, routing with and without an
explicit capture list, 0.5.17's retraction order. Every number is worked out in the comments."""

from __future__ import annotations

import pytest

from specstate.check import Run, run_actions
from specstate.model import Arrive, ForwardMode, ReqStatus, Step, get_variant
from specstate.model.sglang_0_5_17.runtime import runtime_states
from specstate.model.sglang_0_5_17.spec_info import EagleDraftInputV2
from specstate.scenarios_v2 import ADAPTIVE_CONFIG, SMALL_V2

V2 = "upstream-adaptive"


def _run(config, actions):  # noqa: ANN001, ANN202
    run = Run(config, V2)
    return run, [run.apply(a) for a in actions]


def test_results_are_processed_one_iteration_late() -> None:
    """prompt 8, max_new 5, accept 2 per verify: the scheduler sees each result one loop later."""
    run, out = _run(SMALL_V2, [Arrive(8, 5), Step(), Step(accept=(2,)), Step(accept=(2,)), Step(accept=(2,)), Step()])
    prefill, d1, d2, d3, drain = out[1:]
    assert (prefill.batch_kind, prefill.processed) == ("prefill", ())
    assert (d1.batch_kind, d1.processed) == ("decode", (0,))  # launches decode 1, processes the prefill
    r = d1.state.reqs[0]
    # decode 1 was scheduled with kv_committed_len 8: allocated 8 + 2 * max(3 * 1, 4) = 16
    assert (r.output_len, r.kv_committed_len, r.kv_allocated_len) == (1, 8, 16)
    # device seq_lens: 8, then 8 + 2, then 10 + 2 (the committed length lags by one verify)
    assert [f.seq_lens for o in (d1, d2, d3) for f in o.forwards if f.phase == "verify"] == [(8,), (10,), (12,)]
    assert d2.state.reqs[0].output_len == 3 and d2.state.reqs[0].kv_committed_len == 10
    # decode 3 is scheduled before decode 2's result says the request finished (1 + 2 + 2 = 5)
    assert d3.batch_rids == (0,) and d3.state.reqs[0].status == ReqStatus.FINISHED
    # the overrun decode's result is dropped: nothing launched, its rows processed
    assert (drain.batch_kind, drain.processed, drain.state.reqs[0].output_len) == ("none", (0,), 5)
    # released: 12 committed tokens -> an 11-slot bigram key in the tree, everything else free
    assert (drain.state.tree.total, drain.state.kv_available) == (11, 512 - 11)
    assert run.result().ok


def test_the_switch_runs_the_trivial_verify_and_back() -> None:
    """H200 config: 6 requests route to steps 0 (a 1-token verify through the 1-token graph,
    draft extend eager: its graph was captured at the startup width 4); at 5 back to 3 steps."""
    acts = [Arrive(8, 3)] + [Arrive(8, 30)] * 5 + [Step()] * 6
    run, out = _run(ADAPTIVE_CONFIG, acts)
    zero = out[7]  # first decode: 6 rows
    modes = [(f.phase, f.forward_mode, f.input_ids, f.graph.padded_bs if f.graph else None) for f in zero.forwards]
    assert modes == [("verify", ForwardMode.TARGET_VERIFY, (6,), 6), ("draft_extend", ForwardMode.DRAFT_EXTEND_V2, (6,), None)]
    assert zero.state.v2.active_steps == 0 and zero.state.decisions[-1].speculate is False
    back = next(o for o in out if o.batch_kind == "decode" and len(o.batch_rids) == 5)
    assert [f.phase for f in back.forwards] == ["draft", "verify", "draft_extend"]
    assert all(f.graph is not None for f in back.forwards) and back.state.v2.active_steps == 3
    assert run.result().ok and "crossed-down" in run.result().witnesses


def test_runtime_states_one_per_candidate() -> None:
    states = runtime_states(get_variant(V2).configure(ADAPTIVE_CONFIG))
    assert sorted(states) == [0, 3]
    assert states[0].draft_decode is None and states[3].draft_decode is not None
    assert [states[s].target_verify.num_tokens_per_bs for s in (0, 3)] == [1, 4]
    # the draft-extend width is the startup speculative_num_draft_tokens in every state
    assert [states[s].draft_extend.num_tokens_per_bs for s in (0, 3)] == [4, 4]
    assert states[0].target_verify.capture_bs == (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16)


@pytest.mark.parametrize("capture,expected", [
    (None, [3, 0]),  # no explicit capture list: bs 5 routes as 5 (slot 1: 3 steps)
    ((1, 2, 4, 8, 16), [0, 0]),  # explicit list: 5 is padded to 8 first (slot 6: steps 0)
])
def test_routing_with_and_without_an_explicit_capture_list(capture, expected) -> None:  # noqa: ANN001
    cfg = ADAPTIVE_CONFIG.with_(cuda_graph_bs_override=capture)
    steps = []
    for n in (5, 6):
        _, out = _run(cfg, [Arrive(8, 30)] * n + [Step(), Step()])
        steps.append(out[-1].state.v2.active_steps)
    assert steps == expected


def test_retraction_keeps_the_requests_with_most_outputs() -> None:
    """0.5.17 retracts the request with the fewest outputs first (v1 retracts from the back):
    rows [0, 1], request 1 accepts 4 tokens per verify, request 0 three; a 30-slot pool."""
    cfg = SMALL_V2.with_(target_kv_pool_size=30, draft_kv_pool_size=30)
    run = Run(cfg, V2)
    retracted: list[int] = []
    for a in [Arrive(4, 12), Arrive(4, 12)] + [Step(accept=(3, 4))] * 10:
        o = run.apply(a)
        retracted += [e.rid for e in o.events if e.kind == "retract"]
        if retracted:
            break
    assert retracted == [0]  # 4 outputs against request 1's 9
    assert run.state.running.rids == (1,) and run.state.waiting == (0,) and run.result().ok


def test_the_draft_input_keeps_future_indices_for_every_batch_row() -> None:
    run, out = _run(SMALL_V2, [Arrive(8, 2), Arrive(8, 9), Step(), Step(accept=(3, 3)), Step(accept=(1, 1))])
    info = out[-1].state.running.spec_info
    assert isinstance(info, EagleDraftInputV2) and info.rows == (0, 1) and info.future_indices == (2,)
    assert out[-1].state.reqs[0].status == ReqStatus.FINISHED  # finished, still a row until the next filter


def test_v1_variants_are_unchanged_by_the_v2_family() -> None:
    r = run_actions(SMALL_V2, "fixed-threshold", [Arrive(8, 5), Step(), Step(), Step()])
    assert r.config.disable_overlap_schedule and r.ok
