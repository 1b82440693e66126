"""A variant is resolved once, where a call enters, and travels as one object (issue 26).

A ``Variant`` built here is registered under no name, so any code below the entry that looked
its name up again would raise ``UnknownName``: the fuzzer, the model run, the graph and the
``specstate.testing`` API run it end to end. And the family comes with the variant: a second
family of the overlap scheduler loop (as 0.5.23 is) with its own switch threshold draws the
graph with that threshold, where the config's ``disable_overlap_schedule`` would say 0.5.17's."""

from __future__ import annotations

import dataclasses
from typing import Iterator

import pytest
from hypothesis import settings

from specstate.errors import UnknownName
from specstate.model import Variant, as_variant, get_variant

NAME = "unregistered-copy"


def _copy(of: str, name: str, *, family: str | None = None) -> Variant:
    """``of``'s operations and config changes in a new object with no base (so nothing is
    reached through a name), of ``family`` (default ``of``'s)."""
    v = get_variant(of)
    return Variant(name=name, summary=f"a copy of {of}", overrides=dict(v.all_overrides()),
                   config_changes=dict(v.all_config_changes()), family=family or v.family_name,
                   expected_invariant=v.expected_invariant, correct=v.correct)


def test_as_variant_passes_an_object_through_and_resolves_a_name_once() -> None:
    v = _copy("fixed-threshold", NAME)
    assert as_variant(v) is v
    assert as_variant("fixed-threshold") is get_variant("fixed-threshold")
    with pytest.raises(UnknownName):
        as_variant(NAME)  # the copy is known by no name: a look-up below the entry would fail like this


def test_an_unregistered_planted_bug_is_caught_by_the_model_run() -> None:
    from specstate.check import run_actions
    from specstate.scenarios import get_scenario, play_scenario

    bug = _copy("kv-leak-spec-tail", "unregistered-leak")
    r = play_scenario("bug:kv-leak-spec-tail", bug, 0)
    assert r.first is not None and r.first.invariant == "kv-accounting" and r.variant == "unregistered-leak"
    again = run_actions(get_scenario("bug:kv-leak-spec-tail").config, bug, r.actions)
    assert again.first is not None and again.first.invariant == "kv-accounting"
    fixed = play_scenario("bug:kv-leak-spec-tail", _copy("fixed-threshold", NAME), 0)
    assert fixed.ok  # the copy of the corrected default passes the same story


def test_the_fuzzer_and_the_testing_api_run_an_unregistered_variant() -> None:
    from specstate import testing
    from specstate.fuzz.generate import fuzz_seed
    from specstate.fuzz.runner import fuzz_variant, wanted_witnesses

    v = _copy("fixed-threshold", NAME)
    report = fuzz_variant(v, settings(max_examples=15, deadline=None, database=None, derandomize=True))
    assert report.variant == NAME and report.model is v and report.result is None and report.witnesses
    assert wanted_witnesses(v) == wanted_witnesses("fixed-threshold")
    _, result = fuzz_seed(3, v, length=40)
    assert result.variant == NAME and result.ok
    r = testing.fuzz(v, profile="dev", max_examples=10, quiet=True, check_witnesses=False)
    assert r.ok and r.variant == NAME and NAME in r.subject


def test_the_graph_runs_an_unregistered_variant() -> None:
    from specstate.graph.render import to_dot
    from specstate.graph.sources import exploration_graph, fuzz_graph
    from specstate.graph.transitions import SweepBounds
    from specstate.scenarios import SMALL

    v = _copy("fixed-threshold", NAME)
    bounds = SweepBounds(levels=(1, 3), max_depth=8, max_states=400)
    g = exploration_graph(SMALL, v, bounds)
    assert g.nodes and g.family == "sglang-0.5.12" and g.title.startswith(NAME)
    assert NAME in to_dot(g)
    f = fuzz_graph(SMALL, v, 2, length=30, bounds=bounds)
    assert any(e.count for e in f.edges.values())


@pytest.fixture()
def overlap_family_t2() -> Iterator[str]:
    """A test-only second family of the overlap loop (0.5.17's, with switch threshold 2),
    registered for one test and taken out again."""
    from specstate.model.family_registry import _FAMILIES, get_family, register_family

    base = get_family("sglang-0.5.17")
    fam = dataclasses.replace(base, name="sglang-test-t2", base=base.name, switch_threshold=lambda c: 2)
    register_family(fam)
    try:
        yield fam.name
    finally:
        _FAMILIES.pop(fam.name, None)


