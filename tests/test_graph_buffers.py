"""Graph runners' static buffers as state, and the further crash sites of sglang 0.5.12's
graph replay: each a real torch op on tiny CPU tensors, failing with PyTorch's own error at
the SGLang symbol it mirrors."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specstate.check import run_actions
from specstate.model import Arrive, ForwardMode, SpecConfig, Step, Variant, Worker, initial_state, step
from specstate.model.graph_buffers import Writer
from specstate.model.sglang_0_5_12.policies import naive_fallback_decode, shared_target_runners
from specstate.model.runner import ForwardBatch, ModelledCrash, default_graph_runners, run_forward
from specstate.model.modes import CaptureHiddenMode
from specstate.model.ops import DEFAULT_OPS
from specstate.model.spec_info import EagleDraftExtendInput

CFG = SpecConfig(speculative_num_steps=2, speculative_eagle_topk=2, speculative_num_draft_tokens=4,
                 disable_batch_threshold=2, cuda_graph_max_bs=4, max_running_requests=8,
                 target_kv_pool_size=512, draft_kv_pool_size=512, cuda_graph_bs_override=(1, 4))
TWO = [Arrive(8, 20), Arrive(8, 20), Step(), Step(), Step()]


def test_buffers_persist_between_replays_with_their_writers() -> None:
    s = initial_state(CFG)
    for a in TWO[:3]:
        s = step(s, a).state
    o = step(s, Step())
    verify = next(f for f in o.forwards if f.phase == "verify")
    assert verify.graph is not None and (verify.graph.raw_bs, verify.graph.padded_bs) == (2, 4)
    seq_lens = next(r for r in verify.graph.reads if r.name == "seq_lens")
    it = o.state.step_index
    assert seq_lens.rows == (Writer(0, it), Writer(1, it), None, None)  # padding rows: fill values
    stored = dict(o.state.graphs.contents)["target.seq_lens"]
    assert stored[:2] == (Writer(0, it), Writer(1, it))  # the state keeps them for the next replay


def test_replay_prepare_is_a_replaceable_operation() -> None:
    calls: list[tuple[str, int]] = []

    def spy(ops, runner, fb, graphs, iteration, config):  # noqa: ANN001, ANN202
        calls.append((runner.name, fb.batch_size))
        return DEFAULT_OPS.replay_prepare(ops, runner, fb, graphs, iteration, config)

    r = run_actions(CFG, Variant("spy", "counts replays", overrides={"replay_prepare": spy}), TWO)
    assert r.ok and ("target_verify", 2) in calls and ("draft_decode", 2) in calls


def test_shared_buffer_sized_for_another_runtime_state_fails_inside_replay_prepare() -> None:
    """0.5.14+ runtime states share the target's static buffers; sized at capture for the
    1-token state, the 4-token verify overflows them: PyTorch's error, in replay_prepare."""
    def undersized(ops, config):  # noqa: ANN001, ANN202
        return shared_target_runners(config, sized_for=1)

    bad = Variant("undersized", "shared buffers sized for draft_token_num=1", base="steps0-verify",
                  overrides={"graph_runners": undersized})
    r = run_actions(CFG, bad, [Arrive(8, 20), Arrive(8, 20), Step(), Step()])
    v = r.first
    assert v is not None and v.invariant == "worker-crash"
    assert v.field == "cuda_graph_runner.py::CudaGraphRunner.replay_prepare"
    assert v.actual.startswith("RuntimeError") and v.shapes["input_ids"] == [8]
    assert run_actions(CFG, "steps0-verify", [Arrive(8, 20), Arrive(8, 20), Step(), Step()]).ok


