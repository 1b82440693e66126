"""Each release folder pins its own sglang wheels (``WHEELS`` in its package ``__init__``, read as
text: ``Release.wheels``) and ``specstate/upstream.py`` asks the releases (issue 38: a new release
costs its folder and nothing else). The trial release (``tests/test_trial_release.py``) pins none,
so the oracle refuses it."""

from __future__ import annotations

from pathlib import Path

import pytest

from specstate import upstream
from specstate.errors import InternalError
from specstate.model.releases import declared_wheels, releases


def test_upstream_pins_are_the_release_folders_wheels() -> None:
    wheels = {r.name: r.wheels for r in releases()}
    assert upstream.pins() == {k: v for part in wheels.values() for k, v in part.items()}
    assert upstream.PINS is upstream.pins()
    for name, part in wheels.items():  # every folder pins its own release, each a wheel of that release
        version = name.removeprefix("sglang-")
        assert version in part, name
        assert all(file.startswith(f"sglang-{release}-") and len(sha) == 64 for release, (file, sha) in part.items())
    assert "0.5." not in Path(upstream.__file__).read_text().split('"""', 2)[2]  # its code spells no sglang release


def _folder(where: Path, text: str) -> Path:
    d = where / "sglang_9_9_9"
    d.mkdir(parents=True)
    (d / "__init__.py").write_text(text)
    return d


def test_a_folder_without_wheels_pins_none_and_a_malformed_one_is_refused(tmp_path: Path) -> None:
    assert declared_wheels(_folder(tmp_path / "a", '"""doc"""\nBASE = "sglang-0.5.23"\n')) == {}
    with pytest.raises(InternalError, match="WHEELS"):
        declared_wheels(_folder(tmp_path / "b", 'WHEELS = {"9.9.9": "sglang-9.9.9.whl"}\n'))
    sha = "ab" * 32
    good = _folder(tmp_path / "c", f'WHEELS: dict = {{"9.9.9": ("sglang-9.9.9-py3-none-any.whl", "{sha}")}}\n')
    assert declared_wheels(good) == {"9.9.9": ("sglang-9.9.9-py3-none-any.whl", sha)}


def test_a_wheel_pinned_by_two_folders_is_an_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from specstate.model import releases as releases_module

    twice = (*releases(), *releases()[-1:])
    monkeypatch.setattr(releases_module, "releases", lambda: twice)
    upstream.pins.cache_clear()
    try:
        with pytest.raises(InternalError, match=r"each sglang wheel from one release folder but sglang-\S+ gives \[.*\] again"):
            upstream.pins()
    finally:
        monkeypatch.undo()
        upstream.pins.cache_clear()


def test_an_unpinned_release_is_refused_naming_where_pins_live() -> None:
    with pytest.raises(upstream.UpstreamUnavailable, match=r"no pinned wheel .*a release folder's WHEELS"):
        upstream.wheel("9.9.9")
