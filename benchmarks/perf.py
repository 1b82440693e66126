"""The figures of ``docs/performance.md``, each measured beside its baseline in the same process.

``python -m benchmarks`` (see ``benchmarks/__main__.py``) runs :func:`measure` here, and with
``--before CHECKOUT`` once more in a child process whose ``PYTHONPATH`` is that checkout, so the
table shows before and after from one command. Every throughput is divided by a baseline
measured in the same process right next to it (alternating, ``repeats`` times each), so the
ratios survive a machine shared with other work; min / median / max are over the repeats.

Every measured run starts with ``gc.freeze()`` (:func:`_frozen`): what is alive before it (torch,
the modules, earlier runs' caches) is out of the collector's sight, as it is in specstate's own
searches (``heap.frozen_heap``: explore, the graph's sweep; fuzz runs do not freeze, heap.py says
why). Without it a run's speed depended on how much
the process had accumulated: the trivial machine ran at 4.7-6.4k steps/s unfrozen and
11.7-12.6k frozen, in one process, minutes apart (the 2x "noise" of earlier pages).

Baselines:

- ``trivial``: a one-rule Hypothesis ``RuleBasedStateMachine`` (the rule adds 1 to a counter),
  run under the same settings as specstate's machine; steps/s.
- ``bfs``: a bare-Python breadth-first search over integer tuples (4 counters in 0..15, each
  action adds or subtracts 1 from one of them), with a ``set`` of seen tuples; states/s.

Measured (``fixed-threshold`` for v1, ``upstream-adaptive`` for v2):

- ``model``: ``Run.apply`` (``step`` + every invariant + witnesses, as the fuzzer applies it) over
  the seeded generator's cases, transitions/s; and the cost of a transition in 1,000-action cases
  over 50-action ones (history growth).
- ``machine``: specstate's own Hypothesis state machine (``fuzz.machine.machine_for``), model
  transitions/s.
- ``explore``: ``fuzz.explore.explore`` of ``DEFAULT_EXPLORE_CONFIG``, states/s, as ``specstate
  explore`` runs it (both cores, ``fuzz.explore_parallel``) and on one core (``explore-1core``).
- ``graph``: ``specstate graph --variant V --out g.svg`` for every built-in variant, in a child
  process: CPU seconds (user + sys; on an idle core that is the wall time) and wall seconds.
- ``depth12``: ``specstate explore`` to depth 12 of the default config: states, seconds, peak
  memory of its process tree (child).
- ``ceiling``: from the same runs as ``machine`` and ``explore``, the share of wall time spent
  inside the model (``Run.apply``; ``checked_step`` + ``check_outcome``) and the ratio to the
  baseline each would reach if the model cost nothing (what a faster model can and cannot buy).
- ``floor`` (``benchmarks/floor.py``, run by ``benchmarks/__main__.py`` on its own once both
  checkouts' figures are done): what a transition (and an explored state) costs before any of
  its logic runs, the Python calls, copies and constructions it makes at their bare prices,
  beside the goals' budgets.
- ``recorder``: the GPU recorder's hooks driven through simulated decode steps on fake sglang
  objects, recorder off and ``deferred`` alternately (``benchmarks/recorder.py``; the real
  figure needs the H200: ``docs/results/gpu-replay.md``).
"""

from __future__ import annotations

import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

__all__ = ["measure", "trivial_steps_per_s", "bfs_states_per_s", "machine_split", "explore_rate", "explore_split"]


def _settings(examples: int) -> Any:
    from hypothesis import HealthCheck, Phase, settings

    return settings(max_examples=examples, stateful_step_count=50, derandomize=True, database=None,
                    phases=[Phase.generate], deadline=None, suppress_health_check=list(HealthCheck))


def trivial_steps_per_s(examples: int = 60) -> float:
    from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

    count = [0]

    class Trivial(RuleBasedStateMachine):
        @rule()
        def add(self) -> None:
            count[0] += 1

    t0 = time.perf_counter()
    run_state_machine_as_test(Trivial, settings=_settings(examples))
    return count[0] / (time.perf_counter() - t0)


