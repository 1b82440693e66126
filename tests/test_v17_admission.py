"""What admission matched, in a 0.5.17 recording (``recorder.admitted``): a prefill's
``prefix_lens`` (``len(Req.prefix_indices)``: the radix-tree match, or a chunked request's
earlier chunks) and ``extend_lens``, compared step by step with the model's. Recorded by the
CPU stand-in of 0.5.17's scheduler (``tests/sim_sglang17.py``); older recordings, which lack
the two keys, are not compared on them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from specstate.integration.compare import load_records
from specstate.integration.sglang_0_5_17.conformance import check_recording
from specstate.model import Arrive, Step
from specstate.scenarios import get_scenario
from tests.sim_sglang17 import simulate

#: a request that finishes (its prompt goes into the radix tree), one sharing 40 of its tokens,
#: and a prompt long enough for several chunks
ACTIONS = [Arrive(48, 2), *[Step()] * 4, Arrive(60, 2, prefix_of=0, shared_len=40), *[Step()] * 4,
           Arrive(150, 2), *[Step()] * 8]


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("adm") / "admission.jsonl"
    cfg = get_scenario("adaptive-sweep").config.with_(chunked_prefill_size=64)
    simulate(cfg, "upstream-adaptive", ACTIONS, str(out))
    return out


def _prefills(path: Path) -> list[dict]:
    return [r for r in load_records(str(path)) if r.get("ev") == "fbg" and r.get("mode_in") == "EXTEND"]


def test_the_recording_holds_the_radix_match_and_the_chunks(recording: Path) -> None:
    lens = [(tuple(r["prefix_lens"]), tuple(r["extend_lens"])) for r in _prefills(recording)]
    assert ((0,), (48,)) in lens  # nothing cached yet
    assert any(30 < p[0] <= 40 and p[0] + e[0] == 60 for p, e in lens)  # the shared tokens matched
    assert ((0,), (64,)) in lens and ((64,), (64,)) in lens  # the long prompt, chunk by chunk


def test_it_conforms_with_the_model(recording: Path) -> None:
    report = check_recording(recording)
    assert report["mismatch_count"] == 0, report["mismatches"][:3]


def _rewrite(src: Path, dst: Path, change) -> None:  # noqa: ANN001
    with open(dst, "w") as f:
        for r in load_records(str(src)):
            f.write(json.dumps(change(r)) + "\n")


def test_a_wrong_radix_match_is_a_mismatch_on_prefix_lens(recording: Path, tmp_path: Path) -> None:
    def off_by_one(r: dict) -> dict:
        if r.get("ev") == "fbg" and r.get("prefix_lens") and 30 < r["prefix_lens"][0] <= 40:
            r = {**r, "prefix_lens": [r["prefix_lens"][0] - 1]}
        return r

    bad = tmp_path / "bad.jsonl"
    _rewrite(recording, bad, off_by_one)
    mismatches = check_recording(bad)["mismatches"]
    assert len(mismatches) == 1 and "prefix_lens" in str(mismatches[0]), mismatches


def test_a_recording_without_them_is_not_compared_on_them(recording: Path, tmp_path: Path) -> None:
    old = tmp_path / "old.jsonl.gz"
    with gzip.open(old, "wt") as f:
        for r in load_records(str(recording)):
            f.write(json.dumps({k: v for k, v in r.items() if k not in ("prefix_lens", "extend_lens")}) + "\n")
    assert check_recording(old)["mismatch_count"] == 0
