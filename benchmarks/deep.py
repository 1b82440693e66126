"""``python -m benchmarks.deep [--examples 5000] [--seed 0] [--depth 12] [--jobs N] [--limit-s S] [--out DIR] [VARIANT ...]``

The deep campaign of issue 28: every correct built-in variant of every family (or the ones
named) fuzzed at the ``deep`` profile and explored breadth-first, spread over ``--jobs``
processes (the 16 CPU cores of the GPU host, or this machine's 2).

The fuzzing of one variant is exactly ``specstate fuzz --variant V --profile deep --seed SEED
--max-examples EXAMPLES``: that command runs its budget in rounds (``specstate.fuzz.runner.round_plan``,
one Hypothesis run of at most ``ROUND_EXAMPLES`` cases each, from a seed derived from ``SEED``);
here each round is a process of its own, started as ``specstate fuzz --seed ROUND_SEED
--max-examples N``, so a round found failing here fails the same way on any machine. The
exploration is ``specstate explore --variant V --depth DEPTH --max-states M --jobs 1``.

Every process's JSON result, wall time and peak RSS (``os.wait4``) is kept; ``OUT/deep.json`` holds
them, and a Markdown table per variant is printed. A task still running at ``--limit-s`` gets
SIGINT (the fuzzer then writes what it found, the search its shortest counterexample so far) and is
reported as cut short; a task not started by then is reported as not run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["Task", "plan_tasks", "run_tasks", "summarize", "main"]


@dataclass
class Task:
    variant: str
    kind: str  #: "fuzz" (one round) or "explore"
    argv: list[str]
    seed: int | None = None
    examples: int | None = None
    status: str = "not run"  #: "passed", "FAILED", "cut short", "not run", "error"
    exit_code: int | None = None
    wall_s: float | None = None
    peak_rss_mib: float | None = None
    result: dict = field(default_factory=dict)
    stderr_tail: str = ""


def correct_variants() -> list[str]:
    """Every correct built-in variant of every family, aliases left out."""
    from specstate.model import get_variant, variant_names

    names = []
    for name in variant_names():
        v = get_variant(name)
        if v.correct and v.name == name:
            names.append(name)
    return names


def plan_tasks(variants: list[str], *, examples: int, seed: int, depth: int, max_states: int,
               out: Path) -> list[Task]:
    """The fuzz rounds of every variant (``round_plan`` of the ``deep`` profile at ``examples``
    cases from ``seed``), then one exploration per variant."""
    from hypothesis import settings

    from specstate.fuzz.profiles import profile_settings
    from specstate.fuzz.runner import round_plan

    py = [sys.executable, "-m", "specstate"]
    tasks: list[Task] = []
    for v in variants:
        s = settings(profile_settings("deep"), max_examples=examples)
        for r, (rs, rseed) in enumerate(round_plan(s, seed, v)):
            tasks.append(Task(v, "fuzz", py + ["fuzz", "--variant", v, "--profile", "deep", "--seed", str(rseed),
                                              "--max-examples", str(rs.max_examples), "--json", "--quiet",
                                              "--failures", str(out / "failures" / f"{v}-round{r}")],
                              seed=rseed, examples=rs.max_examples))
    for v in variants:
        tasks.append(Task(v, "explore", py + ["explore", "--variant", v, "--depth", str(depth), "--max-states",
                                             str(max_states), "--jobs", "1", "--json",
                                             "--failures", str(out / "failures" / f"{v}-explore")]))  # not --quiet: a cut search's count is in its log
    return tasks


def _run_one(task: Task, deadline: float, stop: threading.Event, logs: Path) -> None:
    if stop.is_set() or time.monotonic() >= deadline:
        return
    t0 = time.monotonic()
    stem = logs / f"{task.kind}-{task.variant}-{task.seed}"
    with open(f"{stem}.out", "w") as out, open(f"{stem}.err", "w") as err:
        p = subprocess.Popen(task.argv, stdout=out, stderr=err)
        timer = threading.Timer(max(0.0, deadline - t0), lambda: p.send_signal(signal.SIGINT))
        timer.start()
        _, status, usage = os.wait4(p.pid, 0)  # reaped here, so its own peak RSS is known
        timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    task.wall_s = round(time.monotonic() - t0, 1)
    task.exit_code = p.returncode
    task.stderr_tail = Path(f"{stem}.err").read_text()[-1500:]
    task.peak_rss_mib = _peak_rss(usage)
    try:
        text = Path(f"{stem}.out").read_text()
        task.result = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        task.result = {}
    task.status = _status(task, cut=time.monotonic() >= deadline)


def _peak_rss(usage) -> float | None:  # noqa: ANN001
    return round(usage.ru_maxrss / 1024, 1) if usage is not None else None


def _status(task: Task, *, cut: bool) -> str:
    if task.exit_code == 0 and task.result.get("ok"):
        return "passed"
    if cut or task.exit_code in (130, -signal.SIGINT):
        return "cut short"
    if task.result.get("violation") is not None:
        return "FAILED"
    if task.kind == "fuzz" and task.exit_code == 1 and not task.result.get("violation"):
        return "passed (witnesses short)" if task.result.get("problems") else "error"
    return "error"


def run_tasks(tasks: list[Task], *, jobs: int, limit_s: float, logs: Path) -> None:
    """Run ``tasks`` on ``jobs`` workers until they are done or ``limit_s`` has passed (each
    process's output in ``logs``)."""
    logs.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + limit_s
    stop = threading.Event()
    done = [0]

    def one(t: Task) -> None:
        _run_one(t, deadline, stop, logs)
        done[0] += 1
        print(f"[deep] {done[0]}/{len(tasks)} {t.kind} {t.variant} seed={t.seed}: {t.status} "
              f"({t.wall_s} s, {t.peak_rss_mib} MiB)", file=sys.stderr, flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, tasks))


