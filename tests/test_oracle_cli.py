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


def test_the_models_own_invariant_violations_are_reported_and_fail(monkeypatch, capsys) -> None:  # noqa: ANN001
    """No mismatch with the oracle, but the model broke one of its invariants on a workload: the
    command says so, its ``--json`` lists it with the coverage block, and it exits 1 (no oracle runs here:
    ``fuzz`` is replaced by its result)."""
    import json

    import specstate.integration.oracle_fuzz as oracle_fuzz

    def fake(release: str, **_: object) -> oracle_fuzz.FuzzResult:
        res = oracle_fuzz.FuzzResult(release, examples=4)
        res.reached.update({"chunked-prefill": 2})
        res.model_violations.append((3, "[kv-accounting] step 7: pool: expected 10, got 9"))
        return res

    monkeypatch.setattr(oracle_fuzz, "fuzz", fake)
    assert main(["oracle", "--engine", "0.5.12", "--examples", "4", "--json"]) == 1
    out = capsys.readouterr()
    assert "1 of 4 workloads broke a model invariant; first (workload 3): [kv-accounting]" in out.err
    r = json.loads(out.out)
    assert r["verdict"] == "violation" and r["problems"] == ["model invariant violated (workload 3): [kv-accounting] "
                                                            "step 7: pool: expected 10, got 9"]
    assert r["coverage"]["reached"] == ["chunked-prefill (2)"] and r["coverage"]["judged"].startswith("oracle: 4")
    monkeypatch.setattr(oracle_fuzz, "fuzz", lambda release, **_: oracle_fuzz.FuzzResult(release, examples=4))
    assert main(["oracle", "--engine", "0.5.12", "--examples", "4"]) == 0
    assert "0 model invariant violations" in capsys.readouterr().out


def test_fuzz_refuses_another_releases_process_before_running_anything() -> None:
    """``oracle_fuzz.fuzz(release, process=...)``: a session's process of another release is a
    usage error naming both releases (nothing is drawn, nothing is sent to it)."""
    from types import SimpleNamespace

    from specstate.errors import InvalidArgument
    from specstate.integration.oracle_fuzz import fuzz

    with pytest.raises(InvalidArgument, match=r"expected an oracle process of sglang 0\.5\.17 but got one of sglang 0\.5\.12"):
        fuzz("0.5.17", examples=1, process=SimpleNamespace(release="0.5.12"))  # type: ignore[arg-type]
