"""``benchmarks/floor.py`` counts what it says it counts (Python calls, ``evolve`` copies by class,
dataclass constructions, per unit of work) and prices and adds them up as its formula says."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from benchmarks import floor
from specstate.model.values import evolve


@dataclass(frozen=True)
class _V:
    a: int = 0
    b: int = 0


def _helper(v: _V) -> _V:
    return evolve(v, a=v.a + 1)


def test_census_counts_calls_copies_and_constructions_per_unit():
    def work() -> int:
        v = _V()  # one construction
        for _ in range(4):  # per unit: one call of _helper, one evolve
            v = _helper(v)
        return 2  # two units of work
    c = floor.census(work)
    assert c["units"] == 2
    assert c["copies"] == 2.0 and c["by_class"] == {"_V": 2.0}
    assert c["inits"] == 0.5 and c["init_sample"] == [(_V, {"a": 0, "b": 0})]
    assert c["calls"] >= (1 + 4 + 4 + 1) / 2  # work, 4 x _helper, 4 x evolve, the __init__
    assert [type(o).__name__ for o, _ in c["sample"]] == ["_V"] * 4 and c["sample"][3][1] == {"a": 4}


@dataclass(frozen=True)
class _Checked:
    n: int

    def __post_init__(self) -> None:
        _helper(_V(self.n))


def test_a_post_init_and_what_it_calls_are_inside_the_construction():
    _helper(_V())  # evolve's first call for a class also reads its fields: not inside the census
    c = floor.census(lambda: (_Checked(3), _V(), 1)[2])
    assert c["inits"] == 2.0 and [cls for cls, _ in c["init_sample"]] == [_Checked, _V]  # the outermost ones
    assert c["init_sample"][0][1] == {"n": 3}
    assert c["in_inits"] == 4.0  # __post_init__, _V's __init__, _helper, evolve: in _Checked's price
    assert c["copies"] == 0.0 and c["by_class"] == {}


def test_census_of_the_model_sees_its_copies():
    from benchmarks import perf

    c = floor.census(floor.model_work("fixed-threshold", perf._cases("fixed-threshold", range(1), 40)))
    assert c["units"] > 0 and c["copies"] > 1 and c["calls"] > c["copies"]
    assert {"ModelState", "Tx"} <= set(c["by_class"])


def test_census_refuses_work_that_did_nothing():
    with pytest.raises(ValueError, match="at least one unit"):
        floor.census(lambda: 0)


def test_floor_adds_copies_and_other_calls_at_their_prices(monkeypatch):
    monkeypatch.setattr(floor, "copy_us", lambda sample: 2.0)
    monkeypatch.setattr(floor, "construct_us", lambda sample: 1.0)
    monkeypatch.setattr(floor, "call_us", lambda: 0.5)
    got = floor.floor({"calls": 10.0, "copies": 3.0, "inits": 2.0, "in_inits": 1.0, "sample": [], "init_sample": []})
    assert got == {"copy_us": 2.0, "construct_us": 1.0, "call_us": 0.5, "floor_us": 3 * 2.0 + 2 * 1.0 + 4 * 0.5}


def test_prices_are_positive_and_a_copy_costs_more_than_a_call():
    """Each price is the best of its rounds; 9 rounds, not 3: under the fast tier's two busy workers
    a 3-round price once came out with the copy not above the call (2026-12-07), where a quiet
    machine measures them 40x apart."""
    sample = [(_V(), {"a": i}) for i in range(200)]
    call = floor.call_us(n=20_000, rounds=9)
    assert call > 0 and floor.copy_us(sample, rounds=9) > call
    assert floor.construct_us([(_V, {"a": i, "b": 0}) for i in range(200)], rounds=9) > call
    assert floor.construct_us([]) == 0.0


def test_budgets_are_the_goals_per_unit():
    b = floor.budgets(10_000.0, 300_000.0)
    assert b["model_us"] == pytest.approx(1e6 / 30_000) and b["explore_us"] == pytest.approx(1e6 / 30_000)


def _mmm(x: float) -> dict[str, float]:
    return {"min": x, "median": x, "max": x}


def test_the_report_says_out_of_reach_only_when_the_floor_is_above_the_budget():
    from benchmarks import report

    census = {"calls": 100.0, "copies": 10.0, "inits": 1.0, "by_class": {"Tx": 10.0}}
    floor_ = {"depth": 8, "model/census": census, "explore/census": census}
    for name, fl, budget in (("model", 20.0, 40.0), ("explore", 90.0, 30.0)):
        floor_.update({f"{name}/copy_us": _mmm(1.0), f"{name}/construct_us": _mmm(0.5), f"{name}/call_us": _mmm(0.03),
                       f"{name}/floor_us": _mmm(fl),
                       f"{name}/budget_us": _mmm(budget), f"{name}/floor_over_budget": _mmm(fl / budget)})
    after = {"floor": floor_, "machine/fixed-threshold": {"value": _mmm(2000.0), "baseline": _mmm(8000.0)},
             "ceiling/machine": {"share": _mmm(0.4), "ceiling": _mmm(0.4)}}
    model, explore, machine = report._floor_rows(after)[2:]
    assert "fit in 50% of the budget" in model and "**0.50 / 0.50 / 0.50**" in model
    assert "out of reach under this decomposition" in explore and "**3.00 / 3.00 / 3.00**" in explore
    # the harness: 500 us a transition, 60% outside the model = 300 us, + the model's floor 20 = 320 vs 250
    assert "300 + 20 = 320 | 250" in machine and "**1.28**" in machine and "out of reach" in machine
    assert report._floor_rows({}) == []
