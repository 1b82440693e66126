"""Fetch sglang's source (wheel, no dependencies) once per version and index its symbols.

Used by ``test_citations.py`` and the hook-target tests: 0.5.12 (the v1 family) and 0.5.17
(the v2 family). The wheels are cached in ``$SPECSTATE_SGLANG_CACHE`` (default
``.specstate-cache/`` in the repository) so CI can keep them between runs.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import zipfile
from functools import lru_cache
from pathlib import Path

SGLANG_VERSION = "0.5.12"
SGLANG_V2_VERSION = "0.5.17"
ROOT = Path(__file__).resolve().parents[1]


def cache_dir() -> Path:
    return Path(os.environ.get("SPECSTATE_SGLANG_CACHE", ROOT / ".specstate-cache"))


def sglang_source(version: str = SGLANG_VERSION) -> Path:
    """The unpacked ``sglang/srt`` folder of sglang==``version`` (downloads the wheel if needed)."""
    dest = cache_dir() / f"sglang-{version}"
    srt = dest / "sglang" / "srt"
    if srt.is_dir():
        return srt
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(f"sglang-{version}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
                        "-d", str(wheels), f"sglang=={version}"], check=True)
        found = sorted(wheels.glob(f"sglang-{version}-*.whl"))
    with zipfile.ZipFile(found[0]) as z:
        members = [m for m in z.namelist() if m.startswith("sglang/srt/") and m.endswith(".py")]
        z.extractall(dest, members)
    return srt


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
