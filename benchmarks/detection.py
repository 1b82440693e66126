"""How fast the fuzzer finds every built-in known bug (issue 29: median <= 1 s, max <= 10 s).

``python -m benchmarks.detection [--seeds N] [--only VARIANT,...]``: for each built-in known-bug
variant of every family (``expected_invariant`` set, not correct), N Hypothesis seeds from a cold
example database, the ``ci`` profile's settings with the seed instead of ``derandomize`` and
room for 2,000 test cases: seconds from the start of the run to the first violating test case
(``FuzzReport.first_violation_s``), the test cases run until then, and whether the invariant found
is the one the bug names. The process's one-time costs (torch's first operations, the shape
caches) are paid by a warm-up run before the first measured seed, so the first seed is not
charged with them.

It writes ``docs/performance.detection.json`` and the section between the page's
``<!-- detection -->`` markers. The machine's load average is given with the figures.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- detection -->", "<!-- /detection -->"
MEDIAN_GOAL_S, MAX_GOAL_S = 1.0, 10.0


def known_bugs() -> list[str]:
    from specstate.model.variants import get_variant, variant_names

    out = []
    for name in variant_names():
        v = get_variant(name)
        if v.expected_invariant and not v.correct and v.name == name:  # aliases once
            out.append(name)
    return out


def _cases_counter() -> list[int]:
    """A counter of test cases: the machine's ``teardown`` runs once per test case."""
    import specstate.fuzz.machine as machine

    count = [0]
    original = machine.SpecMachine.teardown

    def counting(self: Any) -> None:
        count[0] += 1
        original(self)

    machine.SpecMachine.teardown = counting  # type: ignore[method-assign]
    return count


def measure(seeds: int, only: list[str] | None = None) -> dict[str, Any]:
    from hypothesis import settings

    from specstate.fuzz.profiles import profile_settings
    from specstate.fuzz.runner import fuzz_variant
    from specstate.model.variants import get_variant

    s = settings(profile_settings("ci"), derandomize=False, database=None, max_examples=2000)
    count = _cases_counter()
    fuzz_variant("naive-threshold", settings(s, max_examples=5), seed=0)  # warm-up, not measured
    rows = []
    for name in only or known_bugs():
        expected = get_variant(name).expected_invariant
        runs = []
        for seed in range(seeds):
            count[0] = 0
            t0 = time.perf_counter()
            r = fuzz_variant(name, s, seed=seed)
            found = r.result.first.invariant if r.result is not None and r.result.first else None
            runs.append({"seed": seed, "first_s": round(r.first_violation_s, 3) if r.first_violation_s is not None else None,
                         "cases": count[0], "invariant": found, "expected": found == expected,
                         "wall_s": round(time.perf_counter() - t0, 2)})
            print(f"{name} seed {seed}: {runs[-1]}", file=sys.stderr, flush=True)
        firsts = [x["first_s"] for x in runs if x["first_s"] is not None]
        rows.append({"variant": name, "family": get_variant(name).family_name, "expected": expected, "runs": runs,
                     "found": len(firsts), "median_s": round(statistics.median(firsts), 3) if firsts else None,
                     "max_s": max(firsts) if firsts else None,
                     "median_cases": statistics.median(x["cases"] for x in runs),
                     "all_expected": all(x["expected"] for x in runs)})
    return {"seeds": seeds, "load": round(os.getloadavg()[0], 1), "rows": rows}


def render_section(fig: dict[str, Any]) -> str:
    lines = [BEGIN, "## Time to find each built-in known bug (issue 29)", "",
             f"`python -m benchmarks.detection --seeds {fig['seeds']}` (load {fig['load']} on 2 cores; goal: median "
             f"<= {MEDIAN_GOAL_S:g} s and max <= {MAX_GOAL_S:g} s to the first violation):", "",
             "| known bug | family | found | median s | max s | median test cases | invariant as named | goal |",
             "|---|---|---|---|---|---|---|---|"]
    for r in fig["rows"]:
        met = (r["found"] == fig["seeds"] and r["median_s"] is not None and r["median_s"] <= MEDIAN_GOAL_S
               and r["max_s"] <= MAX_GOAL_S)
        lines.append(f"| {r['variant']} | {r['family']} | {r['found']}/{fig['seeds']} | {r['median_s']} | {r['max_s']} | "
                     f"{r['median_cases']} | {'yes' if r['all_expected'] else 'NO'} | {'met' if met else 'not met'} |")
    lines.append(END)
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    from benchmarks.sections import usage

    if (code := usage(argv, __doc__, {"--seeds": True, "--only": True, "--out": True})) is not None:
        return code
    seeds = int(argv[argv.index("--seeds") + 1]) if "--seeds" in argv else 20
    only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else None
    page = Path(argv[argv.index("--out") + 1]) if "--out" in argv else ROOT / "docs" / "performance.md"
    from benchmarks.sections import save_section

    fig = measure(seeds, only)
    save_section(page, ".detection.json", fig, render_section(fig))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