def test_verify_custom_mask_longer_than_the_backend_buffer_fails_in_replay_metadata() -> None:
    """``TritonAttnBackend.init_forward_metadata_replay_cuda_graph``: ``custom_mask[:n] = mask``
    into ``max_num_tokens * max_context_len`` entries."""
    def short_context(ops, config):  # noqa: ANN001, ANN202
        runners = default_graph_runners(config)
        runners["target_verify"] = replace(runners["target_verify"], custom_mask_capacity=4 * 4 * 2)
        return runners

    bad = Variant("short-context", "backend mask buffer for a 2-token context", overrides={"graph_runners": short_context})
    r = run_actions(CFG, bad, [Arrive(20, 20), Step(), Step()])
    v = r.first
    assert v is not None and v.field == "triton_backend.py::TritonAttnBackend.init_forward_metadata_replay_cuda_graph"
    assert v.actual.startswith("RuntimeError") and v.shapes["custom_mask"] == [96]


def test_decode_with_spec_info_through_a_decode_graph_hits_assert_false() -> None:
    """A patch that captures plain-DECODE target graphs and runs its fallback through them
    with the stale ``spec_info`` attached: the copies fit (1 token per request), then the
    triton backend's replay metadata reaches ``assert False``."""
    def decode_graphs(ops, config):  # noqa: ANN001, ANN202
        runners = default_graph_runners(config)
        runners["target_verify"] = replace(runners["target_verify"], name="target_decode", num_tokens_per_bs=1,
                                           capture_forward_mode=ForwardMode.DECODE)
        return runners

    bad = Variant("decode-graph", "naive fallback through a DECODE graph", overrides={
        "graph_runners": decode_graphs, "fallback_decode": naive_fallback_decode,
        "decide_speculation": lambda ops, tx, batch: False})
    v = run_actions(CFG, bad, [Arrive(8, 20), Step(), Step()]).first
    assert v is not None and v.field == "triton_backend.py::TritonAttnBackend.init_forward_metadata_replay_cuda_graph"
    assert v.actual == "AssertionError: Multi-step cuda graph init is not done here."


def _extend_fb(hidden: tuple[int, ...], num_accept: tuple[int, ...]) -> ForwardBatch:
    info = EagleDraftExtendInput(rows=(0, 1), hidden_states=hidden, num_correct_drafts=(2,), num_accept_tokens=num_accept,
                                 num_accept_tokens_cpu=(2, 1), input_ids=(3,), seq_lens=(10, 9), req_pool_indices=(2,),
                                 positions=(3,), bonus_tokens=(2,))
    return ForwardBatch(ForwardMode.DRAFT_EXTEND, (0, 1), (10, 9), (3,), (3,), (3,), info, CaptureHiddenMode.LAST,
                        extend_lens=(2, 1))


def test_draft_extend_replay_copies_num_accept_tokens_for_real() -> None:
    runner = default_graph_runners(CFG)["draft_extend"]
    with pytest.raises(ModelledCrash) as e:
        run_forward("x", Worker.DRAFT, _extend_fb((3, CFG.extend_hidden_size), (3,)), runner, CFG, ops=DEFAULT_OPS)
    assert isinstance(e.value.cause, RuntimeError) and e.value.shapes["field"] == "num_accept_tokens"
    assert e.value.where == "eagle_draft_extend_cuda_graph_runner.py::EAGLEDraftExtendCudaGraphRunner.replay"


def test_draft_extend_replay_skips_hidden_states_of_another_width_silently() -> None:
    """``if hidden_states.shape[1] == buffers.hidden_states.shape[1]``: otherwise no copy, no
    error; the graph reads rows no one wrote in this step (graph-padding sees them)."""
    runner = default_graph_runners(CFG)["draft_extend"]
    ok = run_forward("x", Worker.DRAFT, _extend_fb((3, CFG.extend_hidden_size), (2,)), runner, CFG, ops=DEFAULT_OPS)
    bad = run_forward("x", Worker.DRAFT, _extend_fb((3, CFG.draft_hidden_size), (2,)), runner, CFG, ops=DEFAULT_OPS)
    ok_rows = next(r for r in ok.graph.reads if r.name == "hidden_states").rows[:3]  # type: ignore[union-attr]
    bad_rows = next(r for r in bad.graph.reads if r.name == "hidden_states").rows[:3]  # type: ignore[union-attr]
    assert ok_rows == (Writer(0, 0), Writer(0, 0), Writer(1, 0)) and bad_rows == (None, None, None)
