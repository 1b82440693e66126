"""How much of the reachable state the fuzzer's budget covers (issue 41): per engine family, the
share of ``explore``'s reachable abstract states that ``pytest -m fuzz``'s budget visits.

``python -m benchmarks.coverage [--depth D] [--families F,...] [--examples N] [--out PAGE]``

- *Reachable*: a breadth-first search from the started engine over ``explore``'s default alphabet
  (``fuzz.explore.default_alphabet``: 3 live requests, 4 arrivals; 4-token prompts of 3 or 6 new
  tokens; step accepting 1 or all, EOS, aborts) on the family's exploration config
  (``specstate.testing.explore_config``) to depth ``D`` (default 7), concrete states deduplicated
  by ``explore.canonical`` and the last target forward, each seen through the graph abstraction
  (``graph.abstraction.abstract_state``, the family's threshold bound: decode rows vs T and the
  largest capture size, queue, last decision, next spec_info kind, last target forward and its
  path).
- *Visited*: every state the fuzzer's runs pass through (``check.Run.apply``) under the ``ci``
  profile as ``pytest -m fuzz`` runs them (``FUZZ_RUNS``: ``fuzz_variant`` of the family's
  correct variant with its own config strategy, per state machine and share of the budget), seen
  through the same abstraction.
- *Share*: visited reachable states / reachable states; the reachable states it missed are listed.

``--seed S``: the ci budget under Hypothesis seed ``S`` instead of ``derandomize`` (the spread of
the figure over seeds: ``pytest -m fuzz`` runs one fixed sequence of test cases, so one change to
the fuzzer's rules moves which states that one sequence visits). ``--label NAME`` names this checkout's run (default ``today``); ``--before JSON``: the figures of
an earlier run (another checkout's ``performance.coverage.json``, e.g. before a change to the
fuzzer) shown beside this one's, the same reachable states (same depth) compared.

It writes ``docs/performance.coverage.json`` and the section between the page's ``<!-- coverage -->``
markers. The machine's load average is given with the figures.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import deque
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- coverage -->", "<!-- /coverage -->"
#: (family, its correct variant that ``pytest -m fuzz`` runs)
FAMILIES = (("sglang-0.5.12", "fixed-threshold"), ("sglang-0.5.17", "upstream-adaptive"),
            ("sglang-0.5.23", "upstream-v23"))
#: the runs ``pytest -m fuzz`` makes of a family's variant: (machine, share of the ci budget);
#: ``tests/fuzz/test_correct.py``, ``tests/test_v23_fuzz.py``
FUZZ_RUNS: dict[str, tuple[tuple[str, int], ...]] = {
    "sglang-0.5.12": (("SpecMachine", 1),),
    "sglang-0.5.17": (("SpecMachine", 1),),
    "sglang-0.5.23": (("SpecMachine", 1), ("DrainingMachine", 4)),
}


def _abstraction(variant: Any) -> Any:
    from specstate.graph.abstraction import abstract_state, with_family

    return with_family(abstract_state, variant.engine_family)


def reachable(variant_name: str, depth: int) -> tuple[set[Any], int]:
    """The abstract states reachable within ``depth`` actions of the explore alphabet, and the
    number of concrete (canonical) states behind them."""
    from specstate.check import checked_step
    from specstate.fuzz.explore import canonical, default_alphabet
    from specstate.graph.abstraction import _forward, last_target_forward
    from specstate.invariants import check_outcome
    from specstate.model import as_variant, initial_state
    from specstate.testing._api import explore_config

    v = as_variant(variant_name)
    ops, abstract, alphabet = v.ops(), _abstraction(v), default_alphabet()
    start = canonical(initial_state(v.configure(explore_config(v))))
    seen = {(start, _forward(None))}
    found = {abstract(start, None)}
    frontier = deque([(start, None, 0)])
    while frontier:
        state, last, d = frontier.popleft()
        if d >= depth:
            continue
        for a in alphabet(state):
            o = checked_step(state, a, ops, v, d)
            if check_outcome(o):
                continue  # a violating node is terminal (none under a correct variant)
            now = last_target_forward(o, last)
            found.add(abstract(o.state, now))
            key = (canonical(o.state), _forward(now))
            if key not in seen:
                seen.add(key)
                frontier.append((key[0], now, d + 1))
    return found, len(seen)


@contextmanager
def _visits(variant: Any) -> Iterator[set[Any]]:
    """The abstract states of every state ``check.Run`` passes through while the block runs."""
    from specstate.check import Run
    from specstate.graph.abstraction import last_target_forward

    abstract, visited = _abstraction(variant), set()
    real = Run.apply

    def apply(self: Run, action: Any) -> Any:
        if not getattr(self, "_coverage_started", False):
            self._coverage_started, self._coverage_last = True, None  # type: ignore[attr-defined]
            visited.add(abstract(self.state, None))
        o = real(self, action)
        self._coverage_last = last_target_forward(o, self._coverage_last)  # type: ignore[attr-defined]
        visited.add(abstract(o.state, self._coverage_last))  # type: ignore[attr-defined]
        return o

    Run.apply = apply  # type: ignore[method-assign]
    try:
        yield visited
    finally:
        Run.apply = real  # type: ignore[method-assign]


def fuzz_visited(variant_name: str, examples: int | None, seed: int | None = None) -> tuple[set[Any], float, bool]:
    """The abstract states the ``ci`` profile's run of ``variant_name`` visits (``seed``: under
    that Hypothesis seed, not derandomized), its wall time, whether it found no violation."""
    from hypothesis import settings

    from specstate.fuzz import machine
    from specstate.fuzz.profiles import profile_settings
    from specstate.fuzz.runner import fuzz_variant
    from specstate.model import as_variant

    v = as_variant(variant_name)
    s = profile_settings("ci") if examples is None else settings(profile_settings("ci"), max_examples=examples)
    if seed is not None:
        s = settings(s, derandomize=False, database=None)
    ok = True
    with _visits(v) as visited:
        t0 = time.perf_counter()
        for name, share in FUZZ_RUNS.get(v.family_name, (("SpecMachine", 1),)):
            runs = getattr(machine, name, None)
            if runs is None:  # a checkout before this machine existed
                continue
            report = fuzz_variant(v, settings(s, max_examples=max(s.max_examples // share, 1)), seed=seed, machine=runs)
            ok = ok and report.result is None
        wall = time.perf_counter() - t0
    return visited, wall, ok


def measure(depth: int, families: list[str], label: str, examples: int | None,
            before: dict[str, Any] | None = None, seed: int | None = None) -> dict[str, Any]:
    rows = []
    for family, variant in FAMILIES:
        if family not in families:
            continue
        t0 = time.perf_counter()
        reach, concrete = reachable(variant, depth)
        row: dict[str, Any] = {"family": family, "variant": variant, "reachable": len(reach), "concrete": concrete,
                               "explore_s": round(time.perf_counter() - t0, 1), "runs": {}}
        earlier = {r["family"]: r for r in (before or {}).get("rows", [])}.get(family)
        if earlier is not None:
            row["runs"].update(earlier["runs"])
        for strategy in [label]:
            visited, wall, ok = fuzz_visited(variant, examples, seed)
            hit = reach & visited
            row["runs"][strategy] = {"visited": len(visited), "hit": len(hit), "share": round(len(hit) / len(reach), 3),
                                     "outside": len(visited - reach), "fuzz_s": round(wall, 1), "ok": ok,
                                     "load": round(os.getloadavg()[0], 1),
                                     "missed": sorted(s.key for s in reach - visited)}
            print(f"{family} {strategy}: {len(hit)}/{len(reach)} reachable abstract states visited "
                  f"({len(visited - reach)} more outside the bound), {wall:.0f} s", file=sys.stderr, flush=True)
        rows.append(row)
    strategies = list(dict.fromkeys([*(before or {}).get("strategies", []), label]))
    return {"depth": depth, "examples": examples, "seed": seed, "strategies": strategies,
            "load": round(os.getloadavg()[0], 1), "rows": rows}


def render_section(fig: dict[str, Any]) -> str:
    budget = "the `ci` profile" if fig["examples"] is None else f"`ci` with {fig['examples']} examples"
    strategies = fig["strategies"]
    lines = [BEGIN, "## Share of the reachable abstract states the fuzzer visits (issue 41)", "",
             f"`python -m benchmarks.coverage --depth {fig['depth']}` per checkout ({', '.join(strategies)}; "
             f"2 cores, the load average beside each time): `explore`'s default alphabet to depth {fig['depth']} on each family's "
             f"exploration config gives the reachable abstract states (the graph abstraction); {budget} "
             "(`pytest -m fuzz`'s budget) visits a share of them:", "",
             "| family | reachable (concrete) | " + " | ".join(f"{s}: visited share, fuzz s (load)" for s in strategies)
             + f" | missed ({strategies[-1]}) |",
             "|---|---|" + "---|" * len(strategies) + "---|"]
    for r in fig["rows"]:
        runs = [r["runs"].get(s) for s in strategies]
        cells = [f"{x['hit']}/{r['reachable']} = {x['share']:.0%}, {x['fuzz_s']} s ({x.get('load', '?')})" if x else "-"
                 for x in runs]
        last = runs[-1] or {"missed": []}
        shown = [m.replace("|", " · ") for m in last["missed"][:4]]  # a node key's ``|`` would split the table's cell
        missed = "; ".join(f"`{m}`" for m in shown) + (f" (+{len(last['missed']) - 4})" if len(last["missed"]) > 4 else "")
        lines.append(f"| {r['family']} | {r['reachable']} ({r['concrete']}) | " + " | ".join(cells) + f" | {missed} |")
    lines.append(END)
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    from benchmarks.sections import save_section, usage

    flags = {"--depth": True, "--families": True, "--examples": True, "--label": True, "--before": True, "--seed": True,
             "--out": True}
    if (code := usage(argv, __doc__, flags)) is not None:
        return code

    def value(flag: str, default: str | None) -> str | None:
        return argv[argv.index(flag) + 1] if flag in argv else default

    depth = int(value("--depth", "7") or 7)
    families = (value("--families", None) or ",".join(f for f, _ in FAMILIES)).split(",")
    label = value("--label", "today") or "today"
    examples = int(value("--examples", "0") or 0) or None
    page = Path(value("--out", None) or ROOT / "docs" / "performance.md")
    before_path = value("--before", None)
    before = json.loads(Path(before_path).read_text()) if before_path else None
    if before is not None and before.get("depth") != depth:
        print(f"error: --before was measured at depth {before.get('depth')}, not {depth}", file=sys.stderr)
        return 2
    seed = value("--seed", None)
    fig = measure(depth, families, label, examples, before, int(seed) if seed is not None else None)
    save_section(page, ".coverage.json", fig, render_section(fig))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
