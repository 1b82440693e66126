"""Every ``file.py::Symbol`` the model cites exists in the sglang source it models, release by
release: each family's own citations (``specstate.citations.citations_of``: its release folder,
its page, the paths its package names in ``CITED_OUTSIDE``, and for the shared core's family every
shared module outside the harnesses) in the release that family cites (``Family.source_release``).

Driven by the family registry (``family_names``): a new release folder adds rows here, no line.
What a derived family keeps of its base chain is checked by ``tests/test_release_ranges.py``.
Downloads the pinned sglang wheels without dependencies (cached in ``~/.cache/specstate``,
``specstate/upstream.py``).
"""

from __future__ import annotations

import pytest

from specstate.citations import citations_of
from specstate.model.families import family_names, get_family
from specstate.model.releases import core_family, release_folders
from tests.sglang_source import find_file, sglang_source, symbols_of

pytestmark = pytest.mark.sglang_source

#: what a release's model must cite at least (rows by release; a release with no row: one citation):
#: a count, and files (or ``file::symbol``) that must be among its citations
ENOUGH: dict[str, tuple[int, tuple[str, ...]]] = {
    "0.5.12": (40, ("eagle_worker.py", "eagle_info.py", "schedule_batch.py", "scheduler.py", "cuda_graph_runner.py",
                    "triton_backend.py", "allocator.py")),
    "0.5.17": (60, ("eagle_worker_v2.py", "adaptive_spec_params.py", "adaptive_runtime_state.py", "overlap_utils.py",
                    "batch_result_processor.py", "eagle_utils.py", "eagle_worker_common.py", "schedule_batch.py",
                    "scheduler.py", "decode_cuda_graph_runner.py")),
    "0.5.9": (1, ("model_executor/input_buffers.py::GraphInputBuffers.populate_from_forward_batch",)),
}

#: the families with a release folder (a test-only family has no citations of its own)
FAMILIES = [f for f in family_names() if f in release_folders()]


def _citations(family: str) -> list[tuple[str, str, str]]:
    return [(family, c.file, c.symbol) for c in sorted(citations_of(family))]


def test_every_release_folder_of_the_engine_is_a_registered_family() -> None:
    """Each release folder of the core's engine is a registered family, so its citations are rows
    here (another engine's folder, with a model of its own, is checked by its own test)."""
    engine = core_family().partition("-")[0]
    unregistered = [f for f in release_folders() if f.partition("-")[0] == engine and f not in family_names()]
    assert unregistered == []
    assert core_family() in FAMILIES


@pytest.mark.parametrize("family", FAMILIES)
def test_each_release_cites_enough(family: str) -> None:
    release = get_family(family).source_release
    cites = citations_of(family)
    least, needed = ENOUGH.get(release, (1, ()))
    assert len(cites) >= least, f"only {len(cites)} file::symbol citations of sglang {release} found"
    cited = {str(c) for c in cites} | {c.file for c in cites} | {c.file.split("/")[-1] for c in cites}
    for want in needed:
        assert want in cited, f"{family} does not cite {want} (sglang {release})"


def test_enough_names_registered_releases_only() -> None:
    assert set(ENOUGH) <= {get_family(f).source_release for f in FAMILIES}


def _check(version: str, where: str, file: str, symbol: str) -> None:
    srt = sglang_source(version)
    candidates = find_file(srt, file)
    assert candidates, f"{where} cites {file}::{symbol}, but no {file} in sglang {version}"
    defined = set().union(*(symbols_of(p) for p in candidates))
    assert symbol in defined, (
        f"{where} cites {file}::{symbol}; {file} ({[str(p.relative_to(srt)) for p in candidates]}) "
        f"defines no {symbol} in sglang {version}")


@pytest.mark.parametrize("family,file,symbol", [row for f in FAMILIES for row in _citations(f)])
def test_cited_symbol_exists_in_the_release_cited(family: str, file: str, symbol: str) -> None:
    _check(get_family(family).source_release, family, file, symbol)
