"""The times users wait for (issue 29), each new method beside today's, measured in one run.

``python -m benchmarks --users [--quick] [--fuzz-suite]`` (or ``python -m benchmarks.users [--quick] [--once] [--conform | --startup] [--fuzz-suite]``; ``--conform``: only the conform figures, ``--startup``: only
start-up and collection (and ``--fuzz-suite``), into the saved ones) measures:

- ``prove``: the interval proof (the default) and the enumeration of every bound
  (``--exhaustive``, today's method) of one correct variant per family, in this process, one
  after the other, at ``--max-bs`` 64 (``--quick``: 48), every capture list, after a warm-up of both at 12
  (torch's first ops and the shape caches); the verdicts must agree; ``--once`` adds both at 256
  for fixed-threshold (the enumeration takes most of an hour of CPU on the 2-core machine);
- start-up: ``specstate --version``, ``--help``, ``variants`` and a schema error on a bad
  trace, each against ``python -c "import torch"``, alternating, in child processes (wall and
  CPU seconds of the child), the median of the repeats;
- ``pytest --collect-only -q`` of the whole suite (wall), without and with bytecode caching, and
  whether it imported torch;
- with ``--fuzz-suite``: ``pytest -m fuzz`` (profile ci), wall and CPU seconds (minutes);
- ``specstate conform`` (issue 25's goal: at most 5 s CPU per 1,000 recorded iterations) over the
  saved H200 recordings of sglang 0.5.17 (``tests/data/gpu/v17/flip``): each in a child process
  (``cold``: imports and the model's first torch ops included) and all of them in this process one
  after the other (``warm``), CPU seconds per 1,000 iterations.

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


#: a child collecting the whole suite: its exit status and whether torch was imported
COLLECT_PROBE = ("import sys, pytest\nrc = pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider'])\n"
                 "print('TORCH', 'torch' in sys.modules, 'RC', int(rc))")


def _collect_once(env: dict[str, str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", COLLECT_PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=False)
    return {"wall_s": round(time.perf_counter() - t0, 2), "torch_imported": "TORCH True" in out.stdout,
            "ok": "RC 0" in out.stdout, "load": _load()}


def collect_figure() -> dict[str, Any]:
    """``pytest --collect-only -q`` of the whole suite in a child, with and without bytecode:

    - ``cold``: ``PYTHONDONTWRITEBYTECODE=1`` (this machine's setting): pytest rewrites the asserts
      of every test module and of the plugins' packages (Hypothesis's) again on every run, and
      specstate's modules are compiled every time, as on a clean clone's first collection;
    - ``warm``: bytecode written to and read from a fresh ``PYTHONPYCACHEPREFIX``, after one
      collection that fills it (a developer's second run; CI's every run after the first).
    """
    cold = _collect_once({**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    with tempfile.TemporaryDirectory() as prefix:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = prefix
        _collect_once(env)  # writes the bytecode
        warm = _collect_once(env)
    return {"cold": cold, "warm": warm}


def fuzz_suite_figure() -> dict[str, Any]:
    """``pytest -m fuzz -q`` (profile ci) in a child: wall and CPU seconds (user + system of the
    child and its own children), and pytest's last line. Minutes: only with ``--fuzz-suite``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "pytest", "-m", "fuzz", "-q", "-p", "no:cacheprovider",
                          "--specstate-profile", "ci"], cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    last = (out.stdout.strip().splitlines() or ["(no output)"])[-1].strip("= ")
    return {"wall_s": round(wall, 1), "cpu_s": round((after.ru_utime - before.ru_utime)
                                                     + (after.ru_stime - before.ru_stime), 1),
            "exit": out.returncode, "summary": last, "load": _load()}


CONFORM_DATA = ROOT / "tests" / "data" / "gpu" / "v17" / "flip"


