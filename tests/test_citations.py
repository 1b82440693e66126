"""Every ``file.py::Symbol`` the model cites exists in the sglang source it models: the v1
family's files in sglang==0.5.12, the v2 family's (``specstate/model/sglang_0_5_17/``,
``specstate/scenarios_v2.py``, ``docs/model-v2.md``) in sglang==0.5.17.

Downloads the pinned sglang wheels without dependencies (cached in ``~/.cache/specstate``, ``specstate/upstream.py``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.sglang_source import ROOT, SGLANG_V2_VERSION, SGLANG_VERSION, find_file, sglang_source, symbols_of

pytestmark = pytest.mark.sglang_source

CITATION = re.compile(r"([\w/]+\.py)::([A-Za-z_][\w.]*)")


def _is_v2(f: Path) -> bool:
    rel = f.relative_to(ROOT).as_posix()
    return rel.startswith("specstate/model/sglang_0_5_17/") or rel in ("specstate/scenarios_v2.py", "docs/model-v2.md",
                                                            "specstate/invariants/_provenance.py")


def _is_vllm(f: Path) -> bool:
    """The vLLM family's files cite vLLM (``tests/test_vllm_citations.py`` checks them)."""
    from specstate.citations import vllm_files

    return f in set(vllm_files(ROOT))


def _citations(v2: bool) -> list[tuple[str, str, str]]:
    out = []
    files = sorted((ROOT / "specstate").rglob("*.py")) + [ROOT / "docs" / "model.md", ROOT / "docs" / "model-v2.md"]
    for f in files:
        # the harnesses (integration/, oracle/) name upstream's code beside specstate's own files
        if "integration" in f.parts or "oracle" in f.parts or "sglang_0_5_23" in f.parts or "sglang_0_5_9" in f.parts \
                or _is_vllm(f) \
                or _is_v2(f) != v2 or not f.exists():
            continue
        for m in CITATION.finditer(f.read_text()):
            out.append((str(f.relative_to(ROOT)), m.group(1), m.group(2).rstrip(".")))
    return sorted(set(out))


def test_the_model_cites_enough() -> None:
    cites = _citations(v2=False)
    assert len(cites) >= 40, f"only {len(cites)} file::symbol citations found"
    cited_files = {c[1].split("/")[-1] for c in cites}
    for needed in ("eagle_worker.py", "eagle_info.py", "schedule_batch.py", "scheduler.py",
                   "cuda_graph_runner.py", "triton_backend.py", "allocator.py"):
        assert needed in cited_files, f"no citation of {needed}"


def test_the_v2_model_cites_enough() -> None:
    cites = _citations(v2=True)
    assert len(cites) >= 60, f"only {len(cites)} file::symbol citations of sglang {SGLANG_V2_VERSION} found"
    cited_files = {c[1].split("/")[-1] for c in cites}
    for needed in ("eagle_worker_v2.py", "adaptive_spec_params.py", "adaptive_runtime_state.py", "overlap_utils.py",
                   "batch_result_processor.py", "eagle_utils.py", "eagle_worker_common.py", "schedule_batch.py",
                   "scheduler.py", "decode_cuda_graph_runner.py"):
        assert needed in cited_files, f"no citation of {needed} (sglang {SGLANG_V2_VERSION})"


def _check(version: str, where: str, file: str, symbol: str) -> None:
    srt = sglang_source(version)
    candidates = find_file(srt, file)
    assert candidates, f"{where} cites {file}::{symbol}, but no {file} in sglang {version}"
    defined = set().union(*(symbols_of(p) for p in candidates))
    assert symbol in defined, (
        f"{where} cites {file}::{symbol}; {file} ({[str(p.relative_to(srt)) for p in candidates]}) "
        f"defines no {symbol} in sglang {version}")


@pytest.mark.parametrize("where,file,symbol", _citations(v2=False))
def test_cited_symbol_exists_in_sglang_0_5_12(where: str, file: str, symbol: str) -> None:
    _check(SGLANG_VERSION, where, file, symbol)


@pytest.mark.parametrize("where,file,symbol", _citations(v2=True))
def test_cited_symbol_exists_in_sglang_0_5_17(where: str, file: str, symbol: str) -> None:
    _check(SGLANG_V2_VERSION, where, file, symbol)


def _citations_0_5_9() -> list[tuple[str, str, str]]:
    """The 0.5.9 family's own citations: its folder and its page."""
    files = sorted((ROOT / "specstate/model/sglang_0_5_9").rglob("*.py")) + [ROOT / "docs" / "model-0.5.9.md"]
    out = [(str(f.relative_to(ROOT)), m.group(1), m.group(2).rstrip(".")) for f in files if f.exists()
           for m in CITATION.finditer(f.read_text())]
    return sorted(set(out))


def test_the_0_5_9_family_cites_its_graph_copy() -> None:
    assert ("specstate/model/sglang_0_5_9/replay.py", "model_executor/input_buffers.py",
            "GraphInputBuffers.populate_from_forward_batch") in _citations_0_5_9()


@pytest.mark.parametrize("where,file,symbol", _citations_0_5_9())
def test_cited_symbol_exists_in_sglang_0_5_9(where: str, file: str, symbol: str) -> None:
    _check("0.5.9", where, file, symbol)
