"""A release with no family of its own (``specstate/model/release_gap.py``): ``--engine`` and
``specstate engines --release`` say where it lies between the families and which of the later
family's declared changes (``Family.changes``) it ships; a release a family stands for selects
that family. The declared changes are held to the overrides they describe."""

from __future__ import annotations

import pytest

from specstate.cli import build_parser, main
from specstate.model.families import get_family
from specstate.model.release_gap import describe_unmodelled, family_for_release, parse_release
from specstate.model.sglang_0_5_17.variants import V2_OVERRIDES
from specstate.model.sglang_0_5_23.family import OVERRIDES as V23_OVERRIDES

V23 = get_family("sglang-0.5.23")


def test_every_override_of_the_derived_family_is_a_declared_change() -> None:
    changed = {name for name, fn in V23_OVERRIDES.items() if V2_OVERRIDES.get(name) is not fn}
    declared = {c.operation for c in V23.changes}
    # engine_start only runs the others at start: it changes nothing of its own
    assert changed - {"engine_start"} <= declared, changed - declared
    assert declared - changed <= {"Family.prepare"}, declared - changed


def test_each_change_ships_after_the_base_and_by_the_family_release() -> None:
    low, high = parse_release(get_family(V23.base or "").source_release), parse_release(V23.source_release)
    assert low is not None and high is not None
    for c in V23.changes:
        first = parse_release(c.first_release)
        assert first is not None and low < first <= high, c


@pytest.mark.parametrize("release", ["0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22"])
def test_a_release_between_families_names_both_and_what_it_ships(release: str) -> None:
    text = describe_unmodelled(f"sglang-{release}")
    assert text is not None and "\n" not in text
    ships = sum(1 for c in V23.changes if parse_release(c.first_release) <= parse_release(release))
    assert "between sglang-0.5.17" in text and "and sglang-0.5.23" in text
    assert f"ships {ships} of the {len(V23.changes)} changes" in text
    rows = (describe_unmodelled(release, detail=True) or "").splitlines()[1:]
    assert len(rows) == len(V23.changes) and sum(r.lstrip().startswith("has ") for r in rows) == ships


def test_a_release_a_family_stands_for_selects_it() -> None:
    assert family_for_release("0.5.12.post1") == family_for_release("sglang-0.5.12") == "sglang-0.5.12"
    assert family_for_release("0.5.20") is None and family_for_release("vllm") is None
    parser = build_parser()
    assert parser.parse_args(["run", "--engine", "0.5.12.post1"]).engine == "sglang-0.5.12"
    assert parser.parse_args(["run", "--engine", "0.5.23"]).engine == "sglang-0.5.23"


@pytest.mark.parametrize("value, says", [
    ("sglang-0.5.20", "between sglang-0.5.17"), ("0.5.99", "newer than every modelled release"),
    ("0.4.0", "older than every modelled release"), ("vllm-0.9", "invalid choice: 'vllm-0.9'")])
def test_an_unmodelled_engine_is_one_usage_line(value: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--engine", value]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err, err


def test_engines_release(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engines", "--release", "0.5.21"]) == 1
    out = capsys.readouterr().out.splitlines()
    ships = sum(1 for c in V23.changes if parse_release(c.first_release) <= (0, 5, 21))
    assert f"ships {ships} of the {len(V23.changes)}" in out[0]
    assert any(line.split()[:3] == ["lacks", "0.5.23", "get_next_batch_to_run:"] for line in out)
    assert main(["engines", "--release", "0.5.17"]) == 0
    assert "modelled by sglang-0.5.17" in capsys.readouterr().out
    assert main(["engines", "--release", "nope"]) == 2
