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
import shutil
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


# -- a release built at run time: "sglang 0.5.24" over 0.5.23, in one folder outside the repository --


TEMPLATE = REPO / "tests/trial_release_0_5_24/files"
NEW_FLAG = "--speculative-trial-knob"  #: the launch flag 0.5.24 adds (declared, not modelled)
LAUNCH = ["python", "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
          "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--speculative-adaptive"]


@pytest.fixture(scope="module")
def v24(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``<tmp>/sglang_0_5_24/``: the template's modules and 0.5.23's declared flags with one added."""
    where = tmp_path_factory.mktemp("releases")
    folder = where / "sglang_0_5_24"
    folder.mkdir()
    for f in TEMPLATE.glob("*.py.txt"):
        (folder / f.name.removesuffix(".txt")).write_text(f.read_text())
    flags = json.loads((REPO / "specstate/server_args/flags-0.5.23.json").read_text())
    flags["release"] = "0.5.24"
    flags["flags"].append({"action": None, "arity": 1, "choices": None, "dest": "speculative_trial_knob",
                           "names": [NEW_FLAG], "type": "int"})
    (folder / "flags.json").write_text(json.dumps(flags))
    return where


def _specstate(where: Path, tmp_path: Path, *argv: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """``python -m specstate ARGV`` with the trial folder on ``SPECSTATE_RELEASE_PATH``: the process
    result and how many times the trial's changed operation ran in it."""
    calls = tmp_path / "calls"
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPECSTATE_RELEASE_PATH": str(where), "TRIAL_CALLS": str(calls)}
    p = subprocess.run([sys.executable, "-m", "specstate", *argv], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    return p, sum(int(n) for n in calls.read_text().split()) if calls.exists() else 0


@pytest.fixture()
def loaded(v24: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """The trial release loaded in this process, and taken out again (the registries, the modules,
    ``specstate.model``'s package path)."""
    import specstate.model
    from specstate.model.family_registry import _FAMILIES
    from specstate.model.releases import RELEASE_PATH_ENV, get_release
    from specstate.model.variant_registry import _REGISTRY

    monkeypatch.setenv(RELEASE_PATH_ENV, str(v24))
    path = list(specstate.model.__path__)
    release = get_release("sglang-0.5.24")
    release.load()
    try:
        yield release
    finally:
        _FAMILIES.pop("sglang-0.5.24", None)
        _REGISTRY.pop("upstream-v24", None)
        for name in [m for m in sys.modules if m.startswith("specstate.model.sglang_0_5_24")]:
            del sys.modules[name]
        specstate.model.__path__[:] = path


def test_the_new_release_is_found_by_its_folder_with_every_part(loaded: object) -> None:
    from specstate.model.releases import releases
    from specstate.variant import get_variant

    r = loaded
    assert "sglang-0.5.24" in [x.name for x in releases()]
    pkg = "specstate.model.sglang_0_5_24"
    assert (r.module("launch"), r.module("oracle", room="integration"), r.module("adapter", room="integration")) == (
        f"{pkg}.launch", f"{pkg}.oracle", f"{pkg}.adapter")
    assert r.family.base == "sglang-0.5.23" and r.base == "sglang-0.5.23"
    mine, base = get_variant("upstream-v24").ops(), get_variant("upstream-v23").ops()
    assert {n for n in OP_NAMES_OF(mine) if getattr(mine, n) is not getattr(base, n)} == {"get_next_batch_to_run"}


def OP_NAMES_OF(ops: object) -> tuple[str, ...]:  # noqa: N802
    from specstate.model.ops_table import OP_NAMES

    return tuple(OP_NAMES)


def test_its_citation_is_its_own_and_checked_with_what_it_inherits(loaded: object) -> None:
    """``citations.py`` reads its folder (its one citation) and checks it, and what it keeps of
    0.5.23 and 0.5.17 down the base chain, against a source given for 0.5.24 (0.5.23's: no wheel
    of 0.5.24 is pinned)."""
    from specstate import citations

    own = citations.citations_of("sglang-0.5.24")
    assert {str(c) for c in own} == {"managers/scheduler.py::Scheduler.get_next_batch_to_run"}
    sources = citations.cached_sources()
    if "0.5.23" not in sources or "0.5.17" not in sources:
        pytest.skip("the 0.5.17 / 0.5.23 sources are not in the cache (tests/test_citations.py fetches them)")
    report = citations.check_family("sglang-0.5.24", {**sources, "0.5.24": sources["0.5.23"]})
    assert report.own == 1 and report.inherited > 100 and report.ok, [f.describe() for f in report.failures]
    bad = citations.check_family("sglang-0.5.24", {**sources, "0.5.24": sources["0.5.12"]})
    assert not bad.ok  # the same check fails against a source where 0.5.23's citations do not hold


def test_run_and_fuzz_take_it(v24: Path, tmp_path: Path) -> None:
    p, calls = _specstate(v24, tmp_path, "run", "--engine", "sglang-0.5.24", "--quiet")
    assert p.returncode == 0 and calls > 0, p.stdout + p.stderr
    p, calls = _specstate(v24, tmp_path, "fuzz", "--engine", "sglang-0.5.24", "--profile", "ci", "--max-examples", "10",
                          "--quiet")
    # 10 cases pass but may not reach every switch witness: "not judged" (exit 4), never a violation
    assert p.returncode in (0, 4) and calls > 0 and "fuzz upstream-v24" in p.stdout, p.stdout + p.stderr


def test_check_reads_its_flags(v24: Path, tmp_path: Path) -> None:
    """Its added flag is accepted (not modelled) where 0.5.23 refuses it."""
    line = [*LAUNCH, NEW_FLAG, "3"]
    p, calls = _specstate(v24, tmp_path, "check", "--engine", "sglang-0.5.24", "--parts", "start,sweep", "--", *line)
    assert p.returncode == 0 and calls > 0, p.stdout + p.stderr
    assert "upstream-v24 on sglang 0.5.24" in p.stdout and NEW_FLAG in p.stderr
    p, _ = _specstate(v24, tmp_path, "check", "--engine", "sglang-0.5.23", "--parts", "start", "--", *line)
    assert p.returncode == 2 and f"unrecognized argument {NEW_FLAG}" in p.stderr


def test_engines_lists_it(v24: Path, tmp_path: Path) -> None:
    p, _ = _specstate(v24, tmp_path, "engines", "--json")
    assert p.returncode == 0, p.stderr
    mine = [e for e in json.loads(p.stdout) if e.get("name", e.get("family")) == "sglang-0.5.24"]
    assert len(mine) == 1 and "sglang-0.5.23" in json.dumps(mine[0]), p.stdout


def test_the_oracle_takes_it_and_refuses_it_for_its_wheel(v24: Path, tmp_path: Path) -> None:
    """``specstate oracle`` lists the release (its oracle module is in its folder) and stops at the
    first step that needs upstream's tree: no wheel is pinned for 0.5.24."""
    p, _ = _specstate(v24, tmp_path, "oracle", "--help")
    assert "0.5.24" in p.stdout, p.stdout
    p, _ = _specstate(v24, tmp_path, "oracle", "--engine", "0.5.24", "--examples", "1")
    assert p.returncode not in (0, 1) and "0.5.24" in p.stderr and "Traceback" not in p.stderr, p.stdout + p.stderr


@pytest.mark.slow  # upstream's tree unpacked again under the trial's name (about 20 s)
def test_with_a_wheel_pinned_in_its_folder_the_oracle_runs_it(v24: Path, tmp_path: Path) -> None:
    """Its wheel pinned in its own folder (``WHEELS`` of its ``__init__``: here 0.5.23's file, the
    code the trial stands for), ``specstate oracle`` runs upstream's scheduler against the trial's
    default variant, its changed operation included, and they agree: the oracle takes a release
    that is only its folder."""
    from specstate.upstream import cache_dir, pins

    where = tmp_path / "releases"
    shutil.copytree(v24, where)
    init = where / "sglang_0_5_24" / "__init__.py"
    init.write_text(init.read_text() + f"\nWHEELS = {{\"0.5.24\": {pins()['0.5.23']!r}}}\n")
    try:
        p, calls = _specstate(where, tmp_path, "oracle", "--engine", "0.5.24", "--examples", "2")
    finally:  # its unpacked tree (0.5.23's files under the trial's name) does not stay in the cache
        for left in (cache_dir() / "oracle").glob("sglang-0.5.24-*"):
            shutil.rmtree(left, ignore_errors=True)
    assert p.returncode == 0 and calls > 0, p.stdout + p.stderr
    assert "0.5.24" in p.stdout and "0 mismatches" in p.stdout, p.stdout


def _recording_of_v24(tmp_path: Path) -> Path:
    """The saved 0.5.17 recording under the trial's schema (its recorder is 0.5.17's)."""
    import gzip

    lines = gzip.decompress(RECORDING.read_bytes()).decode().splitlines()
    header = json.loads(lines[0])
    header["schema"] = "specstate-sglang24-rec/1"
    if "sglang" in header:
        header["sglang"] = "0.5.24"
    out = tmp_path / "v24.jsonl.gz"
    out.write_bytes(gzip.compress("\n".join([json.dumps(header), *lines[1:]]).encode() + b"\n"))
    return out


def test_conform_and_graph_read_its_recordings(v24: Path, tmp_path: Path) -> None:
    """A recording of its schema is loaded with its record models and compared with its default
    variant through its adapter (0.5.17's conformance observers), and ``graph --from-recording``
    replays it through its adapter's ``workload``: both run its changed operation (a 0.5.17 run
    relabelled is not 0.5.24's, so the conformance verdict itself is not asserted)."""
    rec = _recording_of_v24(tmp_path)
    p, calls = _specstate(v24, tmp_path, "conform", str(rec))
    assert p.returncode in (0, 1) and calls > 0, p.stdout + p.stderr
    assert "upstream-v24" in p.stdout + p.stderr
    out = tmp_path / "g.json"
    p, calls = _specstate(v24, tmp_path, "graph", "--from-recording", str(rec), "--variant", "upstream-v24",
                          "--out", str(out))
    assert p.returncode == 0 and calls > 0, p.stdout + p.stderr
    assert "recording v24.jsonl.gz" in p.stdout + p.stderr and any(link.get("taken") for link in json.loads(out.read_text())["links"])
    p, _ = _specstate(v24, tmp_path, "graph", "--from-recording", str(rec), "--out", str(out))
    assert p.returncode == 2 and "Expected a variant of sglang-0.5.24" in p.stderr, p.stderr


def test_nothing_outside_its_folder_names_it() -> None:
    """The trial release is its folder: no file of the package names it."""
    named = [str(f.relative_to(REPO)) for f in (REPO / "specstate").rglob("*") if f.is_file()
             and f.suffix in (".py", ".json") and ("0.5.24" in f.read_text() or "0_5_24" in f.read_text())]
    assert named == []
