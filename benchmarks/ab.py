"""Paired A/B of two checkouts: after / before of the same figure, one run at a time.

``python -m benchmarks --before CHECKOUT`` measures both checkouts' figures in two child processes
at once, each as a ratio to a baseline in its own process. Those ratios hold on a shared machine,
but the values of the two checkouts, taken on two cores at once, do not compare well (the same
code gave 1.38x and 1.91x in two runs). :func:`measure_ab` compares them directly instead: one
persistent child per checkout (imports and warm-up once), asked in turn to run the same figure,
the order flipping every round, so that each pair ran back to back on an otherwise idle core;
the ratio of each pair, min / median / max.

Each child uses its own checkout's ``benchmarks.perf`` (names that exist in older checkouts
too), so a checkout from before this module still measures.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["FIGURES", "measure_ab"]

#: figure name -> what it measures (the keys of ``perf.measure``'s ratio figures)
FIGURES = {
    "model/fixed-threshold": "model alone, v1: transitions/s over 6 generated 300-action cases",
    "model/upstream-adaptive": "model alone, v2: transitions/s over 6 generated 300-action cases",
    "machine/fixed-threshold": "specstate's Hypothesis machine: model transitions/s, 30 examples",
    "explore/fixed-threshold": "explore of the default config to depth 8, as the command runs it: states/s",
    "explore-1core/fixed-threshold": "explore of the default config to depth 8 on one core: states/s",
    "recorder/c4": "the GPU recorder's added us per simulated speculative step (fake sglang objects; lower is better)",
    "recorder/c30": "the GPU recorder's added us per simulated fallback step at batch size 30 (lower is better)",
}

_CHILD = r'''
import gc
import importlib.util
import os
import sys
import benchmarks.perf as P

def recorder():
    try:
        import benchmarks.recorder as R
    except ImportError:  # a checkout from before it: the hooks it drives are older than it
        spec = importlib.util.spec_from_file_location("_specstate_bench_recorder",
                                                      os.path.join(os.environ["SPECSTATE_BENCH_ROOT"], "benchmarks", "recorder.py"))
        R = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(R)
    return R

def rate(figure, cases={}):
    kind, variant = figure.split("/")
    if kind == "recorder":
        return recorder().measure(repeats=5, shapes=(variant,))[variant]["added"]["median"]
    if kind == "model":
        if variant not in cases:
            cases[variant] = P._cases(variant, range(6), 300)
        return P.model_transitions_per_s(variant, cases[variant])
    if kind == "machine":
        split = getattr(P, "machine_split", None)
        return split(variant, 30)[0] if split else P.machine_transitions_per_s(variant, 30)
    if kind == "explore" and hasattr(P, "explore_rate"):
        return P.explore_rate(variant, 8)
    split = getattr(P, "explore_split", None)
    return split(variant, 8)[0] if split else P.explore_states_per_s(variant, 8)

print("ready", flush=True)
for line in sys.stdin:
    figure, warm = line.split()
    if warm == "1":
        rate(figure)
    gc.freeze()  # both checkouts alike: what is alive so far is out of the collector's sight (perf._frozen)
    print(rate(figure), flush=True)
'''


def _child(checkout: Path, root: Path, cwd: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(checkout.resolve()), str(root)]),
               SPECSTATE_BENCH_ROOT=str(root.resolve()))
    p = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=env, cwd=cwd)
    assert p.stdout is not None
    if p.stdout.readline().strip() != "ready":
        raise RuntimeError(f"the A/B child for {checkout} did not start")
    return p


def _ask(p: subprocess.Popen, figure: str, warm: bool) -> float:
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(f"{figure} {int(warm)}\n")
    p.stdin.flush()
    return float(p.stdout.readline())


def _stats(xs: list[float]) -> dict[str, float]:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def measure_ab(before: Path, after: Path, root: Path, *, repeats: int = 8) -> dict[str, Any]:
    """For every figure of :data:`FIGURES`: ``repeats`` back-to-back pairs (after, before), the
    order flipping each round (the first run of each figure per child is a warm-up, not kept);
    the values of each side and the ratio after / before of each pair."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as cwd:
        kids = {"before": _child(before, root, cwd), "after": _child(after, root, cwd)}
        try:
            for figure in FIGURES:
                got: dict[str, list[float]] = {"before": [], "after": []}
                for i in range(repeats):
                    order = ("after", "before") if i % 2 == 0 else ("before", "after")
                    for side in order:
                        got[side].append(_ask(kids[side], figure, warm=i == 0))
                ratios = [a / b for a, b in zip(got["after"], got["before"])]
                out[figure] = {"after": _stats(got["after"]), "before": _stats(got["before"]), "ratio": _stats(ratios),
                               "pairs": repeats}
                print(f"A/B {figure}: after / before median {out[figure]['ratio']['median']:.3f}", file=sys.stderr)
        finally:
            for p in kids.values():
                if p.stdin is not None:
                    p.stdin.close()
                p.wait(timeout=60)
    return out