def conform_figures() -> dict[str, Any]:
    """Every saved 0.5.17 recording: a child ``specstate conform`` (cold), then in this process (warm)."""
    from specstate.integration.sglang_0_5_17.conformance import check_recording

    rows = []
    files = sorted(CONFORM_DATA.glob("*.jsonl.gz"))
    check_recording(files[0])  # this process's first torch ops and shape caches
    for f in files:
        wall, cpu = _child([sys.executable, "-m", "specstate", "conform", str(f)], str(ROOT))
        c0 = time.process_time()
        report = check_recording(f)
        warm = time.process_time() - c0
        n = int(report["iterations"])
        rows.append({"recording": f.name, "iterations": n, "mismatches": report["mismatch_count"],
                     "cold_wall_s": round(wall, 2), "cold_cpu_s": round(cpu, 2), "warm_cpu_s": round(warm, 3),
                     "cold_cpu_per_1000": round(1000 * cpu / n, 2), "warm_cpu_per_1000": round(1000 * warm / n, 2)})
    total = sum(r["iterations"] for r in rows)
    return {"load": _load(), "rows": rows, "iterations": total,
            "cold_cpu_per_1000": round(1000 * sum(r["cold_cpu_s"] for r in rows) / total, 2),
            "warm_cpu_per_1000": round(1000 * sum(r["warm_cpu_s"] for r in rows) / total, 2)}


def measure(quick: bool, once: bool = False, fuzz_suite: bool = False) -> dict[str, Any]:
    """``once``: also both methods at ``--max-bs`` 256 for fixed-threshold (the enumeration takes
    most of an hour of CPU on the 2-core machine: the issue's "measure that once"); ``fuzz_suite``:
    also ``pytest -m fuzz`` (``fuzz_suite_figure``: minutes)."""
    fig = {"prove": prove_figures(48 if quick else 64), "startup": startup_figures(3 if quick else 5),
           "collect": collect_figure(), "conform": conform_figures(), "quick": quick}
    if once:
        fig["once"] = prove_figures(256, variants=("fixed-threshold",))
    if fuzz_suite:
        fig["fuzz_suite"] = fuzz_suite_figure()
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
    if fig.get("startup_by"):  # measured again apart from the rest of the section
        lines += ["", f"Start-up and collection measured again by `{fig['startup_by']}`."]
    lines += ["", f"| start-up (median of {s['repeats']}, load {s['load']}) | wall s | CPU s | "
              "/ `import torch` (wall) | / `import torch` (CPU) |", "|---|---|---|---|---|"]
    for name, v in s.items():
        if isinstance(v, dict):
            lines.append(f"| {name} | {v['wall_s']} | {v['cpu_s']} | {v['wall_s'] / torch['wall_s']:.2f} | "
                         f"{v['cpu_s'] / max(torch['cpu_s'], 1e-9):.2f} |")
    lines += render_collect(fig["collect"], torch)
    if fig.get("fuzz_suite"):
        f = fig["fuzz_suite"]
        lines += ["", f"`pytest -m fuzz` (profile ci, `--fuzz-suite`; goal: at most 300 s wall): {f['wall_s']} s wall, "
                  f"{f['cpu_s']} s CPU, exit {f['exit']}: {f['summary']} (load {f['load']})."]
    if fig.get("conform"):
        lines += render_conform(fig["conform"])
    lines.append(END)
    return "\n".join(lines) + "\n"


def render_collect(c: dict[str, Any], torch: dict[str, Any]) -> list[str]:
    """``pytest --collect-only`` (goal: at most 5 s): cold and warm (``collect_figure``); figures
    saved before both were measured have one run only."""
    runs = {"cold": c["cold"], "warm": c["warm"]} if "cold" in c else {"one run": c}
    lines = ["", "| `pytest --collect-only -q` (whole suite; goal: at most 5 s) | wall s | / `import torch` (wall) | "
             "torch imported | load |", "|---|---|---|---|---|"]
    for name, v in runs.items():
        what = {"cold": "cold: PYTHONDONTWRITEBYTECODE=1 (asserts rewritten, modules compiled every run)",
                "warm": "warm: bytecode cached (PYTHONPYCACHEPREFIX, after one run)"}.get(name, name)
        lines.append(f"| {what} | {v['wall_s']} | {v['wall_s'] / torch['wall_s']:.2f} | "
                     f"{'yes' if v['torch_imported'] else 'no'} | {v['load']} |")
    return lines


