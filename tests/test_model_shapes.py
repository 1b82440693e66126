"""Shapes at each phase against what the real sglang 0.5.12 v1 worker recorded on the H200
(bs 10, topk 4, 3 steps, 16 draft tokens; ../shared/gpu/README.md "Shapes recorded")."""

from __future__ import annotations

from specstate.model import Arrive, ForwardMode, SpecConfig, Step, Worker, get_variant, initial_state, step
from specstate.model.spec_info import EagleDraftInput

CFG = SpecConfig(speculative_num_steps=3, speculative_eagle_topk=4, speculative_num_draft_tokens=16,
                 disable_batch_threshold=None, cuda_graph_max_bs=16, target_hidden_size=256, draft_hidden_size=256)
PROMPTS = [80, 81, 82, 83, 84, 85, 86, 87, 88, 89]  # sum 845, as in the recording


def _prefilled():
    ops = get_variant("always-spec").ops()
    s = initial_state(CFG)
    for p in PROMPTS:
        s = step(s, Arrive(p, 32), ops).state
    return step(s, Step(), ops), ops


def test_prefill_then_draft_input_shapes() -> None:
    o, _ = _prefilled()
    fr = o.forwards[0]
    assert (fr.phase, fr.forward_mode, fr.input_ids) == ("forward_target_extend", ForwardMode.EXTEND, (845,))
    info = o.state.last_batch.spec_info
    assert isinstance(info, EagleDraftInput)
    # recorded: topk_p/topk_index [10, 4], hidden_states [10, 256], bonus_tokens [10]
    assert (info.topk_p, info.topk_index, info.hidden_states, info.bonus_tokens) == ((10, 4), (10, 4), (10, 256), (10,))


def test_decode_phase_shapes_match_the_recording() -> None:
    o, ops = _prefilled()
    o = step(o.state, Step(accept=(1,) * 10), ops)
    draft, verify, extend = o.forwards
    # recorded: out_cache_loc [120] = bs x steps x topk before verify
    assert draft.out_cache_loc == (120,) and draft.worker == Worker.DRAFT
    # recorded: draft_token and positions [160]; custom_mask [16080]
    assert verify.input_ids == (160,) and verify.positions == (160,) and verify.forward_mode == ForwardMode.TARGET_VERIFY
    assert verify.graph is not None and verify.graph.padded_bs == 10 and verify.graph.num_tokens_per_bs == 16
    # after verify with accept 1 each: out_cache_loc [10]
    assert extend.out_cache_loc == (10,) and extend.forward_mode == ForwardMode.DRAFT_EXTEND
    assert o.state.running.seq_lens == tuple(p + 1 for p in PROMPTS)


def test_custom_mask_length() -> None:
    o, ops = _prefilled()
    from specstate.model.tx import Tx
    from specstate.model.sglang_0_5_12.worker import draft
    tx = Tx(o.state.evolve(running=o.state.last_batch.evolve(forward_mode=ForwardMode.DECODE), last_batch=None))
    tx = draft(ops, tx)
    assert tx.state.running.spec_info.custom_mask == (16080,)  # recorded: [16080] bool


def test_kv_accounting_through_a_speculative_step() -> None:
    o, ops = _prefilled()
    before = o.state.kv_available
    o = step(o.state, Step(accept=(4, 1, 2, 3, 1, 1, 1, 1, 1, 1)), ops)
    assert before - o.state.kv_available == 4 + 1 + 2 + 3 + 6  # rejected draft slots returned
    assert o.state.kv_allocated == sum(r.kv_allocated_len for r in o.state.live_reqs())


def test_padded_graph_batch_size() -> None:
    ops = get_variant("always-spec").ops()
    s = initial_state(CFG)
    for _ in range(9):
        s = step(s, Arrive(8, 8), ops).state
    s = step(s, Step(), ops).state
    o = step(s, Step(), ops)
    assert o.forwards[1].graph.raw_bs == 9 and o.forwards[1].graph.padded_bs == 10  # capture list 1..8, 10, 12, ...


def test_capture_list_matches_sglang() -> None:
    assert CFG.cuda_graph_bs == (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16)
    assert SpecConfig(cuda_graph_max_bs=48, max_running_requests=48).cuda_graph_bs[-4:] == (32, 40, 44, 48)
