"""Regenerate the figures of ``docs/graphs.md``: ``python -m specstate.cli.figures [FOLDER]``.

Runs the seed's sweep under ``naive-threshold`` (it crashes at C = 10: ``160 vs 10``), saves
that failure trace as ``seed-crash.json``, and draws ``naive-threshold.png`` and
``fixed-threshold.png`` from the same command with only ``--variant`` changed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from specstate.cli import main, run_scenario
from specstate.fuzz.trace import save_trace, trace_from_result
from specstate.scenarios import get_scenario

__all__ = ["regenerate"]


def regenerate(folder: Path) -> int:
    result = run_scenario("seed-sweep", "naive-threshold", 0, progress=False)
    trace = trace_from_result(result, seed=0, scenario="seed-sweep", config=get_scenario("seed-sweep").config)
    path = save_trace(trace, folder, name="seed-crash.json")
    rc = 0
    for variant in ("naive-threshold", "fixed-threshold"):
        rc |= main(["graph", "--variant", variant, "--trace", str(path), "--out", str(folder / f"{variant}.png")])
    return rc


if __name__ == "__main__":  # pragma: no cover
    sys.exit(regenerate(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/graphs")))
