"""The times users wait for (issue 29), each new method beside today's, measured in one run.

``python -m benchmarks --users [--quick] [--fuzz-suite]`` (or ``python -m benchmarks.users [--quick] [--once | --conform | --shape-rules | --startup] [--fuzz-suite]``; ``--conform``, ``--once``, ``--shape-rules``: only those figures, ``--startup``: only
start-up and collection (and ``--fuzz-suite``), into the saved ones) measures:

- ``prove``: the interval proof (the default) and the enumeration of every bound
  (``--exhaustive``, today's method) of every correct built-in variant of every family
  (``correct_variants``) and of ``naive-threshold`` (a failing one: the smallest failing bs and
  its trace length), in this process, one after the other, at ``--max-bs`` 64 (``--quick``: 48),
  every capture list, after a warm-up of both at 12 (torch's first ops and the shape caches); the
  verdicts, failing bs and trace lengths must agree; then ``specstate prove --max-bs 256`` by
  intervals of each of them as a user runs it (a child process: start-up included, wall and CPU
  seconds of the child). ``--once``: only the enumeration at 256 of fixed-threshold, a child
  process under ``nice`` (it takes most of an hour on the 2-core machine: the issue's "measure
  that once"), into the saved figures, with the intervals' figure at 256 measured beside it;
- the shape rules (``specstate/model/tensors.py``, the default) beside ``SPECSTATE_TORCH=always``
  (torch for every tensor op, as before them): ``explore --variant fixed-threshold --depth 12``
  (``--quick``: 8; peak PSS of all its processes), ``prove --max-bs 256`` of fixed-threshold and
  ``run`` (the default scenario), each a child process, the two modes one after the other;
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

from benchmarks.sections import save_section

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- users -->", "<!-- /users -->"
#: a failing variant measured beside the correct ones: the smallest failing bs and its trace
FAILING_VARIANT = "naive-threshold"
ONCE_VARIANT = "fixed-threshold"
BAD_TRACE = {"format": 1, "specstate_version": "0.1.0", "variant": "naive-threshold", "seed": 1, "scenario": None,
             "config": {}, "violation": None, "notes": {}, "actions": [{"op": "arrive", "prompt_len": "3"}]}


def _load() -> float:
    return round(os.getloadavg()[0], 1)


def correct_variants() -> tuple[str, ...]:
    """Every correct built-in variant of every family (``specstate variants``: ``[correct]``),
    each once (not its aliases), by family then name."""
    from specstate.model import get_variant, variant_names

    family = {get_variant(n).name: get_variant(n).family_name for n in variant_names() if get_variant(n).correct}
    return tuple(sorted(family, key=lambda n: (family[n], n)))


def prove_variants() -> tuple[str, ...]:
    return correct_variants() + (FAILING_VARIANT,)


def _family(variant: str) -> str:
    from specstate.model import get_variant

    return get_variant(variant).family_name


def prove_figures(max_bs: int, variants: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Both methods per variant, same process, same config."""
    from specstate.prove import prove
    from specstate.scenarios import SEED_CONFIG

    rows = []
    for variant in variants or prove_variants():
        for exhaustive in (False, True):  # warm: torch's first ops and the shape caches, for both alike
            prove(SEED_CONFIG, variant, 12, exhaustive=exhaustive)
        row: dict[str, Any] = {"variant": variant, "family": _family(variant), "max_bs": max_bs, "load": _load()}
        for method, exhaustive in (("exhaustive", True), ("intervals", False)):
            t0, c0 = time.perf_counter(), time.process_time()
            r = prove(SEED_CONFIG, variant, max_bs, exhaustive=exhaustive)
            f = r.failure
            row[method] = {"wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round(time.process_time() - c0, 2),
                           "verdict": r.verdict(), "failing_bs": f.bound if f else None,
                           "trace": len(f.actions) if f else None,
                           "bounds_run": sum(v.bounds_run for v in r.lists), "steps": r.steps}
        a, b = row["intervals"], row["exhaustive"]
        row["same_verdict"] = (a["verdict"], a["failing_bs"], a["trace"]) == (b["verdict"], b["failing_bs"], b["trace"])
        rows.append(row)
    return rows


