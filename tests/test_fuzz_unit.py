"""Fast unit tests of the fuzzer's modules (no Hypothesis search)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from specstate.check import run_actions
from specstate.fuzz.explore import DEFAULT_EXPLORE_CONFIG, canonical, default_alphabet, explore, shortest_violation
from specstate.fuzz.generate import generate_case, random_actions
from specstate.fuzz.minimize import ddmin, from_items, minimize_failure, to_items
from specstate.fuzz.reproduce import EXIT_MISMATCH, EXIT_VIOLATION, reproduce_file, reproduce_seed
from specstate.fuzz.trace import Trace, load_trace, save_trace
from specstate.model import Abort, Arrive, SpecConfig, Step, initial_state

#: the roomy, gap-free config these tests were written for (the explore default is tight)
SMALL = DEFAULT_EXPLORE_CONFIG.with_(target_kv_pool_size=512, draft_kv_pool_size=512, cuda_graph_bs_override=None)
CRASH = [Arrive(4, 2), Arrive(4, 2), Arrive(4, 2), Step(), Step()]  # bs 3 > threshold 2 -> naive crash


def test_trace_round_trips_through_json(tmp_path: Path) -> None:
    t = Trace(SMALL.with_(cuda_graph_bs_override=(1, 3)), "naive-threshold",
              [Arrive(3, 4), Abort(0), Step(accept=(2, 1), eos=(0,))], {"invariant": "x", "step": 3}, seed=7)
    path = save_trace(t, tmp_path)
    back = load_trace(path)
    assert back.to_json() == t.to_json()
    assert back.config == t.config and back.actions == t.actions


def test_save_trace_is_atomic_and_leaves_no_temporaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = Trace(SMALL, "fixed-threshold", [Arrive(1, 1)])
    path = save_trace(t, tmp_path, name="t.json")
    before = path.read_text()

    def boom(*a: object, **k: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "link", boom)
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        save_trace(Trace(SMALL, "always-spec", [Arrive(2, 2)]), tmp_path, name="t.json")
    with pytest.raises(OSError):
        save_trace(Trace(SMALL, "always-spec", [Arrive(2, 2)]), tmp_path, name="t.json", overwrite=True)
    assert path.read_text() == before  # the old file is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]  # no .trace-*.json left behind


def test_save_trace_never_replaces_another_trace(tmp_path: Path) -> None:
    a, b = Trace(SMALL, "fixed-threshold", [Arrive(1, 1)]), Trace(SMALL, "fixed-threshold", [Arrive(2, 2)])
    pa, pb, again = save_trace(a, tmp_path), save_trace(b, tmp_path), save_trace(a, tmp_path)
    assert pa != pb and again == pa  # unseeded: named by content, so the same trace keeps its name
    assert load_trace(pa).actions == [Arrive(1, 1)] and load_trace(pb).actions == [Arrive(2, 2)]
    same_seed = [save_trace(Trace(SMALL, "fixed-threshold", [Arrive(n, 1)], seed=3), tmp_path) for n in (1, 2)]
    assert same_seed[0].name == "fixed-threshold-ok-seed3.json" and same_seed[1].name.startswith("fixed-threshold-ok-seed3-")
    (tmp_path / ".trace-999999999-stale.json").write_text("{")  # a writer killed mid-write (no such pid)
    save_trace(b, tmp_path)
    assert not list(tmp_path.glob(".trace-*"))


def test_trace_names_are_sanitised(tmp_path: Path) -> None:
    t = Trace(SMALL, "fixed-threshold", [Arrive(1, 1)], violation={"invariant": "../../x", "step": 1})
    path = save_trace(t, tmp_path / "f")
    assert path.parent == tmp_path / "f" and "/" not in path.name and ".." not in path.name


def test_ddmin_finds_a_one_minimal_subset() -> None:
    items = list(range(40))
    got = ddmin(items, lambda xs: 7 in xs and 23 in xs and 31 in xs)
    assert got == [7, 23, 31]


def test_ddmin_keeps_the_whole_list_when_nothing_can_go() -> None:
    assert ddmin([1, 2], lambda xs: xs == [1, 2]) == [1, 2]


def test_items_renumber_rids_when_an_arrival_is_dropped() -> None:
    actions = [Arrive(1, 1), Arrive(2, 2), Arrive(3, 3), Abort(2), Step(eos=(0, 2))]
    items = to_items(actions)
    kept = [items[0], items[2], items[3], items[4]]  # drop rid 1
    assert from_items(kept) == [Arrive(1, 1), Arrive(3, 3), Abort(1), Step(eos=(0, 1))]
    assert from_items([items[1], items[3], items[4]]) == [Arrive(2, 2), Step(eos=())]  # abort of a dropped arrival goes


def test_minimize_reaches_the_bfs_minimum_and_proves_it() -> None:
    noisy = [Arrive(30, 9), Step(accept=(3,)), Arrive(12, 7), Arrive(9, 5), Step(), Abort(0), Arrive(4, 8)] + CRASH
    m = minimize_failure(SMALL, "naive-threshold", noisy)
    assert m.result.first is not None and m.result.first.invariant == "worker-crash"
    assert len(m.actions) == 5 and m.proven_minimal
    assert all(a.prompt_len == 1 and a.max_new_tokens <= 2 for a in m.actions if isinstance(a, Arrive))


def test_minimize_rejects_a_passing_trace() -> None:
    with pytest.raises(ValueError, match="Expected a failing trace"):
        minimize_failure(SMALL, "fixed-threshold", CRASH)


def test_canonical_state_forgets_step_counters() -> None:
    s = initial_state(SMALL)
    assert canonical(s.evolve(step_index=9)) == canonical(s)
    assert canonical(s.evolve(kv_available=1)) != canonical(s)


def test_bfs_finds_the_shortest_counterexample_on_a_toy() -> None:
    r = explore(SMALL, "naive-threshold", alphabet=default_alphabet(max_live=3, max_arrivals=3, max_new=(2,)),
                max_depth=6)
    assert r.counterexample is not None and len(r.counterexample) == 5
    assert r.violations and r.violations[0].invariant == "worker-crash"
    assert r.graph.number_of_nodes() == r.states and r.states == len(set(r.graph.nodes))
    assert sum(d["count"] for _, _, d in r.graph.edges(data=True)) == r.transitions


def test_bfs_on_a_correct_variant_finds_nothing_and_is_complete() -> None:
    r = explore(SMALL, "fixed-threshold", alphabet=default_alphabet(max_live=2, max_arrivals=2, max_new=(2,)),
                max_depth=30)
    assert r.counterexample is None and r.complete


def test_shortest_violation_respects_the_depth_bound() -> None:
    alphabet = default_alphabet(max_live=3, max_arrivals=3, max_new=(2,))
    assert shortest_violation(SMALL, "naive-threshold", alphabet, max_depth=4) == (None, True)
    path, exhaustive = shortest_violation(SMALL, "naive-threshold", alphabet, max_depth=5)
    assert exhaustive and path is not None and len(path) == 5


def test_generator_is_a_function_of_the_seed() -> None:
    assert generate_case(11) == generate_case(11)
    assert generate_case(11) != generate_case(12)
    cfg = SpecConfig()
    assert random_actions(cfg, random.Random(3), length=50) == random_actions(cfg, random.Random(3), length=50)


def test_generated_actions_are_valid_in_every_state() -> None:
    for seed in range(20):
        cfg, actions = generate_case(seed, length=120)
        run_actions(cfg, "fixed-threshold", actions)  # raises InvalidAction on a bad abort


def test_reproduce_file_is_byte_identical_and_checks_the_recorded_violation(tmp_path: Path) -> None:
    result = run_actions(SMALL, "naive-threshold", CRASH)
    path = save_trace(Trace(SMALL, "naive-threshold", result.actions, result.first.to_json()), tmp_path, name="c.json")
    reports = {reproduce_file(path).report for _ in range(3)}
    assert len(reports) == 1
    rep = reproduce_file(path)
    assert rep.exit_code == EXIT_VIOLATION and "same violation as recorded: worker-crash at step 5" in rep.report
    data = json.loads(path.read_text())
    data["violation"]["step"] = 4
    path.write_text(json.dumps(data))
    assert reproduce_file(path).exit_code == EXIT_MISMATCH


def test_reproduce_seed_is_deterministic() -> None:
    a, b = reproduce_seed(5, "naive-threshold"), reproduce_seed(5, "naive-threshold")
    assert a.report == b.report and a.exit_code == b.exit_code
    s1 = reproduce_seed(0, "naive-threshold", scenario="oscillate")
    assert s1.report == reproduce_seed(0, "naive-threshold", scenario="oscillate").report
    assert s1.result.first is not None


def test_explore_defaults_reach_padded_replays_and_retraction_both_ways() -> None:
    """The default config (capture list (1, 4), a 26-slot pool) reaches a padded replay
    after a larger one and a retraction while speculating and while falling back."""
    r = explore(DEFAULT_EXPLORE_CONFIG, "fixed-threshold", alphabet=default_alphabet(max_live=3, max_arrivals=3),
                max_depth=7, keep_graph=False)
    assert r.counterexample is None
    assert {"padded-graph-batch", "padded-after-larger", "retract-during-spec", "retract-while-off"} <= r.witnesses
    roomy = explore(SMALL, "fixed-threshold", alphabet=default_alphabet(max_live=3, max_arrivals=3), max_depth=7,
                    keep_graph=False)
    assert not {"retract-during-spec", "retract-while-off"} & roomy.witnesses  # 512 slots never run out


def test_explore_finds_the_stale_padding_read_by_default() -> None:
    r = explore(DEFAULT_EXPLORE_CONFIG, "stale-graph-padding", alphabet=default_alphabet(max_live=3, max_arrivals=3),
                max_depth=6, stop_at_first=True, keep_graph=False)
    assert r.counterexample is not None and r.violations[0].invariant == "graph-padding"
