"""Every family's release range against the source of every release in it (``specstate/citations.py``).

Each family cites one release (``Family.source_release``) and stands for a range
(``Family.releases``); a cited symbol whose AST (docstrings stripped) differs in a release of the
range, or is gone, fails naming the symbol and the release. A derived family's inherited
citations that changed must be in its ledger. The wheels are downloaded once without
dependencies, pinned by sha256, into the cache (``tests/sglang_source.py``, ``specstate/upstream.py``); offline the tests skip,
saying which release could not be fetched. The last tests show the check can fail: a source
tree with one cited function edited, a docstring-only edit that is no change, a ledger short of
one entry.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest

from specstate import citations
from specstate.citations import Citation, check_family, fingerprint
from specstate.model import families
from specstate.model.families import family_names, get_family
from tests.sglang_source import sglang_source

pytestmark = pytest.mark.sglang_source


def _source(version: str) -> Path:
    try:
        return sglang_source(version)
    except (subprocess.CalledProcessError, OSError) as e:
        pytest.skip(f"sglang {version}'s wheel could not be fetched (offline?): {e}")


def _sources(family: str) -> dict[str, Path]:
    fam = get_family(family)
    wanted = {*fam.releases, fam.source_release}
    if fam.base is not None:
        wanted.add(get_family(fam.base).source_release)
    return {r: _source(r) for r in sorted(wanted)}


@pytest.mark.parametrize("family", family_names())
def test_every_citation_is_unchanged_in_every_release_of_the_range(family: str) -> None:
    report = check_family(family, _sources(family))
    assert report.own > 0 and report.checked == report.releases
    assert report.ok, f"{family} ({', '.join(report.releases)}): " + "; ".join(f.describe() for f in report.failures)


def test_the_0_5_23_family_reviewed_what_it_overrides() -> None:
    report = check_family("sglang-0.5.23", _sources("sglang-0.5.23"))
    # 118 citations of 0.5.17 (with issue 23's start and abort paths): 86 re-cited in 0.5.23's
    # source or gone (14 of them by 0.5.23's engine start, input_buffers.py::share_input_buffer the
    # last, cited where both releases pool the runners' buffers; 42 by the scheduler review: EagleDraftInput, EAGLEWorkerV2.forward_batch_generation and the two
    # graph-runner classes are cited twice; the last five Req, PrefillAdder, ServerArgs and the runner classes;
    # mem_cache/common.py::evict_from_tree_cache since 0.5.17's eviction is its own operation, issue 26;
    # KVCacheConfigurator.resolve_max_num_reqs, the running-request cap both starts apply, issue 36; issue 39's
    # static launch: EAGLEWorkerV2.activate_step_by_batch, re-cited by 0.5.23's static.py; issue 39's paged
    # v2: allocation_sizing.py::get_req_to_token_extra_context_len, re-cited by docs/model-0.5.23.md), 24 kept
    # as they are, none of them changed
    assert (report.reviewed, report.inherited) == (96, 24)
    assert report.unreviewed == [], [f.describe() for f in report.unreviewed]


def _farm(src: Path, dest: Path, edit: str, old: str, new: str) -> Path:
    """``src`` as symlinks, but ``edit`` (a path under it) a copy with ``old`` replaced."""
    for dirpath, _, names in os.walk(src):
        d = dest / Path(dirpath).relative_to(src)
        d.mkdir(parents=True, exist_ok=True)
        for n in names:
            (d / n).symlink_to(Path(dirpath) / n)
    target = dest / edit
    text = target.read_text()
    assert old in text
    target.unlink()
    target.write_text(text.replace(old, new, 1))
    return dest


def test_a_changed_symbol_inside_a_range_fails_naming_symbol_and_release(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    real = _source("0.5.17")
    fake = _farm(real, tmp_path / "srt", "speculative/adaptive_spec_params.py", "+ self.ema_alpha * batch_avg", "+ 0.5 * self.ema_alpha * batch_avg")
    v2 = families.get_family("sglang-0.5.17")
    monkeypatch.setitem(families._FAMILIES, v2.name, dataclasses.replace(v2, release_range=("0.5.17", "0.5.17+edit")))
    report = check_family("sglang-0.5.17", {"0.5.17": real, "0.5.17+edit": fake})
    named = {(str(f.citation), f.release, f.kind) for f in report.failures}
    assert named and all(r == "0.5.17+edit" and k == "changed" for _, r, k in named)
    assert ("adaptive_spec_params.py::AdaptiveStepSlot.update", "0.5.17+edit", "changed") in named


def test_a_docstring_or_comment_edit_is_no_change(tmp_path: Path) -> None:
    real = _source("0.5.17")
    c = Citation("adaptive_spec_params.py", "AdaptiveStepSlot._recompute_params")
    fake = _farm(real, tmp_path / "srt", "speculative/adaptive_spec_params.py",
                 '"""Recompute steps from EMA. Returns True if params changed."""',
                 '"""Another docstring."""  # and a comment\n        # a comment line')
    assert fingerprint(real, c) is not None and fingerprint(fake, c) == fingerprint(real, c)


def test_an_inherited_change_missing_from_the_ledger_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The family's ledger is empty (every inherited change was read); a re-read class that the
    family stops citing is an inherited change again: a failure while it is in no ledger, an open
    entry once the ledger lists it."""
    fam = get_family("sglang-0.5.23")
    dropped = ("schedule_policy.py", "PrefillAdder")
    real = citations.citations_of

    def without(family: str, root: Path | None = None) -> frozenset[Citation]:
        cites = real(family, root)
        return frozenset(c for c in cites if family != fam.name or (Path(c.file).name, c.symbol) != dropped)

    monkeypatch.setattr(citations, "citations_of", without)
    sources = _sources(fam.name)
    report = check_family(fam.name, sources)
    assert {(Path(f.citation.file).name, f.citation.symbol) for f in report.failures} == {dropped}
    assert all("not in the family's ledger" in f.detail and f.release == "0.5.23" for f in report.failures)
    monkeypatch.setitem(families._FAMILIES, fam.name, dataclasses.replace(fam, unreviewed_citations=(dropped,)))
    report = check_family(fam.name, sources)
    assert report.ok and [(Path(f.citation.file).name, f.citation.symbol) for f in report.unreviewed] == [dropped]