def prove_command(variant: str, max_bs: int, exhaustive: bool = False, nice: int = 0,
                  torch: str | None = None) -> dict[str, Any]:
    """``specstate prove --variant V --max-bs N`` as a user runs it: a child process, start-up
    included (wall and CPU seconds of the child), its ``--json`` result read back; ``torch``: the
    child's ``SPECSTATE_TORCH`` (default: the environment's)."""
    with tempfile.TemporaryDirectory() as cwd:
        argv = [sys.executable, "-m", "specstate", "prove", "--variant", variant, "--max-bs", str(max_bs),
                "--json", "--timings", "--quiet", "--failures", cwd] + (["--exhaustive"] if exhaustive else [])
        load = _load()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        env = dict(os.environ, PYTHONPATH=str(ROOT), **({"SPECSTATE_TORCH": torch} if torch else {}))
        out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                             check=False, preexec_fn=(lambda: os.nice(nice)) if nice else None)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if out.returncode not in (0, 1):
            raise RuntimeError(f"Expected specstate prove to exit 0 or 1 but got {out.returncode}: {out.stderr[-2000:]}")
        res = json.loads(out.stdout)
        trace = json.loads(Path(res["trace"]).read_text())["actions"] if res.get("trace") else None
    d = res["details"]
    return {"variant": variant, "family": _family(variant), "max_bs": max_bs, "method": d["method"], "nice": nice,
            "wall_s": round(wall, 2),
            "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
            "proof_wall_s": res["elapsed_s"], "proof_cpu_s": d["cpu_s"],  # the proof itself: no start-up
            "verdict": d["verdict"], "failing_bs": d["failing_bs"], "trace": len(trace) if trace is not None else None,
            "bounds_run": sum(v["bounds_run"] for v in d["lists"]), "lists": len(d["lists"]), "steps": d["steps"],
            "load": load, "load_after": _load()}


