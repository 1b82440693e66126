"""The operations are passed, not kept (issue 38: "step takes the ops it runs", "no module-level
slots"): no module of the model holds the default table in a slot; a variant's table is the
catalog's ``DEFAULT_OPS`` with its overrides and says which it replaced (``Ops.made_from``); a
graph replay without a table is an internal error, not a silent fall back to the defaults; the old
``alloc_slots(state, n, who)`` still evicts as the default table does, with the warning."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from specstate.errors import InternalError, SpecstateDeprecationWarning
from specstate.model import kv
from specstate.model.config import SpecConfig
from specstate.model.ops import DEFAULT_OPS, default_ops
from specstate.model.runner import ForwardBatch, default_graph_runners, run_forward
from specstate.model.step import initial_state
from specstate.model.variants import get_variant

MODEL = Path(__file__).resolve().parents[1] / "specstate" / "model"


def _module_level_lists(path: Path) -> list[str]:
    """Names bound at a module's top level to an empty list or dict literal (a slot filled later)."""
    out = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, (ast.List, ast.Dict)) and not (value.elts if isinstance(value, ast.List) else value.keys):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[union-attr]
            out += [ast.unparse(t) for t in targets]
    return out


def test_the_operations_table_module_keeps_no_slot() -> None:
    assert _module_level_lists(MODEL / "ops_table.py") == []
    assert not hasattr(__import__("specstate.model.ops_table", fromlist=["x"]), "default_ops")
    assert _module_level_lists(MODEL / "kv.py") == [] and _module_level_lists(MODEL / "runner.py") == []


def test_the_slot_finder_sees_a_slot() -> None:
    """The check above can fail: a module-level empty list is found."""
    path = MODEL.parent.parent / "tests" / "_slot_probe.py"
    try:
        path.write_text("_DEFAULT: list[int] = []\nX = 1\n_ALSO = {}\n")
        assert _module_level_lists(path) == ["_DEFAULT", "_ALSO"]
    finally:
        path.unlink()


def test_a_variants_table_is_the_catalogs_with_its_overrides() -> None:
    v = get_variant("naive-threshold")
    ops = v.ops()
    assert ops.made_from is DEFAULT_OPS and DEFAULT_OPS.made_from is DEFAULT_OPS and default_ops() is DEFAULT_OPS
    assert ops.replace().made_from is DEFAULT_OPS  # a table made from a made one still compares with the root
    assert set(ops.overridden()) == {k for k, fn in v.all_overrides().items() if fn is not getattr(DEFAULT_OPS, k)}
    assert ops.overridden() and DEFAULT_OPS.overridden() == {}
    assert ops == DEFAULT_OPS.replace(**v.all_overrides())  # made_from is no field: equality is the operations'


def test_a_graph_replay_without_a_table_is_an_internal_error() -> None:
    from specstate.model.modes import CaptureHiddenMode, ForwardMode, Worker
    from specstate.model.spec_info import EagleDraftExtendInput

    cfg = SpecConfig()
    runner = default_graph_runners(cfg)["draft_extend"]
    info = EagleDraftExtendInput(rows=(0, 1), hidden_states=(3, cfg.extend_hidden_size), num_correct_drafts=(2,),
                                 num_accept_tokens=(2,), num_accept_tokens_cpu=(2, 1), input_ids=(3,), seq_lens=(10, 9),
                                 req_pool_indices=(2,), positions=(3,), bonus_tokens=(2,))
    fb = ForwardBatch(ForwardMode.DRAFT_EXTEND, (0, 1), (10, 9), (3,), (3,), (3,), info, CaptureHiddenMode.LAST,
                      extend_lens=(2, 1))
    with pytest.raises(InternalError, match="table of operations"):
        run_forward("x", Worker.DRAFT, fb, runner, cfg)
    assert run_forward("x", Worker.DRAFT, fb, runner, cfg, ops=DEFAULT_OPS).graph is not None


def test_the_old_alloc_slots_evicts_as_the_default_table_does() -> None:
    assert DEFAULT_OPS.evict_from_tree_cache is kv.evict_from_tree_cache_op
    state = initial_state(SpecConfig(target_kv_pool_size=64, draft_kv_pool_size=64))
    with pytest.warns(SpecstateDeprecationWarning, match=r"alloc_slots\(state, n, who, ops\)"):
        old = kv.alloc_slots(state, 10, "t")
    assert old == kv.alloc_slots(state, 10, "t", DEFAULT_OPS) and old.kv_available == state.kv_available - 10
    assert kv.evict_from_tree_cache(state, 10, DEFAULT_OPS) == DEFAULT_OPS.evict_from_tree_cache(DEFAULT_OPS, state, 10)
