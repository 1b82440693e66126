"""``specstate engines``: every family with its release range and the state of its citations,
read from the sources in the cache only (an empty cache: "not checked" and the fetch command;
a cached source that lacks the cited symbols: FAIL and exit 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specstate.cli import main


def test_engines_lists_families_and_ranges_without_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SPECSTATE_SGLANG_CACHE", str(tmp_path))
    assert main(["engines"]) == 0
    out = capsys.readouterr().out
    for line in ("sglang-0.5.12  releases 0.5.12, 0.5.12.post1", "sglang-0.5.17  releases 0.5.17",
                 "sglang-0.5.23  releases 0.5.23  (default variant upstream-v23, derived from sglang-0.5.17)"):
        assert line in out
    assert "not checked in 0.5.23" in out and "changes not checked" in out and "tests/test_release_ranges.py" in out


def test_engines_fails_when_a_cached_release_lacks_a_cited_symbol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    srt = tmp_path / "sglang-0.5.12" / "sglang" / "srt" / "managers"
    srt.mkdir(parents=True)
    (srt / "schedule_batch.py").write_text("class Req:\n    pass\n")
    monkeypatch.setenv("SPECSTATE_SGLANG_CACHE", str(tmp_path))
    assert main(["engines", "--json"]) == 1
    rows = {r["family"]: r for r in json.loads(capsys.readouterr().out)}
    v1 = rows["sglang-0.5.12"]
    assert v1["checked_releases"] == ["0.5.12"] and v1["missing_sources"] == ["0.5.12.post1"]
    assert any("in sglang 0.5.12: missing" in f for f in v1["failures"])
    assert not any("schedule_batch.py::Req in" in f for f in v1["failures"])  # Req is defined there
    assert rows["sglang-0.5.23"]["failures"] == [] and not rows["sglang-0.5.23"]["ok"]