def bfs_states_per_s(limit: int = 60_000) -> float:
    from collections import deque

    start = (0, 0, 0, 0)
    seen = {start}
    frontier = deque([start])
    t0 = time.perf_counter()
    while frontier and len(seen) < limit:
        s = frontier.popleft()
        for i in range(4):
            for d in (1, -1):
                v = s[i] + d
                if 0 <= v < 16:
                    n = s[:i] + (v,) + s[i + 1:]
                    if n not in seen:
                        seen.add(n)
                        frontier.append(n)
    return len(seen) / (time.perf_counter() - t0)


def _cases(variant: str, seeds: range, length: int) -> list[tuple[Any, list[Any]]]:
    from specstate.fuzz.generate import generate_case
    from specstate.model import get_variant

    fam = get_variant(variant).family_name
    return [generate_case(s, length=length, family=fam) for s in seeds]


def run_cases(variant: str, cases: list[tuple[Any, list[Any]]]) -> int:
    """``Run.apply`` over every case (``check.run_actions``: to the end, or to the first
    violation); the transitions applied."""
    from specstate.check import run_actions

    return sum(len(run_actions(cfg, variant, actions).actions) for cfg, actions in cases)


def model_transitions_per_s(variant: str, cases: list[tuple[Any, list[Any]]]) -> float:
    t0 = time.perf_counter()
    n = run_cases(variant, cases)
    return n / (time.perf_counter() - t0)


class _Inside:
    """Wraps module attributes (functions) to add up the wall time spent inside them, outermost
    calls only: the part of a run that is the model (``step``, every invariant)."""

    def __init__(self, targets: list[tuple[Any, str]]) -> None:
        self.targets, self.seconds, self.calls, self._depth = targets, 0.0, 0, 0
        self._saved: list[tuple[Any, str, Any]] = []

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return fn(*args, **kwargs)
            self._depth, self.calls, t = 1, self.calls + 1, time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t
                self._depth = 0
        return timed

    def __enter__(self) -> "_Inside":
        for owner, name in self.targets:
            fn = getattr(owner, name)
            self._saved.append((owner, name, fn))
            setattr(owner, name, self._wrap(fn))
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, name, fn in reversed(self._saved):
            setattr(owner, name, fn)


def machine_split(variant: str, examples: int = 30) -> tuple[float, float]:
    """(model transitions/s of specstate's Hypothesis machine, share of its wall time inside
    ``Run.apply``)."""
    from hypothesis.stateful import run_state_machine_as_test

    from specstate import check
    from specstate.fuzz.machine import machine_for

    with _Inside([(check.Run, "apply")]) as inside:
        t0 = time.perf_counter()
        run_state_machine_as_test(machine_for(variant, seed=0), settings=_settings(examples))
        elapsed = time.perf_counter() - t0
    return inside.calls / elapsed, inside.seconds / elapsed


def explore_rate(variant: str, depth: int) -> float:
    """``explore`` states/s as ``specstate explore`` runs it: on ``default_jobs()`` processes
    (both cores here; ``fuzz.explore_parallel``)."""
    from specstate.fuzz import explore as ex
    from specstate.fuzz.explore_parallel import default_jobs

    r = ex.explore(ex.DEFAULT_EXPLORE_CONFIG, variant, max_depth=depth, keep_graph=False, jobs=default_jobs())
    return r.states / r.elapsed_s


def explore_split(variant: str, depth: int) -> tuple[float, float]:
    """(``explore`` states/s on one core, share of its search time inside the model:
    ``checked_step`` and ``check_outcome``)."""
    from specstate.fuzz import explore as ex

    with _Inside([(ex, "checked_step"), (ex, "check_outcome")]) as inside:
        r = ex.explore(ex.DEFAULT_EXPLORE_CONFIG, variant, max_depth=depth, keep_graph=False)
    return r.states / r.elapsed_s, inside.seconds / r.elapsed_s


