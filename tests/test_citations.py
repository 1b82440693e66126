"""Every ``file.py::Symbol`` the model cites exists in sglang==0.5.12's source.

Downloads the sglang wheel without dependencies (cached in ``.specstate-cache``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.sglang_source import ROOT, find_file, sglang_source, symbols_of

pytestmark = pytest.mark.sglang_source

CITATION = re.compile(r"([\w/]+\.py)::([A-Za-z_][\w.]*)")


def _citations() -> list[tuple[str, str, str]]:
    out = []
    files = sorted((ROOT / "specstate").rglob("*.py")) + [ROOT / "docs" / "model.md"]
    for f in files:
        if "integration" in f.parts:
            continue
        for m in CITATION.finditer(f.read_text()):
            out.append((str(f.relative_to(ROOT)), m.group(1), m.group(2).rstrip(".")))
    return sorted(set(out))


def test_the_model_cites_enough() -> None:
    cites = _citations()
    assert len(cites) >= 40, f"only {len(cites)} file::symbol citations found"
    cited_files = {c[1].split("/")[-1] for c in cites}
    for needed in ("eagle_worker.py", "eagle_info.py", "schedule_batch.py", "scheduler.py",
                   "cuda_graph_runner.py", "triton_backend.py", "allocator.py"):
        assert needed in cited_files, f"no citation of {needed}"


@pytest.mark.parametrize("where,file,symbol", _citations())
def test_cited_symbol_exists_in_sglang_0_5_12(where: str, file: str, symbol: str) -> None:
    srt = sglang_source()
    candidates = find_file(srt, file)
    assert candidates, f"{where} cites {file}::{symbol}, but no {file} in sglang 0.5.12"
    defined = set().union(*(symbols_of(p) for p in candidates))
    assert symbol in defined, (
        f"{where} cites {file}::{symbol}; {file} ({[str(p.relative_to(srt)) for p in candidates]}) "
        f"defines no {symbol}")
