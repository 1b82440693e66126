"""``docs/performance.md`` from the figures of ``perf.measure`` (after, and optionally before)."""

from __future__ import annotations

import os
import platform
from typing import Any

from benchmarks.digest import MAIN_QUICK_DIGEST, MAIN_TINY_DIGEST

__all__ = ["render"]

#: figure -> (what, unit, baseline, goal on the ratio)
_RATIOS = (
    ("model/fixed-threshold", "model alone, v1 (`Run.apply`: step + every invariant)", "transitions/s",
     "trivial Hypothesis machine, steps/s", 3.0),
    ("model/upstream-adaptive", "model alone, v2 (`Run.apply`)", "transitions/s", "trivial Hypothesis machine, steps/s", 3.0),
    ("machine/fixed-threshold", "specstate's Hypothesis machine", "model transitions/s",
     "trivial Hypothesis machine, steps/s", 0.5),
    ("explore/fixed-threshold", "`explore` (DEFAULT_EXPLORE_CONFIG, depth 8; as the command runs it: both cores)",
     "states/s", "bare-Python BFS, states/s", 0.1),
    ("explore-1core/fixed-threshold", "`explore` on one core (`jobs=1`)", "states/s", "bare-Python BFS, states/s", 0.1),
)


def _mmm(d: dict[str, float], fmt: str = "{:.3g}") -> str:
    return " / ".join(fmt.format(d[k]) for k in ("min", "median", "max"))


