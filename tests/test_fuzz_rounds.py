"""A large fuzzing budget runs in rounds (``runner.round_plan``), so Hypothesis's per-run example
tree does not grow with the whole budget; an interrupted run without a violation says what it covered."""

from __future__ import annotations

import io

import pytest
from hypothesis import settings

from specstate.fuzz.profiles import profile_settings
from specstate.fuzz.runner import ROUND_EXAMPLES, fuzz_variant, round_plan


def test_a_budget_within_one_round_runs_as_given():
    s = settings(profile_settings("deep"), max_examples=ROUND_EXAMPLES)
    [(only, seed)] = round_plan(s, 7, "fixed-threshold")
    assert only is s and seed == 7


def test_the_deep_profile_runs_in_rounds_of_the_round_size_with_distinct_repeatable_seeds():
    s = profile_settings("deep")
    plan = round_plan(s, 3, "fixed-threshold")
    assert [p.max_examples for p, _ in plan] == [ROUND_EXAMPLES] * (s.max_examples // ROUND_EXAMPLES)
    seeds = [seed for _, seed in plan]
    assert seeds[0] == 3 and len(set(seeds)) == len(seeds)
    assert seeds == [seed for _, seed in round_plan(s, 3, "fixed-threshold")]
    assert all(p.database is None and not p.derandomize for p, _ in plan)


def test_the_last_round_takes_the_rest_and_an_unseeded_run_keeps_its_database():
    s = settings(profile_settings("deep"), max_examples=1200)
    plan = round_plan(s, None, "fixed-threshold")
    assert [p.max_examples for p, _ in plan] == [500, 500, 200]
    assert all(seed is None and p.database is not None for p, seed in plan)


def test_a_derandomized_profile_gets_a_different_seed_per_round_else_every_round_would_repeat():
    s = settings(profile_settings("ci"), max_examples=1000)
    plan = round_plan(s, None, "fixed-threshold")
    seeds = [seed for _, seed in plan]
    assert len(plan) == 2 and None not in seeds and len(set(seeds)) == 2
    assert seeds != [seed for _, seed in round_plan(s, None, "upstream-adaptive")]


def _small(n: int) -> settings:
    return settings(profile_settings("ci"), max_examples=n, stateful_step_count=10)


def test_rounds_together_run_the_whole_budget_and_pool_what_they_reached():
    calls = []
    r = fuzz_variant("fixed-threshold", _small(12), seed=5, on_case=lambda: calls.append(1), round_examples=5)
    assert len(calls) == 12 and r.result is None
    one = fuzz_variant("fixed-threshold", _small(5), seed=5, round_examples=5)
    assert one.witnesses <= r.witnesses


def test_the_first_round_with_a_violation_ends_the_run():
    calls = []
    r = fuzz_variant("kv-leak-spec-tail", _small(400), seed=1, on_case=lambda: calls.append(1), round_examples=50)
    assert r.result is not None and "kv-accounting" in r.found
    assert len(calls) < 400


def test_an_interrupted_run_without_a_violation_says_how_many_cases_it_covered():
    out = io.StringIO()
    n = []

    def stop() -> None:
        n.append(1)
        if len(n) == 7:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fuzz_variant("fixed-threshold", _small(12), seed=5, on_case=stop, round_examples=5, out=out)
    line = out.getvalue().strip()
    assert line.startswith("specstate: fuzz fixed-threshold: interrupted after 7 of 12 test cases (in round 2 of 3)")
    assert "no violation" in line and "witnesses reached:" in line


def test_the_deep_campaign_runs_each_round_of_the_fuzz_command_as_its_own_process(tmp_path):
    from benchmarks.deep import plan_tasks

    tasks = plan_tasks(["fixed-threshold", "upstream-v23"], examples=1200, seed=4, depth=5, max_states=10, out=tmp_path)
    fuzz = [t for t in tasks if t.kind == "fuzz" and t.variant == "fixed-threshold"]
    plan = round_plan(settings(profile_settings("deep"), max_examples=1200), 4, "fixed-threshold")
    assert [(t.seed, t.examples) for t in fuzz] == [(seed, s.max_examples) for s, seed in plan]
    assert all(t.argv[t.argv.index("--seed") + 1] == str(t.seed) for t in fuzz)
    assert [t.variant for t in tasks if t.kind == "explore"] == ["fixed-threshold", "upstream-v23"]


def test_the_campaign_table_counts_only_rounds_that_passed_and_names_a_violation(tmp_path):
    from benchmarks.deep import Task, summarize

    ok = Task("fixed-threshold", "fuzz", [], seed=1, examples=500, status="passed",
              result={"ok": True, "details": {"witnesses": ["crossed-up"], "max_crossings": 3}})
    bad = Task("fixed-threshold", "fuzz", [], seed=2, examples=500, status="FAILED",
               result={"ok": False, "violation": {"invariant": "kv-accounting"}, "details": {"max_crossings": 5}})
    never = Task("fixed-threshold", "fuzz", [], seed=3, examples=500)
    row = summarize([ok, bad, never]).splitlines()[2]
    assert row.startswith("| fixed-threshold | 1 / 2 of 3 | 500 | kv-accounting |")
    assert "crossed-up" not in row.split("|")[5] and "crossed-down" in row.split("|")[5]


@pytest.mark.parametrize("ci", ["", "true"])
def test_the_profiles_are_the_same_on_a_ci_machine(ci):
    """Hypothesis's default profile on a machine with ``$CI`` set is derandomized without a database;
    ``dev`` and ``deep`` must not inherit that (``deep`` would run the same examples every night, and
    ``round_plan`` would give its rounds seeds of their own)."""
    import json
    import os
    import subprocess
    import sys

    code = ("import json; from specstate.fuzz.profiles import profile_settings as p; "
            "print(json.dumps({n: [p(n).derandomize, p(n).database is None] for n in ('dev', 'ci', 'deep')}))")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = ci
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == {"dev": [False, False], "ci": [True, True], "deep": [False, False]}
