"""docs/tutorial.md, run: its files are written and its ``$`` commands run in a fresh
directory outside the checkout, in document order, and each output is compared with the
one pasted under it (times normalised). The commands come from the markdown itself, so the
page and the package cannot drift apart.

Markers in the markdown (HTML comments, invisible when rendered), each for the next fenced block:
``<!-- file: NAME -->`` writes the block to NAME; ``<!-- exit: N -->`` expects exit status N
(default 0); ``<!-- output: loose -->`` checks only the exit status (graph output is being
reworked). ```` ```sh ```` blocks (the install) are not run: this test runs the installed
package; ``test_wheel.py`` checks the install itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "tutorial.md"
pytestmark = pytest.mark.slow  # ~1.5 min: the page's commands, two of them pytest runs of the plugin's fuzz test


@dataclass
class Block:
    lang: str
    text: str
    file: str | None = None
    exit: int = 0
    loose: bool = False


def blocks(markdown: str) -> list[Block]:
    """The fenced blocks with the markers that precede them."""
    out: list[Block] = []
    pending: dict[str, str] = {}
    for m in re.finditer(r"<!-- (file|exit|output): (\S+) -->|^```(\w*)\n(.*?)^```$", markdown, re.M | re.S):
        if m.group(1):
            pending[m.group(1)] = m.group(2)
            continue
        out.append(Block(m.group(3), m.group(4), pending.get("file"), int(pending.get("exit", 0)),
                         pending.get("output") == "loose"))
        pending = {}
    return out


def commands(block: Block) -> list[tuple[str, list[str]]]:
    """``(command, expected output lines)`` for each ``$`` line of a console block."""
    out: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out:
            out[-1][1].append(line)
    return out


def normalise(lines: list[str]) -> list[str]:
    """Times vary: ``0.72 s``, ``in 3.76s``, ``(0:01:27)``."""
    out = []
    for line in lines:
        line = re.sub(r"\s*\(\d+:\d\d:\d\d\)", "", line)
        out.append(re.sub(r"\d+\.\d+ ?s\b", "<T>s", line.rstrip()))
    return [line for line in out if line]


def _env() -> dict[str, str]:
    # CI / BUILD_NUMBER make pytest print the short summary untruncated (a terminal of 80
    # columns, as the page shows, truncates it)
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPECSTATE_FAILURE_DIR", "HYPOTHESIS_PROFILE", "PYTEST_ADDOPTS", "PYTHONPATH", "CI",
                        "BUILD_NUMBER")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", COLUMNS="80",
               PYTHONUNBUFFERED="1")
    return env


def test_tutorial_markers_parse() -> None:
    """The parser sees what the tutorial promises: two versions of mypatch.py, the failing and
    the passing fuzz run, the reproduction and the graph."""
    bs = blocks(TUTORIAL.read_text())
    assert [b.file for b in bs if b.file] == ["mypatch.py", "mypatch.py"]
    cmds = [c for b in bs if b.lang == "console" for c, _ in commands(b)]
    assert sum(c.startswith("pytest -q -m fuzz --specstate-variant mypatch:Threshold") for c in cmds) == 2
    assert any(c.startswith("specstate reproduce ") for c in cmds)
    assert any(c.startswith("specstate graph ") for c in cmds)
    assert cmds[0].startswith("specstate check --variant naive-threshold") and "sglang.launch_server" in cmds[0]
    assert [b.exit for b in bs if b.lang == "console"] == [1, 0, 2, 0, 1, 1, 0, 0, 1, 0]
    assert sum("-- vllm serve M" in c for c in cmds) == 2


def test_tutorial_runs_as_written(tmp_path: Path) -> None:
    for block in blocks(TUTORIAL.read_text()):
        if block.file is not None:
            (tmp_path / block.file).write_text(block.text)
            continue
        if block.lang != "console":
            continue
        for command, expected in commands(block):
            p = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=600)
            assert p.returncode == block.exit, f"$ {command}\nexit {p.returncode}, expected {block.exit}\n{p.stdout}"
            if not block.loose:
                assert normalise(p.stdout.splitlines()) == normalise(expected), f"$ {command}\n{p.stdout}"
