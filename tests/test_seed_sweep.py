"""The acceptance story of the seed: the naive patch's two real outcomes are predicted, with
C = 1, 2, 5 passing first; the correct policies pass the whole sweep both ways."""

from __future__ import annotations

import pytest

from specstate.cli import run_scenario


def test_naive_threshold_crashes_at_c10_in_replay_prepare_160_vs_10() -> None:
    r = run_scenario("seed-sweep", "naive-threshold", 0)
    assert [label for _, label in r.milestones] == ["C=1", "C=2", "C=5", "C=10"]
    v = r.first
    assert v is not None and v.invariant == "worker-crash"
    assert v.field == "cuda_graph_runner.py::CudaGraphRunner.replay_prepare"
    assert v.actual.startswith("RuntimeError: ")
    # compared by class and shapes: buffer slice 10 x 16 = 160 tokens, batch 10 tokens
    assert v.shapes == {"input_ids_buffer": [160], "input_ids": [10], "num_tokens_per_bs": 16, "raw_bs": 10}
    assert "The size of tensor a (160) must match the size of tensor b (10)" in v.actual


def test_naive_eager_crashes_at_c10_reading_stale_kv_indptr() -> None:
    r = run_scenario("seed-sweep", "naive-threshold-eager", 0)
    assert [label for _, label in r.milestones][-1] == "C=10"
    v = r.first
    assert v is not None and v.invariant == "worker-crash"
    assert v.field == "triton_backend.py::TritonAttnBackend.init_forward_metadata"
    assert v.actual.startswith("AttributeError: ")
    assert v.shapes == {"spec_info": "EagleDraftInput", "kv_indptr": None}


@pytest.mark.parametrize("variant", ["fixed-threshold", "steps0-verify", "always-spec"])
def test_correct_policies_pass_the_whole_sweep(variant: str) -> None:
    r = run_scenario("seed-sweep", variant, 0)
    assert r.ok, r.first.describe()  # type: ignore[union-attr]
    assert [label for _, label in r.milestones] == [f"C={c}" for c in (1, 2, 5, 10, 30, 70, 100, 250)]
    assert r.stats["idle"] >= 8  # every level ran until its requests finished
    if variant != "always-spec":
        # both directions of the crossing, with live requests: speculation resumed
        assert {"crossed-up", "crossed-down", "spec-resumed"} <= r.witnesses
        assert r.stats["fallback_decode"] > 0 and r.stats["spec_decode"] > 0
    else:
        assert r.stats["fallback_decode"] == 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fixed_threshold_passes_other_seeds(seed: int) -> None:
    assert run_scenario("seed-sweep", "fixed-threshold", seed).ok
