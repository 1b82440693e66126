"""Fetch sglang's source (wheel, no dependencies) once per version and index its symbols.

Used by ``test_citations.py`` and the hook-target tests: 0.5.12 (the v1 family) and 0.5.17
(the v2 family). The wheels are pinned by sha256 (``specstate/upstream.py``) and cached in
``$SPECSTATE_SGLANG_CACHE`` (default ``~/.cache/specstate``, ``$XDG_CACHE_HOME/specstate``) so CI
can keep them between runs.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from specstate import upstream

SGLANG_VERSION = "0.5.12"
SGLANG_V2_VERSION = "0.5.17"
ROOT = Path(__file__).resolve().parents[1]


def cache_dir() -> Path:
    return upstream.cache_dir()


def sglang_source(version: str = SGLANG_VERSION) -> Path:
    """The unpacked ``sglang/srt`` folder of sglang==``version``: its pinned wheel (downloaded,
    hash pinned, if needed), unpacked and checked file by file (``specstate/upstream.py``).
    Offline, an ``OSError`` (the callers skip); a cache that fails a check raises."""
    try:
        return upstream.tree(version, "source") / "sglang" / "srt"
    except upstream.UpstreamOffline as e:
        raise OSError(str(e)) from None


@lru_cache(maxsize=None)
def symbols_of(path: Path) -> frozenset[str]:
    """Top-level names and ``Class.method`` names defined in a Python file."""
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
            if isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        out.add(f"{node.name}.{sub.name}")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(out)


def find_file(srt: Path, rel: str) -> list[Path]:
    """Files under ``sglang/srt`` whose path ends with ``rel``."""
    rel = rel.lstrip("/").removeprefix("sglang/srt/")
    return [p for p in srt.rglob(Path(rel).name) if str(p.relative_to(srt)).endswith(rel)]
