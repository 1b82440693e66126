"""``explore(..., jobs=2)`` (``specstate.fuzz.explore_parallel``) is the serial search on two
processes: the same states, transitions, depth, completeness, counterexample, witnesses and
graph, whatever the bounds cut."""

from __future__ import annotations

import pytest

from specstate.errors import EnvironmentProblem, VariantFailure
from specstate.fuzz.explore import DEFAULT_EXPLORE_CONFIG, ExploreResult, default_alphabet, explore
from specstate.fuzz.explore_parallel import _balance, can_fork
from specstate.model import Step
from specstate.testing._api import explore_config

pytestmark = pytest.mark.skipif(not can_fork(), reason="the parallel search forks")


def _same(a: ExploreResult, b: ExploreResult) -> None:
    assert (a.states, a.transitions, a.max_depth_reached, a.complete) == (b.states, b.transitions, b.max_depth_reached,
                                                                           b.complete)
    assert a.counterexample == b.counterexample
    assert [v.describe() for v in a.violations] == [v.describe() for v in b.violations]
    assert a.witnesses == b.witnesses


#: depth 6 is past 1000 states for each (fixed 1908, naive 1865 with all 5 violations; depth 7: 6600, 3.4 times
#: the search for the same levels split over the workers)
@pytest.mark.parametrize("variant,depth", [("fixed-threshold", 6), ("naive-threshold", 6), ("stale-graph-padding", 6),
                                           ("upstream-adaptive", 6)])
def test_parallel_search_is_the_serial_one(variant: str, depth: int) -> None:
    cfg = explore_config(variant)
    serial = explore(cfg, variant, max_depth=depth, keep_graph=True)
    par = explore(cfg, variant, max_depth=depth, keep_graph=True, jobs=2)
    _same(serial, par)
    assert serial.states > 1000
    # node ids, labels and edges as well: the merge is the serial loop
    assert list(serial.graph.nodes(data=True)) == list(par.graph.nodes(data=True))
    assert list(serial.graph.edges(data=True)) == list(par.graph.edges(data=True))


@pytest.mark.parametrize("bounds", [{"max_states": 777}, {"max_states": 1}, {"stop_at_first": True}, {"max_depth": 0}])
def test_parallel_search_stops_where_the_serial_one_does(bounds: dict) -> None:
    kw = {"max_depth": 7, **bounds}
    serial = explore(DEFAULT_EXPLORE_CONFIG, "naive-threshold", keep_graph=False, **kw)
    par = explore(DEFAULT_EXPLORE_CONFIG, "naive-threshold", keep_graph=False, jobs=2, **kw)
    _same(serial, par)


def test_parallel_progress_is_reported_per_node() -> None:
    seen: list[list[tuple[int, int, int]]] = [[], []]
    for jobs, out in ((1, seen[0]), (2, seen[1])):
        explore(DEFAULT_EXPLORE_CONFIG, "fixed-threshold", max_depth=5, keep_graph=False, jobs=jobs,
                on_node=lambda s, t, d, out=out: out.append((s, t, d)))
    assert seen[0] == seen[1] and len(seen[0]) > 50


def test_a_failing_operation_is_raised_where_the_serial_search_raises_it() -> None:
    def alphabet(s):  # noqa: ANN001, ANN202  (an invalid action once a request has arrived)
        return [Step(eos=(7,))] if s.reqs else default_alphabet()(s)[:1]

    errors = []
    for jobs in (1, 2):
        with pytest.raises(Exception) as e:
            explore(DEFAULT_EXPLORE_CONFIG, "fixed-threshold", alphabet=alphabet, max_depth=4, jobs=jobs)
        errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1]
    assert not issubclass(errors[0][0], VariantFailure)


def test_a_worker_that_dies_is_a_clear_error() -> None:
    import os

    def alphabet(s):  # noqa: ANN001, ANN202  (the worker holding a 2-request state dies)
        if len(s.reqs) >= 2:
            os._exit(3)
        return default_alphabet()(s)

    with pytest.raises(EnvironmentProblem, match=r"exited with code 3.*--jobs 1"):
        explore(DEFAULT_EXPLORE_CONFIG, "fixed-threshold", alphabet=alphabet, max_depth=6, jobs=2)


def test_balance_spreads_the_next_level_and_moves_nothing_when_even() -> None:
    keeps = [[(0, i, 100 + i) for i in range(60)], [(1, i, 200 + i) for i in range(10)]]
    gives = _balance(keeps, 2)
    assert gives[0][0] == 1 and len(gives[0][1]) == 25 and gives[1][1] == []
    even = [[(0, i, i) for i in range(30)], [(1, i, 50 + i) for i in range(31)]]
    assert all(not g for _, g in _balance(even, 2))