def _frozen(fn: Callable[[], Any]) -> Any:
    """``fn()`` with everything alive before it frozen (``gc.freeze``; never thawed: the
    benchmark's process ends after its figures)."""
    gc.freeze()
    return fn()


def _stats(xs: list[float]) -> dict[str, float]:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def _paired(fn: Callable[[], float], base: Callable[[], float], repeats: int) -> dict[str, Any]:
    """``fn`` and ``base`` alternately; the ratio of each pair."""
    return _paired_split(lambda: (fn(), 0.0), base, repeats)[0]


def _paired_split(fn: Callable[[], tuple[float, float]], base: Callable[[], float],
                  repeats: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """``fn`` = (rate, share of its time inside the model) and ``base`` alternately: the paired
    figure (value, baseline, ratio) and, from the same runs, the model's share and the ratio the
    rate would reach if the model cost nothing, ``rate / (1 - share) / base``."""
    vals, bases, ratios, shares, ceilings = [], [], [], [], []
    for _ in range(repeats):
        b = _frozen(base)
        v, share = _frozen(fn)
        vals.append(v)
        bases.append(b)
        ratios.append(v / b)
        shares.append(share)
        ceilings.append(v / max(1e-9, 1 - share) / b)
    return ({"value": _stats(vals), "baseline": _stats(bases), "ratio": _stats(ratios)},
            {"share": _stats(shares), "ceiling": _stats(ceilings)})


def _child(code: str, env: dict[str, str] | None = None, timeout: int = 600, cwd: str | None = None) -> dict[str, Any]:
    """Run ``code`` in a child Python; its CPU seconds, wall seconds, peak RSS and last line."""
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr.strip()[-300:]
    return {"cpu_s": cpu, "wall_s": wall, "maxrss_mib": after.ru_maxrss / 1024, "rc": p.returncode, "out": last}


def graph_times(variants: list[str], out_dir: str, env: dict[str, str] | None = None,
                cwd: str | None = None) -> dict[str, Any]:
    """``specstate graph --variant V --out V.svg`` in a child process per variant (``env`` / ``cwd``:
    the child's environment and folder, e.g. another checkout's ``PYTHONPATH`` and a folder
    outside both checkouts); CPU s counts every process of the child (the sweep runs on both
    cores), wall s is what a user waits."""
    out = {}
    for v in variants:
        code = ("import sys; from specstate.cli import main; "
                f"sys.exit(main(['graph', '--variant', {v!r}, '--out', {os.path.join(out_dir, v + '.svg')!r}]))")
        r = _child(code, dict(env if env is not None else os.environ), cwd=cwd)
        r["load"] = os.getloadavg()[0]
        out[v] = r
    return out


_PEAK_MEMORY = r'''
import os, threading, time
def _pss(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("Pss:"))
    except (OSError, StopIteration):
        return 0
def _tree_pss():  # this process and its children (the search's workers), KiB
    me = os.getpid()
    kids = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        kids.append(int(p))
            except (OSError, ValueError, IndexError):
                pass
    return _pss(me) + sum(map(_pss, kids))
peak = [0]
def _sample():
    while True:
        peak[0] = max(peak[0], _tree_pss())
        time.sleep(0.25)
threading.Thread(target=_sample, daemon=True).start()
'''


def depth12() -> dict[str, Any]:
    """What ``specstate explore --variant fixed-threshold --depth 12`` runs (its default alphabet,
    config and jobs), in the checkout under test: states, transitions, search seconds,
    completeness, peak memory of the whole process tree (proportional set size, sampled: shared
    pages counted once; where ``/proc`` has none, the parent's peak RSS) and jobs."""
    code = (_PEAK_MEMORY +
            "import resource\n"
            "from specstate.testing._api import explore_bfs\n"
            "try:\n    from specstate.fuzz.explore_parallel import default_jobs\n"
            "except ImportError:\n    default_jobs = lambda: 1\n"
            "import inspect\n"
            "kw = {'jobs': default_jobs()} if 'jobs' in inspect.signature(explore_bfs).parameters else {}\n"
            "r = explore_bfs('fixed-threshold', depth=12, quiet=True, **kw)\n"
            "peak[0] = max(peak[0], _tree_pss())\n"
            "mem = peak[0] // 1024 or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024\n"
            "print(r.states, r.transitions, round(r.elapsed_s, 2), r.complete, mem, kw.get('jobs', 1))\n")
    return _child(code, dict(os.environ), timeout=900)


def profile_model(variant: str, cases: list[tuple[Any, list[Any]]], top: int = 18) -> list[tuple[str, float, float]]:
    """(function, share of own time, share of cumulative time) of the model benchmark."""
    import cProfile
    import pstats

    pr = cProfile.Profile()
    pr.enable()
    model_transitions_per_s(variant, cases)
    pr.disable()
    st = pstats.Stats(pr)
    total = sum(v[2] for v in st.stats.values())  # type: ignore[attr-defined]
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:top]  # type: ignore[attr-defined]
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = []
    for (file, line, name), (_, _, tt, ct, _) in rows:
        f = os.path.relpath(file, here) if file.startswith(here) else os.path.basename(file)
        out.append((f"{f}:{line}({name})", tt / total, ct / total))
    return out