def test_a_second_overlap_family_draws_its_own_threshold(overlap_family_t2: str) -> None:
    from specstate.graph.abstraction import threshold
    from specstate.graph.render import to_dot
    from specstate.graph.sources import exploration_graph
    from specstate.graph.transitions import SweepBounds
    from specstate.model.family_registry import _family_from_loop, get_family

    ours = _copy("upstream-adaptive", "unregistered-t2", family=overlap_family_t2)
    assert ours.engine_family is get_family(overlap_family_t2)
    cfg = ours.configure(get_family("sglang-0.5.17").graph_config)
    base_t = get_family("sglang-0.5.17").switch_threshold(cfg)
    assert base_t is not None and base_t != 2
    # the config names only its loop: inferring the family from it would give 0.5.17's threshold
    assert cfg.disable_overlap_schedule is False and _family_from_loop(cfg).name == "sglang-0.5.17"
    assert threshold(cfg, ours.engine_family) == 2
    bounds = SweepBounds(levels=(1, 2, 3), max_depth=6, max_states=300)
    g = exploration_graph(get_family("sglang-0.5.17").graph_config, ours, bounds)
    assert g.family == overlap_family_t2
    assert "T = 2," in to_dot(g)
    two_rows = [n for n in g.nodes.values() if getattr(n, "batch", None) in ("= T", "> T", "> T, > capture")]
    assert two_rows  # bursts of 2 and 3 reach T = 2 and above; under 0.5.17's T they would all be "< T"
    upstream = exploration_graph(get_family("sglang-0.5.17").graph_config, "upstream-adaptive", bounds)
    assert f"T = {base_t}," in to_dot(upstream)
    assert not any(getattr(n, "batch", None) in ("= T", "> T", "> T, > capture") for n in upstream.nodes.values())


def test_a_variant_object_goes_through_the_fuzzer_s_failure_path(tmp_path) -> None:  # noqa: ANN001
    """A failure found on a ``Variant`` object is minimised and saved under its name (the object,
    not its name, reaches ``record_failure`` and the minimiser)."""
    from specstate import testing
    from specstate.fuzz.trace import load_trace

    v = get_variant("naive-threshold")
    r = testing.fuzz(v, profile="ci", max_examples=60, quiet=True, failures=tmp_path)
    assert not r.ok and r.violation is not None and r.violation.invariant == v.expected_invariant
    assert r.trace_path is not None and load_trace(r.trace_path).variant == "naive-threshold"
    assert 0 < r.details["minimized_length"] <= r.details["shrunk_length"]


def test_the_testing_api_plays_a_scenario_on_an_unregistered_variant(tmp_path) -> None:  # noqa: ANN001
    from specstate import testing

    r = testing.run_scenario(_copy("kv-leak-spec-tail", "unregistered-leak"), "bug:kv-leak-spec-tail", failures=tmp_path,
                             quiet=True)
    assert not r.ok and r.violation is not None and r.violation.invariant == "kv-accounting"
    assert r.variant == "unregistered-leak" and "unregistered-leak" in r.subject


def test_explore_and_prove_run_an_unregistered_variant_and_find_its_bug() -> None:
    from specstate.fuzz.explore import DEFAULT_EXPLORE_CONFIG, default_alphabet, explore, shortest_violation
    from specstate.prove import prove

    bug = _copy("kv-leak-spec-tail", "unregistered-leak")
    r = explore(DEFAULT_EXPLORE_CONFIG, bug, alphabet=default_alphabet(max_live=2, max_arrivals=2), max_depth=5, jobs=1)
    assert r.variant == "unregistered-leak" and r.counterexample and r.violations[0].invariant == "kv-accounting"
    path, _ = shortest_violation(DEFAULT_EXPLORE_CONFIG, bug, default_alphabet(max_live=2, max_arrivals=2), max_depth=5)
    assert path is not None and len(path) == len(r.counterexample)
    from specstate.scenarios import SEED_CONFIG

    held = prove(SEED_CONFIG, _copy("fixed-threshold", NAME), 8)
    assert held.variant == NAME and held.holds
    naive = prove(SEED_CONFIG, _copy("naive-threshold", "unregistered-naive"), 8)
    assert naive.failure is not None and naive.failure.bound == 6
