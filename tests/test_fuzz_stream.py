"""The fuzz stream a seed names does not depend on which modules the process imported
(``specstate/fuzz/stream.py``): Hypothesis mines literals from local modules into its
draws, so without the pin a fuzz test drew other workloads under ``pytest tests`` (every
test module collected first) than alone, and CI missed a witness the test reached alone."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specstate.check as check
from specstate.fuzz.profiles import profile_settings
from specstate.fuzz.runner import fuzz_variant
from specstate.fuzz.stream import import_independent_draws
from specstate.model import Action

providers = pytest.importorskip("hypothesis.internal.conjecture.providers")


def _draws() -> list[int]:
    """200 derandomized draws over a range the probe module's literals fall in."""
    seen: list[int] = []

    @settings(max_examples=200, derandomize=True, database=None, deadline=None)
    @given(st.integers(0, 10**6))
    def one(n: int) -> None:
        seen.append(n)

    one()
    return seen


def _import_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A local module holding literals in every range the strategies draw from."""
    (tmp_path / "specstate_literals_probe.py").write_text(
        "VALUES = [" + ", ".join(str(n) for n in range(100, 900, 7)) + "]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "specstate_literals_probe", raising=False)
    importlib.import_module("specstate_literals_probe")


def test_without_the_pin_an_import_changes_the_derandomized_stream(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """What the pin is for: Hypothesis itself draws the probe's literals once it is imported
    (if this fails, Hypothesis dropped its local-constant pool and the pin may go)."""
    before = _draws()
    _import_probe(tmp_path, monkeypatch)
    after = _draws()
    assert after != before
    assert set(after) - set(before) & set(range(100, 900, 7))


def test_with_the_pin_the_stream_is_the_same_whatever_was_imported(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with import_independent_draws():
        before = _draws()
    _import_probe(tmp_path, monkeypatch)
    with import_independent_draws():
        after = _draws()
    assert after == before


def test_the_fuzzer_runs_under_the_pin(monkeypatch: pytest.MonkeyPatch) -> None:
    pools: list[object] = []
    apply = check.Run.apply

    def looking(self: check.Run, action: Action):  # noqa: ANN202
        pools.append(providers._get_local_constants())
        return apply(self, action)

    monkeypatch.setattr(check.Run, "apply", looking)
    fuzz_variant("fixed-threshold", settings(profile_settings("ci"), max_examples=3))
    assert pools
    assert all(not p.set_for_type("integer") for p in pools)


def test_the_pin_is_lifted_afterwards_and_nests() -> None:
    before = providers._get_local_constants
    with import_independent_draws():
        inner = providers._get_local_constants
        assert inner is not before
        with import_independent_draws():
            assert providers._get_local_constants is inner
        assert providers._get_local_constants is inner
        assert not any(inner().set_for_type(kind) for kind in ("integer", "float", "string", "bytes"))
    assert providers._get_local_constants is before
