"""``Release`` (``specstate/model/releases.py``): one object per release folder, found by name, that
the catalogs ask (issue 38). Parametrized over the releases found: a new folder adds rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from specstate.model.releases import RELEASE_PATH_ENV, Release, core_family, get_release, release_folders, releases

RELEASES = releases()


def test_every_sglang_folder_is_one_release_and_the_core_is_among_them() -> None:
    assert [r.name for r in RELEASES] == [n for n in release_folders() if n.startswith("sglang-")]
    assert core_family() in [r.name for r in RELEASES]
    assert get_release(RELEASES[0].version) == RELEASES[0] and get_release(RELEASES[0].name) == RELEASES[0]


@pytest.mark.parametrize("release", RELEASES, ids=[r.name for r in RELEASES])
def test_the_catalogs_are_the_releases_answers(release: Release) -> None:
    """Each catalog holds a release exactly where the release answers with a part."""
    from specstate.integration.catalog import ADAPTERS
    from specstate.oracle.catalog import RELEASES as ORACLES
    from specstate.oracle.worker.catalog import RELEASES as WORKERS
    from specstate.server_args import RULES, TABLES
    from specstate.server_args._tables import DEPLOYMENTS

    assert (release.module("adapter", room="integration") is not None) == (release.name in {a.family for a in ADAPTERS})
    assert (release.module("oracle", room="integration") is not None) == (release.version in ORACLES)
    assert (release.module("worker_oracle", room="integration") is not None) == (release.version in WORKERS)
    has_launch = release.module("launch") is not None
    assert has_launch == (release.version in TABLES) == (release.version in RULES) == (release.version in DEPLOYMENTS)
    assert release.family.name == release.name and release.family.source_release == release.version
    if release.name == core_family():
        assert release.overrides is None and release.base is None


def test_a_folder_named_as_a_built_in_is_not_read_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    core = get_release(core_family())
    (tmp_path / core.folder.name).mkdir()
    (tmp_path / core.folder.name / "__init__.py").write_text("raise AssertionError('imported')\n")
    monkeypatch.setenv(RELEASE_PATH_ENV, str(tmp_path))
    try:
        assert release_folders()[core.name] == core.folder
    finally:
        import specstate.model

        specstate.model.__path__[:] = [p for p in specstate.model.__path__ if p != str(tmp_path.resolve())]
