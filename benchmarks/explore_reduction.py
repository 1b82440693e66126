"""``explore`` with and without its reduction (issue 29: at depth 12 on the default config,
>= 10x fewer states and >= 5x less time than unreduced, peak memory <= 256 MiB, the same verdict
and shortest counterexample length for every built-in known bug), side by side in one run.

``python -m benchmarks.explore_reduction [--depth 12] [--unreduced-max-states N] [--both-depth 10]
[--bugs-depth 8] [--jobs N] [--out docs/performance.md] [--render]`` (``--render``: the section from
the saved figures, nothing measured; ``--jobs``: processes per search, default the command's, both
cores). ``--searches-only [--depth 12] [--jobs N]``: only the reduced and the unreduced search at
``--depth``, one JSON line each (states, transitions, complete, search_s, peak_mib: PSS of the
process tree), nothing saved: on a 16-core host,
``python -m benchmarks.explore_reduction --searches-only --depth 12 --jobs 16``.

- the search ``specstate explore --variant fixed-threshold --depth D`` runs (default alphabet and
  config, both cores), reduced (the default) and ``--no-reduce``, each in a child process: states,
  transitions, search seconds, completeness, peak memory of the process tree (PSS: shared pages
  once, sampled, ``perf._PEAK_MEMORY``). The unreduced search runs to ``--unreduced-max-states``
  (default 10,000,000: to completion, many minutes; with a cap the ratios are lower bounds), and
  at ``--both-depth`` (0: none), where all run to completion, the reduced search, the reduced
  search without its sleep sets (``explore(..., por=False)``: the same states, more
  transitions) and the unreduced one;
- every built-in known bug, unreduced and reduced, one process, breadth-first to the first
  violation at ``--bugs-depth`` (or depth 6 where none is that short, so that both are
  exhaustive): verdict, shortest counterexample length, states, seconds.

It writes ``docs/performance.explore_reduction.json`` and the page's ``<!-- explore-reduction -->``
section (``sections.save_section``), and prints the section.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.perf import _PEAK_MEMORY, _child

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- explore-reduction -->", "<!-- /explore-reduction -->"
STATES_GOAL, TIME_GOAL, MEMORY_GOAL_MIB = 10.0, 5.0, 256


def depth_search(depth: int, reduce: bool, max_states: int, por: bool = True, torch: str | None = None,
                 jobs: int = 0) -> dict[str, Any]:
    """The command's search (``explore_bfs``: its alphabet, config and jobs) in a child process;
    ``por=False``: the reduced search without its sleep sets (``explore(..., por=False)``, the
    same alphabet, config and jobs); ``torch``: the child's ``SPECSTATE_TORCH`` (``always``: every
    tensor op in torch, as before the shape rules; default: the environment's); ``jobs``: processes
    (0: the command's default, ``default_jobs()``)."""
    n = str(jobs) if jobs > 0 else "default_jobs()"
    search = (f"r = explore_bfs('fixed-threshold', depth={depth}, quiet=True, jobs={n}, reduce={reduce!r}, "
              f"max_states={max_states})\n") if por else (
              "from specstate.fuzz.explore import default_alphabet, explore\n"
              "from specstate.testing._api import explore_config\n"
              f"r = explore(explore_config('fixed-threshold'), 'fixed-threshold', alphabet=default_alphabet(max_live=3, "
              f"max_arrivals=4), max_depth={depth}, max_states={max_states}, keep_graph=False, jobs={n}, "
              f"reduce={reduce!r}, por=False)\n")
    code = (_PEAK_MEMORY +
            "from specstate.testing._api import explore_bfs\n"
            "from specstate.fuzz.explore_parallel import default_jobs\n" + search +
            "peak[0] = max(peak[0], _tree_pss())\n"
            "import json\n"
            "print(json.dumps({'states': r.states, 'transitions': r.transitions, 'search_s': round(r.elapsed_s, 2), "
            f"'complete': r.complete, 'peak_mib': peak[0] // 1024, 'jobs': {n}, "
            "'counterexample': None if r.counterexample is None else len(r.counterexample)}))\n")
    got = _child(code, dict(os.environ, **({"SPECSTATE_TORCH": torch} if torch else {})), timeout=4 * 3600)
    if got["rc"] != 0:
        raise RuntimeError(f"Expected the depth-{depth} search (reduce={reduce}) to finish but it said {got['out']}")
    return {**json.loads(got["out"]), "wall_s": round(got["wall_s"], 1), "cpu_s": round(got["cpu_s"], 1),
            "load": round(os.getloadavg()[0], 1)}


def known_bug_rows(depth: int) -> list[dict[str, Any]]:
    """Every built-in known bug: the unreduced and the reduced search to the first violation."""
    from benchmarks.detection import known_bugs
    from specstate.fuzz.explore import explore
    from specstate.testing._api import explore_config

    rows = []
    for name in known_bugs():
        cfg = explore_config(name)
        runs = {}
        for d in (depth, 6):
            for reduce in (False, True):
                t0 = time.perf_counter()
                r = explore(cfg, name, max_depth=d, keep_graph=False, stop_at_first=True, reduce=reduce,
                            max_states=200_000)
                runs[reduce] = {"length": None if r.counterexample is None else len(r.counterexample),
                                "states": r.states, "complete": r.complete or r.counterexample is not None,
                                "s": round(time.perf_counter() - t0, 2), "replays": bool(r.violations)}
            if runs[False]["length"] is not None or d == 6:
                break
        rows.append({"variant": name, "depth": d, "full": runs[False], "reduced": runs[True]})
        print(name, rows[-1], file=sys.stderr, flush=True)
    return rows


def measure(depth: int, unreduced_cap: int, bugs_depth: int, both_depth: int, jobs: int = 0) -> dict[str, Any]:
    """The searches at ``depth`` (the unreduced one to ``unreduced_cap`` states) and at
    ``both_depth``, where both run to completion, then the known bugs."""
    reduced = depth_search(depth, True, 10_000_000, jobs=jobs)
    full = depth_search(depth, False, unreduced_cap, jobs=jobs)
    both = {"depth": both_depth, "reduced": depth_search(both_depth, True, 10_000_000, jobs=jobs),
            "no_sleep": depth_search(both_depth, True, 10_000_000, por=False, jobs=jobs),
            "unreduced": depth_search(both_depth, False, 10_000_000, jobs=jobs)} if both_depth else None
    return {"depth": depth, "reduced": reduced, "unreduced": full, "both": both, "bugs": known_bug_rows(bugs_depth),
            "cpus": os.cpu_count()}


def _search_line(name: str, r: dict[str, Any]) -> str:
    return (f"| {name} | {r['states']:,} | {r['transitions']:,} | {'yes' if r['complete'] else 'NO (cap)'} | "
            f"{r['search_s']} | {r['wall_s']} | {r['peak_mib']} | {r['load']} |")


def _goal(reached: bool, exact: bool) -> str:
    """A ratio against a goal; a lower bound (the unreduced search capped) shows a goal met, never
    one missed."""
    return "met" if reached else ("NOT met" if exact else "not shown: the unreduced search stopped at its cap")


def render_section(fig: dict[str, Any]) -> str:
    red, full = fig["reduced"], fig["unreduced"]
    states, secs = full["states"] / red["states"], full["search_s"] / red["search_s"]
    bound = "" if full["complete"] else " (a lower bound: the unreduced search stopped at its cap)"
    same = all(b["full"]["length"] == b["reduced"]["length"] and b["full"]["complete"] and b["reduced"]["complete"]
               for b in fig["bugs"])
    lines = [BEGIN, f"## `explore --depth {fig['depth']}`: reduced (the default) and `--no-reduce` (issue 29)", "",
             f"`python -m benchmarks.explore_reduction` (`specstate explore --variant fixed-threshold --depth "
             f"{fig['depth']}` as the command runs it: default config and alphabet, {red['jobs']} processes; each search "
             f"in a child process, one after the other, on {fig['cpus']} CPUs shared with other work; load average "
             f"at the end of each in the last column). The reduction: finished requests' spent fields erased, request "
             f"ids and the radix tree's node ids and clock renamed canonically (`specstate/fuzz/symmetry.py`), and "
             f"sleep sets over the commuting arrivals and aborts (`search.independent`): docs/fuzzing.md says why "
             f"both are sound.", "",
             "| search | states | transitions | complete | search s | wall s | peak memory MiB (PSS, all processes) | load |",
             "|---|---:|---:|---|---:|---:|---:|---:|",
             _search_line(f"depth {fig['depth']}, reduced", red),
             _search_line(f"depth {fig['depth']}, unreduced (`--no-reduce`)", full)]
    both = fig.get("both")
    if both:
        lines += [_search_line(f"depth {both['depth']}, reduced", both["reduced"]),
                  *([_search_line(f"depth {both['depth']}, reduced without sleep sets (`explore(..., por=False)`)",
                                  both["no_sleep"])] if "no_sleep" in both else []),
                  _search_line(f"depth {both['depth']}, unreduced (`--no-reduce`)", both["unreduced"])]
    lines += ["",
             f"- depth {fig['depth']}, states unreduced / reduced: **{states:.1f}**{bound} (goal >= {STATES_GOAL:g}: "
             f"{_goal(states >= STATES_GOAL, full['complete'])})",
             f"- depth {fig['depth']}, search time unreduced / reduced: **{secs:.1f}**{bound} (goal >= {TIME_GOAL:g}: "
             f"{_goal(secs >= TIME_GOAL, full['complete'])})",
             *([f"- depth {both['depth']}, where both are complete: **{both['unreduced']['states'] / both['reduced']['states']:.1f}x** "
                f"fewer states, **{both['unreduced']['search_s'] / both['reduced']['search_s']:.1f}x** less search time"]
               if both else []),
             *([f"- depth {both['depth']}, the sleep sets: the same states ("
                f"{'yes' if both['no_sleep']['states'] == both['reduced']['states'] else 'NO'}), "
                f"**{1 - both['reduced']['transitions'] / both['no_sleep']['transitions']:.0%}** fewer transitions, search "
                f"time {both['no_sleep']['search_s']} -> {both['reduced']['search_s']} s"] if both and "no_sleep" in both else []),
             f"- peak memory, reduced: **{red['peak_mib']} MiB** (goal <= {MEMORY_GOAL_MIB} MiB: "
             f"{'met' if red['peak_mib'] <= MEMORY_GOAL_MIB else 'NOT met'})",
             f"- every built-in known bug: the same verdict and shortest counterexample length: "
             f"**{'yes' if same else 'NO'}** (table below)", "",
             "Every built-in known bug, breadth-first to the first violation (one process; depth "
             f"{fig['bugs'][0]['depth'] if fig['bugs'] else '-'}, or 6 where no counterexample is that short, where both "
             "searches are exhaustive); \"replays\": the reduced search's counterexample, renamed back into a trace, "
             "violates an invariant when replayed from the initial state:", "",
             "| known bug | depth | unreduced: counterexample length | states | s | reduced: length | states | s | replays |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for b in fig["bugs"]:
        f, r = b["full"], b["reduced"]
        lines.append(f"| {b['variant']} | {b['depth']} | {f['length'] or 'none'} | {f['states']:,} | {f['s']} | "
                     f"{r['length'] or 'none'} | {r['states']:,} | {r['s']} | "
                     f"{('yes' if r['replays'] else 'NO') if r['length'] else '-'} |")
    lines.append(END)
    return "\n".join(lines) + "\n"


def searches_only(depth: int, jobs: int, unreduced_cap: int) -> None:
    """``--searches-only``: the reduced and the unreduced search at ``depth``, one JSON line each
    (states, transitions, complete, search seconds, peak PSS of the process tree), nothing saved."""
    for reduce, cap in ((True, 10_000_000), (False, unreduced_cap)):
        print(json.dumps({"depth": depth, "reduce": reduce, **depth_search(depth, reduce, cap, jobs=jobs)}), flush=True)


def main(argv: list[str]) -> int:
    def opt(name: str, default: int) -> int:
        return int(argv[argv.index(name) + 1]) if name in argv else default

    if "--help" in argv or "-h" in argv:
        print(__doc__)
        return 0
    if "--searches-only" in argv:
        searches_only(opt("--depth", 12), opt("--jobs", 0), opt("--unreduced-max-states", 10_000_000))
        return 0

    page = Path(argv[argv.index("--out") + 1]) if "--out" in argv else ROOT / "docs" / "performance.md"
    from benchmarks.sections import save_section

    saved = page.with_suffix(".explore_reduction.json")
    if "--render" in argv:  # the section again from the saved figures
        fig = json.loads(saved.read_text())
    else:
        fig = measure(opt("--depth", 12), opt("--unreduced-max-states", 10_000_000), opt("--bugs-depth", 8),
                      opt("--both-depth", 10), opt("--jobs", 0))
    save_section(page, ".explore_reduction.json", fig, render_section(fig))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