def _ratio_rows(after: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    ab = after.get("ab") or {}
    rows = ["| figure | value after (min / median / max) | baseline in the same run | ratio after | ratio before | "
            "after / before, paired A/B (min / median / max) | goal | us per unit after / the goal's budget |",
            "|---|---:|---:|---:|---:|---:|---|---:|"]
    for key, what, unit, base, goal in _RATIOS:
        a = after.get(key)
        if a is None:
            continue
        b = before.get(key) if before else None
        met = "met" if a["ratio"]["median"] >= goal else "NOT met"
        # what one transition (state) costs now, and what the goal allows beside the median baseline
        cost, budget = 1e6 / a["value"]["median"], 1e6 / (goal * a["baseline"]["median"])
        speedup = f"{_mmm(ab[key]['ratio'])}" if key in ab else "-"
        rows.append(f"| {what} | {_mmm(a['value'], '{:,.0f}')} {unit} | {_mmm(a['baseline'], '{:,.0f}')} ({base}) | "
                    f"**{_mmm(a['ratio'])}** | {_mmm(b['ratio']) if b else '-'} | {speedup} | >= {goal}x: {met} | "
                    f"{cost:,.0f} / {budget:,.0f} |")
    h = after.get("history")
    if h:
        hb = before.get("history") if before else None
        rows.append(f"| history growth: transitions/s of 1,000-action cases / of 50-action cases | | | "
                    f"**{_mmm(h)}** | {_mmm(hb) if hb else '-'} | | 1.0 = no growth | |")
    return rows


_CEILINGS = (
    ("ceiling/machine", "specstate's Hypothesis machine", "`Run.apply`", "trivial Hypothesis machine", 0.5),
    ("ceiling/explore", "`explore` on one core (depth 8)", "`checked_step` + `check_outcome`", "bare-Python BFS", 0.1),
)


def _ceiling_rows(after: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    rows = ["| harness | share of wall time inside the model (min / median / max) | ratio to the baseline if the model "
            "cost nothing, after | before | goal |", "|---|---:|---:|---:|---|"]
    for key, what, inside, base, goal in _CEILINGS:
        a = after.get(key)
        if a is None:
            continue
        b = (before or {}).get(key)
        rows.append(f"| {what} ({inside}) | {_mmm(a['share'], '{:.0%}')} | **{_mmm(a['ceiling'])}** x {base} | "
                    f"{_mmm(b['ceiling']) if b else '-'} | >= {goal}x: {_reach(a['ceiling'], goal)} |")
    return rows if len(rows) > 2 else []


def _reach(ceiling: dict[str, float], goal: float) -> str:
    """Whether a free model would meet ``goal``, by the spread of the repeats (the baseline is noisy)."""
    if ceiling["max"] < goal:
        return "out of reach by model speed alone (every repeat below it)"
    if ceiling["min"] >= goal:
        return "within reach (every repeat at or above it)"
    return "not settled: the repeats fall on both sides"


_FLOORS = (
    ("model", "model transition, v1 (`Run.apply`)", "model/fixed-threshold", "3x the trivial Hypothesis machine's steps/s"),
    ("explore", "explored state, one core", "explore-1core/fixed-threshold", "0.1x the bare BFS's states/s"),
)


def _floor_rows(after: dict[str, Any]) -> list[str]:
    f = after.get("floor")
    if f is None:
        return []
    rows = ["| unit | Python calls / copies (`evolve`) / dataclass constructions per unit | copies by class | "
            "price of a copy / a construction / a call, us | floor, us (min / median / max) | the goal's budget, us | "
            "**floor / budget** | measured cost, us (median) | verdict |",
            "|---|---:|---|---:|---:|---:|---:|---:|---|"]
    for name, what, figure, goal in _FLOORS:
        c = f[f"{name}/census"]
        by = ", ".join(f"{k} {v:.1f}" for k, v in list(c["by_class"].items())[:4])
        fig = after.get(figure)
        cost = f"{1e6 / fig['value']['median']:.0f}" if fig else "-"
        fb = f[f"{name}/floor_over_budget"]
        verdict = ("out of reach under this decomposition (every repeat's lower bound above the budget)" if fb["min"] > 1
                   else f"the bodies of the operations would have to fit in {1 - fb['median']:.0%} of the budget"
                   if fb["max"] < 1 else "the lower bound alone is about the budget (repeats on both sides)")
        rows.append(f"| {what} | {c['calls']:.0f} / {c['copies']:.1f} / {c['inits']:.1f} | {by} | "
                    f"{f[name + '/copy_us']['median']:.2f} / {f[name + '/construct_us']['median']:.2f} / "
                    f"{f[name + '/call_us']['median']:.3f} | "
                    f"{_mmm(f[name + '/floor_us'], '{:.0f}')} | {_mmm(f[name + '/budget_us'], '{:.0f}')} ({goal}) | "
                    f"**{_mmm(fb, '{:.2f}')}** | {cost} | {verdict} |")
    rows.extend(_machine_floor_row(after, f))
    return rows


def _machine_floor_row(after: dict[str, Any], f: dict[str, Any]) -> list[str]:
    """The Hypothesis machine with a model that cost only its floor: the harness's own time per
    transition (``ceiling/machine``: the share outside ``Run.apply``) plus the model's floor,
    against 1 / (0.5x the trivial machine's steps/s); medians of separate runs."""
    m, c = after.get("machine/fixed-threshold"), after.get("ceiling/machine")
    if m is None or c is None:
        return []
    per_us = 1e6 / m["value"]["median"]
    harness_us = per_us * (1 - c["share"]["median"])
    floor_us = harness_us + f["model/floor_us"]["median"]
    budget_us = 1e6 / (0.5 * m["baseline"]["median"])
    verdict = ("out of reach: Hypothesis's own work and the model's floor exceed the budget" if floor_us > budget_us
               else "within the budget on the medians")
    return [f"| Hypothesis machine transition (the harness measured, the model at its floor; medians) | - | - | - | "
            f"{harness_us:.0f} + {f['model/floor_us']['median']:.0f} = {floor_us:.0f} | {budget_us:.0f} (0.5x the trivial "
            f"Hypothesis machine's steps/s) | **{floor_us / budget_us:.2f}** | {per_us:.0f} | {verdict} |"]


def _graph_rows(after: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    g = after.get("graph")
    if not g:
        return []
    gb = (before or {}).get("graph") or {}
    rows = ["| variant | wall s after | CPU s after | wall s before | CPU s before | < 10 s (wall, after) |",
            "|---|---:|---:|---:|---:|---|"]
    for v, a in g.items():
        b = gb.get(v)
        ok = "yes" if a["wall_s"] < 10 and a["rc"] == 0 else ("FAILED" if a["rc"] != 0 else "NO")
        rows.append(f"| {v} | {a['wall_s']:.1f} | {a['cpu_s']:.1f} | {b['wall_s']:.1f} | {b['cpu_s']:.1f} | {ok} |" if b else
                    f"| {v} | {a['wall_s']:.1f} | {a['cpu_s']:.1f} | - | - | {ok} |")
    worst = max(g.items(), key=lambda kv: kv[1]["wall_s"])
    rows.append("")
    rows.append(f"Worst after: `{worst[0]}`, {worst[1]['wall_s']:.1f} s wall" +
                (f" (before: `{max(gb.items(), key=lambda kv: kv[1]['wall_s'])[0]}`, "
                 f"{max(x['wall_s'] for x in gb.values()):.1f} s wall)." if gb else "."))
    loads = [x["load"] for x in g.values() if "load" in x]
    if loads:
        rows.append(f"1-minute load average while measuring: {min(loads):.1f} to {max(loads):.1f} on 2 cores "
                    "(the graphs are measured one child process at a time, after the other figures).")
    return rows


def _recorder_rows(after: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    r = after.get("recorder")
    if not r:
        return []
    rb = (before or {}).get("recorder") or {}
    ab = after.get("ab") or {}
    rows = ["| regime (simulated step) | recorder off, us per step | `deferred`, us per step | added by the recorder, us "
            "per step (min / median / max) | added / off step | added, before | after / before, paired A/B "
            "(min / median / max; below 1 = cheaper) |", "|---|---:|---:|---:|---:|---:|---:|"]
    what = {"c4": "c = 4, speculative (draft replay, verify forward + graph, draft-extend replay, post)",
            "c30": "c = 30, fallback (target decode and draft extend forwards, post)"}
    for shape, d in r.items():
        b = rb.get(shape)
        pair = ab.get(f"recorder/{shape}")
        rows.append(f"| {what.get(shape, shape)} | {d['off']['median']:.1f} | {d['deferred']['median']:.1f} | "
                    f"**{_mmm(d['added'], '{:.1f}')}** | {d['added']['median'] / d['off']['median']:.1f}x | "
                    f"{_mmm(b['added'], '{:.1f}') if b else '-'} | {_mmm(pair['ratio']) if pair else '-'} |")
    return rows


def _depth12(after: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    out = []
    for label, r in (("after", after.get("depth12")), ("before", (before or {}).get("depth12"))):
        if not r:
            continue
        parts = r["out"].split()
        if r["rc"] != 0 or len(parts) < 5:
            out.append(f"- {label}: failed ({r['out'][:200]})")
            continue
        states, transitions, secs, complete, rss = parts[:5]
        # a checkout from before the parallel search printed the one process's peak RSS; since, the
        # process tree's peak proportional set size and the jobs
        mem = (f"peak memory {rss} MiB (the parent and its {parts[5]} search processes, PSS: shared pages once)"
               if len(parts) > 5 and parts[5] != "1" else
               f"peak memory {rss} MiB (PSS)" if len(parts) > 5 else f"peak RSS {rss} MiB")
        out.append(f"- {label}: {int(states):,} states, {int(transitions):,} transitions, {secs} s search, "
                   f"complete={complete}, {mem} (goal <= 1024 MiB: {'met' if int(rss) <= 1024 else 'NOT met'})")
    return out


def _intro(after: dict[str, Any], before: dict[str, Any] | None, command: str) -> list[str]:
    return [

        "# Performance",
        "",
        f"Written by `{command}` (`benchmarks/`: `perf.py` measures, `report.py` writes this page). "
        "Every throughput is divided by a baseline measured in the same process, alternately, so the "
        "ratios hold on a machine shared with other work; absolute figures do not. "
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs; "
        + (f"highest load average the measuring run saw: {' / '.join(f'{x:.1f}' for x in after['load'])} (1 / 5 / 15 min). "
           if "load" in after else "load average not recorded by this run (this machine was shared with other "
           "sessions; it ran at about 5-12 on 2 cores while measuring). ") +
        "Under a load "
        "above the core count the CPU seconds below are inflated too (shared caches and cores): compare "
        "before with after, not with a fixed limit.",
        "",
        "Baselines: the *trivial Hypothesis machine* is a one-rule `RuleBasedStateMachine` (the rule adds 1 "
        "to a counter) under the settings specstate's machine runs with; the *bare BFS* searches 4 integer "
        "counters in 0..15 (add or subtract 1 from one) with a `set` of seen tuples.",
        "",
    ]


def _ratio_section(after: dict[str, Any], before: dict[str, Any] | None, command: str) -> list[str]:
    return [
        "## Throughput, as ratios",
        "",
        "The ratio columns divide each checkout's figure by its own baseline, both checkouts measured at once, "
        "one per core. The paired A/B column compares the two checkouts' values directly: one persistent "
        "process per checkout runs the same figure in turn, back to back, the order flipping each round "
        "(`benchmarks/ab.py`); that is the speed-up figure. Every measured run, and every A/B run of either "
        "checkout, starts with the heap frozen (`gc.freeze()`, `perf._frozen`): the trivial machine's rate "
        "otherwise moved 2x with what the process had accumulated. The *ratio before* column is measured by "
        "the before checkout's own `benchmarks/perf.py`; one from before that change (f5b0e4e) measured "
        "without freezing, so its ratios rest on a slower, unsteady baseline.",
        "",
        *_ratio_rows(after, before),
        "",
    ]


def _ceiling_section(after: dict[str, Any], before: dict[str, Any] | None, command: str) -> list[str]:
    return [
        *(["## What a faster model can buy", "",
            "The machine and `explore` spend part of their time outside the model (Hypothesis drawing and "
            "choosing rules; canonical states, hashing and the seen-set). Measured in the same runs: the share "
            "inside the model, and the ratio each would reach with a model that cost nothing "
            "(`rate / (1 - share)`, divided by the baseline). A goal above that ceiling needs the harness "
            "itself to change, not only the model.", "", *_ceiling_rows(after, before), ""]
          if _ceiling_rows(after, before) else []),
    ]


def _floor_section(after: dict[str, Any], before: dict[str, Any] | None, command: str) -> list[str]:
    return [
        *(["## The floor of the present decomposition", "",
            "What a transition costs before any of its logic runs (`benchmarks/floor.py`): the Python calls it "
            "makes, the frozen values it copies (`values.evolve`: every operation returns a new `Tx` and "
            "`ModelState`) and the ones it constructs, counted over the model benchmark's cases and over an `explore` of the default config "
            f"(depth {after['floor']['depth'] if 'floor' in after else '-'}), each priced at its bare cost on this "
            "machine (a copy, a construction: the census's own `evolve` and dataclass `__init__` calls replayed, "
            "less the loop; a call: a three-argument function that returns at once), beside the goal's budget "
            "measured in the same process. A lower bound: it prices no statement past the call. A floor above the "
            "budget means no tuning of the operations' bodies meets the goal; fewer copies (operations that do "
            "not each return a new frozen value) or fewer calls (fewer, larger functions) would, which is a "
            "different decomposition from the one `../shared/STYLE.md` asks for (frozen states, a pure `step`, "
            "every real operation a small named replaceable function).", "", *_floor_rows(after), ""]
          if _floor_rows(after) else []),
    ]


def _graph_section(after: dict[str, Any], before: dict[str, Any] | None, command: str) -> list[str]:
    return [
        "## `specstate graph --variant V --out g.svg` (the default abstract graph), per built-in variant",
        "",
        "Child processes, start-up (torch import) included, one at a time, before and after alternating per "
        "variant. Wall s is what a user waits (the sweep runs on both cores, `graph.parallel`); CPU s = user + "
        "sys of the child and its processes.",
        "",
        *_graph_rows(after, before),
        "",
    ]


def _recorder_section(after: dict[str, Any], before: dict[str, Any] | None, command: str) -> list[str]:
    return [
        *(["## The GPU recorder's hooks, on this CPU", "",
            "`benchmarks/recorder.py` drives the recorder's real hooks (`integration/sglang_recorder.py`) through "
            "simulated decode steps on small stand-ins for sglang's objects, recorder off (the hooks only count) and "
            "`deferred` alternately in one process, the collector off while timing. The off step is the hooks' "
            "bookkeeping alone (no model runs here), so the ratio is not the GPU's: the goal (<= 3% of a decode "
            "step) is measured on the H200, `docs/results/gpu-replay.md` (device calls 14-15: 0.070 ms per step at "
            "c = 4, 2.6%; 0.121 ms at c = 30, 2.5%). This table tracks the hooks' own cost before and after.", "",
            *_recorder_rows(after, before), ""] if _recorder_rows(after, before) else []),
    ]


def _depth12_section(after: dict[str, Any], before: dict[str, Any] | None, command: str) -> list[str]:
    return [
        "## `specstate explore --variant fixed-threshold --depth 12` (the default config and alphabet, as the command runs it)",
        "",
        *(_depth12(after, before) or ["- not measured (`--quick`, or the run ended before it)"]),
        "",
    ]


def _digest_section(after: dict[str, Any], before: dict[str, Any] | None, command: str) -> list[str]:
    return [
        "## Behaviour unchanged",
        "",
        "`python -m benchmarks.digest --quick` hashes every step's state, forwards, events, crash and "
        "violations over every built-in variant (generated cases, scenarios), explored graphs, abstract "
        "graphs and failure traces (`benchmarks/digest.py`); it prints `same as main before the speed work` "
        f"when the total is main's before the speed work (7c8499d): `{MAIN_QUICK_DIGEST}`. `tests/test_digest.py` checks the "
        f"`--tiny` digest (`{MAIN_TINY_DIGEST}`).",
        "",
    ]


def _profile_section(after: dict[str, Any], before: dict[str, Any] | None, command: str) -> list[str]:
    return [
        "## Where the time goes after the work",
        "",
        "cProfile of the v1 model benchmark (`Run.apply` over two generated 300-action cases); share of all "
        "profiled time, own and cumulative:",
        "",
        "| function | own | cumulative |",
        "|---|---:|---:|",
        *[f"| `{f}` | {own:.1%} | {cum:.1%} |" for f, own, cum in after.get("profile", [])],
        "",
    ]


def render(after: dict[str, Any], before: dict[str, Any] | None, *, command: str) -> str:
    """The page: each section from the saved figures of both checkouts, in order."""
    sections = (_intro, _ratio_section, _ceiling_section, _floor_section, _graph_section, _recorder_section, _depth12_section, _digest_section, _profile_section)
    return "\n".join(line for section in sections for line in section(after, before, command))
