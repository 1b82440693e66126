"""``specstate oracle --engine``: the release as the oracle names it (``0.5.23``) or the family's name
as every other command takes it (``sglang-0.5.23``); anything else is one usage error naming the
choices. Parsing only: no oracle runs."""

from __future__ import annotations

import pytest

from specstate.cli import build_parser, main
from specstate.oracle.catalog import RELEASES


@pytest.mark.parametrize("release", RELEASES)
def test_the_release_and_the_family_name_both_select_the_release(release: str) -> None:
    parser = build_parser()
    assert parser.parse_args(["oracle", "--engine", release]).engine == release
    assert parser.parse_args(["oracle", "--engine", f"sglang-{release}"]).engine == release


@pytest.mark.parametrize("bad", ["sglang-0.5.99", "0.5.99", "sglang", "vllm-0.5.23"])
def test_an_unknown_release_is_a_usage_error_naming_the_choices(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["oracle", "--engine", bad]) == 2
    err = capsys.readouterr().err
    assert f"invalid choice: {bad!r}" in err and all(repr(r) in err for r in RELEASES), err
    assert "Traceback" not in err