def summarize(tasks: list[Task]) -> str:
    """A Markdown table: per variant, the fuzz rounds and cases run, failures, witnesses; the search."""
    from specstate.fuzz.runner import wanted_witnesses

    rows = ["| variant | fuzz rounds passed / run | cases | violations | witnesses missing (all rounds) | max crossings "
            "| explore: states / transitions | complete | counterexample | explore s | peak RSS MiB |",
            "|---|---:|---:|---|---|---:|---:|---|---|---:|---:|"]
    for v in dict.fromkeys(t.variant for t in tasks):
        fz = [t for t in tasks if t.variant == v and t.kind == "fuzz"]
        ran = [t for t in fz if t.status != "not run"]
        ok = [t for t in ran if t.status.startswith("passed")]
        wit = set().union(*(t.result.get("details", {}).get("witnesses", []) for t in ran)) if ran else set()
        missing = ", ".join(sorted(wanted_witnesses(v) - wit)) or "none"
        cross = max((t.result.get("details", {}).get("max_crossings", 0) for t in ran), default=0)
        bad = [t.result["violation"].get("invariant", "?") for t in ran if t.result.get("violation")]
        cases = sum(t.examples or 0 for t in ok)
        ex = next((t for t in tasks if t.variant == v and t.kind == "explore"), None)
        d = ex.result.get("details", {}) if ex else {}
        cex = ("none" if ex and ex.result.get("ok") else
               f"{d.get('counterexample_length')} actions" if d.get("counterexample_length") else ex.status if ex else "-")
        rss = max((t.peak_rss_mib or 0 for t in fz + ([ex] if ex else [])), default=0)
        rows.append(f"| {v} | {len(ok)} / {len(ran)} of {len(fz)} | {cases:,} | {', '.join(bad) or 'none'} "
                    f"| {missing} | {cross} | {d.get('states', '-'):,} / {d.get('transitions', '-'):,} "
                    f"| {d.get('complete', '-')} | {cex} | {ex.wall_s if ex else '-'} | {rss} |"
                    if d else
                    f"| {v} | {len(ok)} / {len(ran)} of {len(fz)} | {cases:,} | {', '.join(bad) or 'none'} "
                    f"| {missing} | {cross} | - | - | {cex} | {ex.wall_s if ex else '-'} | {rss} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.deep", description=__doc__.splitlines()[2])
    ap.add_argument("variants", nargs="*", help="default: every correct built-in variant of every family")
    ap.add_argument("--examples", type=int, default=None, help="cases per variant (default: the deep profile's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--depth", type=int, default=12)
    ap.add_argument("--max-states", type=int, default=3_000_000)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--limit-s", type=float, default=3600.0)
    ap.add_argument("--no-explore", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("deep-campaign"))
    a = ap.parse_args(argv)
    from specstate.fuzz.profiles import profile_settings

    variants = a.variants or correct_variants()
    examples = a.examples or profile_settings("deep").max_examples
    a.out.mkdir(parents=True, exist_ok=True)
    tasks = plan_tasks(variants, examples=examples, seed=a.seed, depth=a.depth, max_states=a.max_states, out=a.out)
    if a.no_explore:
        tasks = [t for t in tasks if t.kind != "explore"]
    # the explorations first: each is one long process, the rounds fill the other workers around them
    tasks.sort(key=lambda t: t.kind != "explore")
    print(f"[deep] {len(tasks)} tasks over {a.jobs} workers: {', '.join(variants)}; {examples} cases each "
          f"(deep profile, seed {a.seed}), explore depth {a.depth}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    run_tasks(tasks, jobs=a.jobs, limit_s=a.limit_s, logs=a.out / "logs")
    table = summarize(tasks)
    (a.out / "deep.json").write_text(json.dumps({"examples": examples, "seed": a.seed, "depth": a.depth,
                                                 "wall_s": round(time.monotonic() - t0, 1),
                                                 "tasks": [asdict(t) for t in tasks]}, indent=1))
    print(table)
    return 0 if all(t.status.startswith("passed") for t in tasks) else 1


if __name__ == "__main__":
    sys.exit(main())
