"""``benchmarks.coverage``: the reachable abstract states and the fuzzer's visits are seen through
one abstraction, so the share means something: a run of explore's own alphabet within the bound
visits only reachable states, the bound is monotone, and a fuzz run's visits are counted."""

from __future__ import annotations

import random

import pytest

from benchmarks.coverage import _visits, fuzz_visited, reachable, render_section
from specstate.check import Run
from specstate.fuzz.explore import default_alphabet
from specstate.model import as_variant
from specstate.testing._api import explore_config


@pytest.mark.parametrize("variant", ["fixed-threshold", "upstream-v23"])
def test_a_walk_of_the_explore_alphabet_visits_only_reachable_states(variant: str) -> None:
    depth = 5
    reach, concrete = reachable(variant, depth)
    assert concrete >= len(reach) > 3
    v, alphabet, rng = as_variant(variant), default_alphabet(), random.Random(7)
    with _visits(v) as visited:
        for _ in range(12):
            run = Run(explore_config(v), v)
            for _ in range(depth):
                run.apply(rng.choice(alphabet(run.state)))
    assert visited and visited <= reach, sorted(s.key for s in visited - reach)


def test_the_bound_is_monotone() -> None:
    small, _ = reachable("fixed-threshold", 3)
    large, _ = reachable("fixed-threshold", 5)
    assert small < large


def test_a_fuzz_run_is_counted_and_the_section_renders() -> None:
    visited, wall, ok = fuzz_visited("fixed-threshold", 5)
    assert ok and len(visited) > 3 and wall > 0
    reach, concrete = reachable("fixed-threshold", 3)
    hit = reach & visited
    fig = {"depth": 3, "examples": 5, "strategies": ["today"], "load": 0.0, "rows": [
        {"family": "sglang-0.5.12", "variant": "fixed-threshold", "reachable": len(reach), "concrete": concrete,
         "explore_s": 0.0, "runs": {"today": {"visited": len(visited), "hit": len(hit), "share": len(hit) / len(reach),
                                              "outside": len(visited - reach), "fuzz_s": wall, "ok": ok,
                                              "missed": sorted(s.key for s in reach - visited)}}}]}
    text = render_section(fig)
    assert text.startswith("<!-- coverage -->") and text.rstrip().endswith("<!-- /coverage -->")
    assert f"{len(hit)}/{len(reach)}" in text


def test_its_command_line_is_checked_before_measuring(tmp_path) -> None:  # noqa: ANN001
    from benchmarks import coverage

    assert coverage.main(["--no-such-flag"]) == 2 and coverage.main(["--help"]) == 0
    before = tmp_path / "before.json"
    before.write_text('{"depth": 6, "strategies": ["before"], "rows": []}')
    assert coverage.main(["--depth", "8", "--before", str(before)]) == 2  # another bound: not comparable
