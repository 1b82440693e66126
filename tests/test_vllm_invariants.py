"""Each vLLM invariant (``specstate/integration/vllm_0_34_0/invariants.py``) has a case that breaks it and a
positive control that keeps it (the registry meta-test's rule for the SGLang invariants)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specstate.integration.vllm_0_34_0.invariants import VLLM_INVARIANTS, check_step
from specstate.model.vllm_0_34_0.config import VllmEngineConfig
from specstate.model.vllm_0_34_0.engine import start, step
from specstate.model.vllm_0_34_0.state import Dispatch, StepRecord, VAction, VState
from specstate.model.vllm_0_34_0.variants import VARIANTS

CONFIG = VllmEngineConfig(max_num_batched_tokens=32, max_model_len=256, num_gpu_blocks=64,
                          schedule=((1, 1, 3), (2, 4096, 0)))
#: one decode, then a prompt longer than the budget beside it (the #49548 shape)
ACTIONS = (VAction(((4, 20),), (3,)), VAction((), (3,)), VAction(((100, 2),), (3,)))


def _played(variant: str) -> tuple[VState, StepRecord]:
    started = start(CONFIG, VARIANTS[variant].ops)
    state = started.state
    for a in ACTIONS:
        state = step(state, a, VARIANTS[variant].ops, started.config, started.plan)
    return state, state.records[-1]


def _one(name: str, state: VState, rec: StepRecord):  # noqa: ANN202
    return VLLM_INVARIANTS[name].check(state, CONFIG, rec)


def test_every_invariant_is_named_documented_and_cites_vllm() -> None:
    for name, inv in VLLM_INVARIANTS.items():
        assert name.startswith("vllm_") and inv.doc and ".py::" in inv.mirrors


def test_k_keyed_on_decode_rows() -> None:
    state, rec = _played("dsd-as-shipped")
    v = _one("vllm_dsd_k_keyed_on_decode_rows", state, rec)
    assert v is not None and (v.field, v.expected, v.actual) == ("num_spec_tokens_to_schedule", 3, 0)
    state, rec = _played("dsd-corrected")
    assert _one("vllm_dsd_k_keyed_on_decode_rows", state, rec) is None


def test_kv_block_accounting() -> None:
    state, rec = _played("dsd-corrected")
    assert _one("vllm_kv_block_accounting", state, rec) is None
    leaked = state.with_(free_blocks=state.free_blocks - 1)
    v = _one("vllm_kv_block_accounting", leaked, rec)
    assert v is not None and v.field == "free_blocks + held" and v.expected == CONFIG.num_gpu_blocks - 1
    short = state.put(state.req(state.running[0]).with_(blocks=0)).with_(free_blocks=state.free_blocks + 
                                                                         state.req(state.running[0]).blocks)
    v = _one("vllm_kv_block_accounting", short, rec)
    assert v is not None and v.field == "blocks" and v.rid == state.running[0]


def test_decode_graph_rows() -> None:
    state, rec = _played("dsd-corrected")
    assert rec.dispatch is not None and _one("vllm_decode_graph_rows", state, rec) is None
    full = replace(rec, dispatch=Dispatch("FULL", 2, 2, 1, 2, 2, decode_graph_eligible=False))
    v = _one("vllm_decode_graph_rows", state, full)
    assert v is not None and v.field == "cg_mode"
    narrow = replace(rec, dispatch=Dispatch("PIECEWISE", 1, None, None, 9, 2, decode_graph_eligible=True))
    assert _one("vllm_decode_graph_rows", state, narrow).field == "graph rows"  # type: ignore[union-attr]


def test_request_token_accounting() -> None:
    state, rec = _played("dsd-corrected")
    assert _one("vllm_request_token_accounting", state, rec) is None
    over = replace(rec, scheduled=rec.scheduled + ((99, CONFIG.max_num_batched_tokens),))
    assert _one("vllm_request_token_accounting", state, over).field == "total_num_scheduled_tokens"  # type: ignore[union-attr]
    wide = replace(rec, spec=((0, CONFIG.num_speculative_tokens + 1),))
    assert _one("vllm_request_token_accounting", state, wide).field == "scheduled_spec_decode_tokens"  # type: ignore[union-attr]
    rid = state.running[0]
    ahead = state.put(state.req(rid).with_(num_computed_tokens=10_000))
    assert _one("vllm_request_token_accounting", ahead, rec).field == "num_computed_tokens"  # type: ignore[union-attr]


@pytest.mark.parametrize("name", sorted(VLLM_INVARIANTS))
def test_check_step_reports_the_first_broken_one_by_name(name: str) -> None:
    state, rec = _played("dsd-corrected")
    assert check_step(state, CONFIG, rec) is None
    assert check_step(state, CONFIG, rec, names=(name,)) is None
