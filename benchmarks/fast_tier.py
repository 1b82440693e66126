"""The fast tier's cost (issue 38): ``pytest -m "not fuzz and not slow"`` as a developer runs it.

``python -m benchmarks.fast_tier [--one-process] [--offline] [--bytecode] [--top N] [--out PAGE]``

Runs the fast tier in a child process from the repository root, on two cores as the suite's
``conftest.py`` chooses for it (``-n 2``; ``--one-process``: ``-n 0``), and prints:

- wall and CPU minutes (user + system of the child and of its own children: pytest-xdist's two
  workers and every process a test starts), and the machine's load average before and after (a
  shared machine's wall time means something only beside it; CPU minutes compare across loads);
- pytest's last line (passed, skipped, ...), its exit status and the tests that failed;
- whether the run fetched anything: the files of the upstream cache (``specstate.upstream.cache_dir``:
  the pinned sglang and vLLM wheels and what is unpacked from them) before and after, by name; a new
  wheel or a new unpacked tree is a fetch (a warm cache must need none). ``--offline``: the child
  runs without a network (``unshare -n``, Linux; as a non-root user ``unshare -rn``; only the
  loopback, brought up), so that a test
  that still needed a registry would fail or skip, and the skips that name a missing wheel or
  registry are counted;
- the ``--top`` (default 15) slowest test phases by wall (pytest's ``--durations``);
- whether Python kept its bytecode cache: this workplace's machines set ``PYTHONDONTWRITEBYTECODE=1``,
  and then every pytest process rewrites and compiles the test modules again and every process a
  test starts compiles specstate's modules again; ``--bytecode``: the child runs without that
  variable, as Python runs by default (and as ``.ci/run`` runs the suite); run it twice, the first
  run writes the caches.

Goal (issue 38): the fast tier within 5 minutes (wall) on the 2-core machine, offline from a warm
cache. It writes ``docs/performance.fast_tier.json`` beside the page and the section between the
page's ``<!-- fast_tier -->`` markers, which ``python -m benchmarks`` keeps when it rewrites the rest.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.sections import save_section, usage

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- fast_tier -->", "<!-- /fast_tier -->"
TIER = "not fuzz and not slow"
GOAL_WALL_MIN = 5.0
#: a skip reason that says a wheel or a registry was missing (a fetch the run could not make)
FETCH_SKIP = re.compile(r"no wheel|no package registry|not cached|offline|download", re.IGNORECASE)


def _load() -> float:
    return round(os.getloadavg()[0], 1)


def cache_files() -> set[str]:
    """The upstream cache's wheels and unpacked trees, by name: ``wheels/*`` and every top-level
    entry and ``oracle/*`` entry (the signed bytecode folders beside the trees and the citation index's
    signed store are derived, not fetched, and are left out)."""
    from specstate.upstream import cache_dir

    from specstate.citations import INDEX_STORE

    root = cache_dir()
    if not root.is_dir():
        return set()
    names = {p.name for p in root.iterdir() if not p.name.endswith(".bytecode") and p.name != INDEX_STORE}
    for sub in ("wheels", "oracle"):
        if (root / sub).is_dir():
            names |= {f"{sub}/{p.name}" for p in (root / sub).iterdir() if not p.name.endswith(".bytecode")}
    return {n for n in names if not n.split("/")[-1].startswith(".")}


def command(one_process: bool, offline: bool, top: int) -> list[str]:
    """The child's command line: the tier, quiet, skip reasons shown, the slowest phases listed."""
    argv = [sys.executable, "-m", "pytest", "-m", TIER, "-q", "-p", "no:cacheprovider", "-rsfE",
            f"--durations={top}", "-n", "0" if one_process else "2"]
    if offline:
        if shutil.which("unshare") is None:
            raise SystemExit("--offline needs util-linux's `unshare` (Linux)")
        # a new network namespace has only a loopback, and it starts down: brought up first (the
        # oracle's torch.distributed store and the multi-rank tests talk over 127.0.0.1)
        up = 'ip link set lo up 2>/dev/null || ifconfig lo up 2>/dev/null; exec "$@"'
        argv = ["unshare", "-n" if os.geteuid() == 0 else "-rn", "sh", "-c", up, "sh", *argv]
    return argv


def _durations(out: str, top: int) -> list[dict[str, Any]]:
    """pytest's ``--durations`` lines: ``12.34s call     tests/test_x.py::test_y``."""
    rows = []
    for m in re.finditer(r"^(\d+\.\d+)s (setup|call|teardown)\s+(.+?)\s*$", out, re.MULTILINE):
        rows.append({"wall_s": float(m.group(1)), "phase": m.group(2), "test": m.group(3)})
    return rows[:top]


def _skips(out: str) -> tuple[int, int]:
    """Skipped tests, and those whose reason names a missing wheel or registry (``-rs`` lines)."""
    total = fetch = 0
    for m in re.finditer(r"^SKIPPED \[(\d+)\] (.*)$", out, re.MULTILINE):
        total += int(m.group(1))
        fetch += int(m.group(1)) if FETCH_SKIP.search(m.group(2)) else 0
    return total, fetch


def _failed(out: str) -> list[str]:
    """The tests pytest's short summary names as failed or in error (``-rfE``)."""
    return [m.group(1) for m in re.finditer(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", out, re.MULTILINE)]


def measure(one_process: bool, offline: bool, top: int, bytecode: bool = False) -> dict[str, Any]:
    """One run of the tier in a child: wall and CPU minutes, load, summary, fetches, slowest phases
    (``bytecode``: without ``PYTHONDONTWRITEBYTECODE``, Python's default)."""
    before_files, load_before = cache_files(), _load()
    argv = command(one_process, offline, top)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    lines = proc.stdout.strip().splitlines() or ["(no output)"]
    skipped, fetch_skips = _skips(proc.stdout)
    return {"command": " ".join(["pytest", "-m", f'"{TIER}"', "-n", "0" if one_process else "2"]),
            "offline": offline, "wall_min": round(wall / 60, 2), "cpu_min": round(cpu / 60, 2),
            "load_before": load_before, "load_after": _load(), "exit": proc.returncode,
            "summary": lines[-1].strip("= "), "failed": _failed(proc.stdout), "skipped": skipped, "skipped_for_a_fetch": fetch_skips,
            "fetched": sorted(cache_files() - before_files), "slowest": _durations(proc.stdout, top),
            "cpus": os.cpu_count(), "bytecode_cache": not env.get("PYTHONDONTWRITEBYTECODE")}


def render_section(fig: dict[str, Any]) -> str:
    """The page's section: the figures, the goal, the fetches and the slowest phases."""
    met = "met" if fig["wall_min"] <= GOAL_WALL_MIN else "NOT met"
    fetched = ", ".join(fig["fetched"]) or "nothing (the cache was warm)"
    lines = [BEGIN, "## The fast tier: `pytest -m \"not fuzz and not slow\"` (issue 38)", "",
             f"`python -m benchmarks.fast_tier{' --offline' if fig['offline'] else ''}`: `{fig['command']}` in a "
             f"child process, {'without a network (`unshare -n`)' if fig['offline'] else 'with the network'}, "
             f"{fig['cpus']} CPUs, load average {fig['load_before']} before and {fig['load_after']} after"
             + _bytecode_words(fig.get("bytecode_cache")) + ".", "",
             f"**{fig['wall_min']} min wall, {fig['cpu_min']} CPU min** (user + system of pytest, its workers and "
             f"the processes the tests start; goal: at most {GOAL_WALL_MIN:g} min wall on the 2-core machine: "
             f"{met} in this run). Exit {fig['exit']}: {fig['summary']}; {fig['skipped']} skipped, "
             f"{fig['skipped_for_a_fetch']} of them for want of a wheel or a registry. Fetched: {fetched}."
             + (f" Failed: {', '.join(f'`{t}`' for t in fig.get('failed', []))}." if fig.get("failed") else ""), "",
             "| slowest test phases (wall s, two workers sharing the machine) | phase | wall s |", "|---|---|---|"]
    lines += [f"| `{r['test']}` | {r['phase']} | {r['wall_s']} |" for r in fig["slowest"]]
    return "\n".join(lines + [END]) + "\n"


def _bytecode_words(kept: bool | None) -> str:
    if kept is None:  # figures saved before the flag
        return ""
    return ("; Python's bytecode cache kept (no `PYTHONDONTWRITEBYTECODE`, Python's default, as `.ci/run` runs)" if kept
            else "; `PYTHONDONTWRITEBYTECODE=1` (this workplace's setting: test modules rewritten and modules compiled "
                 "in every process)")


def main(argv: list[str]) -> int:
    known = {"--one-process": False, "--offline": False, "--bytecode": False, "--top": True, "--out": True}
    if (code := usage(argv, __doc__, known)) is not None:
        return code
    page = Path(argv[argv.index("--out") + 1]) if "--out" in argv else ROOT / "docs" / "performance.md"
    top = int(argv[argv.index("--top") + 1]) if "--top" in argv else 15
    fig = measure("--one-process" in argv, "--offline" in argv, top, bytecode="--bytecode" in argv)
    save_section(page, ".fast_tier.json", fig, render_section(fig))
    return 0 if fig["exit"] == 0 and not fig["fetched"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