def _over(monkeypatch: pytest.MonkeyPatch, base: str) -> str:
    """A test-only release over ``base`` (``sglang-R+next``, R the base's release; no folder, so no
    citation of its own), registered for one test: it keeps everything in force for ``base``."""
    fam = get_family(base)
    name = f"sglang-{fam.source_release}+next"
    monkeypatch.setitem(families._FAMILIES, name, dataclasses.replace(
        fam, name=name, base=base, release_range=(), overridden_citations=(), unreviewed_citations=(), changes=()))
    return name


@pytest.mark.parametrize("base", family_names())
def test_a_release_over_a_release_keeps_the_whole_chain(base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inheritance follows ``base`` to the root: a release over ``base`` keeps ``base``'s own
    citations and what ``base`` keeps of its own base (not ``base``'s own alone), each re-checked
    from the release that cites it; the base chain's ledgers cover the changes they list."""
    name = _over(monkeypatch, base)
    sources = _sources(base)
    sources[get_family(name).source_release] = sources[get_family(base).source_release]
    below = check_family(base, sources)
    report = check_family(name, sources)
    assert report.own == 0 and report.reviewed == 0
    assert report.inherited == len(citations.in_force(base)) == below.own + below.inherited
    assert report.ok, "; ".join(f.describe() for f in report.failures)
    assert len(report.unreviewed) == len(below.unreviewed)  # the same changes, still open in the base's ledger
    from specstate.cli.engines import family_rows  # `specstate engines`: the same counts, from the cache

    row = next(r for r in family_rows() if r["family"] == name)
    assert (row["own_citations"], row["reviewed_inherited"], row["inherited_citations"]) == (0, 0, report.inherited)


@pytest.mark.parametrize("base", [n for n in family_names() if get_family(n).base is not None])
def test_a_change_two_levels_down_fails_in_the_release_over_it(base: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A symbol ``base`` keeps from its own base, gone from the next release's source: a failure of
    the release over ``base``, naming it (one level of inheritance would never read it)."""
    name = _over(monkeypatch, base)
    fam = get_family(base)
    sources = _sources(base)
    ref = sources[fam.source_release]
    open_entries = {(Path(f).name, s) for f, s in fam.unreviewed_citations}  # changes the base's ledger lists
    deep = sorted(c for c, by in citations.in_force(base).items() if by.name != base
                  and (Path(c.file).name, c.symbol) not in open_entries and citations.find_file(ref, c.file))
    assert deep, f"{base} keeps no citation of {fam.base} outside its ledger"
    c = deep[0]
    path = citations.find_file(ref, c.file)[0].relative_to(ref).as_posix()
    text = (ref / path).read_text()
    fake = _farm(ref, tmp_path / "srt", path, text, "")  # the file emptied
    release = get_family(name).source_release
    report = check_family(name, {**sources, release: fake})
    failed = {(f.citation, f.release) for f in report.failures}
    assert (c, release) in failed, [f.describe() for f in report.failures][:5]
    assert all(f.release == release for f in report.failures)


def test_cached_sources_reads_only_unpacked_releases(tmp_path: Path) -> None:
    (tmp_path / "sglang-9.9.9" / "sglang" / "srt").mkdir(parents=True)
    (tmp_path / "sglang-9.9.8").mkdir()
    (tmp_path / "wheels").mkdir()
    assert list(citations.cached_sources(tmp_path)) == ["9.9.9"]
