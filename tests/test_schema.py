"""The file schema and the model's own strictness: no coercion, bounds, errors that name the
field or the action, and a ``kv-accounting`` invariant whose cost is what a step changed."""

from __future__ import annotations

import pytest

from specstate.check import Run, run_actions
from specstate.errors import InvalidAction, InvalidConfig, TraceFormatError
from specstate.fuzz.generate import generate_case
from specstate.invariants._always import _live_slots
from specstate.model import Arrive, SpecConfig, Step, initial_state, step
from specstate.schema import action_from_data, describe_error, parse_trace


@pytest.mark.parametrize("changes, field", [
    ({"target_hidden_size": 8.5}, "target_hidden_size"),   # was a worker-crash of a correct variant
    ({"speculative_num_steps": True}, "speculative_num_steps"),
    ({"speculative_num_steps": "3"}, "speculative_num_steps"),
    ({"cuda_graph_max_bs": 10**9}, "cuda_graph_max_bs"),   # was a minute and 3 GB
    ({"schedule_conservativeness": float("inf")}, "schedule_conservativeness"),
    ({"cuda_graph_bs_override": (1, 2.5)}, "cuda_graph_bs_override"),
])
def test_config_is_strict_from_python_too(changes: dict, field: str) -> None:
    with pytest.raises(InvalidConfig, match=field):
        SpecConfig(**changes)


@pytest.mark.parametrize("data, path", [
    ({"op": "arrive", "prompt_len": "7", "max_new_tokens": 2}, "prompt_len"),
    ({"op": "arrive", "prompt_len": 2.7, "max_new_tokens": 2}, "prompt_len"),
    ({"op": "step", "accept": "1234"}, "accept"),
    ({"op": "abort", "rid": True}, "rid"),
    ({"op": "step", "eos": [-1]}, "eos[0]"),
    ({"op": "step", "extra": 1}, "extra"),
])
def test_actions_are_not_coerced(data: dict, path: str) -> None:
    with pytest.raises(TraceFormatError, match=path.replace("[", r"\[").replace("]", r"\]")):
        action_from_data(data)


def test_an_eos_for_a_request_that_never_arrived_is_an_error_naming_the_action() -> None:
    cfg = SpecConfig()
    with pytest.raises(InvalidAction, match=r"actions\[1\].*eos"):
        run_actions(cfg, "fixed-threshold", [Arrive(3, 2), Step(eos=(-1,))])
    with pytest.raises(InvalidAction, match=r"actions\[1\].*eos"):
        run_actions(cfg, "fixed-threshold", [Arrive(3, 2), Step(eos=(4,))])


def test_errors_name_the_file_and_the_json_path() -> None:
    text = '{"format": 1, "variant": "x", "config": {}, "actions": [{"op": "step"}, {"op": "arrive", "prompt_len": 0}]}'
    with pytest.raises(TraceFormatError) as e:
        parse_trace(text, "t.json")
    assert str(e.value).startswith("t.json: actions[1].")
    assert "\n" not in str(e.value)
    from pydantic import BaseModel, ValidationError

    class M(BaseModel):
        a: int

    with pytest.raises(ValidationError) as v:
        M.model_validate({"a": "x"})
    assert describe_error(v.value, "f") == "f: a: expected a valid integer, unable to parse string as an integer, got 'x' (str)"


@pytest.mark.parametrize("seed", range(12))
def test_incremental_kv_accounting_agrees_with_a_full_recount(seed: int) -> None:
    config, actions = generate_case(seed, length=200)
    run = Run(config, "fixed-threshold")
    state = run.state
    for a in actions:
        o = step(state, a, run.ops)
        slots, count, _, _ = _live_slots(o)
        live = [r for r in o.state.reqs if r.live]
        assert (slots, count) == (sum(r.own_slots for r in live), len(live))
        state = o.state


def test_kv_accounting_looks_at_what_a_step_changed() -> None:
    """2,000 arrivals: the invariant inspects each new request once (it was every request at
    every step: quadratic, about 2 million here). Counted, not timed: 20,000 arrivals cost 4.9 s of
    the fast tier only in copying the growing request tuple, and a count this size tells the two apart."""
    cfg = SpecConfig(target_kv_pool_size=1 << 20, draft_kv_pool_size=1 << 20)
    state, inspected = initial_state(cfg), 0
    ops = Run(cfg, "fixed-threshold").ops
    for _ in range(2_000):
        o = step(state, Arrive(4, 2), ops)
        inspected += len(_live_slots(o)[2])
        state = o.state
    assert inspected == 2_000


def test_the_removed_pydantic_models_name_their_replacement() -> None:
    import specstate.schema as schema

    for old, new in (("TraceFile", "read_trace"), ("config_model", "config_schema")):
        with pytest.raises(AttributeError, match=rf"specstate\.schema\.{old} was removed.*specstate\.schema\.{new}"):
            getattr(schema, old)
        assert callable(getattr(schema, new))
