"""Same seed, config and variant: byte-identical reports, traces and graph files, whatever
``PYTHONHASHSEED`` is (timings go to stderr)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = r"""
import sys
from specstate.cli import main
runs = [
    ["run", "--variant", "naive-threshold", "--failures", "f", "--quiet"],
    ["reproduce", "f/naive-threshold-worker-crash-step80-seed0.json"],
    ["minimize", "f/naive-threshold-worker-crash-step80-seed0.json", "--failures", "f", "--out", "min.json", "--quiet"],
    ["explore", "--variant", "naive-threshold", "--max-bs", "2", "--depth", "5", "--failures", "f", "--quiet"],
    ["graph", "--variant", "naive-threshold", "--levels", "1,2,5,10", "--out", "g.dot"],
    ["graph", "--variant", "naive-threshold", "--levels", "1,2,5,10", "--out", "g.json"],
    ["graph", "--variant", "naive-threshold", "--trace", "f/min.json", "--levels", "1,2,5", "--out", "t.dot"],
]
for argv in runs:
    print("$", " ".join(argv), "->", main(argv), flush=True)
"""


def _outputs(folder: Path, hashseed: str) -> dict[str, bytes]:
    folder.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "SPECSTATE_FAILURE_DIR")}
    env["PYTHONHASHSEED"] = hashseed
    root = Path(__file__).resolve().parents[1]
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=folder, env=env, capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    files = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    return {"stdout": done.stdout, **files}


@pytest.mark.slow  # every command in fresh processes under two hash seeds (25 s)
def test_outputs_do_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    a, b = _outputs(tmp_path / "a", "1"), _outputs(tmp_path / "b", "4242")
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name] == b[name], f"{name} differs between PYTHONHASHSEED=1 and 4242"
    assert b"-> 1" in a["stdout"] and "g.dot" in a and "f/min.json" in a
