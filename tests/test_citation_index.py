"""The citation index's store (``citations._index``): the symbols of an upstream source file are
parsed once per user, kept signed beside the sources, and never trusted unless this user's key
signed them for that very text and code."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from specstate import _bytecode, citations

SOURCE = '''
def plain(x):
    """A docstring (stripped)."""
    return x + 1


class Runner:
    def replay(self, bs):
        return bs * 2
'''


@pytest.fixture()
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache and a fresh key; the in-process memo emptied before and after."""
    monkeypatch.setenv("SPECSTATE_SGLANG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    citations._index.cache_clear()
    src = tmp_path / "src" / "sglang" / "srt" / "cuda_graph_runner.py"
    src.parent.mkdir(parents=True)
    src.write_text(SOURCE)
    yield src
    citations._index.cache_clear()


def _entries(src: Path) -> list[Path]:
    return sorted((src.parents[3] / "cache" / citations.INDEX_STORE).glob("*.idx"))


def test_a_second_process_reads_the_index_without_parsing(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = dict(citations._index(store))
    assert set(first) == {"plain", "Runner", "Runner.replay"} and len(_entries(store)) == 1
    citations._index.cache_clear()  # as a new process: only the store remains

    def no_parse(text: str) -> None:
        raise AssertionError("parsed again although the store held the index")

    monkeypatch.setattr(citations, "_symbols", no_parse)
    assert dict(citations._index(store)) == first


def test_an_entry_this_key_did_not_sign_is_derived_again(store: Path) -> None:
    """A planted entry (tagged with another key) that says the cited symbol changed is ignored:
    the index is the source's own."""
    import marshal

    real = dict(citations._index(store))
    (entry,) = _entries(store)
    forged = {**real, "Runner.replay": "forged"}
    digest = entry.stem
    _bytecode.write_signed(entry, b"k" * 32, "citations/" + citations._index_version(), digest, marshal.dumps(forged))
    citations._index.cache_clear()
    assert dict(citations._index(store)) == real
    # and the entry was signed again with this user's key
    secret = _bytecode.key()
    assert secret is not None
    assert _bytecode.read_signed(entry, secret, "citations/" + citations._index_version(), digest) is not None


def test_a_changed_source_is_parsed_again(store: Path) -> None:
    citations._index(store)
    store.write_text(SOURCE.replace("bs * 2", "bs * 3"))
    citations._index.cache_clear()
    changed = citations._index(store)
    assert "Mult" in changed["Runner.replay"] and "value=3" in changed["Runner.replay"]
    assert len(_entries(store)) == 2  # one entry per text


def test_without_a_key_nothing_is_stored_and_the_index_is_the_same(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    want = dict(citations._index(store))
    citations._index.cache_clear()
    for e in _entries(store):
        e.unlink()
    monkeypatch.setattr(_bytecode, "key", lambda: None)
    assert dict(citations._index(store)) == want and _entries(store) == []
