"""The model's incremental bookkeeping gives what a full recount gives.

The speed work keeps per-state bookkeeping beside the fields (the live-request index, the
requests a step changed, torch shape checks remembered per shape) so a step costs what it
changed. Each test here recomputes the same thing from scratch on every step of generated
cases, bug variants included, and compares.
"""

from __future__ import annotations

from typing import Any

import pytest

from specstate.check import Run
from specstate.fuzz.generate import generate_case
from specstate.invariants._always import _live_slots, _own_requests_to_check
from specstate.invariants import check_outcome
from specstate.model import get_variant, step
from specstate.model import tensors
from specstate.model.sglang_0_5_17 import identities

#: bound by ``_heavy_imports`` when the module's first test runs: a module-level import (or a
#: ``lazy_module`` stand-in, which pytest's collector touches) would import torch at collection
#: (``tests/test_startup.py`` checks that collecting the suite does not)
torch: Any = None


@pytest.fixture(autouse=True, scope="module")
def _heavy_imports() -> None:
    global torch
    import torch as module

    torch = module


V2_VARIANTS = ("upstream-adaptive", "v2-commit-after-finish", "v2-single-reserve", "v2-alloc-follows-active-steps")


@pytest.mark.parametrize("variant", V2_VARIANTS)
@pytest.mark.parametrize("seed", range(4))
def test_v2_request_identities_checked_on_what_changed_equal_a_full_check(variant: str, seed: int) -> None:
    """Up to and including the first violating step (a run stops there), the requests the
    v2 ``kv-accounting`` looks at find exactly what looking at every request finds."""
    config, actions = generate_case(seed, length=200, family=get_variant(variant).family_name)
    run = Run(config, variant)
    state, checked, everyone = run.state, 0, 0
    for a in actions:
        o = step(state, a, run.ops)
        violations = check_outcome(o)  # the step's bookkeeping, as Run.apply leaves it
        subset = _own_requests_to_check(o, identities, _live_slots(o).changed_rids)
        full = list(identities.request_kv(o.state))
        assert list(identities.request_kv(o.state, subset)) == full
        checked += len(subset) if subset is not None else len(o.state.reqs)
        everyone += len(o.state.reqs)
        if violations:
            break
        state = o.state
    assert checked < everyone  # it did look at fewer requests


@pytest.mark.parametrize("variant", ("fixed-threshold", "naive-threshold", "upstream-adaptive"))
@pytest.mark.parametrize("seed", range(6))
def test_live_index_equals_a_recount(variant: str, seed: int) -> None:
    config, actions = generate_case(seed, length=200, family=get_variant(variant).family_name)
    run = Run(config, variant)
    state = run.state
    for a in actions:
        state = step(state, a, run.ops).state
        want = tuple(r.rid for r in state.reqs if r.live)
        assert state.live_rids() == want
        holding = sum(1 for r in state.reqs if r.live and r.status.value in ("running", "prefilling") and r.kv_allocated_len)
        assert state.req_slots_held() == holding


def test_a_shape_check_that_failed_runs_torch_again_and_a_success_is_remembered() -> None:
    calls: list[int] = []

    def bad() -> None:
        calls.append(1)
        torch.zeros((3,)).copy_(torch.zeros((5,)))

    for _ in range(3):
        with pytest.raises(RuntimeError, match="must match the size"):
            tensors.once(("test-bad-copy", 3, 5), bad)
    assert len(calls) == 3 and not tensors.passed(("test-bad-copy", 3, 5))

    def good() -> tuple[int, ...]:
        calls.append(2)
        return tensors.shape_of(torch.cat([torch.zeros((2, 4)), torch.zeros((1, 4))]))

    assert tensors.once(("test-good-cat",), good) == (3, 4) == tensors.once(("test-good-cat",), good)
    assert calls.count(2) == 1 and tensors.passed(("test-good-cat",))


def test_remembered_shape_ops_still_raise_pytorchs_own_error() -> None:
    """``cat_rows`` / ``select_rows`` after a success with other shapes still fail for real."""
    assert tensors.cat_rows((2, 4), (3, 4)) == (5, 4)
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        tensors.cat_rows((2, 4), (3, 5))
    assert tensors.select_rows((4, 2), [0, 3]) == (2, 2)
    with pytest.raises(IndexError):
        tensors.select_rows((4, 2), [0, 4])
    with pytest.raises(IndexError):  # again: a failure is never remembered
        tensors.select_rows((4, 2), [0, 4])


def test_guarded_once_reports_every_failure_and_builds_no_report_after_a_success() -> None:
    from specstate.model.runner import ModelledCrash, guarded_once

    built: list[int] = []

    def shapes() -> dict:
        built.append(1)
        return {"dst": [3], "src": [5]}

    for _ in range(2):  # a failing op: a crash with its shapes, every time
        with pytest.raises(ModelledCrash) as e:
            guarded_once("test.py::bad", ("test-guarded-bad",), shapes,
                         lambda: torch.zeros((3,)).copy_(torch.zeros((5,))))
        assert e.value.shapes == {"dst": [3], "src": [5]} and isinstance(e.value.cause, RuntimeError)
    assert len(built) == 2
    for _ in range(3):  # a passing op: the report is built until it passed once, then never
        assert guarded_once("test.py::good", ("test-guarded-good",), shapes, lambda: 7) == 7
    assert len(built) == 3


def test_check_once_keeps_no_tensor_and_reports_a_failure_every_time() -> None:
    from specstate.model.runner import ModelledCrash, check_once

    made: list[torch.Tensor] = []

    def op() -> torch.Tensor:
        made.append(torch.zeros((4,)) + torch.zeros((4,)))
        return made[-1]

    assert check_once("test::add", ("test-check-once", 4), lambda: {"a": [4]}, op) is None
    check_once("test::add", ("test-check-once", 4), lambda: {"a": [4]}, op)
    assert len(made) == 1 and tensors.passed(("test-check-once", 4))
    assert tensors.once(("test-check-once", 4), op) is None  # the memo holds no tensor
    for _ in range(2):
        with pytest.raises((RuntimeError, ModelledCrash)):
            check_once("test::bad", ("test-check-once-bad",), lambda: {"a": [3], "b": [5]},
                       lambda: torch.zeros((3,)) + torch.zeros((5,)))
    assert not tensors.passed(("test-check-once-bad",))