def once_figures(repeats: int = 3) -> dict[str, Any]:
    """The enumeration at 256 of ``ONCE_VARIANT`` (a child under ``nice``), the intervals' beside it:
    the median of ``repeats`` runs by CPU seconds (a 3 s run right after a 140 s one measured from
    2.9 to 5.7 s on the idle machine; one sample of it made a ratio of 24x or 48x)."""
    exhaustive = prove_command(ONCE_VARIANT, 256, exhaustive=True, nice=10)
    runs = sorted((prove_command(ONCE_VARIANT, 256) for _ in range(repeats)), key=lambda r: r["cpu_s"])
    return {"exhaustive": exhaustive, "intervals": runs[len(runs) // 2],
            "intervals_cpu_s_all": [r["cpu_s"] for r in runs]}


def run_command(torch: str) -> dict[str, Any]:
    """``specstate run`` (the default scenario, fixed-threshold) in a child with ``SPECSTATE_TORCH``
    = ``torch``: wall and CPU seconds, peak memory (PSS, ``perf._PEAK_MEMORY``), whether it held."""
    from benchmarks.perf import _PEAK_MEMORY
    from benchmarks.perf import _child as code_child

    with tempfile.TemporaryDirectory() as cwd:
        code = (_PEAK_MEMORY + "import contextlib, io, json, sys\nfrom specstate.cli import main\n"
                "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
                f"    rc = main(['run', '--quiet', '--failures', {cwd!r}])\n"
                "peak[0] = max(peak[0], _tree_pss())\n"
                "print(json.dumps({'rc': rc, 'peak_mib': peak[0] // 1024, 'torch': 'torch' in sys.modules}))\n")
        load = _load()
        got = code_child(code, dict(os.environ, PYTHONPATH=str(ROOT), SPECSTATE_TORCH=torch), cwd=cwd)
    if got["rc"] != 0:
        raise RuntimeError(f"Expected specstate run to finish but it said {got['out']}")
    return {**json.loads(got["out"]), "wall_s": round(got["wall_s"], 2), "cpu_s": round(got["cpu_s"], 2), "load": load}


def shape_rules_figures(explore_depth: int = 12) -> dict[str, Any]:
    """The shape rules (``specstate/model/tensors.py``, the default) beside ``SPECSTATE_TORCH=always``
    (every tensor op in torch: the method before them), each command in a child process, the two
    one after the other: ``explore --variant fixed-threshold --depth D`` (peak PSS over all its
    processes, wall), ``prove --variant fixed-threshold --max-bs 256``, ``run``."""
    from benchmarks.explore_reduction import depth_search

    out: dict[str, Any] = {"explore_depth": explore_depth}
    for name, measure_one in (("explore", lambda m: depth_search(explore_depth, True, 10_000_000, torch=m)),
                              ("prove_256", lambda m: prove_command(ONCE_VARIANT, 256, torch=m)),
                              ("run", run_command)):
        out[name] = {}
        for mode in ("always", "rules"):
            out[name][mode] = measure_one(mode)
            print(name, mode, out[name][mode], file=sys.stderr, flush=True)
    return out


def render_shape_rules(s: dict[str, Any]) -> list[str]:
    d = s["explore_depth"]
    lines = ["", "The shape rules (`specstate/model/tensors.py`: torch only where a rule predicts a crash; the default) "
             "beside `SPECSTATE_TORCH=always` (torch for every tensor op, as before them), each a child process, the "
             "two one after the other:", "",
             "| command | always: wall s | always: CPU s | always: peak MiB | rules: wall s | rules: CPU s | "
             "rules: peak MiB | wall always / rules | load |", "|---|---|---|---|---|---|---|---|---|"]
    names = {"explore": f"explore --variant fixed-threshold --depth {d} (PSS, all processes)",
             "prove_256": f"prove --variant {ONCE_VARIANT} --max-bs 256", "run": "run (the default scenario; PSS)"}
    for key, label in names.items():
        a, r = s[key]["always"], s[key]["rules"]
        lines.append(f"| `{label}` | {a['wall_s']} | {a.get('cpu_s', '')} | {a.get('peak_mib', '')} | {r['wall_s']} | "
                     f"{r.get('cpu_s', '')} | {r.get('peak_mib', '')} | {a['wall_s'] / max(r['wall_s'], 1e-9):.2f} | "
                     f"{a['load']}, {r['load']} |")
    e = s["explore"]
    lines += ["", f"explore: {e['rules']['states']:,} states both ways (same: "
              f"{'yes' if e['rules']['states'] == e['always']['states'] else 'NO'}); peak memory {e['rules']['peak_mib']} "
              f"MiB with the rules (goal <= 256 MiB: {'met' if e['rules']['peak_mib'] <= 256 else 'NOT met'})."]
    p = s["prove_256"]["rules"]
    once = s.get("once_exhaustive_wall_s")
    if once:
        lines[-1] += (f" prove --max-bs 256 by intervals with the rules: {p['wall_s']} s wall against the enumeration's "
                      f"{once} s measured once (`--once`): **{once / max(p['wall_s'], 1e-9):.0f}x** (goal >= 40x).")
    return lines


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


def measure(quick: bool, fuzz_suite: bool = False) -> dict[str, Any]:
    """Every figure but the once-only enumeration at 256 (``once_figures``), which stays as saved;
    ``fuzz_suite``: also ``pytest -m fuzz`` (``fuzz_suite_figure``: minutes)."""
    fig = {"prove": prove_figures(48 if quick else 64), "prove_256": [prove_command(v, 256) for v in prove_variants()],
           "shape_rules": shape_rules_figures(8 if quick else 12),
           "startup": startup_figures(3 if quick else 5), "collect": collect_figure(), "conform": conform_figures(),
           "quick": quick}
    if fuzz_suite:
        fig["fuzz_suite"] = fuzz_suite_figure()
    return fig


def render_section(fig: dict[str, Any]) -> str:
    lines = [BEGIN, "## What users wait for (issue 29): each new method beside today's, one run", "",
             f"`python -m benchmarks --users{' --quick' if fig['quick'] else ''}`; the load average (2 cores, "
             "shared) is given per figure: only ratios within one row compare.", "",
             "Both methods in this process, one after the other (`prove(SEED_CONFIG, V, max_bs)`, every capture "
             "list); \"failing bs / trace\": the smallest failing batch size and its trace's length in actions "
             "(`holds`: none); \"same\": the same verdict, failing bs and trace length.", "",
             "| `specstate prove` | family | max-bs | intervals wall / CPU s | exhaustive wall / CPU s | "
             "speed-up (CPU) | bounds run | intervals: failing bs / trace | exhaustive: failing bs / trace | same | "
             "load |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in fig["prove"]:
        a, b = r["intervals"], r["exhaustive"]
        lines.append(f"| {r['variant']} | {r.get('family', '')} | {r['max_bs']} | {a['wall_s']} / {a['cpu_s']} | "
                     f"{b['wall_s']} / {b['cpu_s']} | {b['cpu_s'] / max(a['cpu_s'], 1e-9):.1f}x | "
                     f"{a['bounds_run']} vs {b['bounds_run']} | {_failing(a)} | {_failing(b)} | "
                     f"{'yes' if r['same_verdict'] else 'NO'} | {r['load']} |")
    lines += render_prove_256(fig)
    if fig.get("shape_rules"):
        once = fig.get("once")
        lines += render_shape_rules({**fig["shape_rules"], "once_exhaustive_wall_s":
                                     once["exhaustive"]["wall_s"] if isinstance(once, dict) and "exhaustive" in once else None})
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


def _failing(r: dict[str, Any]) -> str:
    return "holds" if r.get("failing_bs") is None and r.get("trace") is None else f"{r.get('failing_bs')} / {r['trace']}"


def render_prove_256(fig: dict[str, Any]) -> list[str]:
    """``specstate prove --max-bs 256`` by intervals per variant (a child each), and the once-only
    enumeration at 256 beside the intervals' figure of its run."""
    lines: list[str] = []
    if fig.get("prove_256"):
        lines += ["", "`specstate prove --variant V --max-bs 256` by intervals, every capture list, as a user runs it "
                  "(a child process each, one after the other: start-up included; goal: at most 60 s wall):", "",
                  "| variant | family | wall s | CPU s | the proof alone: wall / CPU s | verdict | failing bs / trace | "
                  "bounds run | steps | load |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in fig["prove_256"]:
            alone = f"{r['proof_wall_s']} / {r['proof_cpu_s']}" if "proof_cpu_s" in r else ""
            lines.append(f"| {r['variant']} | {r['family']} | {r['wall_s']} | {r['cpu_s']} | {alone} | {r['verdict']} | "
                         f"{_failing(r)} | {r['bounds_run']} | {r['steps']} | {r['load']} |")
    once = fig.get("once")
    if isinstance(once, dict) and "exhaustive" in once:
        e, i = once["exhaustive"], once["intervals"]
        lines += ["", f"The enumeration at 256, measured once (`python -m benchmarks.users --once`: "
                  f"`specstate prove --variant {e['variant']} --max-bs 256 --exhaustive`, a child under `nice "
                  f"{e['nice']}`, load {e['load']} to {e['load_after']}; then the same by intervals, load {i['load']}): "
                  f"{e['wall_s']} s wall / {e['cpu_s']} CPU s, {e['bounds_run']} bounds run, {e['steps']} steps, "
                  f"{e['verdict']}; by intervals {i['wall_s']} s / {i['cpu_s']} CPU s"
                  + (f" (the median of {len(once['intervals_cpu_s_all'])} runs by CPU s: "
                     f"{', '.join(map(str, once['intervals_cpu_s_all']))})" if once.get("intervals_cpu_s_all") else "")
                  + f", {i['bounds_run']} bounds, "
                  f"{i['verdict']}: **{e['wall_s'] / max(i['wall_s'], 1e-9):.0f}x less wall, "
                  f"{e['cpu_s'] / max(i['cpu_s'], 1e-9):.0f}x less CPU** (the enumeration ran niced on a shared "
                  "machine: CPU is the fairer ratio; both include the start-up"
                  + (f", {max(i['cpu_s'] - i['proof_cpu_s'], 0):.1f} CPU s of the intervals'" if "proof_cpu_s" in i else "")
                  + ")"
                  + (f"; the proofs alone (no start-up): {e['proof_cpu_s']} vs {i['proof_cpu_s']} CPU s, "
                     f"**{e['proof_cpu_s'] / max(i['proof_cpu_s'], 1e-9):.0f}x less CPU**" if "proof_cpu_s" in e else "")
                  + "."]
    return lines


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


def main(argv: list[str]) -> int:
    from benchmarks.sections import usage

    known = {"--quick": False, "--out": True, "--conform": False, "--once": False, "--shape-rules": False,
             "--startup": False, "--fuzz-suite": False}
    if (code := usage(argv, __doc__, known)) is not None:  # it measured everything (most of an hour) before
        return code
    quick = "--quick" in argv
    page = Path(argv[argv.index("--out") + 1]) if "--out" in argv else ROOT / "docs" / "performance.md"
    saved = page.with_suffix(".users.json")
    only = {"--conform": ("conform", conform_figures), "--once": ("once", once_figures),
            "--shape-rules": ("shape_rules", lambda: shape_rules_figures(8 if quick else 12))}
    for flag, (key, figures) in only.items():
        if flag in argv:  # only these figures, into the saved ones (read after measuring: a run takes long)
            got = figures()
            if not saved.exists():  # no saved figures to render the section with
                print(json.dumps(got, indent=1))
                return 0
            fig = {**json.loads(saved.read_text()), key: got}
            break
    else:
        if "--startup" in argv and saved.exists():  # only start-up and collection (and --fuzz-suite), into the saved ones
            fig = {**json.loads(saved.read_text()), "startup": startup_figures(3 if quick else 5),
                   "collect": collect_figure(), "startup_by": "python -m benchmarks.users --startup" + (" --quick" if quick else "")}
            if "--fuzz-suite" in argv:
                fig["fuzz_suite"] = fuzz_suite_figure()
            save_section(page, ".users.json", fig, render_section(fig))
            return 0
        fig = measure(quick, fuzz_suite="--fuzz-suite" in argv)
        old = json.loads(saved.read_text()) if saved.exists() else {}
        if isinstance(old.get("once"), dict):
            fig["once"] = old["once"]  # measured once (``--once``), kept
    save_section(page, ".users.json", fig, render_section(fig))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
