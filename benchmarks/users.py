"""The times users wait for (issue 29), each new method beside today's, measured in one run.

``python -m benchmarks --users [--quick]`` (or ``python -m benchmarks.users [--quick] [--once]``) measures:

- ``prove``: the interval proof (the default) and the enumeration of every bound
  (``--exhaustive``, today's method) of one correct variant per family, in this process, one
  after the other, at ``--max-bs`` 64 (``--quick``: 48), every capture list, after a warm-up of both at 12
  (torch's first ops and the shape caches); the verdicts must agree; ``--once`` adds both at 256
  for fixed-threshold (the enumeration takes most of an hour of CPU on the 2-core machine);
- start-up: ``specstate --version``, ``--help``, ``variants`` and a schema error on a bad
  trace, each against ``python -c "import torch"``, alternating, in child processes (wall and
  CPU seconds of the child), the median of the repeats;
- ``pytest --collect-only -q`` of the whole suite (wall), and whether it imported torch.

It writes ``performance.users.json`` beside the page and the section between the page's
``<!-- users -->`` markers (``render_section``), which ``python -m benchmarks`` keeps when it
rewrites the rest. Every figure carries the machine's load average at the time: on a shared
machine only the ratios of one run mean something.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- users -->", "<!-- /users -->"
PROVE_VARIANTS = ("fixed-threshold", "upstream-adaptive")
BAD_TRACE = {"format": 1, "specstate_version": "0.1.0", "variant": "naive-threshold", "seed": 1, "scenario": None,
             "config": {}, "violation": None, "notes": {}, "actions": [{"op": "arrive", "prompt_len": "3"}]}


def _load() -> float:
    return round(os.getloadavg()[0], 1)


def prove_figures(max_bs: int, variants: tuple[str, ...] = PROVE_VARIANTS) -> list[dict[str, Any]]:
    """Both methods per variant, same process, same config."""
    from specstate.prove import prove
    from specstate.scenarios import SEED_CONFIG

    rows = []
    for variant in variants:
        for exhaustive in (False, True):  # warm: torch's first ops and the shape caches, for both alike
            prove(SEED_CONFIG, variant, 12, exhaustive=exhaustive)
        row: dict[str, Any] = {"variant": variant, "max_bs": max_bs, "load": _load()}
        for method, exhaustive in (("exhaustive", True), ("intervals", False)):
            t0, c0 = time.perf_counter(), time.process_time()
            r = prove(SEED_CONFIG, variant, max_bs, exhaustive=exhaustive)
            f = r.failure
            row[method] = {"wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round(time.process_time() - c0, 2),
                           "verdict": r.verdict(), "trace": len(f.actions) if f else None,
                           "bounds_run": sum(v.bounds_run for v in r.lists), "steps": r.steps}
        row["same_verdict"] = row["intervals"]["verdict"] == row["exhaustive"]["verdict"]
        rows.append(row)
    return rows


def _child(argv: list[str], cwd: str) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def startup_figures(repeats: int) -> dict[str, Any]:
    """Each command beside ``import torch``, alternating, ``repeats`` times; medians."""
    with tempfile.TemporaryDirectory() as cwd:
        bad = Path(cwd) / "bad.json"
        bad.write_text(json.dumps(BAD_TRACE))
        spec = [sys.executable, "-m", "specstate"]
        cases = {"import torch": [sys.executable, "-c", "import torch"], "--version": spec + ["--version"],
                 "--help": spec + ["--help"], "variants": spec + ["variants"],
                 "schema error (bad trace)": spec + ["reproduce", str(bad)]}
        got: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
        for _ in range(repeats):
            for name, argv in cases.items():
                got[name].append(_child(argv, cwd))
    out: dict[str, Any] = {"load": _load(), "repeats": repeats}
    for name, runs in got.items():
        out[name] = {"wall_s": round(statistics.median(w for w, _ in runs), 3),
                     "cpu_s": round(statistics.median(c for _, c in runs), 3)}
    return out


def collect_figure() -> dict[str, Any]:
    probe = ("import sys, pytest\nrc = pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider'])\n"
             "print('TORCH', 'torch' in sys.modules)")
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    return {"wall_s": round(wall, 2), "torch_imported": "TORCH True" in out.stdout, "load": _load()}


def measure(quick: bool, once: bool = False) -> dict[str, Any]:
    """``once``: also both methods at ``--max-bs`` 256 for fixed-threshold (the enumeration takes
    most of an hour of CPU on the 2-core machine: the issue's "measure that once")."""
    fig = {"prove": prove_figures(48 if quick else 64), "startup": startup_figures(3 if quick else 5),
           "collect": collect_figure(), "quick": quick}
    if once:
        fig["once"] = prove_figures(256, variants=("fixed-threshold",))
    return fig


def render_section(fig: dict[str, Any]) -> str:
    lines = [BEGIN, "## What users wait for (issue 29): each new method beside today's, one run", "",
             f"`python -m benchmarks --users{' --quick' if fig['quick'] else ''}`; the load average (2 cores, "
             "shared) is given per figure: only ratios within one row compare.", "",
             "| `specstate prove` | max-bs | intervals wall / CPU s | exhaustive wall / CPU s | speed-up (CPU) | "
             "bounds run | same verdict | load |", "|---|---|---|---|---|---|---|---|"]
    for r in fig["prove"] + fig.get("once", []):
        a, b = r["intervals"], r["exhaustive"]
        lines.append(f"| {r['variant']} | {r['max_bs']} | {a['wall_s']} / {a['cpu_s']} | {b['wall_s']} / {b['cpu_s']} | "
                     f"{b['cpu_s'] / max(a['cpu_s'], 1e-9):.1f}x | {a['bounds_run']} vs {b['bounds_run']} | "
                     f"{'yes' if r['same_verdict'] else 'NO'} | {r['load']} |")
    s = fig["startup"]
    torch = s["import torch"]
    lines += ["", f"| start-up (median of {s['repeats']}, load {s['load']}) | wall s | CPU s | "
              "/ `import torch` (wall) | / `import torch` (CPU) |", "|---|---|---|---|---|"]
    for name, v in s.items():
        if isinstance(v, dict):
            lines.append(f"| {name} | {v['wall_s']} | {v['cpu_s']} | {v['wall_s'] / torch['wall_s']:.2f} | "
                         f"{v['cpu_s'] / max(torch['cpu_s'], 1e-9):.2f} |")
    c = fig["collect"]
    lines += ["", f"`pytest --collect-only -q` (whole suite): {c['wall_s']} s wall (load {c['load']}), torch "
              f"{'imported' if c['torch_imported'] else 'not imported'}.", END]
    return "\n".join(lines) + "\n"


def put_section(page: Path, section: str) -> None:
    """Replace the page's marked section (or append it)."""
    text = page.read_text() if page.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section.rstrip("\n") + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    page.write_text(text)


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    page = Path(argv[argv.index("--out") + 1]) if "--out" in argv else ROOT / "docs" / "performance.md"
    fig = measure(quick, once="--once" in argv)
    page.with_suffix(".users.json").write_text(json.dumps(fig, indent=1))
    section = render_section(fig)
    put_section(page, section)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
