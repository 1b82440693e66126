"""``python -m benchmarks [--before CHECKOUT] [--repeats N] [--quick] [--out docs/performance.md]``

Measures the figures of ``benchmarks/perf.py`` in this process (after) and, with ``--before``, in
a child process running another checkout of specstate (``git worktree add /tmp/before main`` or
``git archive``), then writes ``docs/performance.md``. Run it from the repository root; every
figure is a ratio to a baseline measured in the same process (see ``perf.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.perf import measure
from benchmarks.report import render

ROOT = Path(__file__).resolve().parent.parent


def _before(checkout: str, repeats: int, quick: bool, out_dir: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(checkout).resolve()), str(ROOT)]))
    args = [sys.executable, "-m", "benchmarks.perf", str(repeats), out_dir] + (["--quick"] if quick else [])
    with tempfile.TemporaryDirectory() as cwd:  # not the repository root: its specstate would win
        p = subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    if p.returncode != 0:
        raise SystemExit(f"the --before run failed:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks")
    ap.add_argument("--before", default=None, help="another checkout of specstate, measured in a child process")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer cases and variants (a smoke run)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "performance.md"))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as out_dir:
        before = _before(args.before, args.repeats, args.quick, out_dir) if args.before else None
        print("measuring this checkout", file=sys.stderr)
        after = measure(repeats=args.repeats, quick=args.quick, out_dir=out_dir)
    Path(args.out).write_text(render(after, before, command=" ".join(["python -m benchmarks"] + argv)))
    (Path(args.out).with_suffix(".json")).write_text(json.dumps({"after": after, "before": before}, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
