"""One check across releases (``specstate.across``, ``specstate engines --trace / --fuzz``): the
same trace on every family, one row per family with its release range, verdict and first
violation; a config a family cannot start under, and an action a state does not admit, say so."""

from __future__ import annotations

from pathlib import Path

import pytest

from specstate.across import ReleaseRow, format_table, fuzz_across, replay_across
from specstate.cli import main
from specstate.fuzz.trace import Trace, save_trace
from specstate.model import Abort, Arrive, Step
from specstate.scenarios import get_scenario, play_scenario
from specstate.scenarios_v2 import SMALL_V2

STORY = [Arrive(8, 6), Arrive(8, 6), *([Step(accept=(2, 2))] * 8)]


def _by_family(rows: list[ReleaseRow]) -> dict[str, ReleaseRow]:
    return {r.family: r for r in rows}


def test_every_family_runs_its_release_as_shipped() -> None:
    rows = _by_family(replay_across(SMALL_V2, STORY))
    assert [(r.variant, r.verdict, r.releases) for r in rows.values()] == [
        ("fixed-threshold", "pass", ("0.5.12", "0.5.12.post1")), ("upstream-adaptive", "pass", ("0.5.17",)),
        ("upstream-v23", "pass", ("0.5.23",)), ("fixed-threshold@sglang-0.5.9", "pass", ("0.5.9",))]
    assert all(r.steps == len(STORY) for r in rows.values())


def test_a_failing_release_shows_its_first_violation_and_the_others_pass() -> None:
    found = play_scenario("bug:v2-single-reserve", "v2-single-reserve", 0)
    assert not found.ok
    config = get_scenario("bug:v2-single-reserve").config
    rows = _by_family(replay_across(config, found.actions, variants={"sglang-0.5.17": "v2-single-reserve"}))
    assert rows["sglang-0.5.17"].verdict == "FAIL" and "kv-accounting" in rows["sglang-0.5.17"].first
    assert rows["sglang-0.5.23"].verdict == rows["sglang-0.5.12"].verdict == "pass"
    table = format_table(list(rows.values()))
    assert rows["sglang-0.5.9"].verdict == "pass"
    assert "| sglang-0.5.17 | 0.5.17 | v2-single-reserve | FAIL | " in table and table.count("| pass |") == 3


def test_a_config_a_family_cannot_start_under_says_so() -> None:
    bad = SMALL_V2.with_(speculative_adaptive_config='{"warmup_batches": 3}')  # no batch-size slot
    rows = _by_family(replay_across(bad, STORY))
    assert rows["sglang-0.5.12"].verdict == "pass"  # the v1 worker has no adaptive controller
    for f in ("sglang-0.5.17", "sglang-0.5.23"):
        assert rows[f].verdict == "cannot start" and "integer-string BS key" in rows[f].first


def test_an_action_the_state_does_not_admit_is_named() -> None:
    rows = replay_across(SMALL_V2, [Arrive(8, 4), Step(), Abort(7)])
    assert {(r.verdict, r.steps) for r in rows} == {("action 2 does not exist here", 2)}


def test_engines_trace_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = save_trace(Trace(SMALL_V2, "upstream-v23", list(STORY)), tmp_path)
    assert main(["engines", "--trace", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| family | releases | variant | verdict | first violation |")
    assert "| sglang-0.5.23 | 0.5.23 | upstream-v23 | pass |" in out


def test_fuzz_across_runs_one_budget_per_family() -> None:
    rows = fuzz_across("ci", max_examples=3, families=["sglang-0.5.23"], variants={"sglang-0.5.23": "v2-single-reserve"})
    assert [(r.family, r.variant, r.verdict) for r in rows] == [("sglang-0.5.23", "v2-single-reserve", "FAIL")]
    assert "kv-accounting" in rows[0].first


def test_a_fuzz_budget_too_small_to_reach_the_witnesses_is_incomplete_not_a_failure() -> None:
    rows = fuzz_across("ci", max_examples=1, families=["sglang-0.5.23"])
    assert [(r.verdict, r.first.startswith("witnesses never reached")) for r in rows] == [("incomplete", True)]
