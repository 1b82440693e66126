"""A trial release (issue 26): ``tests/trial_release/`` holds a test-only family derived from
sglang 0.5.17 that overrides one operation (``verify_v2``, counted), written against
``specstate.variant`` alone and registered by importing it. It runs through run, fuzz, explore,
graph and conform (on a saved 0.5.17 recording, whose release the family stands for) like a
built-in family, with its override, not the base's operation, doing the work.

The files the trial needs besides its own folder: none (a real release adds one line to each
catalog; the fixture below registers the trial for this module instead). Conformance's pairing
(``integration/conform.py::_models_release``) is asked of the family objects (``Family.base``,
``Family.releases``): a family derived from the recording's that stands for the recorded release
is accepted with no line naming it (docs/architecture.md, "Adding a release")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from specstate import testing
from specstate.errors import UsageError

REPO = Path(__file__).resolve().parents[1]
RECORDING = REPO / "tests/data/gpu/v17/g000.jsonl.gz"
SPEC = "tests.trial_release.family:TRIAL"


@pytest.fixture(scope="module")
def trial() -> Iterator[object]:
    """The trial family registered for this module's tests, and taken out again afterwards (the
    registries are the process's: other tests list every family and variant)."""
    from specstate.model.family_registry import _FAMILIES
    from specstate.model.variant_registry import _REGISTRY
    from tests.trial_release import family

    _FAMILIES[family.NAME], _REGISTRY[family.TRIAL.name] = family.FAMILY, family.TRIAL
    try:
        yield family
    finally:
        _FAMILIES.pop(family.NAME, None)
        _REGISTRY.pop(family.TRIAL.name, None)


def _calls(trial: object, check) -> tuple[object, int]:  # noqa: ANN001
    before = trial.CALLS[0]  # type: ignore[attr-defined]
    result = check()
    return result, trial.CALLS[0] - before  # type: ignore[attr-defined]


def test_the_trial_is_a_family_of_its_own_over_0_5_17(trial: object) -> None:
    from specstate.variant import FAMILY_0_5_17, get_family, get_variant

    fam, v = get_family("sglang-trial"), get_variant("trial-release")
    assert fam.base == FAMILY_0_5_17.name and v.family_name == "sglang-trial"
    assert v.ops().overridden().keys() == get_variant("upstream-adaptive").ops().overridden().keys() | {"verify_v2"}
    assert {n for n, q in v.ops().overridden().items() if q.startswith("tests.trial_release.")} == {"verify_v2"}


def test_run(trial: object, tmp_path: Path) -> None:
    result, calls = _calls(trial, lambda: testing.run_scenario("trial-release", "adaptive-sweep", quiet=True,
                                                               failures=tmp_path))
    assert result.ok, result.report
    assert calls > 0


def test_fuzz(trial: object, tmp_path: Path) -> None:
    result, calls = _calls(trial, lambda: testing.fuzz("trial-release", profile="ci", max_examples=20, quiet=True,
                                                       failures=tmp_path, check_witnesses=False))
    assert result.ok, result.report
    assert calls > 0


def test_explore(trial: object, tmp_path: Path) -> None:
    result, calls = _calls(trial, lambda: testing.explore("trial-release", max_live=2, depth=5, quiet=True,
                                                          failures=tmp_path))
    assert result.ok, result.report
    assert calls > 0


def test_conform_on_a_saved_0_5_17_recording(trial: object) -> None:
    result, calls = _calls(trial, lambda: testing.check_recording(RECORDING, "trial-release", threshold=None))
    assert result.ok, result.report
    assert result.details["iterations"] > 50 and result.details["mismatch_count"] == 0
    assert calls > 0


def test_conform_still_refuses_a_family_of_another_release() -> None:
    """0.5.23 derives from 0.5.17 too, but stands for 0.5.23 only: its variants do not read 0.5.17's recordings."""
    with pytest.raises(UsageError, match="Expected a variant of sglang-0.5.17"):
        testing.check_recording(RECORDING, "upstream-v23", threshold=None)


def _graph(tmp_path: Path, variant: str) -> dict:  # type: ignore[type-arg]
    out = tmp_path / f"{variant.replace(':', '_')}.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-m", "specstate", "graph", "--variant", variant, "--out", str(out)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(out.read_text())


def test_graph_from_the_command_line_is_0_5_17s(tmp_path: Path) -> None:
    """``specstate graph --variant tests.trial_release.family:TRIAL`` (the module registers its
    family in that process): the same graph as 0.5.17's own, since the override only counts."""
    trial_graph, base_graph = _graph(tmp_path, SPEC), _graph(tmp_path, "upstream-adaptive")
    assert len(trial_graph["nodes"]) > 10
    assert (trial_graph["nodes"], trial_graph["links"]) == (base_graph["nodes"], base_graph["links"])
