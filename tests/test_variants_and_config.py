from __future__ import annotations

import pytest

from specstate.cli import run_scenario
from specstate.errors import InvalidConfig, UnknownName, VariantLoadError
from specstate.model import DEFAULT_OPS, SpecConfig, get_variant, variant_names


def test_user_class_variant_loads_and_runs() -> None:
    v = get_variant("tests.user_variants.mine:SmallThreshold")
    assert set(v.overrides) == {"decide_speculation"} and v.base == "fixed-threshold"
    r = run_scenario("oscillate", "tests.user_variants.mine:SmallThreshold", 0)
    assert r.ok and r.stats["fallback_decode"] > 0 and r.stats["spec_decode"] > 0


def test_user_variant_instance_is_caught() -> None:
    r = run_scenario("oscillate", "tests.user_variants.mine:BROKEN", 0)
    assert r.first is not None and r.first.invariant == "worker-crash"


@pytest.mark.parametrize("spec,err", [
    ("tests.user_variants.nope:X", VariantLoadError),
    ("tests.user_variants.mine:Missing", VariantLoadError),
    ("tests.user_variants.mine:NOT_A_VARIANT", VariantLoadError),
    ("no-such-variant", UnknownName),
])
def test_bad_variant_names(spec: str, err: type) -> None:
    with pytest.raises(err) as e:
        get_variant(spec)
    assert "Expected" in str(e.value)


def test_unknown_operation_override_is_rejected() -> None:
    with pytest.raises(UnknownName):
        DEFAULT_OPS.replace(not_an_op=lambda: None)


def test_every_builtin_variant_builds_ops() -> None:
    from specstate.model.ops import DEFAULT_OPS

    for name in variant_names():  # (a test's variant may "override" an operation with its default: a mutation back)
        ops = get_variant(name).ops()
        changed = {k for k, fn in get_variant(name).all_overrides().items() if fn is not getattr(DEFAULT_OPS, k)}
        assert set(ops.overridden()) == changed, name


@pytest.mark.parametrize("changes,field", [
    ({"speculative_eagle_topk": 1, "speculative_num_draft_tokens": 16}, "speculative_num_draft_tokens"),
    ({"page_size": 0}, "page_size"),
    ({"page_size": 48}, "chunked_prefill_size"),  # sglang asserts the chunk is whole pages
    ({"draft_kv_pool_size": 10}, "draft_kv_pool_size"),
    ({"speculative_num_steps": 0}, "speculative_num_steps"),
])
def test_invalid_configs_name_the_field(changes: dict, field: str) -> None:
    with pytest.raises(InvalidConfig, match=f"but got {field}="):
        SpecConfig(**changes)


def test_config_json_round_trip() -> None:
    from specstate.schema import config_from_data

    c = SpecConfig(disable_batch_threshold=None, cuda_graph_bs_override=(1, 2, 4))
    assert config_from_data(c.to_json()) == c
    with pytest.raises(InvalidConfig, match="bogus: unknown field"):
        config_from_data({"bogus": 1})


def test_the_old_json_readers_still_work_with_a_warning() -> None:
    """``SpecConfig.from_json`` and ``action_from_json`` moved to the schema (the model imports no
    schema): the old names give the same values, warning with the replacement."""
    from specstate.errors import SpecstateDeprecationWarning
    from specstate.model import Arrive

    c = SpecConfig(disable_batch_threshold=None)
    with pytest.warns(SpecstateDeprecationWarning, match="use specstate.schema.config_from_data"):
        assert SpecConfig.from_json(c.to_json()) == c
    with pytest.warns(SpecstateDeprecationWarning, match="use specstate.schema.action_from_data"):
        from specstate.model.actions import action_from_json
    assert action_from_json({"op": "arrive", "prompt_len": 3, "max_new_tokens": 2}) == Arrive(3, 2)


def test_user_subclass_of_eagle_draft_input_runs_the_seed_sweep_without_false_alarm() -> None:
    """A user's ``EagleDraftInput`` subclass with an extra per-row field: kinds compare with
    ``isinstance``, the extra field is filtered and merged because it is discovered."""
    from specstate.check import Run
    from specstate.model.spec_info import batch_fields
    from specstate.scenarios import get_scenario
    from tests.user_variants.mine import MyDraftInput

    assert "accept_length" in batch_fields(MyDraftInput)
    seen: set[str | None] = set()
    sc = get_scenario("seed-sweep")
    run = Run(sc.config, "tests.user_variants.mine:SubclassedDraftInput",
              on_step=lambda o: seen.update(f.spec_info for f in o.forwards))
    import random
    sc.play(run, random.Random(0))
    r = run.result()
    assert r.ok, r.first.describe()  # type: ignore[union-attr]
    assert "MyDraftInput" in seen and r.stats["fallback_decode"] > 0 and r.stats["spec_decode"] > 0
    assert isinstance(run.state.running.spec_info, MyDraftInput) or run.state.running.is_empty()