def measure(*, repeats: int = 3, quick: bool = False, graphs: bool = True, out_dir: str = tempfile.gettempdir(),
            save: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Every figure; ``save(figures so far)`` after each one (a long run keeps what it measured)."""
    from specstate.model import variant_names

    res: dict[str, Any] = {}

    def done() -> None:
        res["load"] = max(res.get("load", (0.0, 0.0, 0.0)), tuple(os.getloadavg()))
        if save is not None:
            save(res)

    n_cases = 2 if quick else 6
    for variant in ("fixed-threshold", "upstream-adaptive"):
        cases = _cases(variant, range(n_cases), 300)
        res[f"model/{variant}"] = _paired(lambda: model_transitions_per_s(variant, cases), trivial_steps_per_s, repeats)
        done()
    short, long = _cases("fixed-threshold", range(20), 50), _cases("fixed-threshold", range(1), 1000)
    res["history"] = _stats([_frozen(lambda: model_transitions_per_s("fixed-threshold", long)) /
                             _frozen(lambda: model_transitions_per_s("fixed-threshold", short)) for _ in range(repeats)])
    res["machine/fixed-threshold"], res["ceiling/machine"] = _paired_split(
        lambda: machine_split("fixed-threshold", 10 if quick else 30), trivial_steps_per_s, repeats)
    res["explore/fixed-threshold"] = _paired(lambda: explore_rate("fixed-threshold", 6 if quick else 8),
                                             bfs_states_per_s, repeats)
    res["explore-1core/fixed-threshold"], res["ceiling/explore"] = _paired_split(
        lambda: explore_split("fixed-threshold", 6 if quick else 8), bfs_states_per_s, repeats)
    res["profile"] = profile_model("fixed-threshold", _cases("fixed-threshold", range(2), 300))
    done()
    from benchmarks import recorder

    res["recorder"] = recorder.measure(repeats=5 if quick else 15)
    done()
    if graphs:
        names = variant_names() if not quick else ["always-spec", "naive-threshold", "upstream-adaptive"]
        res["graph"] = {}
        for v in names:
            res["graph"].update(graph_times([v], out_dir))
            done()
    if not quick:
        res["depth12"] = depth12()
        done()
    return res


if __name__ == "__main__":  # ``python -m benchmarks.perf REPEATS OUT_DIR JSON [--quick]``: one checkout's figures
    args = sys.argv[1:]
    path = args[2]

    def save(res: dict[str, Any]) -> None:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(res, f, indent=1)
        os.replace(tmp, path)

    measure(repeats=int(args[0]), quick="--quick" in args, graphs="--no-graphs" not in args, out_dir=args[1], save=save)