def render_conform(c: dict[str, Any]) -> list[str]:
    """The conform table: per recording, cold (a child) and warm CPU per 1,000 iterations."""
    lines = ["", f"`specstate conform` over the saved H200 recordings of sglang 0.5.17 (goal: at most 5 s CPU per "
             f"1,000 iterations; load {c['load']}): {c['iterations']} iterations, cold "
             f"{c['cold_cpu_per_1000']} s and warm {c['warm_cpu_per_1000']} s CPU per 1,000.", "",
             "| recording | iterations | mismatches | cold wall / CPU s | cold CPU s per 1,000 | warm CPU s | "
             "warm CPU s per 1,000 |", "|---|---|---|---|---|---|---|"]
    for r in c["rows"]:
        lines.append(f"| {r['recording']} | {r['iterations']} | {r['mismatches']} | {r['cold_wall_s']} / "
                     f"{r['cold_cpu_s']} | {r['cold_cpu_per_1000']} | {r['warm_cpu_s']} | {r['warm_cpu_per_1000']} |")
    return lines


def put_section(page: Path, section: str) -> None:
    """Replace the page's section marked as ``section`` is (its first line, ``<!-- name -->``, and
    ``<!-- /name -->``), or append it: a section written again replaces the one before it, and
    every earlier copy of it is dropped."""
    begin = section.split("\n", 1)[0].strip()
    if not (begin.startswith("<!-- ") and begin.endswith(" -->")):
        raise ValueError(f"Expected a section starting with its marker '<!-- name -->' but got {begin!r}")
    end = f"<!-- /{begin[5:-4]} -->"
    text = page.read_text() if page.exists() else ""
    at = None  # where the first copy stood
    while begin in text and end in text.split(begin, 1)[1]:
        head, rest = text.split(begin, 1)
        at = len(head.rstrip("\n")) if at is None else at
        text = head.rstrip("\n") + "\n\n" + rest.split(end, 1)[1].lstrip("\n")
    at = len(text.rstrip("\n")) if at is None else at
    tail = text[at:].strip("\n")
    page.write_text(text[:at] + "\n\n" + section.strip("\n") + "\n" + ("\n" + tail + "\n" if tail else ""))


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    page = Path(argv[argv.index("--out") + 1]) if "--out" in argv else ROOT / "docs" / "performance.md"
    saved = page.with_suffix(".users.json")
    if "--conform" in argv and not saved.exists():
        print(json.dumps(conform_figures(), indent=1))  # no saved figures to render the section with
        return 0
    if "--conform" in argv:  # only the conform figures, into the saved ones
        fig = {**json.loads(saved.read_text()), "conform": conform_figures()}
    elif "--startup" in argv and saved.exists():  # only start-up and collection (and --fuzz-suite), into the saved ones
        fig = {**json.loads(saved.read_text()), "startup": startup_figures(3 if quick else 5), "collect": collect_figure(),
               "startup_by": "python -m benchmarks.users --startup" + (" --quick" if quick else "")}
        if "--fuzz-suite" in argv:
            fig["fuzz_suite"] = fuzz_suite_figure()
    else:
        fig = measure(quick, once="--once" in argv, fuzz_suite="--fuzz-suite" in argv)
    save_section(page, ".users.json", fig, render_section(fig))
    return 0


def save_section(page: Path, suffix: str, fig: dict[str, Any], section: str) -> None:
    """The figures beside the page (``page`` with ``suffix``), the section into the page, and printed."""
    page.with_suffix(suffix).write_text(json.dumps(fig, indent=1))
    put_section(page, section)
    print(section)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
